"""LangChain filters in the core's filter model.

A call's ``filters=`` (and a retriever's ``filters`` field) is a structured filter:

- ``langchain_core.structured_query`` ``Comparison`` and ``Operation`` (what a
  self-query retriever's LLM writes): ``eq``, ``ne``, ``gt``, ``gte``, ``lt``, ``lte``,
  ``in``, ``nin``, ``contain`` (a stored list holds the value, or a stored string the text)
  and ``like`` (a substring), under
  ``and``, ``or`` and ``not`` ("none of"); a ``like`` value holding ``%`` is refused (it
  is no wildcard here);
- or a dict: ``{"doc_type": "public"}`` (equal), ``{"year": {"$gte": 2020}}``, with
  ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``, ``$in``, ``$nin``, ``$contains``,
  ``$any``, ``$all``, ``$text_match``, ``$text_match_insensitive`` (not on Milvus) and
  ``$is_empty`` (value ``True``); several keys in
  one dict must all hold; ``{"$and": [...]}``, ``{"$or": [...]}`` and ``{"$not": [...]}``
  (none of) combine dicts. ``$or`` and ``$not`` given one dict of several keys (not a list)
  are refused: "not both" or "neither"? An empty dict is no filter.

Values are strings, numbers and bools: a date (a query constructor's ``{"date":
"2024-01-01", "type": "date"}`` included) is refused; store and compare dates as strings
(``"2024-01-01"``) or numbers.

A raw store filter (a Milvus ``expr`` string) is accepted only when the retriever is
built, and is combined verbatim with everything else; never per call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.structured_query import Comparison, Operation, StructuredQuery

from thresholded.errors import UnsafeFilterError
from thresholded.filters import Combine, Condition, Filter, Group, Op
from thresholded.filters.model import all_of, check_no_wildcard, date_text

_COMPARATORS = {
    "eq": Op.EQ,
    "ne": Op.NE,
    "gt": Op.GT,
    "gte": Op.GTE,
    "lt": Op.LT,
    "lte": Op.LTE,
    "in": Op.IN,
    "nin": Op.NIN,
    "contain": Op.CONTAINS,
    "like": Op.TEXT_MATCH,
}
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
_LITERAL = "'$text_match' (its dict form)"
_DICT_GROUPS = {"$and": Combine.AND, "$or": Combine.OR, "$not": Combine.NOT}


def to_filter(filters: Any) -> Filter | None:
    """A structured LangChain filter (or the dict form) in the core model; None: no filter."""
    if filters is None:
        return None
    if isinstance(filters, Condition | Group):  # already in the core model
        return filters
    if isinstance(filters, Comparison | Operation):
        return _structured(filters)
    if isinstance(filters, Mapping):
        return _mapping(filters) if filters else None
    if isinstance(filters, StructuredQuery):
        raise TypeError(
            "filters got a whole StructuredQuery (a query constructor's output): pass its "
            ".filter (None: no filter), and search for its .query"
        )
    raise TypeError(
        f"filters must be a structured filter (langchain_core.structured_query Comparison or "
        f"Operation) or a dict such as {{'doc_type': 'public'}}, got {type(filters).__name__}"
    )


def _structured(item: Comparison | Operation) -> Filter:
    if isinstance(item, Comparison):
        op = _COMPARATORS[str(getattr(item.comparator, "value", item.comparator))]
        if op is Op.TEXT_MATCH:  # LangChain's translators write it into a LIKE pattern
            check_no_wildcard(item.attribute, item.value, operator="like", instead=_LITERAL)
        return Condition(item.attribute, op, item.value)
    children = tuple(_nested(a) for a in item.arguments)
    return Group(Combine(str(getattr(item.operator, "value", item.operator))), children)


def _nested(item: Any) -> Filter:
    if isinstance(item, Comparison | Operation):
        return _structured(item)
    raise TypeError(f"an Operation holds Comparisons and Operations, got {item!r}")


def _mapping(filters: Mapping[str, Any]) -> Filter:
    parts: list[Filter] = []
    for key, value in filters.items():
        if key in _DICT_GROUPS:
            if isinstance(value, Mapping):
                _one_filter(key, value)
                value = [value]
            if not isinstance(value, list | tuple):
                raise UnsafeFilterError(f"{key} takes a list of filters, got {value!r}")
            parts.append(Group(_DICT_GROUPS[key], tuple(_mapping(v) for v in value)))
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
