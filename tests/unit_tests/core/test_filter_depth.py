"""A filter nested a few hundred groups deep (an agent's, built from a question) failed with
Python's RecursionError while it was read or written for Milvus, and one about a hundred
deep with Milvus Lite's raw assert: groups nested more than ``MAX_DEPTH`` deep are refused by
name."""

from __future__ import annotations

import pytest

from thresholded.errors import UnsafeFilterError
from thresholded.filters import Dialect, to_milvus
from thresholded.filters.mapping import from_mapping
from thresholded.filters.model import MAX_DEPTH, all_of


def nested(levels: int) -> dict:
    """``levels`` groups, alternating AND and OR, each inside the last."""
    f: dict = {"k": "x"}
    for i in range(levels):
        f = {"$or" if i % 2 else "$and": [{"k": {"$ne": f"v{i}"}}, f]}
    return f


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 400, 5000])
def test_a_filter_nested_deeper_than_the_limit_is_refused_by_name(levels):
    with pytest.raises(UnsafeFilterError, match=f"more than {MAX_DEPTH} deep"):
        from_mapping(nested(levels))


def test_a_filter_nested_to_the_limit_is_written():
    f = from_mapping(nested(MAX_DEPTH))
    assert f.depth == MAX_DEPTH
    assert to_milvus(f, Dialect.LITE_2).expr.count("!=") == MAX_DEPTH


def test_llama_index_filters_nested_deeper_than_the_limit_are_refused():
    from llama_index.core.vector_stores import MetadataFilter, MetadataFilters

    from llama_index_thresholded.filters import to_filter

    f = MetadataFilters(filters=[MetadataFilter(key="k", value="x")])
    for _ in range(MAX_DEPTH):
        f = MetadataFilters(filters=[MetadataFilter(key="k", value="y"), f], condition="or")
    with pytest.raises(UnsafeFilterError, match="deep"):
        to_filter(f)


def llama_index_nested(levels: int):
    from llama_index.core.vector_stores import MetadataFilter, MetadataFilters

    f = MetadataFilters(filters=[MetadataFilter(key="k", value="x")])
    for i in range(levels):
        condition = "or" if i % 2 else "and"
        f = MetadataFilters(
            filters=[MetadataFilter(key="k", value=f"v{i}"), f], condition=condition
        )
    return f


def langchain_nested(levels: int):
    from langchain_core.structured_query import Comparator, Comparison, Operation, Operator

    f = Comparison(comparator=Comparator.EQ, attribute="k", value="x")
    for i in range(levels):
        operator = Operator.OR if i % 2 else Operator.AND
        other = Comparison(comparator=Comparator.NE, attribute="k", value=f"v{i}")
        f = Operation(operator=operator, arguments=[other, f])
    return f


@pytest.mark.parametrize("levels", [400, 2000])
def test_framework_filters_nested_hundreds_deep_are_refused_by_name(levels):
    from langchain_thresholded.filters import to_filter as langchain_filter
    from llama_index_thresholded.filters import to_filter as llama_index_filter

    with pytest.raises(UnsafeFilterError, match=f"more than {MAX_DEPTH} deep"):
        llama_index_filter(llama_index_nested(levels))
    with pytest.raises(UnsafeFilterError, match=f"more than {MAX_DEPTH} deep"):
        langchain_filter(langchain_nested(levels))


def test_filters_each_within_the_limit_are_combined_and_written():
    """A retriever's filters and a call's, each nested to the limit, were refused at the call:
    combined, their AND is a group more."""
    deepest = from_mapping({"$or": [{"k": "y"}, nested(MAX_DEPTH - 1)]})
    assert deepest.depth == MAX_DEPTH
    combined = all_of(deepest, from_mapping({"$or": [{"a": 1}, nested(MAX_DEPTH - 1)]}))
    assert combined.depth == MAX_DEPTH + 1
    assert to_milvus(combined, Dialect.LITE_2).expr.count("!=") == 2 * (MAX_DEPTH - 1)


def test_a_combination_nested_past_its_own_limit_is_refused_by_name():
    from thresholded.filters.model import COMBINED_DEPTH, Combine, Condition, Group, Op

    f = Group(Combine.OR, (Condition("k", Op.EQ, "x"),))
    for i in range(COMBINED_DEPTH - 1):
        f = Group(Combine.AND if i % 2 else Combine.OR, (Condition("k", Op.NE, f"v{i}"), f))
    with pytest.raises(UnsafeFilterError, match=f"more than {COMBINED_DEPTH} deep"):
        Group(Combine.NOT, (f,))
