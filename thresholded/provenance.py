"""Which objects this package's retrievers produced, in this process: the only marks trusted.

A retriever's output carries marks in its metadata (``similarity``, ``score_kind``,
``attached_role``, ``attached_to``). Metadata can be written by anyone: a stored
document that holds ``similarity=0.99`` must not clear a floor. So the retrievers
register every object they return, and the postprocessor and the compressor honour
marks only on registered objects. The registry holds weak references: it keeps
nothing alive, and an id reused by a new object is not mistaken for the old one.
"""

from __future__ import annotations

import weakref
from typing import TypeVar

__all__ = ["is_registered", "register"]

T = TypeVar("T")


class _Entry(weakref.ref):  # type: ignore[type-arg]
    """A weak reference that knows its key, to leave the registry when its object dies."""

    __slots__ = ("key",)
    key: int


_REGISTRY: dict[int, _Entry] = {}


def _forget(entry: _Entry) -> None:
    # Runs while the object is being freed, before its id can be reused: the entry at
    # its key can only be this object's.
    _REGISTRY.pop(entry.key, None)


def register(obj: T) -> T:
    """Record ``obj`` as produced by this package (its marks are ours); returns it."""
    entry = _Entry(obj, _forget)
    entry.key = id(obj)
    _REGISTRY[entry.key] = entry  # one dict operation: atomic, no lock needed
    return obj


def is_registered(obj: object) -> bool:
    """Whether ``obj`` itself (not an equal copy) was produced by this package."""
    entry = _REGISTRY.get(id(obj))
    return entry is not None and entry() is obj
