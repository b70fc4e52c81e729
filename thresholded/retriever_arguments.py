"""Retriever arguments that every adapter reads the same way: the filter keys allowed,
and the size of a multi-collection retriever's thread pool."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any

from pydantic import BeforeValidator

MAX_DEFAULT_WORKERS = 64


def allowed_keys(keys: Iterable[str] | None) -> frozenset[str] | None:
    """``allowed_filter_keys`` as a set of keys; a string would be read as its characters."""
    if keys is None:
        return None
    if isinstance(keys, str | bytes):
        raise TypeError(
            f"allowed_filter_keys must be a list of keys, got the string {keys!r}, which would "
            f"be read as its characters: pass allowed_filter_keys=[{keys!r}]"
        )
    return frozenset(keys)


def _no_string(keys: Any) -> Any:
    """``keys`` as given, refusing a lone string as :func:`allowed_keys` does (anything else
    is pydantic's to validate)."""
    if isinstance(keys, str | bytes):
        allowed_keys(keys)
    return keys


AllowedFilterKeys = Annotated[list[str] | None, BeforeValidator(_no_string)]
"""The type of a pydantic ``allowed_filter_keys`` field: a list of keys, or None."""


def check_max_workers(max_workers: object) -> None:
    """Refuse a pool size that is not a whole number of 1 or more (None: the default)."""
    if max_workers is not None and (
        isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1
    ):
        raise ValueError(f"max_workers must be 1 or more, got {max_workers!r}")


def pool_size(max_workers: int | None, collections: int) -> int:
    """``max_workers``, else two threads per collection, at most 64."""
    return max_workers or min(MAX_DEFAULT_WORKERS, 2 * collections)
