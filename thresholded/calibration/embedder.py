"""What calibration needs from an embedding model, and the checks on what it returns.

An embedder is anything with ``model_id``, ``embed_documents`` and ``embed_queries``
returning unit vectors; ``BatchedEmbedder`` adapts a framework model's two batch
functions and shows progress. Every vector is checked to be unit length, because
an inner product is a cosine only on unit vectors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from thresholded.calibration.data import Passage
from thresholded.calibration.indexing import IndexAs, passage_texts
from thresholded.errors import DimensionMismatchError, NotUnitVectorError
from thresholded.models import ModelId

__all__ = [
    "UNIT_TOLERANCE",
    "BatchedEmbedder",
    "Embedder",
    "check_unit",
    "embed",
    "model_id_of",
    "passage_vectors",
]

UNIT_TOLERANCE = 1e-3


class Embedder(Protocol):
    """What calibration needs from an embedding model: unit vectors, batched."""

    @property
    def model_id(self) -> ModelId | str: ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...


class BatchedEmbedder:
    """Adapts two per-batch functions to ``Embedder``, with a progress bar.

    A framework model (LlamaIndex, LangChain) embeds a list of texts; this class
    cuts the input into batches so a long corpus shows progress instead of hanging.
    """

    def __init__(
        self,
        model_id: ModelId | str,
        embed_documents: Callable[[list[str]], Sequence[Sequence[float]]],
        embed_queries: Callable[[list[str]], Sequence[Sequence[float]]],
        *,
        batch_size: int = 32,
        progress: bool = True,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.model_id = model_id
        self._documents = embed_documents
        self._queries = embed_queries
        self.batch_size = batch_size
        self.progress = progress

    def _run(
        self, fn: Callable[[list[str]], Sequence[Sequence[float]]], texts: Sequence[str], desc: str
    ) -> np.ndarray:
        rows: list[Sequence[float]] = []
        batches = range(0, len(texts), self.batch_size)
        if not self.progress:
            for start in batches:
                rows.extend(fn(list(texts[start : start + self.batch_size])))
            return np.asarray(rows, dtype=np.float64)
        from tqdm import tqdm  # plain tqdm: works in a terminal and a notebook without widgets

        with tqdm(total=len(texts), desc=desc, unit="text") as bar:
            for start in batches:
                batch = list(texts[start : start + self.batch_size])
                rows.extend(fn(batch))
                bar.update(len(batch))
        return np.asarray(rows, dtype=np.float64)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._run(self._documents, texts, "embedding passages")

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._run(self._queries, texts, "embedding questions")


def check_unit(vectors: np.ndarray, what: str) -> None:
    """Refuse vectors that are not unit length: their inner products are not cosines."""
    norms = np.linalg.norm(vectors, axis=1)
    bad = np.flatnonzero(np.abs(norms - 1.0) > UNIT_TOLERANCE)
    if bad.size:
        raise NotUnitVectorError(
            f"{bad.size} {what} vectors are not unit length (e.g. norm {norms[bad[0]]:.4f}): "
            "an inner product is a cosine only on unit vectors; normalise the embeddings"
        )


def embed(embedder: Embedder, texts: Sequence[str], *, queries: bool) -> np.ndarray:
    """Embed passages or questions, checked: one unit vector per text."""
    fn = embedder.embed_queries if queries else embedder.embed_documents
    vectors = np.asarray(fn(list(texts)), dtype=np.float64)
    what = "question" if queries else "passage"
    if vectors.ndim != 2 or vectors.shape[0] != len(texts):
        raise ValueError(f"the embedder returned {vectors.shape} for {len(texts)} {what}s")
    check_unit(vectors, what)
    return vectors


def passage_vectors(
    embedder: Embedder,
    corpus: Sequence[Passage],
    allowed: Sequence[Passage],
    stored: np.ndarray | None,
    index_as: IndexAs,
) -> np.ndarray:
    """The allowed passages' vectors, checked unit length: embedded as ``index_as``
    indexes them, or the rows of their ``stored`` vectors (one row per corpus passage)."""
    if stored is None:
        return embed(embedder, passage_texts(allowed, index_as), queries=False)
    if stored.shape[0] != len(corpus):
        raise ValueError(f"{stored.shape[0]} stored vectors for {len(corpus)} passages")
    row = {p.pid: i for i, p in enumerate(corpus)}
    vectors = np.asarray(stored, dtype=np.float64)[[row[p.pid] for p in allowed]]
    check_unit(vectors, "stored passage")
    return vectors


def model_id_of(embedder: Any, dimension: int) -> ModelId:
    """The embedder's canonical id, with the dimension its vectors really have."""
    raw = embedder.model_id
    model = ModelId.parse(raw) if isinstance(raw, str) else raw
    if model.dimension is None:
        return ModelId(model.name, dimension)
    if model.dimension != dimension:
        raise DimensionMismatchError(
            f"{model} should give {model.dimension}-dimensional vectors, got {dimension}"
        )
    return model
