"""Filters as Chroma ``where`` clauses, sent to the store so that its search returns the
nearest rows that satisfy them.

Chroma's ``where`` means what the model means for the operators written here
(checked against :func:`~thresholded.filters.evaluate.matches` by the tests):

- ``$eq``, ``$in``: equal and of one type (``1`` is ``1.0``; ``True`` is not ``1``);
- ``$ne``, ``$nin``: their complements, a row lacking the key included;
- ``$gt``, ``$gte``, ``$lt``, ``$lte``: on numbers only, and a row whose value is not a
  number (or that lacks the key) does not match.

Chroma compares a stored integer with a value cast to an integer (``x == 2.5`` holds for a
stored ``2``), so a number is written only when it is a whole one: an int that fits 64
bits, or a float with no fraction within 2**53.

The rest has no exact ``where`` form and is refused condition by condition: a number
with a fraction, an ordering on strings (Chroma refuses it), the complement of an
ordering (a missing key would be left out), list and text tests, IS_EMPTY. A filter is
put in negation normal form first (Chroma has no ``$not``); a refused part is left out
of the clause, which then matches more rows, never fewer, and the result is marked
inexact. The engine checks every candidate against the reference anyway, and drops
what does not match.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from thresholded.filters.model import Combine, Condition, Filter, Op, check_keys, fold, kind

_POSITIVE = {Op.EQ: "$eq", Op.NE: "$ne", Op.IN: "$in", Op.NIN: "$nin"}
_COMPLEMENT = {Op.EQ: "$ne", Op.NE: "$eq", Op.IN: "$nin", Op.NIN: "$in"}
_ORDERED = {Op.GT: "$gt", Op.GTE: "$gte", Op.LT: "$lt", Op.LTE: "$lte"}


class Inexpressible(Exception):
    """A condition with no exact form in a store's filter dialect: it stays client-side."""


@dataclass(frozen=True)
class ChromaWhere:
    """A filter written as a Chroma ``where`` clause."""

    where: dict[str, Any] | None
    """The clause; None when nothing of the filter could be written (or no filter)."""
    exact: bool = True
    """The clause matches exactly the rows the filter does (else: more of them)."""


def to_chroma(f: Filter | None, *, allowed_keys: Iterable[str] | None = None) -> ChromaWhere:
    """``f`` as a Chroma ``where`` clause; every key checked (and allowed, if a list is given).
    A filter no row can match, or every row does, is written as no clause: the engine's
    check decides."""
    if f is None:
        return ChromaWhere(None)
    check_keys(f, allowed_keys)
    folded = fold(f)
    if isinstance(folded, bool):
        return ChromaWhere(None, exact=folded)
    writer = _Writer()
    return ChromaWhere(writer.write(folded, negated=False), exact=writer.exact)


def condition_where(c: Condition, *, negated: bool = False) -> dict[str, Any]:
    """One condition (or its complement) as a ``where`` clause; :class:`Inexpressible` when
    Chroma has no exact form for it."""
    if c.op in _POSITIVE and all(map(_exact, c.values)):
        return {c.key: {(_COMPLEMENT if negated else _POSITIVE)[c.op]: _value(c.value)}}
    if c.op in _ORDERED and not negated and kind(c.value) == "number" and _exact(c.value):
        return {c.key: {_ORDERED[c.op]: c.value}}
    raise Inexpressible(f"{'not ' if negated else ''}{c} has no exact Chroma form")


class _Writer:
    def __init__(self) -> None:
        self.exact = True

    def write(self, f: Filter, *, negated: bool) -> dict[str, Any] | None:
        """``f`` (or its complement) in negation normal form; None: no constraint written."""
        if isinstance(f, Condition):
            try:
                return condition_where(f, negated=negated)
            except Inexpressible:
                self.exact = False
                return None
        if f.combine is Combine.NOT:  # none of them: each one's complement, all of them
            return self._join(f.children, negated=not negated, conjunction=not negated)
        conjunction = (f.combine is Combine.AND) != negated  # De Morgan
        return self._join(f.children, negated=negated, conjunction=conjunction)

    def _join(
        self, children: Iterable[Filter], *, negated: bool, conjunction: bool
    ) -> dict[str, Any] | None:
        parts = [self.write(child, negated=negated) for child in children]
        if conjunction:
            written = [p for p in parts if p is not None]  # a part left out only widens
            return _joined(written, "$and")
        if any(p is None for p in parts):  # one unconstrained alternative: the whole is
            return None
        return _joined(parts, "$or")  # type: ignore[arg-type]


def and_where(own: dict[str, Any] | None, written: dict[str, Any] | None) -> dict[str, Any] | None:
    """A Chroma ``where`` clause: a retriever's own, AND the filters where written
    (:func:`to_chroma`; None: neither restricts)."""
    if not own or written is None:
        return written or own or None
    return {"$and": [own, written]}


def _joined(parts: list[dict[str, Any]], word: str) -> dict[str, Any] | None:
    """Parts under ``$and``/``$or``; Chroma wants two or more, so one part stands alone."""
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {word: parts}


def _exact(value: Any) -> bool:
    """A value Chroma compares as the model does: a string, a bool, or a whole number."""
    if kind(value) != "number":
        return True
    if isinstance(value, int):
        return -(2**63) <= value < 2**63
    return value.is_integer() and abs(value) <= 2**53


def _value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
