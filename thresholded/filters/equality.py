"""The part of a filter that a store comparing values with Python's ``==`` applies safely.

Such a store (LlamaIndex's in-memory stores) holds flat filters only, and may raise on an
ordering of a value of another type. It is sent the part it applies no more strictly than
the model: it then returns a superset of the rows, which the engine's check narrows. One
that returned too little could never be corrected.
"""

from __future__ import annotations

from thresholded.filters.model import Combine, Condition, Filter, Group, Op, kind

SAFE_OPERATORS = frozenset({Op.EQ, Op.NE, Op.IN, Op.NIN, Op.IS_EMPTY})
"""Operators such a store applies without raising on a value of another type."""
_NEGATIVE = frozenset({Op.NE, Op.NIN})


def equality_part(f: Filter | None) -> tuple[Combine, tuple[Condition, ...]] | None:
    """Of ``f``, the conditions such a store applies safely, and how they combine; None when it is
    not flat, or nothing of it can be sent. Of an AND, the safe conditions are sent, the
    others left to the engine's check (``tenant == "a" and flag != 1`` still sends the
    tenant); of an OR or a NOT, all of it or nothing: leaving a part out would not return a
    superset."""
    if f is None:
        return None
    group = f if isinstance(f, Group) else Group(Combine.AND, (f,))
    negated = group.combine is Combine.NOT
    safe = tuple(
        c for c in group.children if isinstance(c, Condition) and _safe(c, negated=negated)
    )
    if group.combine is Combine.AND:
        if not safe:
            return None
    elif len(safe) != len(group.children):
        return None
    return group.combine, safe


def _safe(c: Condition, *, negated: bool = False) -> bool:
    """Whether such a store applies the condition no more strictly than the model does
    (``negated``: under a NOT group, which returns the rows it does not match).

    Not NE or NIN with a number, nor EQ or IN with a number under NOT: the store compares
    with Python's ``==``, under which ``True == 1`` and ``False == 0``, so it would never
    return a section whose stored ``True`` is "not 1" (a bool is not a number,
    :mod:`thresholded.filters`).
    """
    if c.op not in SAFE_OPERATORS:
        return False
    negative = (c.op in _NEGATIVE) != negated
    return not negative or all(kind(v) != "number" for v in c.values)
