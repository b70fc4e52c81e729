"""Which metric a LlamaIndex vector store scores with, and what each query mode's score is."""

from __future__ import annotations

import math
from typing import Any

from llama_index.core.vector_stores.types import BasePydanticVectorStore, VectorStoreQueryMode

from thresholded.classes import is_named
from thresholded.errors import UnsupportedMetricError
from thresholded.milvus_collection import field_dimension, index_metric
from thresholded.scores import Metric, ScoreKind, declared_kind
from thresholded.store_metrics import checked_metric, chroma_metric, faiss_metric

_NON_DENSE_KINDS = {
    VectorStoreQueryMode.SPARSE: ScoreKind.BM25,
    VectorStoreQueryMode.TEXT_SEARCH: ScoreKind.BM25,
    VectorStoreQueryMode.MMR: ScoreKind.MMR,
}

_NEVER_COSINE_MODES = frozenset(
    {
        VectorStoreQueryMode.SEMANTIC_HYBRID,
        VectorStoreQueryMode.SVM,
        VectorStoreQueryMode.LOGISTIC_REGRESSION,
        VectorStoreQueryMode.LINEAR_REGRESSION,
    }
)
"""Modes whose scores no ``ScoreKind`` names and which are never cosines: a hybrid search
reranked by the store, and the decision values of a classifier or regression fitted to
each question (``SimpleVectorStore`` scores a section at cosine 0.9 about 0.09)."""


def store_metric(vector_store: object, metric: Metric | str | None = None) -> Metric:
    """The metric of a store's dense scores, read from a store we know, else ``metric``.

    ``SimpleVectorStore`` ranks by cosine; a Milvus store scores with its
    ``similarity_metric``; a FAISS store with its index's metric (inner product, or
    squared L2); a Chroma store returns its space's distance (``l2``: squared L2,
    ``ip``: 1 - ip, ``cosine``: 1 - cos), which the backend reads back from
    LlamaIndex's ``exp(-distance)``. An explicit ``metric`` that contradicts what the
    store reports is an error; for any other store it is required.
    """
    name = type(vector_store).__name__
    found = checked_metric(name, metric, lambda: _reported_metric(vector_store))
    if found is None:
        raise UnsupportedMetricError(
            f"cannot tell which metric {name} scores with, so its scores cannot be read as "
            "cosine similarities: pass metric='IP' (unit vectors), 'COSINE', "
            "'COSINE_DISTANCE' (1 - cosine), 'IP_DISTANCE' (1 - inner product, unit vectors) "
            "or 'L2' (squared, unit vectors)"
        )
    return found


def _reported_metric(vector_store: object) -> Metric | None:
    """The metric the store itself reports, or None where it says nothing."""
    name = type(vector_store).__name__
    if is_named(vector_store, "MilvusVectorStore"):  # and its subclasses
        return _milvus_metric(vector_store)
    if name == "SimpleVectorStore":
        return Metric.COSINE  # it ranks by cosine similarity
    if is_faiss_store(vector_store):
        return faiss_metric(vector_store._faiss_index, name)
    if is_chroma_store(vector_store):
        return chroma_metric(vector_store._collection, name)
    return None


def _milvus_metric(vector_store: Any) -> Metric:
    """The store's ``similarity_metric``, which its searches send, once checked against the
    metric of the collection's dense index: Milvus Lite answers a search of another metric
    with the index's scores (an L2 distance of 0 would read as an IP cosine of 0)."""
    declared = Metric.parse(getattr(vector_store, "similarity_metric", "IP"))
    indexed = _milvus_index_metric(vector_store)
    if indexed is not None and indexed.upper() != declared.value:
        name = getattr(vector_store, "collection_name", None)
        raise UnsupportedMetricError(
            f"{type(vector_store).__name__} searches with similarity_metric="
            f"{declared.value!r}, but collection {name!r} is indexed with {indexed}: Milvus "
            f"Lite returns {indexed} scores, which would be read as {declared.value} (the "
            "wrong cosines, even an inverted ranking); a Milvus server may refuse the search. "
            f"Open the store with similarity_metric={indexed!r}, or with "
            "existing_milvus_store(uri, collection_name), which reads the metric of the index."
        )
    return declared


def _milvus_index_metric(vector_store: Any) -> str | None:
    """The metric of the index on the store's dense vector field; None when it has none or
    cannot be read (then the store's ``similarity_metric`` is taken as it is)."""
    client = getattr(vector_store, "client", None)
    name = getattr(vector_store, "collection_name", None)
    field = getattr(vector_store, "embedding_field", None)
    if client is None or not isinstance(name, str) or not isinstance(field, str):
        return None
    try:
        return index_metric(client, name, field)
    except Exception:  # a courtesy check, as the dimension is: never a reason to fail
        return None


def is_faiss_store(vector_store: object) -> bool:
    """Whether the store is llama-index-vector-stores-faiss's ``FaissVectorStore``."""
    return is_named(vector_store, "FaissVectorStore")


def is_chroma_store(vector_store: object) -> bool:
    """Whether the store is llama-index-vector-stores-chroma's ``ChromaVectorStore``."""
    return is_named(vector_store, "ChromaVectorStore")


def chroma_distances(similarities: list[float]) -> list[float]:
    """Chroma's raw distances, from the ``exp(-distance)`` LlamaIndex's Chroma store reports."""
    return [-math.log(s) if s > 0 else math.inf for s in similarities]


def score_kind_for(mode: VectorStoreQueryMode | str, vector_store: object) -> ScoreKind:
    """What a score means for a query mode: only dense search returns cosines."""
    mode = VectorStoreQueryMode(mode)
    if mode is VectorStoreQueryMode.DEFAULT:
        return ScoreKind.COSINE
    if mode is VectorStoreQueryMode.HYBRID:
        ranker = str(getattr(vector_store, "hybrid_ranker", "RRFRanker"))
        return ScoreKind.WEIGHTED if ranker.lower().startswith("weighted") else ScoreKind.RRF
    return _NON_DENSE_KINDS.get(mode, ScoreKind.UNKNOWN)


def declared_mode_kind(
    declared: ScoreKind | str | None, mode: VectorStoreQueryMode | str, vector_store: object
) -> ScoreKind:
    """The kind of a query mode's scores, as :func:`thresholded.scores.declared_kind` reads a
    declaration; ``score_kind='cosine'`` is refused for every mode whose scores are never
    cosines, those of no named kind included."""
    mode = VectorStoreQueryMode(mode)
    source = f"vector_store_query_mode={mode.value!r}"
    if (
        mode in _NEVER_COSINE_MODES
        and declared is not None
        and ScoreKind.parse(declared) is ScoreKind.COSINE
    ):
        raise ValueError(
            f"score_kind='cosine' contradicts the scores of {source}, which are never cosines "
            "(a store's semantic reranking, or a classifier's or regression's decision value): "
            "leave score_kind out (to cut them by their dense cosine, set "
            "hybrid_policy='rescore' in the policy)"
        )
    return declared_kind(declared, score_kind_for(mode, vector_store), source=source)


def collection_dimension(vector_store: BasePydanticVectorStore) -> int | None:
    """The dense vector dimension of a store's collection, where it can be read cheaply: the
    collection's own, else the store's ``dim`` (a store reopening a collection with another
    ``dim`` searches the collection's vectors all the same)."""
    dim = getattr(vector_store, "dim", None)
    declared = dim if isinstance(dim, int) and not isinstance(dim, bool) else None
    client = getattr(vector_store, "client", None)
    field = getattr(vector_store, "embedding_field", None)
    name = getattr(vector_store, "collection_name", None)
    if client is None or field is None or name is None:
        return declared
    found = field_dimension(client, name, field)
    return declared if found is None else found


def held_dimension(vector_store: object) -> int | None:
    """The dimension of the vectors an in-memory or FAISS store holds (None while empty): a
    question of another model is then a clear error, not numpy's or FAISS's."""
    if is_faiss_store(vector_store):
        index = vector_store._faiss_index  # type: ignore[attr-defined]
        return int(index.d) if index.ntotal else None
    if is_named(vector_store, "SimpleVectorStore"):
        vectors = vector_store.data.embedding_dict  # type: ignore[attr-defined]
        return len(next(iter(vectors.values()))) if vectors else None
    return None


def store_uri(vector_store: object) -> str | None:
    """The URI a store connects to, where the store knows it (no pymilvus import needed).

    A ``CompatibleMilvusVectorStore`` keeps it. LlamaIndex's ``MilvusVectorStore``
    leaves its ``uri`` field at the default whatever it connected to, so it has none.
    """
    compatible = is_named(vector_store, "CompatibleMilvusVectorStore")
    uri = getattr(vector_store, "uri", None) if compatible else None
    return uri if isinstance(uri, str) else None
