"""Safe Milvus boolean expressions: validated field names and escaped literals.

Metadata filters reach Milvus as expression strings. Keys come from user
interfaces and from LLM-generated filters, values from anyone, so neither may
change what a filter means: a key must be a plain identifier, and a value is
always a literal, whatever quotes, backslashes, operators or newlines it holds.
A value Milvus could not read at all (a line break, a control character, a lone
surrogate) is refused before any query, with an error that says why.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

from thresholded.errors import ThresholdedError


class UnsafeFilterError(ThresholdedError, ValueError):
    """A filter key or value that could change the meaning of a Milvus expression."""


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,254}$")
_RESERVED = frozenset(
    {"and", "or", "not", "in", "like", "true", "false", "exists", "json_contains", "array_contains"}
)
_ESCAPES = {"\\": "\\\\", '"': '\\"'}
_ALLOWED_CONTROL = {"\t"}

COMPARISONS = {"==", "!=", ">", ">=", "<", "<="}


def field_name(key: object, allowed: Iterable[str] | None = None) -> str:
    """A filter key as a Milvus field name: a plain identifier, and allowed if a list is given."""
    if not isinstance(key, str) or not _IDENTIFIER.match(key) or key.lower() in _RESERVED:
        raise UnsafeFilterError(
            f"filter key {key!r} is not a plain field name (letters, digits and '_', "
            "not starting with a digit, not a keyword): it would be inserted into the "
            "Milvus expression as code"
        )
    if allowed is not None:
        allowed = set(allowed)
        if key not in allowed:
            raise UnsafeFilterError(
                f"filter key {key!r} is not one of the allowed keys: {sorted(allowed)}"
            )
    return key


def literal(value: object) -> str:
    """A Python value as a Milvus literal: strings double-quoted with every escape applied."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise UnsafeFilterError(f"filter value {value!r} is not a finite number")
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    raise UnsafeFilterError(
        f"filter value {value!r} of type {type(value).__name__} is not supported"
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


def comparison(key: str, operator: str, value: object) -> str:
    if operator not in COMPARISONS:
        raise UnsafeFilterError(f"unknown comparison operator {operator!r}")
    return f"{key} {operator} {literal(value)}"


def membership(key: str, values: Sequence[object], *, negate: bool = False) -> str:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise UnsafeFilterError(f"'in' needs a list of values for {key!r}, got {values!r}")
    return f"{key} {'not in' if negate else 'in'} {literal(list(values))}"


def prefix_match(key: str, prefix: str) -> str:
    """``key like "prefix%"``, with the prefix taken literally (no wildcards of its own)."""
    if not isinstance(prefix, str):
        raise UnsafeFilterError(f"a text match needs a string, got {prefix!r}")
    if "%" in prefix or "_" in prefix:
        raise UnsafeFilterError(
            f"text match value {prefix!r} holds a LIKE wildcard ('%' or '_'), "
            "which Milvus would not take literally"
        )
    return f"{key} like {_string(prefix + '%')}"


def join(clauses: Sequence[str], condition: str) -> str:
    """Join parenthesised clauses with ``and``/``or``; ``not`` negates their conjunction."""
    parts = [f"({c})" for c in clauses if c]
    if not parts:
        return ""
    condition = condition.lower()
    if condition == "not":
        return f"not ({' and '.join(parts)})"
    if condition not in ("and", "or"):
        raise UnsafeFilterError(f"unknown filter condition {condition!r}")
    return f" {condition} ".join(parts)
