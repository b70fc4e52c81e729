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


def none_matching(value: str, operator=FilterOperator.TEXT_MATCH) -> MetadataFilters:
    match = MetadataFilter(key="tags", value=value, operator=operator)
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


WILDCARD = r"'%'.*wildcard"
ANY_ONE = r"'_'.*any one character"


@pytest.mark.parametrize(
    ("value", "said"),
    [(v, WILDCARD) for v in ("%internal%", "internal%", "%")]
    + [(v, ANY_ONE) for v in ("int_rnal", "_")],
)
@pytest.mark.parametrize(
    "operator", [FilterOperator.TEXT_MATCH, FilterOperator.TEXT_MATCH_INSENSITIVE]
)
def test_a_text_match_wildcard_is_refused(kit, tagged, value, said, operator):
    """``_`` too, under NOT: in LlamaIndex's Milvus store's LIKE pattern it is any one
    character, so "none of int_rnal" meant to leave out the internal section, and read as
    the characters ``int_rnal``, which no section holds, it left out none. TEXT_MATCH_INSENSITIVE
    too: LlamaIndex's SQL stores (Postgres) write it into an ILIKE pattern."""
    filters = none_matching(value, operator)
    for retriever in retrievers(kit, tagged):
        with pytest.raises(UnsafeFilterError, match=said):
            retriever.retrieve_with_report(kit.QUESTION, filters=filters)
    with pytest.raises(UnsafeFilterError, match=said):
        retrievers(kit, tagged, filters)


def test_text_match_is_a_substring(kit, tagged):
    for retriever in retrievers(kit, tagged):
        report = retriever.retrieve_with_report(kit.QUESTION, filters=none_matching("internal"))
        assert [n.node.node_id for n in report.items] == ["pub"]


def test_an_underscore_where_it_only_narrows_is_the_character(kit, tagged):
    """Read as the character, ``_`` matches fewer sections than as a wildcard: outside a NOT
    (or under two), it can only leave sections out, never let one in."""
    match = MetadataFilter(key="tags", value="int_rnal", operator=FilterOperator.TEXT_MATCH)
    twice = MetadataFilters(filters=[none_matching("int_rnal")], condition=FilterCondition.NOT)
    for retriever in retrievers(kit, tagged):
        for filters in (MetadataFilters(filters=[match]), twice):
            assert retriever.retrieve_with_report(kit.QUESTION, filters=filters).items == []
