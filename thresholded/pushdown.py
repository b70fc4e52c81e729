"""Range-search pushdown: let the engine drop what is below the cosine floor.

A dense search on Milvus can be a range search: the engine returns only results
whose score is strictly above a radius, so results below the floor never cross the
wire. The client-side floor stays the authority; the pushdown only saves work and
transfer.

- Only COSINE collections are pushed. Under IP a score is a cosine only on a unit
  vector: a stored vector too short would score below the radius though its cosine
  is above the floor, never come back, and never have its length checked. IP and L2
  collections are filtered on the client, where every stored norm is checked.

- The engine keeps ``score > radius`` while the policy keeps ``score >= floor``,
  and scores are float32: the radius is ``floor - PUSHDOWN_EPSILON``, so a score
  equal to the floor still comes back and the client decides.
- A floor of 0 is never pushed: 0 turns the floor off and keeps negative cosines.
- An engine that rejects range search is searched again without it; that
  collection is then filtered on the client only, and says so once in the log.
"""

from __future__ import annotations

import logging
import threading

from thresholded.guarded import Guarded

logger = logging.getLogger(__name__)

PUSHDOWN_EPSILON = 1e-6
"""Margin below the floor: float32 rounds scores near 1 by about 6e-8."""


class PushdownSwitch(Guarded):
    """Whether one collection still pushes its floor; turned off once an engine refuses."""

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
