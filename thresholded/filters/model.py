"""The filter model: conditions on metadata keys, combined by AND, OR and NOT groups.

What a filter means follows LlamaIndex's reference (``build_metadata_filter_fn``),
extended to nested groups:

- a group's NOT means "none of its children";
- NE and NIN hold for a row that lacks the key (they are the complements of EQ and IN);
- TEXT_MATCH is a substring match;
- CONTAINS, ANY and ALL test the items of a stored list, or the text of a stored string
  (a substring, as LlamaIndex's ``value in stored``);
- a condition whose value has another type than the row's stored value does not match
  that row (``"1"`` is not ``1``; a string never clears ``> 3``), so NE and NIN hold there.

A filter that means nothing is refused here, before any query: an empty group inside
another, a list whose values are of different types, a list with EQ or NE (use IN or
NIN), TEXT_MATCH with a value that is not a string, a missing or non-finite value, a
value given to IS_EMPTY, a date (store and compare dates as strings or numbers).
A top-level empty filter is no filter: adapters turn it into ``None``.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from thresholded.errors import UnsafeFilterError
from thresholded.filters.keys import check_key


class Op(StrEnum):
    """A condition's operator; the values are LlamaIndex's ``FilterOperator`` values."""

    EQ = "=="
    NE = "!="
    GT = ">"
    GTE = ">="
    LT = "<"
    LTE = "<="
    IN = "in"
    NIN = "nin"
    CONTAINS = "contains"
    ANY = "any"
    ALL = "all"
    TEXT_MATCH = "text_match"
    TEXT_MATCH_INSENSITIVE = "text_match_insensitive"
    IS_EMPTY = "is_empty"


class Combine(StrEnum):
    """How a group combines its children."""

    AND = "and"
    OR = "or"
    NOT = "not"
    """None of the children holds."""


Scalar = str | int | float | bool
ORDERED = frozenset({Op.GT, Op.GTE, Op.LT, Op.LTE})
LISTS = frozenset({Op.IN, Op.NIN, Op.ANY, Op.ALL})
TEXTS = frozenset({Op.TEXT_MATCH, Op.TEXT_MATCH_INSENSITIVE})


def kind(value: object) -> str:
    """A value's type as filters compare it: ``bool``, ``number``, ``string``, ``list``."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "list"
    return type(value).__name__


@dataclass(frozen=True)
class Condition:
    """``key op value``: one test of one metadata key."""

    key: str
    op: Op
    value: Scalar | tuple[Scalar, ...] | None = None

    def __post_init__(self) -> None:
        check_key(self.key)
        object.__setattr__(self, "op", Op(self.op))
        object.__setattr__(self, "value", _checked_value(self.key, self.op, self.value))

    def __str__(self) -> str:
        return f"{self.key} {self.op.value} {self.value!r}"

    @property
    def values(self) -> tuple[Scalar, ...]:
        """The values the condition compares with: a list test's, one, or none (is_empty)."""
        if self.value is None:
            return ()
        return self.value if isinstance(self.value, tuple) else (self.value,)


MAX_DEPTH = 32
"""How deep groups may nest in a filter given (each adapter's reader refuses one deeper,
:func:`check_depth`). Milvus Lite 2.5 fails an expression nested about 40 to 50 levels
deep, and writing one a few hundred deep exhausts Python's recursion: a filter an agent
builds from a question is refused with a clear error before either. No filter needs more:
an AND inside an AND (an OR inside an OR) is one group."""

COMBINED_DEPTH = MAX_DEPTH + 4
"""How deep groups may nest in any filter of the model: one combined of filters given, each
within :data:`MAX_DEPTH` (a retriever's, a call's, a member's), which :func:`all_of` nests
a group deeper than the deepest, as a LangChain ensemble's OR of its members' filters does:
a few groups more, still short of the depth Milvus Lite 2.5 fails and of Python's recursion."""


@dataclass(frozen=True)
class Group:
    """Children combined by AND, OR or NOT (none of them); never empty, nested at most
    :data:`COMBINED_DEPTH` deep (``depth``: 1 for a group of conditions)."""

    combine: Combine
    children: tuple[Filter, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "combine", Combine(self.combine))
        object.__setattr__(self, "children", tuple(self.children))
        if not self.children:
            raise UnsafeFilterError(
                f"an empty {self.combine.value.upper()} group means nothing: give it "
                "conditions, or remove it (for no filter at all, pass None)"
            )
        for child in self.children:
            if not isinstance(child, Condition | Group):
                raise TypeError(f"a filter group holds conditions and groups, got {child!r}")
        depth = 1 + max((c.depth for c in self.children if isinstance(c, Group)), default=0)
        check_depth(depth, COMBINED_DEPTH)
        object.__setattr__(self, "depth", depth)


def check_depth(depth: int, limit: int = MAX_DEPTH) -> None:
    """Refuse groups nested ``depth`` deep, past ``limit`` (a filter given: :data:`MAX_DEPTH`)."""
    if depth > limit:
        raise UnsafeFilterError(
            f"a filter nests groups more than {limit} deep: write an AND inside an AND "
            "(an OR inside an OR) as one group"
        )


Filter = Condition | Group


def all_of(*filters: Filter | None) -> Filter | None:
    """Every given filter must hold (None is no filter): how filters combine, only narrowing."""
    parts: list[Filter] = []
    for f in filters:
        if f is None:
            continue
        if isinstance(f, Group) and f.combine is Combine.AND:
            parts.extend(f.children)
        else:
            parts.append(f)
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else Group(Combine.AND, tuple(parts))


def keys(f: Filter | None) -> set[str]:
    """Every key a filter names."""
    if f is None:
        return set()
    if isinstance(f, Condition):
        return {f.key}
    return set().union(*(keys(c) for c in f.children))


def check_keys(f: Filter | None, allowed: Iterable[str] | None) -> None:
    """Refuse a filter naming a key outside ``allowed`` (None: any field name)."""
    if allowed is None:
        return
    allowed = frozenset(allowed)
    for key in sorted(keys(f)):
        check_key(key, allowed)


def check_not_marks(f: Filter | None, marks: Mapping[str, str]) -> None:
    """Refuse a filter naming a key this package writes on its results (``marks``: each with
    what to use instead): the filter is judged on the stored sections, which lack it, so
    ``!=`` would exclude nothing and ``==`` everything, whatever the results show."""
    for key in sorted(keys(f)):
        if key in marks:
            raise UnsafeFilterError(
                f"filter key {key!r} is a mark this package writes on its results, not "
                f"metadata of the stored sections, which the filter is judged on: "
                f"{marks[key]}"
            )


def like_condition(
    key: str,
    op: Op,
    value: Any,
    *,
    operator: str,
    instead: str,
    negated: bool = False,
    checked_only: bool = False,
) -> Condition:
    """A framework's condition in the model (``negated``: under a NOT, or an odd number of
    them). A substring match (TEXT_MATCH, TEXT_MATCH_INSENSITIVE) is refused where a LIKE
    character in its value would change what the filter lets through: the framework's own
    stores write the value into a LIKE pattern (LangChain's ``like``, LlamaIndex's TEXT_MATCH
    on Milvus, both of LlamaIndex's on its SQL stores, ILIKE for the insensitive one;
    ``operator``: its name there), and the model reads it as a character.
    ``checked_only``: the filter is only tested against what the framework's store returned
    under it, never written into a store's query, and a ``%`` outside a NOT is read as the
    character: that can only hold back more than the store's pattern did (its own stores
    that write none, such as ``SimpleVectorStore``, read it so too).

    - ``%``, a wildcard there, anywhere: ``%internal%`` would match no section, and under
      NOT every one, the sections it meant to leave out included;
    - ``_``, any one character there, under NOT: read as the character, it matches fewer
      sections, so "none of" lets more through (``int_rnal`` left out no ``internal``
      section). Elsewhere it can only leave sections out, and is read as the character.

    ``instead`` names the filter for a text that holds such a character."""
    if op in TEXTS and isinstance(value, str):
        if "%" in value and (negated or not checked_only):
            raise UnsafeFilterError(
                f"{operator} on {key!r} is a substring match, and its value {value!r} holds "
                "'%', which would be matched as a character, not as a wildcard: give the text "
                f"alone ({value.replace('%', '')!r}), or {instead} for a text that holds '%'"
            )
        if negated and "_" in value:
            part = max(value.split("_"), key=len)
            raise UnsafeFilterError(
                f"{operator} on {key!r} under NOT is a substring match, and its value "
                f"{value!r} holds '_', which a LIKE pattern reads as any one character and "
                "this package as the character itself: the NOT would let through the "
                "sections the pattern meant to leave out. Give the text without '_'"
                f"{f' (e.g. {part!r})' if part else ''}, or {instead} for a text that holds '_'"
            )
    return Condition(key, op, value)


def fold(f: Filter) -> Filter | bool:
    """``f`` without the parts whose result is known without looking at a row:
    ``IN []`` never holds, ``NIN []`` always does, ``ANY []`` never, ``ALL []`` always.
    True and False mean the whole filter always, or never, holds."""
    if isinstance(f, Condition):
        if f.op in LISTS and not f.value:
            return f.op in (Op.NIN, Op.ALL)
        return f
    children: list[Filter] = []
    for child in f.children:
        folded = fold(child)
        if folded is True:
            if f.combine is Combine.OR:
                return True
            if f.combine is Combine.NOT:
                return False
        elif folded is False:
            if f.combine is Combine.AND:
                return False
        else:
            children.append(folded)
    if not children:
        return f.combine is not Combine.OR
    return Group(f.combine, tuple(children))


def none_match(f: Filter | None) -> bool:
    """True when no row can match: the store need not be asked."""
    return f is not None and fold(f) is False


# Values ------------------------------------------------------------------------------------
def _checked_value(key: str, op: Op, value: object) -> Scalar | tuple[Scalar, ...] | None:
    if op is Op.IS_EMPTY:
        return _no_value(key, value)
    if value is None:
        raise UnsafeFilterError(f"the filter on {key!r} ({op.value}) has no value")
    if op in LISTS:
        return _list(key, op, value)
    value = builtin(value)
    if isinstance(value, list | tuple):
        fix = " use IN or NIN for a list of values" if op in (Op.EQ, Op.NE) else ""
        raise UnsafeFilterError(
            f"the filter on {key!r} compares with a list ({op.value} {list(value)!r}), "
            f"which has no single meaning:{fix or ' give one value'}"
        )
    _scalar(key, op, value)
    if op in TEXTS and not isinstance(value, str):
        raise UnsafeFilterError(
            f"{op.value} on {key!r} needs a string, got {value!r}: a text match compares text"
        )
    if op in ORDERED and isinstance(value, bool):
        raise UnsafeFilterError(f"{op.value} on {key!r} needs a number or a string, got {value!r}")
    return value  # type: ignore[return-value]


def _no_value(key: str, value: object) -> None:
    """IS_EMPTY takes no value. One given would be ignored, whatever it says:
    ``is_empty "false"`` (as an agent or a JSON form writes "is not empty") would still
    mean "is empty", and admit exactly the sections its writer meant to leave out."""
    if value is not None:
        raise UnsafeFilterError(
            f"is_empty on {key!r} takes no value, got {value!r}, which would be ignored: "
            'give None; for "is not empty", put the condition under a NOT group'
        )
    return None


def _list(key: str, op: Op, value: object) -> tuple[Scalar, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple | set | frozenset):
        raise UnsafeFilterError(f"{op.value} on {key!r} needs a list of values, got {value!r}")
    items = tuple(builtin(item) for item in value)
    for item in items:
        _scalar(key, op, item)
    kinds = {kind(item) for item in items}
    if len(kinds) > 1:
        raise UnsafeFilterError(
            f"{op.value} on {key!r} mixes values of types {sorted(kinds)}: a stored value has "
            "one type, so give values of one type (split the filter with OR)"
        )
    return items


def builtin(value: object) -> object:
    """A value as the built-in bool, int, float or str it stands for: a numpy scalar's, an
    enum's (``StrEnum``, ``IntEnum``), another subclass's. A store writes values as their
    ``repr``, which for these is no value (``np.float64(0.5)``, ``<Color.RED: 'red'>``)."""
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        value = value.item()  # type: ignore[attr-defined]
    if isinstance(value, bool):
        return bool(value)
    for base in (int, float, str):
        if isinstance(value, base) and type(value) is not base:
            return base.__dict__[f"__{base.__name__}__"](value)
    return value


def date_text(value: object) -> str | None:
    """The text of a date or datetime: a ``datetime.date``'s ISO form, or the string of a
    LangChain query constructor's ``{"date": "2024-01-01", "type": "date"}`` (or
    ``{"datetime": ..., "type": "datetime"}``); None for any other value."""
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, Mapping) and len(value) == 2 and value.get("type") in _DATE_TYPES:
        text = value.get(value["type"])
        return text if isinstance(text, str) else None
    return None


_DATE_TYPES = ("date", "datetime")


def _scalar(key: str, op: Op, value: object) -> None:
    date = date_text(value)
    if date is not None:
        raise UnsafeFilterError(
            f"the filter on {key!r} ({op.value}) compares with a date ({date!r}), which filters "
            "do not compare: store dates in the metadata as strings ('2024-01-01': in one ISO "
            "form, their order is the dates') or numbers (20240101, a Unix timestamp), and "
            f"compare with the same kind, e.g. {key} {op.value} {date!r}"
        )
    if kind(value) not in ("bool", "number", "string"):
        raise UnsafeFilterError(
            f"the filter on {key!r} ({op.value}) has a value of type {type(value).__name__}: "
            "use a string, a number or a bool"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise UnsafeFilterError(f"the filter on {key!r} has the value {value!r}: not a number")
