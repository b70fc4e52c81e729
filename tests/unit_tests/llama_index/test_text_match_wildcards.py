"""``FilterOperator.TEXT_MATCH`` with ``%`` in its value is refused: LlamaIndex's Milvus store
writes the value into a LIKE pattern, where ``%`` is a wildcard, and its in-memory store
(the package's reference) reads it as a character. Read as the characters ``%internal%``,
which no section holds, "none of the sections matching %internal%" (a NOT group) held for
every one: the internal sections came back."""

from __future__ import annotations

import pytest
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from llama_index_thresholded import MultiCollectionRetriever, ThresholdedRetriever
from thresholded.errors import UnsafeFilterError


def none_matching(value: str) -> MetadataFilters:
    match = MetadataFilter(key="tags", value=value, operator=FilterOperator.TEXT_MATCH)
    return MetadataFilters(filters=[match], condition=FilterCondition.NOT)


@pytest.fixture
def tagged(kit):
    nodes = [
        kit.section("pub", 0.9, axis=1, tags="faq,public"),
        kit.section("int", 0.95, axis=2, tags="internal,plan"),
    ]
    return kit.build_index(nodes, kit.embedding())


def retrievers(kit, index, filters=None):
    policy = kit.policy(min_similarity=0.5)
    return [
        ThresholdedRetriever(index, policy, filters=filters),
        MultiCollectionRetriever([index], policy=policy, filters=filters),
    ]


@pytest.mark.parametrize("value", ["%internal%", "internal%", "%"])
def test_a_text_match_wildcard_is_refused(kit, tagged, value):
    for retriever in retrievers(kit, tagged):
        with pytest.raises(UnsafeFilterError, match=r"'%'.*wildcard"):
            retriever.retrieve_with_report(kit.QUESTION, filters=none_matching(value))
    with pytest.raises(UnsafeFilterError, match=r"'%'.*wildcard"):
        retrievers(kit, tagged, none_matching(value))


def test_text_match_is_a_substring(kit, tagged):
    for retriever in retrievers(kit, tagged):
        report = retriever.retrieve_with_report(kit.QUESTION, filters=none_matching("internal"))
        assert [n.node.node_id for n in report.items] == ["pub"]
