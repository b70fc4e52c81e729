"""The reference: whether one row's metadata satisfies a filter.

Every store is held to this. Where the store had no translation of the filter,
and for every neighbour and parent summary, the engine checks each section's
metadata with :func:`matches` before returning it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from numbers import Number
from typing import Any

from thresholded.filters.model import Combine, Condition, Filter, Op, builtin, kind


def matches(f: Filter | None, metadata: Mapping[str, Any]) -> bool:
    """True when ``metadata`` satisfies ``f``; no filter is satisfied by every row."""
    if f is None:
        return True
    if isinstance(f, Condition):
        return holds(f, metadata.get(f.key))
    results = (matches(child, metadata) for child in f.children)
    if f.combine is Combine.AND:
        return all(results)
    if f.combine is Combine.OR:
        return any(results)
    return not any(results)  # NOT: none of them


def holds(condition: Condition, stored: Any) -> bool:
    """One condition against the stored value (None: the row lacks the key)."""
    return _RULES[condition.op](stored_value(stored), condition.value)


def stored_value(value: Any) -> Any:
    """A stored value as the built-in value it stands for, as filter values are: an
    in-memory store keeps what it was given (numpy scalars and arrays from a data frame,
    ``Decimal`` from a database row, a set of tags), and ``np.int64(7)`` read as another
    type than ``7`` held for ``tenant != 7``, admitting the tenant the filter leaves out."""
    if type(value).__module__ == "numpy" and getattr(value, "ndim", 0):
        value = value.tolist()  # type: ignore[union-attr]
    if isinstance(value, list | tuple | set | frozenset):
        return [stored_value(item) for item in value]
    value = builtin(value)
    if isinstance(value, Number) and not isinstance(value, bool | int | float | complex):
        return _as_number(value)
    return value


def _as_number(value: Any) -> Any:
    """A number of another type (``Decimal``, ``Fraction``) as an int when it is whole, else
    as the nearest float."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return value
    return int(value) if math.isfinite(number) and number.is_integer() else number


def _same(stored: Any, value: Any) -> bool:
    """Equal, and of one type: ``1 == 1.0``, but ``"1" != 1`` and ``True != 1``."""
    return stored is not None and kind(stored) == kind(value) and stored == value


def _ordered(compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def rule(stored: Any, value: Any) -> bool:
        return stored is not None and kind(stored) == kind(value) and compare(stored, value)

    return rule


def _contains(stored: Any, value: Any) -> bool:
    """A stored list holds the value (of the same type), or a stored string the text, as
    LlamaIndex's reference reads ``value in stored``: tags kept as one string
    (``"faq,internal"``, as flat metadata must) are tested too."""
    if isinstance(stored, str):
        return isinstance(value, str) and value in stored
    return isinstance(stored, list | tuple) and any(_same(item, value) for item in stored)


def _is_empty(stored: Any, value: Any) -> bool:
    return stored is None or stored == "" or (isinstance(stored, list | tuple) and not stored)


def _text(stored: Any, value: Any) -> bool:
    return isinstance(stored, str) and value in stored


def _text_insensitive(stored: Any, value: Any) -> bool:
    return isinstance(stored, str) and value.lower() in stored.lower()


def _in(stored: Any, values: Any) -> bool:
    return any(_same(stored, v) for v in values)


_RULES: dict[Op, Callable[[Any, Any], bool]] = {
    Op.EQ: _same,
    Op.NE: lambda stored, value: not _same(stored, value),
    Op.GT: _ordered(lambda a, b: a > b),
    Op.GTE: _ordered(lambda a, b: a >= b),
    Op.LT: _ordered(lambda a, b: a < b),
    Op.LTE: _ordered(lambda a, b: a <= b),
    Op.IN: _in,
    Op.NIN: lambda stored, values: not _in(stored, values),
    Op.CONTAINS: _contains,
    Op.ANY: lambda stored, values: any(_contains(stored, v) for v in values),
    Op.ALL: lambda stored, values: all(_contains(stored, v) for v in values),
    Op.TEXT_MATCH: _text,
    Op.TEXT_MATCH_INSENSITIVE: _text_insensitive,
    Op.IS_EMPTY: _is_empty,
}
