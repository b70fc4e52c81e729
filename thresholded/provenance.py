"""Which objects this package's retrievers produced, in this process: the only marks trusted.

A retriever's output carries marks in its metadata (``similarity``, ``score_kind``,
``attached_role``, ``attached_to``). Metadata can be written by anyone: a stored
document that holds ``similarity=0.99`` must not clear a floor. So the retrievers
register every object they return, and the postprocessor and the compressor honour
marks only on registered objects. The registry holds weak references: it keeps
nothing alive, and an id reused by a new object is not mistaken for the old one.
"""

from __future__ import annotations

import threading
import weakref
from typing import TypeVar

__all__ = ["is_registered", "register"]

T = TypeVar("T")

_REGISTRY: weakref.WeakValueDictionary[int, object] = weakref.WeakValueDictionary()
_LOCK = threading.Lock()


def register(obj: T) -> T:
    """Record ``obj`` as produced by this package (its marks are ours); returns it."""
    with _LOCK:
        _REGISTRY[id(obj)] = obj
    return obj


def is_registered(obj: object) -> bool:
    """Whether ``obj`` itself (not an equal copy) was produced by this package."""
    return _REGISTRY.get(id(obj)) is obj
