"""A pymilvus client whose every call carries a deadline, so that a frozen server cannot hang it.

pymilvus sends a call without a deadline unless it is given ``timeout=``; a
server that stops answering (frozen, overloaded, a network partition) then
holds the caller forever. Stores that do not pass a timeout through (LlamaIndex's
``MilvusVectorStore`` does not) get one from this wrapper: each public method
that takes ``timeout`` gets this default, and an explicit ``timeout`` still wins.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Iterable
from typing import Any


def check_timeout(timeout: float | None) -> float | None:
    """A timeout is None (no deadline) or a finite number of seconds above 0."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"timeout must be a number of seconds or None, got {timeout!r}")
    if not (math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"timeout must be a finite number of seconds above 0, got {timeout!r}")
    return float(timeout)


_TIMEOUT_IN_KWARGS = frozenset(
    {
        "list_collections",
        "list_indexes",
        "describe_database",
        "drop_database",
        "alter_database_properties",
        "drop_database_properties",
    }
)
"""pymilvus client methods without a ``timeout`` parameter that pass ``**kwargs``, and so
a ``timeout``, on to the server call."""


@functools.cache
def _timed_methods(cls: type) -> frozenset[str]:
    """Public methods of a client class that take a ``timeout`` argument, named or in kwargs."""
    names = {name for name in _TIMEOUT_IN_KWARGS if callable(getattr(cls, name, None))}
    for name, member in inspect.getmembers(cls, callable):
        if name.startswith("_"):
            continue
        try:
            if "timeout" in inspect.signature(member).parameters:
                names.add(name)
        except (TypeError, ValueError):  # a builtin without a signature
            continue
    return frozenset(names)


READS = frozenset(
    {
        "list_collections",
        "has_collection",
        "describe_collection",
        "list_indexes",
        "describe_index",
        "get_load_state",
        "get_collection_stats",
    }
)
"""Calls that only read a collection's description: quick on any server that answers."""


class TimeoutClient:
    """Wraps a ``MilvusClient`` or ``AsyncMilvusClient``; calls default to ``timeout`` seconds.

    ``only`` limits the deadline to those methods (e.g. :data:`READS`); the methods
    named in ``untimed`` keep pymilvus's own default (no deadline).
    """

    def __init__(
        self,
        client: Any,
        timeout: float,
        *,
        only: frozenset[str] | None = None,
        untimed: Iterable[str] = (),
    ) -> None:
        self._client = client
        self._timeout = check_timeout(timeout)
        methods = _timed_methods(type(client))
        methods = methods if only is None else methods & only
        self._methods = methods - frozenset(untimed)

    @property
    def wrapped(self) -> Any:
        return self._client

    @property
    def timeout(self) -> float | None:
        return self._timeout

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name not in self._methods:
            return attr

        @functools.wraps(attr)
        def with_deadline(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("timeout") is None:
                kwargs["timeout"] = self._timeout
            return attr(*args, **kwargs)

        return with_deadline

    def __repr__(self) -> str:
        return f"TimeoutClient({self._client!r}, timeout={self._timeout})"


def with_timeout(
    client: Any,
    timeout: float | None,
    *,
    only: frozenset[str] | None = None,
    untimed: Iterable[str] = (),
) -> Any:
    """``client`` itself when ``timeout`` is None, else wrapped in a :class:`TimeoutClient`."""
    if client is None or check_timeout(timeout) is None:
        return client
    return TimeoutClient(client, timeout, only=only, untimed=untimed)  # type: ignore[arg-type]
