"""What a setting held, to tell later whether it was changed, in place or replaced.

A retriever that copies settings when it is built (a wrapped retriever's filters, say)
does not follow a change made to them afterwards; it keeps their ``shape`` and refuses
a call once they are not the ``same``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Copied", "same", "shape"]


@dataclass(frozen=True)
class Copied:
    """A wrapped retriever whose settings ``from_retriever`` copied (``read`` reads them),
    what they were then, and what a search uses instead (``instead``, for the message). The
    copy does not follow a change (a filter set on the retriever afterwards, say), so a
    search after one is refused."""

    retriever: Any
    read: Callable[[Any], Any]
    held: Any
    copied: str
    instead: str

    @classmethod
    def of(
        cls,
        retriever: Any,
        read: Callable[[Any], Any],
        *,
        copied: str,
        instead: str,
        by_fields: tuple[type, ...] = (),
    ) -> Copied:
        return cls(retriever, read, shape(read(retriever), by_fields=by_fields), copied, instead)

    def check_unchanged(self) -> None:
        if not same(self.held, self.read(self.retriever)):
            raise ValueError(
                f"the wrapped {type(self.retriever).__name__} was changed after from_retriever "
                f"copied its {self.copied}: a search would not follow the change. Call "
                "ThresholdedRetriever.from_retriever(...) again with the changed retriever, "
                f"or {self.instead}"
            )


@dataclass(frozen=True)
class _Fields:
    """An object compared by its fields (a filter model), and what they held."""

    value: Any
    fields: Any


def shape(value: Any, *, by_fields: tuple[type, ...] = ()) -> Any:
    """``value`` with its dicts, lists, tuples and sets copied, all the way down, and the
    fields of objects of the ``by_fields`` types too; every other object as it is."""
    if by_fields and isinstance(value, by_fields):
        return _Fields(value, shape(vars(value), by_fields=by_fields))
    if isinstance(value, Mapping):
        return {key: shape(item, by_fields=by_fields) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [shape(item, by_fields=by_fields) for item in value]
    if isinstance(value, set | frozenset):
        return frozenset(value)
    return value


def same(held: Any, value: Any) -> bool:
    """Whether ``value`` still holds what ``shape`` copied: the same keys and items, and the
    very same objects (an object is not compared by value: a new one counts as a change)."""
    if isinstance(held, dict):
        return (
            isinstance(value, Mapping)
            and held.keys() == value.keys()
            and all(same(item, value[key]) for key, item in held.items())
        )
    if isinstance(held, list):
        return (
            isinstance(value, list | tuple)
            and len(held) == len(value)
            and all(map(same, held, value))
        )
    if isinstance(held, frozenset):
        return isinstance(value, set | frozenset) and held == value
    if isinstance(held, _Fields):
        return held.value is value and same(held.fields, vars(value))
    return held is value
