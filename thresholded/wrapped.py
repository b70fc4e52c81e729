"""A wrapped retriever's restrictions with those given to ``from_retriever``: they only
narrow. A raw expression both give holds twice (AND); any other restriction both give is
refused, as neither may replace the other; one given as None, a blank expression or an empty
clause restricts nothing, so it leaves the wrapped retriever's in force (an empty list of ids
or partitions is no such thing: it is held as given)."""

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


def says_nothing(value: Any) -> bool:
    """A restriction given to ``from_retriever`` that leaves the wrapped one in force: None,
    a blank string (no expression) or an empty mapping (no clause). An empty list is not one:
    a list of ids that names none admits no section, and one of partitions is refused
    (Milvus would search every partition)."""
    if value is None or isinstance(value, Mapping):
        return not value
    return isinstance(value, str) and not value.strip()


def refuse_replaced(
    inherited: Mapping[str, Any],
    given: Mapping[str, Any],
    keys: Iterable[str],
    argument: str = "",
) -> None:
    """Refuse a restriction among ``keys`` that both set (not None), differently;
    ``argument`` names the store arguments that hold them, if any."""
    clashing = [k for k in keys if inherited.get(k) is not None and given.get(k) is not None]
    clashing = [k for k in clashing if not _same_restriction(inherited[k], given[k])]
    if clashing:
        raise ValueError(
            f"both the wrapped retriever and from_retriever give {argument}{clashing}: one would "
            "replace the other. Give them once, and further restrictions as filters=..., "
            "which are combined"
        )


def _same_restriction(one: Any, other: Any) -> bool:
    """Whether two values of a restriction restrict alike: equal, or lists of the same ids
    in another order (a list of ids is a set)."""
    if one == other:
        return True
    lists = (list, tuple, set, frozenset)
    if not (isinstance(one, lists) and isinstance(other, lists)):
        return False
    try:
        return set(one) == set(other)
    except TypeError:  # unhashable items: compare as given
        return False


def merged_restrictions(
    inherited: Mapping[str, Any],
    given: Mapping[str, Any],
    *,
    restricting: Iterable[str],
    expr_keys: Iterable[str],
    argument: str,
) -> dict[str, Any]:
    """``inherited`` with ``given`` over it, what of ``given`` says nothing left out
    (:func:`says_nothing`): a raw expression (a string under one of ``expr_keys``) that
    both give holds twice (AND), a blank one restricting nothing; any other of
    ``restricting`` both give is refused (:func:`refuse_replaced`); ``argument`` names the
    store arguments in the error."""
    expr_keys = set(expr_keys)
    inherited = {k: v for k, v in inherited.items() if k not in expr_keys or not says_nothing(v)}
    given = {k: v for k, v in given.items() if not says_nothing(v)}
    merged = {**inherited, **given}
    anded = {k for k in expr_keys if all(isinstance(m.get(k), str) for m in (inherited, given))}
    for key in anded:
        merged[key] = f"({inherited[key]}) and ({given[key]})"
    refuse_replaced(inherited, given, sorted(set(restricting) - anded), argument=f"{argument} ")
    return merged
