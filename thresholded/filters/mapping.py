"""The dict form of a filter, in the model: ``{"doc_type": "public"}`` (equal),
``{"year": {"$gte": 2020}}``, with ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``,
``$in``, ``$nin``, ``$contains``, ``$any``, ``$all``, ``$text_match``,
``$text_match_insensitive`` and ``$is_empty`` (``True``: empty, ``False``: not); several
keys in one dict must all hold; ``{"$and": [...]}``, ``{"$or": [...]}`` and
``{"$not": [...]}`` (none of) combine dicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from thresholded.errors import UnsafeFilterError
from thresholded.filters.model import (
    Combine,
    Condition,
    Filter,
    Group,
    Op,
    all_of,
    check_depth,
    date_text,
)

_DICT_OPS = {
    "$eq": Op.EQ,
    "$ne": Op.NE,
    "$gt": Op.GT,
    "$gte": Op.GTE,
    "$lt": Op.LT,
    "$lte": Op.LTE,
    "$in": Op.IN,
    "$nin": Op.NIN,
    "$contains": Op.CONTAINS,
    "$any": Op.ANY,
    "$all": Op.ALL,
    "$text_match": Op.TEXT_MATCH,
    "$text_match_insensitive": Op.TEXT_MATCH_INSENSITIVE,
    "$is_empty": Op.IS_EMPTY,
}
_DICT_GROUPS = {"$and": Combine.AND, "$or": Combine.OR, "$not": Combine.NOT}


def from_mapping(filters: Mapping[str, Any]) -> Filter:
    """A non-empty dict filter in the model; an empty one nested inside another is refused,
    and one nested deeper than the model takes before it is read further."""
    return _from_mapping(filters, 0)


def _from_mapping(filters: Mapping[str, Any], depth: int) -> Filter:
    parts: list[Filter] = []
    for key, value in filters.items():
        if key in _DICT_GROUPS:
            if isinstance(value, Mapping):
                _one_filter(key, value)
                value = [value]
            if not isinstance(value, list | tuple):
                raise UnsafeFilterError(f"{key} takes a list of filters, got {value!r}")
            check_depth(depth + 1)
            children = tuple(_from_mapping(v, depth + 1) for v in value)
            parts.append(Group(_DICT_GROUPS[key], children))
        elif isinstance(key, str) and key.startswith("$"):
            raise UnsafeFilterError(
                f"unknown filter operator {key!r} at the top of a filter: use a key, or one "
                f"of {sorted(_DICT_GROUPS)}"
            )
        elif isinstance(value, Mapping) and date_text(value) is None:
            parts.extend(_conditions(key, value))
        else:
            parts.append(Condition(key, Op.EQ, value))
    combined = all_of(*parts)
    if combined is None:
        raise UnsafeFilterError("an empty filter inside another means nothing: remove it")
    return combined


def _one_filter(group: str, value: Mapping[str, Any]) -> None:
    """Refuse ``$not`` or ``$or`` given one dict of several keys: the dict is one filter (all
    of its keys), so ``{"$not": {"a": 1, "b": 2}}`` would be "not both", where "neither" is
    as likely meant (MongoDB's ``$nor``), and ``$or`` would mean AND."""
    if group == "$and" or len(value) < 2:
        return
    keys = ", ".join(map(repr, value))
    raise UnsafeFilterError(
        f"{group} given one dict of {len(value)} keys ({keys}) has no single meaning: give a "
        f"list, [{{...}}, {{...}}] for each key on its own, or [{{...}}] for all of them together"
    )


def _conditions(key: str, ops: Mapping[str, Any]) -> list[Filter]:
    if not ops:
        raise UnsafeFilterError(f"the filter on {key!r} names no operator")
    found = []
    for name, value in ops.items():
        if name not in _DICT_OPS:
            raise UnsafeFilterError(
                f"unknown filter operator {name!r} on {key!r}: use one of {sorted(_DICT_OPS)}"
            )
        op = _DICT_OPS[name]
        if op is Op.IS_EMPTY:
            if not isinstance(value, bool):
                raise UnsafeFilterError(
                    f"$is_empty on {key!r} takes True (empty) or False (not empty), got "
                    f"{value!r}: a value of another type has no single meaning"
                )
            condition: Filter = Condition(key, op)
            found.append(condition if value else Group(Combine.NOT, (condition,)))
        else:
            found.append(Condition(key, op, value))
    return found
