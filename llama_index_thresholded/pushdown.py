"""Range-search pushdown: let Milvus drop what is below the cosine floor.

A dense search on Milvus can be a range search: ``search_params["params"]["radius"]``
makes the engine return only results whose IP or COSINE score is strictly above
the radius, so results below the floor never cross the wire. The client-side
floor stays the authority; the pushdown only saves work and transfer.

- Milvus keeps ``score > radius`` while the policy keeps ``score >= floor``, and
  scores are float32: the radius is ``floor - PUSHDOWN_EPSILON``, so a score equal
  to the floor still comes back (and the client decides, exactly as without
  pushdown).
- No ``range_filter`` (the upper bound) is sent: ``range_filter=1.0`` would drop
  results of near-unit vectors that score just above 1 (IP on a stored vector of
  norm 1.005 scores 1.005), which the policy keeps.
- A floor of 0 is never pushed: 0 turns the floor off and keeps negative cosines,
  while ``radius=0`` would drop them.
- Only dense (default-mode) searches on IP or COSINE are pushed. L2 is not: its
  radius is a distance with the opposite ordering (``d = 2 - 2 cos`` on unit
  vectors); L2 collections are filtered on the client only.
- An engine that rejects range search is searched again without it; the retriever
  then filters on the client only, and says so once in the log.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from llama_index.core.vector_stores.types import VectorStoreQueryMode

from thresholded.scores import Metric, ScoreKind

logger = logging.getLogger(__name__)

PUSHDOWN_EPSILON = 1e-6
"""Margin below the floor: float32 rounds scores near 1 by about 6e-8."""

SEARCH_CONFIG_KEY = "milvus_search_config"
"""The ``vector_store_kwargs`` key LlamaIndex's Milvus store reads its search_params from."""

_PUSHED_METRICS = (Metric.IP, Metric.COSINE)


def is_milvus_store(vector_store: object) -> bool:
    """A ``MilvusVectorStore`` or a subclass of it (known by name: no import needed)."""
    return any(cls.__name__ == "MilvusVectorStore" for cls in type(vector_store).__mro__)


def can_push_down(
    vector_store: object,
    mode: VectorStoreQueryMode,
    score_kind: ScoreKind,
    metric: Metric | None,
) -> bool:
    """True when a floor can be sent to this store as a range search."""
    return (
        is_milvus_store(vector_store)
        and mode is VectorStoreQueryMode.DEFAULT
        and score_kind is ScoreKind.COSINE
        and metric in _PUSHED_METRICS
    )


def range_search_kwargs(
    vector_store_kwargs: dict[str, Any], vector_store: object, floor: float
) -> dict[str, Any]:
    """``vector_store_kwargs`` with the floor pushed as a radius; unchanged when not pushable.

    The search config the store would use anyway (the caller's
    ``milvus_search_config``, else the store's ``search_config``) is kept, with
    ``radius`` added to its params. A caller who set ``radius`` or
    ``range_filter`` already keeps them.
    """
    if floor == 0.0:
        return vector_store_kwargs
    base = vector_store_kwargs.get(SEARCH_CONFIG_KEY)
    if base is None:
        base = getattr(vector_store, "search_config", None) or {}
    params = dict(base.get("params") or {})
    if "radius" in params or "range_filter" in params:
        return vector_store_kwargs
    params["radius"] = floor - PUSHDOWN_EPSILON
    return {**vector_store_kwargs, SEARCH_CONFIG_KEY: {**base, "params": params}}


class PushdownSwitch:
    """Whether one retriever still pushes its floor; turned off once an engine refuses."""

    def __init__(self, enabled: bool) -> None:
        self._enabled = enabled
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self._enabled

    def refused(self, where: str, error: BaseException) -> None:
        """The engine refused a range search: filter on the client from now on, log once."""
        with self._lock:
            if not self._enabled:
                return
            self._enabled = False
        logger.warning(
            "range search refused by %s (%s: %s); its cosine floor is applied on the client "
            "only from now on",
            where,
            type(error).__name__,
            error,
        )
