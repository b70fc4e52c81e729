"""LangChain filters in the core's filter model.

A call's ``filters=`` (and a retriever's ``filters`` field) is a structured filter:

- ``langchain_core.structured_query`` ``Comparison`` and ``Operation`` (what a
  self-query retriever's LLM writes): ``eq``, ``ne``, ``gt``, ``gte``, ``lt``, ``lte``,
  ``in``, ``nin``, ``contain`` (a stored list holds the value, or a stored string the text)
  and ``like`` (a substring), under
  ``and``, ``or`` and ``not`` ("none of"); a ``like`` value holding ``%`` is refused (it
  is no wildcard here), and one holding ``_`` under ``not`` (nor is it any one character);
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

from thresholded.filters import Combine, Condition, Filter, Group, Op
from thresholded.filters.mapping import from_mapping
from thresholded.filters.model import check_depth, like_condition
from thresholded.strict import framework_of

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
_LITERAL = "'$text_match' (its dict form)"


def to_filter(filters: Any) -> Filter | None:
    """A structured LangChain filter (or the dict form) in the core model; None: no filter."""
    if filters is None:
        return None
    if isinstance(filters, Condition | Group):  # already in the core model
        return filters
    if isinstance(filters, Comparison | Operation):
        return _structured(filters)
    if isinstance(filters, Mapping):
        return from_mapping(filters) if filters else None
    if isinstance(filters, StructuredQuery):
        raise TypeError(
            "filters got a whole StructuredQuery (a query constructor's output): pass its "
            ".filter (None: no filter), and search for its .query"
        )
    if framework_of(filters) == "LlamaIndex":
        raise TypeError(
            f"filters got {type(filters).__name__}, LlamaIndex's filter form: the LangChain "
            "adapter takes a structured filter or its dict form: write it as a dict, such as "
            "{'doc_type': {'$ne': 'internal'}} for MetadataFilter(key='doc_type', "
            "value='internal', operator=FilterOperator.NE)"
        )
    raise TypeError(
        f"filters must be a structured filter (langchain_core.structured_query Comparison or "
        f"Operation) or a dict such as {{'doc_type': 'public'}}, got {type(filters).__name__}"
    )


def _structured(item: Comparison | Operation, negated: bool = False, depth: int = 1) -> Filter:
    """``negated``: under a NOT (or an odd number of them); ``depth``: an Operation's, refused
    past the model's limit before its arguments are read."""
    if isinstance(item, Comparison):
        op = _COMPARATORS[str(getattr(item.comparator, "value", item.comparator))]
        return like_condition(
            item.attribute, op, item.value, operator="like", instead=_LITERAL, negated=negated
        )
    check_depth(depth)
    combine = Combine(str(getattr(item.operator, "value", item.operator)))
    inner = negated != (combine is Combine.NOT)
    return Group(combine, tuple(_nested(a, inner, depth + 1) for a in item.arguments))


def _nested(item: Any, negated: bool, depth: int) -> Filter:
    if isinstance(item, Comparison | Operation):
        return _structured(item, negated, depth)
    raise TypeError(f"an Operation holds Comparisons and Operations, got {item!r}")
