"""LlamaIndex ``MetadataFilters`` in the core's filter model, and back.

Filters are translated once, into :mod:`thresholded.filters`, whatever the store:
on Milvus the core writes the expression (keys checked, values escaped, NOT as
"none of", in the dialect of the engine) and hands it to the store as its
``string_expr``; other stores get LlamaIndex's own ``MetadataFilters`` where they
can hold the filter. Either way the engine checks every returned section, and
every neighbour and parent summary, against the same filter.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from thresholded.errors import UnsafeFilterError
from thresholded.filters import Combine, Condition, Filter, Group, Op
from thresholded.filters.equality import equality_part
from thresholded.filters.model import check_depth, like_condition


def to_filter(
    filters: MetadataFilters | MetadataFilter | None, *, checked_only: bool = False
) -> Filter | None:
    """LlamaIndex filters in the core model; an empty top-level ``MetadataFilters`` is no
    filter, as LlamaIndex reads it, and an empty one nested inside is an error. An empty
    top-level OR is refused: LlamaIndex reads it as no filter, though "any of nothing"
    holds for no row (an OR of a caller's rights that came out empty would admit all).
    ``checked_only``: they are only tested against what LlamaIndex's own retriever returned
    (:func:`thresholded.filters.model.like_condition`)."""
    if filters is None:
        return None
    if isinstance(filters, MetadataFilter):
        return _condition(filters, checked_only=checked_only)
    if isinstance(filters, list | tuple) and filters and all(_a_filter(f) for f in filters):
        raise TypeError(
            "filters must be LlamaIndex MetadataFilters, got a list of MetadataFilter: wrap it, "
            "MetadataFilters(filters=[...]) (all of them must hold; condition='or': any)"
        )
    if not isinstance(filters, MetadataFilters):
        raise TypeError(
            f"filters must be LlamaIndex MetadataFilters, got {type(filters).__name__}: write "
            "{'doc_type': 'policy'} as MetadataFilters(filters=[MetadataFilter(key='doc_type', "
            "value='policy')]) (from llama_index.core.vector_stores)"
        )
    if not filters.filters:
        if filters.condition == FilterCondition.OR:
            raise UnsafeFilterError(
                "MetadataFilters(filters=[], condition='or') holds no condition: LlamaIndex "
                "reads it as no filter, which admits every section, yet any of no condition "
                "admits none. Give it conditions, or pass filters=None for no filter"
            )
        return None
    return _group(filters, checked_only=checked_only)


def _group(
    filters: MetadataFilters, negated: bool = False, *, checked_only: bool, depth: int = 1
) -> Group:
    """``negated``: under a NOT (or an odd number of them); ``depth``: the group's, refused
    past the model's limit before its children are read."""
    check_depth(depth)
    combine = Combine((filters.condition or FilterCondition.AND).value)
    inner = negated != (combine is Combine.NOT)
    children = tuple(
        _group(f, inner, checked_only=checked_only, depth=depth + 1)
        if isinstance(f, MetadataFilters)
        else _condition(f, inner, checked_only=checked_only)
        for f in filters.filters
    )
    return Group(combine, children)


def _a_filter(item: Any) -> bool:
    return isinstance(item, MetadataFilter | MetadataFilters)


def _condition(item: MetadataFilter, negated: bool = False, *, checked_only: bool) -> Condition:
    op = Op(FilterOperator(item.operator).value)
    instead = "CONTAINS" if op is Op.TEXT_MATCH else "CONTAINS (which tells case apart)"
    return like_condition(
        item.key,
        op,
        item.value,
        operator=op.value,
        instead=instead,
        negated=negated,
        checked_only=checked_only,
    )


def to_metadata_filters(f: Filter | None) -> MetadataFilters | None:
    """A core filter as flat LlamaIndex filters, for stores that hold no nested groups: the
    part of it they apply safely (:func:`thresholded.filters.equality.equality_part`); None
    when there is none (the engine's check then applies it alone)."""
    part = equality_part(f)
    if part is None:
        return None
    combine, conditions = part
    return MetadataFilters(
        filters=[
            MetadataFilter(
                key=c.key,
                operator=FilterOperator(c.op.value),
                value=list(c.value) if isinstance(c.value, tuple) else c.value,
            )
            for c in conditions
        ],
        condition=FilterCondition(combine.value),
    )


@dataclass(frozen=True)
class HeldFilters:
    """A retriever's own filters: the caller's object, and what it said when the retriever was
    built. The retriever searches with ``where``; the caller's object may still be changed in
    place (``filters.filters.append(...)``), which a call refuses rather than ignore."""

    given: MetadataFilters | None
    where: Filter | None

    @classmethod
    def of(cls, filters: MetadataFilters | None) -> HeldFilters:
        return cls(filters, to_filter(filters))

    def check_unchanged(self, retriever: str) -> None:
        """Raise when the caller's filters no longer say what they said at construction."""
        try:
            unchanged = to_filter(self.given) == self.where
        except (TypeError, ValueError) as exc:
            raise ValueError(_changed_message(retriever)) from exc
        if not unchanged:
            raise ValueError(_changed_message(retriever))


@dataclass(frozen=True)
class HeldRestrictions:
    """A retriever's ``doc_ids``, ``node_ids`` and ``vector_store_kwargs``: the caller's
    objects, and a copy of what they said when the retriever was built, which it searches
    with. A change made in place afterwards is refused at the next call, as the filters'."""

    given: dict[str, Any]
    as_given: dict[str, Any]

    @classmethod
    def of(cls, **given: Any) -> HeldRestrictions:
        return cls(given, copy.deepcopy(given))

    def check_unchanged(self, retriever: str) -> None:
        changed = sorted(k for k, v in self.given.items() if v != self.as_given[k])
        if changed:
            raise ValueError(
                f"{', '.join(changed)} given to {retriever} were changed in place after it was "
                "built; it holds them as they were then, so a search would ignore the change. "
                f"Build a new retriever with the changed {', '.join(changed)}"
            )


def _changed_message(retriever: str) -> str:
    return (
        f"the filters given to {retriever}(filters=...) were changed in place after it was "
        "built; it holds them as they were then, so a search would ignore the change. "
        f"Build a new retriever with the changed filters ({retriever}(..., "
        "filters=...)), or give one call its own: retrieve_with_report(query, filters=...), "
        "which narrow the retriever's"
    )
