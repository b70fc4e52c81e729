"""Which objects this package's retrievers produced, in this process: the only marks trusted.

A retriever's output carries marks in its metadata (``similarity``, ``score_kind``,
``attached_role``, ``attached_to``). Metadata can be written by anyone: a stored
document that holds ``similarity=0.99`` must not clear a floor. So the retrievers
register every object they return, with the question it was retrieved for
(:class:`Asked`), and the postprocessor and the compressor honour marks only on
registered objects, and only for that question: a cosine measured against another
question says nothing about this one (:func:`standing`). The registry holds weak
references: it keeps nothing alive, and an id reused by a new object is not mistaken
for the old one.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeVar

from thresholded.models import ModelId

__all__ = [
    "Asked",
    "Standing",
    "asked_of",
    "is_registered",
    "marks_model",
    "register",
    "standing",
]

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class Asked:
    """The question a result's marks answer: its text, and the vector it was searched with."""

    text: str
    vector: Sequence[float] | None = None
    """The question's vector: the one the retriever searched with, or the one a filter
    is given with the question (None: none given, or none searched with)."""
    embedded: tuple[str, ...] = ()
    """The texts the question's vector is embedded from, when they are not ``text`` alone
    (LlamaIndex's ``custom_embedding_strs``)."""
    given: bool = False
    """The vector is the caller's own, not the embedding of the question's texts."""
    model: ModelId | None = None
    """The embedding model whose cosines the marks are (None: not named). It is not part of
    the question: a filter checks it against its own floor's model."""
    held_back: bool = False
    """The retrieval held sections back: filters (its own or the call's), ids or a store's
    restrictions. Not part of the question: a section added to its answer is held to none
    of them, so an engine refuses one (``llama_index_thresholded.query_engine``)."""
    _verdicts: dict[int, tuple[Asked, bool]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def answers(self, other: Asked) -> bool:
        """Whether marks written for this question hold for ``other``: the same text and
        embedded texts, and, where ``other`` has a vector, the same vector (a vector
        another component filled in from the same texts is the same one). A question
        searched with the caller's own vector is that vector: the text alone does not
        say it. A verdict is kept per question compared (vectors are long)."""
        if other is self:
            return True
        kept = self._verdicts.get(id(other))
        if kept is not None and kept[0] is other:
            return kept[1]
        verdict = self._judge(other)
        if len(self._verdicts) >= 16:
            self._verdicts.clear()
        self._verdicts[id(other)] = (other, verdict)
        return verdict

    def _judge(self, other: Asked) -> bool:
        if self.text != other.text or self.embedded != other.embedded:
            return False
        if other.vector is not None:
            return self.vector is None or _same_vector(self.vector, other.vector)
        return not self.given


def _same_vector(mine: Sequence[float], theirs: Sequence[float]) -> bool:
    if mine is theirs:
        return True
    return len(mine) == len(theirs) and list(map(float, mine)) == list(map(float, theirs))


class Standing(Enum):
    """What the postprocessor and the compressor may read on a result."""

    OURS = "ours"
    """Produced by this package's retriever for this question: its marks are trusted."""
    ANOTHER_QUESTION = "another question"
    """Produced by this package's retriever for another question: its marks and score are
    that question's, and say nothing about this one."""
    FOREIGN = "foreign"
    """Not produced by this package's retriever: its marks are anyone's."""


class _Entry(weakref.ref):  # type: ignore[type-arg]
    """A weak reference that knows its key, to leave the registry when its object dies,
    and the question its object's marks answer."""

    __slots__ = ("asked", "key")
    key: int
    asked: Asked | None


_REGISTRY: dict[int, _Entry] = {}


def _forget(entry: _Entry) -> None:
    # Runs while the object is being freed, before its id can be reused: the entry at
    # its key can only be this object's.
    _REGISTRY.pop(entry.key, None)


def register(obj: T, asked: Asked | None = None) -> T:
    """Record ``obj`` as produced by this package (its marks are ours) for the question
    ``asked`` (None: for whatever question it is judged against); returns it."""
    entry = _Entry(obj, _forget)
    entry.key = id(obj)
    entry.asked = asked
    _REGISTRY[entry.key] = entry  # one dict operation: atomic, no lock needed
    return obj


def _entry(obj: object) -> _Entry | None:
    entry = _REGISTRY.get(id(obj))
    return entry if entry is not None and entry() is obj else None


def standing(obj: object, asked: Asked | None = None) -> Standing:
    """Whether ``obj`` itself (not an equal copy) was produced by this package, and for
    the question ``asked``. Where either side names no question, its marks are ours."""
    entry = _entry(obj)
    if entry is None:
        return Standing.FOREIGN
    if asked is None or entry.asked is None or entry.asked.answers(asked):
        return Standing.OURS
    return Standing.ANOTHER_QUESTION


def is_registered(obj: object, asked: Asked | None = None) -> bool:
    """Whether ``obj``'s marks are trusted for ``asked`` (see :func:`standing`)."""
    return standing(obj, asked) is Standing.OURS


def asked_of(obj: object) -> Asked | None:
    """The question ``obj`` was registered for; None when it was not, or for none."""
    entry = _entry(obj)
    return None if entry is None else entry.asked


def marks_model(obj: object) -> ModelId | None:
    """The embedding model whose cosines ``obj``'s marks are; None when not named."""
    asked = asked_of(obj)
    return None if asked is None else asked.model
