"""Which objects this package's retrievers produced, in this process: the only marks trusted.

A retriever's output carries marks in its metadata (``similarity``, ``score_kind``,
``attached_role``, ``attached_to``). Metadata can be written by anyone: a stored
document that holds ``similarity=0.99`` must not clear a floor. So the retrievers
register every object they return, with the question it was retrieved for, and the
postprocessor and the compressor honour marks only on registered objects, and only for
that question: a cosine measured against another question says nothing about this one.
The registry holds weak references: it keeps nothing alive, and an id reused by a new
object is not mistaken for the old one.
"""

from __future__ import annotations

import weakref
from typing import TypeVar

__all__ = ["is_registered", "register"]

T = TypeVar("T")


class _Entry(weakref.ref):  # type: ignore[type-arg]
    """A weak reference that knows its key, to leave the registry when its object dies,
    and the question its object's marks answer."""

    __slots__ = ("key", "question")
    key: int
    question: str | None


_REGISTRY: dict[int, _Entry] = {}


def _forget(entry: _Entry) -> None:
    # Runs while the object is being freed, before its id can be reused: the entry at
    # its key can only be this object's.
    _REGISTRY.pop(entry.key, None)


def register(obj: T, question: str | None = None) -> T:
    """Record ``obj`` as produced by this package (its marks are ours) for ``question``
    (None: for whatever question it is judged against); returns it."""
    entry = _Entry(obj, _forget)
    entry.key = id(obj)
    entry.question = question
    _REGISTRY[entry.key] = entry  # one dict operation: atomic, no lock needed
    return obj


def is_registered(obj: object, question: str | None = None) -> bool:
    """Whether ``obj`` itself (not an equal copy) was produced by this package, for
    ``question``: marks written for another question are not this one's. Where either
    side names no question, the object's own marks are honoured."""
    entry = _REGISTRY.get(id(obj))
    if entry is None or entry() is not obj:
        return False
    return question is None or entry.question is None or entry.question == question
