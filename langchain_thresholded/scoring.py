"""Which metric a LangChain vector store scores with, so its raw scores can be read as cosines.

The metric is read where the store says it: ``InMemoryVectorStore`` returns cosines;
a FAISS store (langchain-community) scores with its index's metric (inner product,
or squared L2: every ``DistanceStrategy`` but ``MAX_INNER_PRODUCT`` builds an L2
index); a Chroma store (langchain-chroma) returns its space's *distance* (``l2``:
squared L2, ``ip``: 1 - ip, ``cosine``: 1 - cos); a Milvus store its index's metric.
An explicit ``metric=`` that contradicts what the store reports is an error.

``similarity_search_with_relevance_scores`` is never used: langchain-milvus maps
IP and COSINE to ``(s + 1) / 2`` (a cosine of 0.35 reads 0.675),
``InMemoryVectorStore`` does not implement it, and the generic inner-product
function inverts the score. The raw score of ``similarity_search_with_score`` is
converted here from the metric the store is known to use.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from langchain_core.vectorstores import InMemoryVectorStore, VectorStore

from langchain_thresholded.milvus import orm_calls
from thresholded.errors import UnsupportedMetricError
from thresholded.scores import Metric
from thresholded.store_metrics import checked_metric, chroma_metric, faiss_metric

_MILVUS_DEFAULT_METRIC = Metric.L2
"""The metric langchain-milvus gives the index it creates when none is configured."""


def _is_instance(store: object, module_name: str, class_name: str) -> bool:
    """Checked without importing the store's package: it is optional, and a store of it
    can only exist once it has been imported."""
    module = sys.modules.get(module_name)
    cls = getattr(module, class_name, None) if module is not None else None
    return isinstance(cls, type) and isinstance(store, cls)


def is_milvus(store: object) -> bool:
    """Whether ``store`` is a ``langchain_milvus.Milvus`` (or Zilliz) store."""
    return _is_instance(store, "langchain_milvus", "Milvus")


def is_faiss(store: object) -> bool:
    """Whether ``store`` is langchain-community's ``FAISS`` store."""
    return _is_instance(store, "langchain_community.vectorstores.faiss", "FAISS")


def is_chroma(store: object) -> bool:
    """Whether ``store`` is langchain-chroma's ``Chroma`` store."""
    return _is_instance(store, "langchain_chroma.vectorstores", "Chroma")


def supports_metric_detection(store: VectorStore) -> bool:
    """Whether :func:`store_metric` can read the metric of ``store`` without being told."""
    return (
        isinstance(store, InMemoryVectorStore)
        or is_milvus(store)
        or is_faiss(store)
        or is_chroma(store)
    )


def store_metric(
    store: VectorStore,
    metric: Metric | str | None = None,
    search_kwargs: Mapping[str, Any] | None = None,
) -> Metric:
    """The metric of the raw scores the search of ``store`` returns (its
    ``similarity_search_with_score*``; ``search_kwargs``: the store arguments of the
    search, for a Milvus ``param``).

    ``InMemoryVectorStore`` returns cosines. A FAISS store is read from its index's
    metric, a Chroma store from its collection's space. A langchain-milvus store is
    read, in this order, from the ``param`` of this search, its ``search_params``,
    the collection's index and its ``index_params``. An explicit ``metric`` must
    agree with what the store reports; where the store reports nothing it is the
    metric, and a Milvus store otherwise has langchain-milvus's own default (L2).
    Any other store without ``metric`` is an error that says what to pass.
    """
    found = checked_metric(
        type(store).__name__,
        metric,
        lambda: _reported_metric(store, search_kwargs or {}),
        default=_MILVUS_DEFAULT_METRIC if is_milvus(store) else None,
    )
    if found is None:
        raise unknown_store_error(store)
    return found


def _reported_metric(store: VectorStore, search_kwargs: Mapping[str, Any]) -> Metric | None:
    """The metric the store itself reports, or None where it says nothing."""
    if isinstance(store, InMemoryVectorStore):
        return Metric.COSINE  # it ranks by cosine_similarity and returns it
    if is_faiss(store):
        return faiss_metric(store.index, type(store).__name__)
    if is_chroma(store):
        return chroma_metric(store._collection, type(store).__name__)
    if is_milvus(store):
        return _milvus_metric(store, search_kwargs)
    return None


def unknown_store_error(store: object) -> UnsupportedMetricError:
    name = type(store).__name__
    return UnsupportedMetricError(
        f"cannot tell which metric {name} scores with, so its scores cannot be read as cosine "
        f"similarities. Pass ThresholdedRetriever(metric=...): 'COSINE' (the store returns "
        "cosine similarities), 'COSINE_DISTANCE' (1 - cosine), 'IP' (inner product on unit "
        "vectors), 'IP_DISTANCE' (1 - inner product, unit vectors) or 'L2' (squared "
        "distance on unit vectors); or score_kind='unknown' with a policy of "
        "hybrid_policy='rescore' to re-score the candidates with the store's embeddings; or "
        "score_kind='rrf'/'weighted'/... for scores that are not cosines (never cut by the "
        "floor unless re-scored)."
    )


def _milvus_metric(store: Any, search_kwargs: Mapping[str, Any]) -> Metric | None:
    if getattr(store, "_is_multi_vector", False):
        raise UnsupportedMetricError(
            f"{type(store).__name__} has several vector fields, so its scores are hybrid "
            "(RRF or weighted) scores, not cosine similarities. Declare them with "
            "score_kind='rrf' or 'weighted' (never cut by the floor), and re-score the "
            "candidates with the dense embeddings with a policy of hybrid_policy='rescore'."
        )
    for source in (search_kwargs.get("param"), getattr(store, "search_params", None)):
        found = _metric_type(source)
        if found is not None:
            return _parse(found, store)
    found = _index_metric(store)
    if found is None:
        found = _metric_type(getattr(store, "index_params", None))
    return None if found is None else _parse(found, store)


def _index_metric(store: Any) -> str | None:
    """The metric of the collection's live index, where it exists."""
    try:
        with orm_calls():  # langchain-milvus reads the index through pymilvus's ORM
            index = store._get_index()
    except Exception:  # the metric is read from elsewhere when the index cannot be
        return None
    if not isinstance(index, Mapping):
        return None
    return _metric_type(index.get("index_param"))


def _metric_type(params: Any) -> str | None:
    if isinstance(params, list):
        params = params[0] if len(params) == 1 else None
    if isinstance(params, Mapping):
        value = params.get("metric_type")
        return str(value) if value else None
    return None


def _parse(value: str, store: object) -> Metric:
    try:
        return Metric.parse(value)
    except UnsupportedMetricError as exc:
        raise UnsupportedMetricError(
            f"{type(store).__name__} scores with {value!r}, which cannot be read as a cosine "
            f"similarity ({exc}). Declare the score kind with score_kind=... (e.g. 'unknown'), "
            "and re-score the candidates with a policy of hybrid_policy='rescore'."
        ) from None
