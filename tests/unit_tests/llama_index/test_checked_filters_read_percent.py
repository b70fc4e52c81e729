"""The abstaining engines check what LlamaIndex's own retriever returned against its filters,
and refused every question whose filter was a substring match holding ``%``
(``TEXT_MATCH "50%"``): the refusal is meant for a filter written into a store's LIKE pattern.
Only checked, outside a NOT, the ``%`` is read as the character, which holds back no less than
the store did; under a NOT it is still refused."""

from __future__ import annotations

import pytest
from llama_index.core.llms import MockLLM
from llama_index.core.schema import IndexNode
from llama_index.core.vector_stores import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from llama_index_thresholded import AbstainingQueryEngine
from thresholded.errors import UnsafeFilterError

FIFTY = MetadataFilter(key="title", value="50%", operator=FilterOperator.TEXT_MATCH)


def sources(retriever, kit):
    engine = AbstainingQueryEngine.from_args(retriever, llm=MockLLM())
    return sorted(n.node.node_id for n in engine.query(kit.QUESTION).source_nodes)


def test_a_substring_match_holding_percent_answers(kit):
    sale = kit.section("sale", 0.9, title="50% off")
    other = kit.section("other", 0.8, axis=2, title="500 items")
    index = kit.build_index([sale, other], kit.embedding())
    assert sources(index.as_retriever(filters=MetadataFilters(filters=[FIFTY])), kit) == ["sale"]


def test_a_section_followed_past_such_a_filter_is_still_refused(kit):
    internal = kit.section("internal", 0.1, axis=2, title="50 internal", text="INTERNAL ONLY")
    pointer = IndexNode(
        id_="pointer",
        text="Pointer.",
        index_id="internal",
        obj=internal,
        metadata={"title": "50% pointer"},
        embedding=kit.vec(0.9),
    )
    index = kit.build_index([pointer], kit.embedding())
    retriever = index.as_retriever(filters=MetadataFilters(filters=[FIFTY]))
    with pytest.raises(UnsafeFilterError, match="outside its filters") as raised:
        sources(retriever, kit)
    assert "INTERNAL ONLY" not in str(raised.value)


def test_under_not_it_is_still_refused(kit):
    other = kit.section("other", 0.8, axis=2, title="500 items")
    index = kit.build_index([kit.section("sale", 0.9, title="50% off"), other], kit.embedding())
    negated = MetadataFilters(filters=[FIFTY], condition=FilterCondition.NOT)
    with pytest.raises(UnsafeFilterError, match="'%'"):
        sources(index.as_retriever(filters=negated), kit)
