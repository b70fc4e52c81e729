"""Safe pieces of Milvus boolean expressions: checked field names and escaped literals.

Keys come from user interfaces and from LLM-generated filters, values from
anyone, so neither may change what a filter means: a key must be a plain field
name (see :mod:`thresholded.filters.keys`), and a value is always a literal,
whatever quotes, backslashes, operators or newlines it holds. A value Milvus
could not read at all (a line break, a control character, a lone surrogate) or
would read as another value (an integer beyond 64 bits) is refused before any
query, with an error that says why.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

from thresholded.errors import UnsafeFilterError
from thresholded.filters.keys import check_key

__all__ = [
    "UnsafeFilterError",
    "all_of_exprs",
    "field_name",
    "id_membership",
    "literal",
    "membership",
]

_ESCAPES = {"\\": "\\\\", '"': '\\"'}
_ALLOWED_CONTROL = {"\t"}
INT_LITERAL_LIMIT = 2**63 - 1
"""The largest integer magnitude a Milvus expression holds: its lexer reads a signed 64-bit
integer, the sign apart from the digits (so -2**63 is out of reach too)."""


def field_name(
    key: object, allowed: Iterable[str] | None = None, *, json_field: str | None = None
) -> str:
    """A filter key as a Milvus field name: a plain identifier, and allowed if a list is given.
    Where the metadata is kept in one JSON field (``json_field``, langchain-milvus's
    ``metadata_field``), the key inside it: ``json_field["key"]``."""
    name = check_key(key, None if allowed is None else frozenset(allowed))
    return name if json_field is None else f"{check_key(json_field)}[{literal(name)}]"


def literal(value: object) -> str:
    """A Python value as a Milvus literal: strings double-quoted with every escape applied."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return _integer(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise UnsafeFilterError(f"filter value {value!r} is not a finite number")
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    raise UnsafeFilterError(
        f"filter value {value!r} of type {type(value).__name__} is not supported"
    )


def _integer(value: int) -> str:
    """An integer Milvus reads as itself. Beyond 64 bits Milvus Lite clamps the literal to
    the nearest 64-bit integer (``10**30`` reads as ``2**63 - 1``), so ``!=`` and ``==``
    would compare with another number than the filter's."""
    if -INT_LITERAL_LIMIT <= value <= INT_LITERAL_LIMIT:
        return str(value)
    raise UnsafeFilterError(
        f"filter value {value} is beyond the integers a Milvus expression can hold "
        f"(-{INT_LITERAL_LIMIT} to {INT_LITERAL_LIMIT}, i.e. +-(2**63 - 1)): Milvus would "
        "compare with another number. Compare with a value within that range"
    )


def check_expression(expr: str) -> str:
    """A raw Milvus expression string, refused if no request could carry it.

    For expressions written by hand (LangChain's ``expr``): their meaning is the
    writer's, but a lone surrogate would fail deep inside pymilvus.
    """
    _refuse_lone_surrogates(expr, what="filter expression")
    return expr


def _refuse_lone_surrogates(text: str, *, what: str) -> None:
    """Python strings may hold half a UTF-16 pair (from ``surrogateescape``, or a JSON
    ``"\\ud800"``): it is not text, and no request can be encoded with it."""
    bad = next((ch for ch in text if "\ud800" <= ch <= "\udfff"), None)
    if bad is not None:
        raise UnsafeFilterError(
            f"{what} {text!r} holds a lone surrogate (U+{ord(bad):04X}), which is not valid "
            "Unicode text and cannot be sent to Milvus: decode the text properly, or drop "
            "the character"
        )


def _string(value: str) -> str:
    _refuse_lone_surrogates(value, what="filter value")
    out = []
    for ch in value:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif (ord(ch) < 0x20 or ord(ch) == 0x7F) and ch not in _ALLOWED_CONTROL:
            # Milvus's lexer rejects a raw newline in a string and does not decode "\n",
            # so such a value can neither be written nor matched: refuse it clearly.
            raise UnsafeFilterError(
                f"filter value {value!r} holds a line break or control character, "
                "which a Milvus expression cannot hold"
            )
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def membership(key: str, values: Sequence[object]) -> str:
    """``key in [...]`` for a non-empty list of ids of one field (a declared field)."""
    if isinstance(values, str | bytes) or not isinstance(values, Sequence) or not values:
        raise UnsafeFilterError(f"'in' needs a non-empty list of values for {key!r}")
    return f"{check_key(key)} in {literal(list(values))}"


def id_membership(key: str, ids: Sequence[str], *, integer: bool = False) -> str | None:
    """``key in [...]`` for the rows of ``ids``, ids read from anywhere (the ids a section
    links to are its writer's text): each is a literal, whatever quotes or brackets it
    holds. An id no key of the field can be is left out, as no row has it: one a Milvus
    expression cannot hold (a line break), or on an ``integer`` key anything but a 64-bit
    integer in ASCII digits. None when none is left."""
    keys = [_key(i, integer) for i in ids]
    kept = [k for k in keys if k is not None]
    return membership(key, kept) if kept else None


_INTEGER = re.compile(r"-?[0-9]+")


def _key(value: str, integer: bool) -> str | int | None:
    """``value`` as a key of the field, if it can be one a Milvus literal can hold."""
    key: str | int = value
    if integer:
        if not _INTEGER.fullmatch(value):
            return None
        key = int(value)
    try:
        literal(key)
    except UnsafeFilterError:
        return None
    return key


def all_of_exprs(exprs: Iterable[str | None]) -> str | None:
    """Milvus expressions that must all hold, as one; None when there are none."""
    parts = [f"({e})" for e in exprs if e]
    return " and ".join(parts) if parts else None
