"""Which metric a LangChain vector store scores with, so its raw scores can be read as cosines.

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

_MILVUS_DEFAULT_METRIC = Metric.L2
"""The metric langchain-milvus gives the index it creates when none is configured."""


def is_milvus(store: object) -> bool:
    """Whether ``store`` is a ``langchain_milvus.Milvus`` (or Zilliz) store.

    Checked without importing langchain-milvus: it is an optional extra, and a
    store of it can only exist once it has been imported.
    """
    module = sys.modules.get("langchain_milvus")
    milvus = getattr(module, "Milvus", None) if module is not None else None
    return milvus is not None and isinstance(store, milvus)


def supports_metric_detection(store: VectorStore) -> bool:
    """Whether :func:`store_metric` can read the metric of ``store`` without being told."""
    return isinstance(store, InMemoryVectorStore) or is_milvus(store)


def store_metric(
    store: VectorStore,
    metric: Metric | str | None = None,
    search_kwargs: Mapping[str, Any] | None = None,
) -> Metric:
    """The metric of the raw scores ``store.similarity_search_with_score*`` returns.

    An explicit ``metric`` wins. ``InMemoryVectorStore`` returns cosines. A
    langchain-milvus store is read, in this order, from the ``param`` of this
    search, its ``search_params``, the collection's index, its ``index_params``,
    and langchain-milvus's own default (L2). Any other store is an error that
    says what to pass.
    """
    if metric is not None:
        return Metric.parse(metric)
    if isinstance(store, InMemoryVectorStore):
        return Metric.COSINE  # it ranks by cosine_similarity and returns it
    if is_milvus(store):
        return _milvus_metric(store, search_kwargs or {})
    raise unknown_store_error(store)


def unknown_store_error(store: object) -> UnsupportedMetricError:
    name = type(store).__name__
    return UnsupportedMetricError(
        f"cannot tell which metric {name} scores with, so its scores cannot be read as cosine "
        f"similarities. Pass ThresholdedRetriever(metric=...): 'COSINE' (the store returns "
        "cosine similarities), 'IP' (inner product on unit vectors) or 'L2' (squared "
        "distance on unit vectors); or score_kind='unknown' with a policy of "
        "hybrid_policy='rescore' to re-score the candidates with the store's embeddings; or "
        "score_kind='rrf'/'weighted'/... for scores that are not cosines (never cut by the "
        "floor unless re-scored)."
    )


def _milvus_metric(store: Any, search_kwargs: Mapping[str, Any]) -> Metric:
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
    return _MILVUS_DEFAULT_METRIC if found is None else _parse(found, store)


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
