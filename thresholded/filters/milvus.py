"""Filters as Milvus boolean expressions, in the dialect of each engine.

The engines differ where it matters for a security filter:

- Milvus Lite 2.5 runs no ``not (...)`` and no ``exists`` on a metadata key, and its
  ``k != v`` holds where ``k`` is missing or of another type: it is the complement of
  ``k == v``, as the model wants. It fails an expression nested 50 levels deep, as a
  chain of 51 ``or`` is (an IN of 51 values): longer chains are written as trees.
- Milvus Lite 3.x (and newer servers) run ``not`` and ``exists``, but a comparison on a
  missing key is neither true nor false, so ``not (k == v)`` leaves out the rows that
  lack ``k``: the complement of EQ and IN is written ``(not (P) or not exists k)``. An
  ordering, a text or a list test on a value of another type is unknown too, so its
  complement has no exact form there.
- Milvus Lite 3.x runs no ``in [...]``: IN is written as ``==`` joined by ``or``.
- The Milvus 2.3 server runs ``not`` and ``exists``, and there ``not (P)`` holds wherever
  ``P`` does not, a missing key included: every exact condition has its complement. Its
  ``like`` takes a prefix only, so TEXT_MATCH (a substring) is left to the check.

A filter is first put in negation normal form (NOT pushed down to conditions by De
Morgan's laws, "none of" being "and not"); each condition and each complement is then
written in a form the engine runs and that means exactly the model's condition. Where
an engine has no such form, the part is left out of the expression (the expression
then matches more rows, never fewer) and the result is marked inexact: the engine
checks every candidate against the reference anyway, and drops what does not match.

CONTAINS, ANY and ALL with text look in a stored list (``json_contains``) or a stored
string (``like``, as TEXT_MATCH), since the model reads both.

``IN []``, ``NIN []``, ``ANY []`` and ``ALL []`` never reach an engine: their result is
known (:func:`~thresholded.filters.model.fold`). TEXT_MATCH_INSENSITIVE has no Milvus
form and is refused.
"""

from __future__ import annotations

import functools
import heapq
import importlib.metadata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from thresholded.errors import UnsafeFilterError
from thresholded.filters.model import Combine, Condition, Filter, Op, check_keys, fold
from thresholded.milvus_expr import field_name, literal


class Dialect(StrEnum):
    """What an engine runs, and how its comparisons treat a missing key."""

    LITE_2 = "milvus-lite-2"
    """No ``not``, no ``exists``; ``k != v`` holds where ``k`` is missing."""
    MODERN = "milvus-modern"
    """``not`` and ``exists``; comparisons on a missing key are unknown."""
    SERVER_2_3 = "milvus-2.3"
    """``not`` is the complement (missing keys included); ``like`` takes a prefix only."""
    PLAIN = "milvus-plain"
    """An engine whose negation is not known: complements are left to the reference check."""


@dataclass(frozen=True)
class MilvusFilter:
    """A filter written for one engine."""

    expr: str | None
    """The expression; None when nothing of the filter could be written (or no filter)."""
    exact: bool = True
    """The expression matches exactly the rows the filter does (else: more of them)."""
    never: bool = False
    """No row matches: the engine need not be asked."""


_COMPARISONS = {Op.EQ: "==", Op.GT: ">", Op.GTE: ">=", Op.LT: "<", Op.LTE: "<="}
_ARRAYS = {Op.CONTAINS: "json_contains", Op.ANY: "json_contains_any", Op.ALL: "json_contains_all"}
_COMPLEMENTS = {Op.NE: Op.EQ, Op.NIN: Op.IN}
_LIKE_SPECIALS = ("%", "_", "\\")


def _argument(value: object) -> str:
    """A value as a function's argument: a negative number in parentheses, as Milvus Lite 3
    and the server read no sign there (``json_contains(a, -1)`` is a syntax error)."""
    written = literal(value)
    return f"({written})" if written.startswith("-") else written


_EXACT_ON_2_3 = frozenset({*_COMPARISONS, Op.IN, *_ARRAYS})
"""Conditions the 2.3 server writes exactly, so that ``not`` gives their complement."""


def to_milvus(
    f: Filter | None,
    dialect: Dialect,
    *,
    allowed_keys: Iterable[str] | None = None,
    json_field: str | None = None,
    declared: DeclaredFields | None = None,
) -> MilvusFilter:
    """``f`` as an expression ``dialect`` runs; every key checked (and allowed, if a list is
    given), every value a literal. Where the metadata is kept in one JSON field
    (``json_field``), each key is written as a key of that field (``json_field["key"]``).
    Keys that are ``declared`` fields of the collection are written for their type."""
    if f is None:
        return MilvusFilter(None)
    check_keys(f, allowed_keys)
    folded = fold(f)
    if folded is True:
        return MilvusFilter(None)
    if folded is False:
        return MilvusFilter(None, never=True)
    writer = _Writer(dialect, json_field, declared or DeclaredFields())
    expr = writer.write(folded, negated=False)
    if expr is not None and depth(expr) > MAX_EXPR_DEPTH:
        raise UnsafeFilterError(
            f"the filter, written for Milvus, nests {depth(expr)} levels deep (each and, or "
            f"and not is one), more than the {MAX_EXPR_DEPTH} written (Milvus Lite 2.5 fails "
            "50): nest fewer groups, or put fewer conditions beside each nested group"
        )
    return MilvusFilter(None if expr is None else str(expr), exact=writer.exact)


def dialect_of(client: Any, uri: str) -> Dialect:
    """The dialect of the engine behind a pymilvus client at ``uri``: Milvus Lite (a local
    file) by its installed version, a server by the version it reports."""
    if not uri.startswith(("http://", "https://", "tcp://", "grpc://")):
        return Dialect.MODERN if _lite_major() >= 3 else Dialect.LITE_2
    try:
        version = str(client.get_server_version())
    except Exception:  # an engine that does not say is written for plainly
        return Dialect.PLAIN
    return Dialect.SERVER_2_3 if version.lstrip("v").startswith("2.3.") else Dialect.PLAIN


def client_dialect(client: Any) -> Dialect:
    """The dialect of a pymilvus client's engine, from its URI (and a server's version)."""
    uri = str(getattr(getattr(client, "_config", None), "uri", "") or "")
    return dialect_of(client, uri)


class StoreDialect:
    """A backend's ``_dialect``: that of its store's client (:func:`client_dialect`), asked
    once (a server reports its version)."""

    _store: Any

    @functools.cached_property
    def _dialect(self) -> Dialect:
        return client_dialect(getattr(self._store, "client", None))


def _lite_major() -> int:
    try:
        return int(importlib.metadata.version("milvus-lite").split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return 2


_LIST_OPS = frozenset({*_ARRAYS, Op.IS_EMPTY})
_NO_LENGTH_OF_A_KEY = frozenset({Dialect.MODERN, Dialect.PLAIN})
"""Engines that may take ``array_length`` of a field only, not of a key inside a JSON field
(``array_length(metadata["tags"])``): Milvus Lite 3 refuses it, and an engine not known."""


class ValueKind(StrEnum):
    """The kind of value a declared field holds, as Milvus compares it."""

    TEXT = "text"
    NUMBER = "number"
    """A FLOAT or DOUBLE field: any number."""
    WHOLE_NUMBER = "whole number"
    """An INT field: Milvus refuses a float there (``year > 2020.5``, ``year == 2021.0``)."""
    BOOLEAN = "boolean"

    def holds(self, value: object) -> bool:
        if self is ValueKind.BOOLEAN or isinstance(value, bool):
            return self is ValueKind.BOOLEAN and isinstance(value, bool)
        if self is ValueKind.WHOLE_NUMBER:
            return isinstance(value, int)
        return isinstance(value, str if self is ValueKind.TEXT else int | float)


def value_kind(dtype: str) -> ValueKind | None:
    """The kind of value a Milvus field of data type ``dtype`` (its name: ``VARCHAR``,
    ``INT64``, ...) holds; None for one no filter compares (JSON, vectors)."""
    if dtype in ("VARCHAR", "STRING"):
        return ValueKind.TEXT
    if dtype == "BOOL":
        return ValueKind.BOOLEAN
    if "VECTOR" in dtype:
        return None
    if dtype.startswith("INT"):
        return ValueKind.WHOLE_NUMBER
    return ValueKind.NUMBER if dtype in ("FLOAT", "DOUBLE") else None


@dataclass(frozen=True)
class DeclaredFields:
    """The filter keys that are declared fields of a collection, by kind: Milvus runs on a
    declared ARRAY field only the list tests, and on a declared scalar field none of them
    (metadata in a dynamic or JSON field can hold any value, and is written for any)."""

    lists: frozenset[str] = frozenset()
    """Declared ARRAY fields."""
    scalars: frozenset[str] = frozenset()
    """Declared fields of one scalar value (text, number, boolean)."""
    kinds: tuple[tuple[str, ValueKind], ...] = ()
    """Each declared field's kind of value (an ARRAY's elements'), by key."""

    def check(self, c: Condition) -> None:
        """Refuse a condition Milvus cannot run on the declared field it names."""
        kind = dict(self.kinds).get(c.key)
        if kind is ValueKind.WHOLE_NUMBER and c.key in self.lists:
            kind = ValueKind.NUMBER  # json_contains takes any number on a list of integers
        other = next((v for v in c.values if kind and not kind.holds(v)), None)
        if other is not None:
            raise UnsafeFilterError(
                f"{c.op.value} {other!r} on {c.key!r}, a declared field of the collection "
                f"holding {kind}s, which Milvus refuses to compare with a "
                f"{type(other).__name__}: compare it with a {kind}"
            )
        if c.key in self.lists and c.op not in _LIST_OPS:
            raise UnsafeFilterError(
                f"{c.op.value} on {c.key!r}, a declared ARRAY field of the collection, which "
                "Milvus compares with no single value: test it with contains, any or all"
            )
        if c.key in self.scalars and c.op in _LIST_OPS:
            raise UnsafeFilterError(
                f"{c.op.value} on {c.key!r}, a declared scalar field of the collection, which "
                "Milvus cannot run as a list test: use eq or in (text_match for a substring)"
            )


def declared_of(fields: Iterable[tuple[str, Any, Any]]) -> DeclaredFields:
    """The declared fields of a collection by kind, from each field's name, data type and,
    for an ARRAY, element type (pymilvus ``DataType`` members, read by name): JSON and vector
    fields hold no value a filter compares."""
    lists, scalars, kinds = set(), set(), {}
    for name, dtype, element in fields:
        is_list = dtype.name == "ARRAY"
        if is_list:
            lists.add(name)
        elif dtype.name != "JSON" and "VECTOR" not in dtype.name:
            scalars.add(name)
        kind = value_kind((element if is_list else dtype).name)
        if kind is not None:
            kinds[name] = kind
    return DeclaredFields(
        lists=frozenset(lists), scalars=frozenset(scalars), kinds=tuple(kinds.items())
    )


def declared_in(description: Mapping[str, Any]) -> DeclaredFields:
    """The declared fields of a collection as ``MilvusClient.describe_collection`` describes
    it (:func:`declared_of`)."""
    fields = description.get("fields", [])
    return declared_of((f["name"], f["type"], f.get("element_type")) for f in fields)


class _Writer:
    def __init__(self, dialect: Dialect, json_field: str | None, declared: DeclaredFields) -> None:
        self.dialect = dialect
        self.json_field = json_field
        self.declared = declared
        self.exact = True

    def write(self, f: Filter, *, negated: bool) -> str | None:
        """``f`` (or its complement), in negation normal form; None: no constraint written."""
        if isinstance(f, Condition):
            self.declared.check(f)
            if f.op in _COMPLEMENTS:
                positive = Condition(f.key, _COMPLEMENTS[f.op], f.value)
                return self.condition(positive, negated=not negated)
            return self.condition(f, negated=negated)
        if f.combine is Combine.NOT:  # none of them: each one's complement, all of them
            return self._join(f.children, negated=not negated, conjunction=not negated)
        conjunction = (f.combine is Combine.AND) != negated  # De Morgan
        return self._join(f.children, negated=negated, conjunction=conjunction)

    def _join(self, children: Iterable[Filter], *, negated: bool, conjunction: bool) -> str | None:
        parts = [self.write(child, negated=negated) for child in children]
        if conjunction:
            written = [p for p in parts if p is not None]  # a part left out only widens
            return _joined(written, "and")
        if any(p is None for p in parts):  # one unconstrained alternative: the whole is
            return None
        return _joined(parts, "or")  # type: ignore[arg-type]

    def condition(self, c: Condition, *, negated: bool) -> str | None:
        key = field_name(c.key, json_field=self.json_field)
        if c.op is Op.TEXT_MATCH_INSENSITIVE:
            raise UnsafeFilterError(
                f"{c.op.value} on {c.key!r} has no Milvus form: use TEXT_MATCH, or store a "
                "lower-cased copy of the field and match that"
            )
        positive = self.positive(key, c)
        if not negated:
            return positive
        return self.complement(key, c, positive)

    def positive(self, key: str, c: Condition) -> str | None:
        if c.op in _COMPARISONS:
            return f"{key} {_COMPARISONS[c.op]} {literal(c.value)}"
        if c.op is Op.IN:
            assert isinstance(c.value, tuple)
            return _joined([f"{key} == {literal(v)}" for v in c.value], "or")
        if c.op in _ARRAYS:
            return self.list_test(key, c)
        if c.op is Op.TEXT_MATCH:
            return self.text_match(key, str(c.value))
        assert c.op is Op.IS_EMPTY
        if c.key in self.declared.lists:  # a declared list holds nothing else
            return f"array_length({key}) == 0"
        if self.json_field is not None and self.dialect in _NO_LENGTH_OF_A_KEY:
            self.exact = False  # no length of a key inside a JSON field: the reference checks
            return None
        if self.dialect is Dialect.MODERN:
            empty_list = f"(array_length({key}) == 0 and json_contains_all({key}, []))"
            return _Written(f'(not exists {key} or {key} == "" or {empty_list})', 3)
        self.exact = False  # rows of any non-list value: the reference checks the rest
        return f"array_length({key}) == 0"

    def complement(self, key: str, c: Condition, positive: str | None) -> str | None:
        if self.dialect is Dialect.SERVER_2_3 and _exact_on_2_3(c):
            return _Written(f"not ({positive})", depth(positive) + 1)
        if self.dialect is Dialect.MODERN and positive is not None:
            if c.op is Op.IS_EMPTY:  # never unknown: a missing key is empty
                return _Written(f"not ({positive})", depth(positive) + 1)
            if c.op in (Op.EQ, Op.IN):  # false, not unknown, on a value of another type
                return _Written(f"(not ({positive}) or not exists {key})", depth(positive) + 2)
        if self.dialect is Dialect.LITE_2 and c.op is Op.EQ:
            return f"{key} != {literal(c.value)}"
        if self.dialect is Dialect.LITE_2 and c.op is Op.IN:
            assert isinstance(c.value, tuple)
            return _joined([f"{key} != {literal(v)}" for v in c.value], "and")
        self.exact = False
        return None

    def list_test(self, key: str, c: Condition) -> str | None:
        """CONTAINS, ANY or ALL: ``json_contains`` (``_any``, ``_all``) for a stored list,
        and for text values, the text in a stored string too (``like``): any of them for
        CONTAINS and ANY, all of them for ALL."""
        listed = f"{_ARRAYS[c.op]}({key}, {_argument(c.value)})"
        texts = _texts(c)
        if not texts or c.key in self.declared.lists:  # a declared list is never a string
            return listed
        found = [self.text_match(key, text) for text in texts]
        written = [part for part in found if part is not None]
        if len(written) < len(found):  # a text the engine cannot look for: any string
            return _Written(f'({listed} or {key} >= "")', 1)
        in_string = _joined(written, "and" if c.op is Op.ALL else "or")
        return _Written(f"({listed} or {in_string})", depth(in_string) + 1)

    def text_match(self, key: str, text: str) -> str | None:
        """``key like "%text%"``. A value holding LIKE's own characters is matched by its
        plain fragments in order, which every engine reads the same; the reference then
        checks the rest. The empty text is in every string: ``key >= ""``. The 2.3 server
        matches prefixes only: there the check does it all."""
        if text and self.dialect is Dialect.SERVER_2_3:  # a prefix only: nothing exact
            self.exact = False
            return None
        fragments = [text]
        for special in _LIKE_SPECIALS:
            fragments = [piece for part in fragments for piece in part.split(special)]
        if len(fragments) > 1:
            self.exact = False
        plain = [p for p in fragments if p]
        if not plain:  # every string holds "": Milvus Lite 2.5 matches nothing with like "%"
            return f'{key} >= ""'
        pattern = "%".join(["", *plain, ""])
        return f"{key} like {literal(pattern)}"


def _texts(c: Condition) -> list[str]:
    """The text values of a list test (its values are of one type)."""
    return [v for v in c.values if isinstance(v, str)]


def _exact_on_2_3(c: Condition) -> bool:
    """Whether the 2.3 server writes ``c`` exactly, so that ``not`` gives its complement: a
    list test of text looks in strings with ``like``, which there takes a prefix only."""
    return c.op in _EXACT_ON_2_3 and not (c.op in _ARRAYS and _texts(c))


MAX_EXPR_DEPTH = 44
"""The deepest an expression is written (:func:`depth`). Milvus reads a chain of ``and`` or
``or`` as nested pairs, one level per part, and Milvus Lite 2.5 fails an expression nested
50 levels deep ("unsupported expr proto node"): an IN of 51 values, or groups of a few
conditions each nested 32 deep. A few levels are left for what a store adds around it (its
own expression, ``doc_ids``)."""


class _Written(str):
    """An expression written, knowing how deep Milvus nests it (:func:`depth`)."""

    depth: int

    def __new__(cls, text: str, depth: int) -> _Written:
        written = super().__new__(cls, text)
        written.depth = depth
        return written


def depth(expr: str) -> int:
    """How deep Milvus nests ``expr``: one level for each ``and``, ``or`` or ``not`` a part
    of it sits under (a condition: 0)."""
    return expr.depth if isinstance(expr, _Written) else 0


def _joined(parts: list[str], word: str) -> str | None:
    """``parts`` joined by ``word``, two at a time, the shallowest two first: a part nested
    deep (a group) is joined last, one level deeper, and a long list (an IN of thousands
    of values) is as deep as the logarithm of its length. Each pair is written in the
    order its parts were given."""
    if not parts:
        return None
    queue = [(depth(p), i, p) for i, p in enumerate(parts)]
    heapq.heapify(queue)
    while len(queue) > 1:
        (low, i, a), (high, j, b) = heapq.heappop(queue), heapq.heappop(queue)
        first, second = (a, b) if i < j else (b, a)
        pair = _Written(f"({_part(first)} {word} {_part(second)})", max(low, high) + 1)
        heapq.heappush(queue, (pair.depth, min(i, j), pair))
    return queue[0][2]


def _part(expr: str) -> str:
    """``expr`` as a part of a pair: in parentheses, unless it is one part already (a
    condition of one word, or one written here in parentheses whole)."""
    whole = isinstance(expr, _Written) and expr.startswith("(")
    return f"({expr})" if " " in expr and not whole else expr
