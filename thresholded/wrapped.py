"""A wrapped retriever's restrictions with those given to ``from_retriever``: they only
narrow. A raw expression both give holds twice (AND); any other restriction both give is
refused, as neither may replace the other; one given as None or empty restricts nothing,
so it leaves the wrapped retriever's in force."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sized
from typing import Any


def restricts(value: Any) -> bool:
    """A keyword's value restricts unless it is None or empty."""
    if value is None:
        return False
    if isinstance(value, str):
        return bool(value.strip())
    return not isinstance(value, Sized) or len(value) > 0


def refuse_replaced(
    inherited: Mapping[str, Any], given: Mapping[str, Any], keys: Iterable[str]
) -> None:
    """Refuse a restriction among ``keys`` that both set (not None), differently."""
    clashing = [k for k in keys if inherited.get(k) is not None and given.get(k) is not None]
    clashing = [k for k in clashing if inherited[k] != given[k]]
    if clashing:
        raise ValueError(
            f"both the wrapped retriever and from_retriever give {clashing}: one would "
            "replace the other. Give them once, and further restrictions as filters=..., "
            "which are combined"
        )


def merged_restrictions(
    inherited: Mapping[str, Any],
    given: Mapping[str, Any],
    *,
    restricting: Iterable[str],
    expr_key: str,
) -> dict[str, Any]:
    """``inherited`` with ``given`` over it, ``given``'s empty values left out: the raw
    expression under ``expr_key`` that both give holds twice (AND); any other of
    ``restricting`` both give is refused (:func:`refuse_replaced`)."""
    given = {k: v for k, v in given.items() if restricts(v)}
    merged = {**inherited, **given}
    exprs = [k.get(expr_key) for k in (inherited, given) if k.get(expr_key)]
    if len(exprs) > 1:
        merged[expr_key] = " and ".join(f"({e})" for e in exprs)
    refuse_replaced(inherited, given, sorted(set(restricting) - {expr_key}))
    return merged
