"""LlamaIndex metadata filters as safe Milvus expressions.

llama-index-vector-stores-milvus inserts filter keys into the expression as
they are and escapes only single quotes in values, so a key such as
``doc_type == "internal" or doc_type`` or a value ending in a backslash can
change what the filter means. Filters for a Milvus store are therefore
translated here, with validated keys and fully escaped values, and handed to
the store as its ``string_expr``.
"""

from __future__ import annotations

from collections.abc import Iterable

from llama_index.core.vector_stores.types import (
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from thresholded import milvus_expr
from thresholded.milvus_expr import UnsafeFilterError

_COMPARISON_OPERATORS = {
    FilterOperator.EQ: "==",
    FilterOperator.NE: "!=",
    FilterOperator.GT: ">",
    FilterOperator.GTE: ">=",
    FilterOperator.LT: "<",
    FilterOperator.LTE: "<=",
}
_ARRAY_FUNCTIONS = {
    FilterOperator.CONTAINS: "array_contains",
    FilterOperator.ANY: "array_contains_any",
    FilterOperator.ALL: "array_contains_all",
}


def milvus_expression(
    filters: MetadataFilters | None,
    *,
    allowed_keys: Iterable[str] | None = None,
    doc_ids: list[str] | None = None,
    node_ids: list[str] | None = None,
    doc_id_field: str = "doc_id",
    id_field: str = "id",
) -> str:
    """The Milvus expression of ``filters`` (and doc/node id restrictions); "" for none."""
    allowed = set(allowed_keys) if allowed_keys is not None else None
    clauses = []
    if filters is not None and filters.filters:
        clauses.append(_filters(filters, allowed))
    if doc_ids:
        clauses.append(milvus_expr.membership(doc_id_field, doc_ids))
    if node_ids:
        clauses.append(milvus_expr.membership(id_field, node_ids))
    return milvus_expr.join(clauses, "and") if len(clauses) > 1 else (clauses[0] if clauses else "")


def _filters(filters: MetadataFilters, allowed: set[str] | None) -> str:
    clauses = [
        _filters(f, allowed) if isinstance(f, MetadataFilters) else _filter(f, allowed)
        for f in filters.filters
    ]
    return milvus_expr.join(clauses, filters.condition.value if filters.condition else "and")


def _filter(item: MetadataFilter, allowed: set[str] | None) -> str:
    key = milvus_expr.field_name(item.key, allowed)
    op, value = item.operator, item.value
    if op is FilterOperator.IS_EMPTY:
        return f"array_length({key}) == 0"
    if value is None:
        raise UnsafeFilterError(f"filter on {key!r} has no value")
    if op in _COMPARISON_OPERATORS:
        return milvus_expr.comparison(key, _COMPARISON_OPERATORS[op], value)
    if op in (FilterOperator.IN, FilterOperator.NIN):
        return milvus_expr.membership(key, value, negate=op is FilterOperator.NIN)  # type: ignore[arg-type]
    if op in _ARRAY_FUNCTIONS:
        return f"{_ARRAY_FUNCTIONS[op]}({key}, {milvus_expr.literal(value)})"
    if op is FilterOperator.TEXT_MATCH:
        return milvus_expr.prefix_match(key, value)  # type: ignore[arg-type]
    raise UnsafeFilterError(f"filter operator {op.value!r} is not supported on Milvus")
