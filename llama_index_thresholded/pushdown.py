"""Range-search pushdown on LlamaIndex's Milvus store (see :mod:`thresholded.pushdown`).

The radius goes to Milvus in the search config the store would use anyway. No
``range_filter`` (the upper bound) is sent: ``range_filter=1.0`` would drop
results of near-unit vectors that score just above 1, which the policy keeps.
Only dense searches on COSINE are pushed. An IP score is a cosine only on a unit
vector, and a stored vector too short to score above the radius would never come back
to have its length checked; an L2 radius is a distance, with the opposite ordering. IP
and L2 collections are filtered on the client only.
"""

from __future__ import annotations

from typing import Any

from thresholded.classes import is_named
from thresholded.pushdown import PUSHDOWN_EPSILON
from thresholded.scores import Metric

__all__ = ["PUSHDOWN_EPSILON", "SEARCH_CONFIG_KEY", "is_milvus_store", "range_search_kwargs"]

SEARCH_CONFIG_KEY = "milvus_search_config"
"""The ``vector_store_kwargs`` key LlamaIndex's Milvus store reads its search_params from."""

PUSHED_METRICS = (Metric.COSINE,)
"""The metrics whose floor is sent as a radius: scores that are cosines whatever the
stored vectors' lengths."""


def is_milvus_store(vector_store: object) -> bool:
    """A ``MilvusVectorStore`` or a subclass of it (known by name: no import needed)."""
    return is_named(vector_store, "MilvusVectorStore")


def range_search_kwargs(
    vector_store_kwargs: dict[str, Any], vector_store: object, radius: float
) -> dict[str, Any]:
    """``vector_store_kwargs`` with ``radius`` in the search params.

    The search config the store would use anyway (the caller's
    ``milvus_search_config``, else the store's ``search_config``) is kept, with
    ``radius`` added to its params. A caller who set ``radius`` or
    ``range_filter`` already keeps them.
    """
    base = vector_store_kwargs.get(SEARCH_CONFIG_KEY)
    if base is None:
        base = getattr(vector_store, "search_config", None) or {}
    params = dict(base.get("params") or {})
    if "radius" in params or "range_filter" in params:
        return vector_store_kwargs
    params["radius"] = radius
    return {**vector_store_kwargs, SEARCH_CONFIG_KEY: {**base, "params": params}}
