"""A filtered FAISS search, searched for as far as the filter needs.

FAISS applies a filter after its search, to the ``fetch_k`` nearest rows only (an MMR
search: ``2 * fetch_k``): the rows within a selective filter (one tenant's) may all lie
beyond them, and the search then returns none of them, though they exist. A search that
returned fewer rows than asked is made again over a window twice as wide, up to the whole
index. The retriever's own search and an ensemble member's alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FAISS_FILTER_ROWS = 10_000
"""A filtered FAISS search considers every row of an index up to this size."""


def faiss_rows(store: Any) -> int:
    """How many rows a FAISS store's index holds."""
    return int(getattr(getattr(store, "index", None), "ntotal", 0) or 0)


def first_window(store: Any, kwargs: Mapping[str, Any], k: int) -> Mapping[str, Any]:
    """``kwargs`` of a filtered similarity search of FAISS ``store``: every row of an index up
    to :data:`FAISS_FILTER_ROWS` rows is considered, and at least that many (or ``10 * k``) of
    a larger one; a larger ``fetch_k`` given stays. Unfiltered: ``kwargs`` as they are."""
    if kwargs.get("filter") is None:
        return kwargs
    total = faiss_rows(store)
    wanted = total if total <= FAISS_FILTER_ROWS else max(FAISS_FILTER_ROWS, 10 * k)
    return {**kwargs, "fetch_k": max(int(kwargs.get("fetch_k") or 0), wanted, k)}


def wider_window(
    store: Any, kwargs: Mapping[str, Any], k: int, found: int, *, mmr: bool = False
) -> Mapping[str, Any] | None:
    """``kwargs`` for the search again over a window twice as wide, when a filtered search of
    FAISS ``store`` returned fewer than ``k`` rows while its window (``fetch_k`` rows; ``mmr``:
    ``2 * fetch_k``, FAISS's MMR default ``fetch_k`` 20) left some of the index out. None: the
    search was complete."""
    if kwargs.get("filter") is None or found >= k:
        return None
    fetch_k = int(kwargs.get("fetch_k") or (20 if mmr else 0))
    window, total = (2 * fetch_k if mmr else fetch_k), faiss_rows(store)
    if window >= total:
        return None
    return {**kwargs, "fetch_k": min(total, max(2 * fetch_k, k))}
