"""A retriever's filters nested to the limit (32 groups deep), narrowed by a call's filters,
were refused at the call: combined, their AND is a group more than either."""

from __future__ import annotations

from llama_index.core.vector_stores import MetadataFilter, MetadataFilters

from llama_index_thresholded import ThresholdedRetriever
from thresholded.filters.model import MAX_DEPTH


def test_a_call_narrowing_filters_nested_to_the_limit_answers(kit):
    own = MetadataFilters(filters=[MetadataFilter(key="k", value="x")], condition="or")
    for i in range(MAX_DEPTH - 1):
        other = MetadataFilter(key="k", value=f"v{i}", operator="!=")
        own = MetadataFilters(filters=[other, own], condition="and" if i % 2 else "or")
    index = kit.build_index([kit.section("a", 0.9, k="x", kind="public")], kit.embedding())
    retriever = ThresholdedRetriever(index, kit.policy(min_similarity=0.0), filters=own)
    call = MetadataFilters(filters=[MetadataFilter(key="kind", value="public")])
    report = retriever.retrieve_with_report(kit.QUESTION, filters=call)
    assert [n.node.node_id for n in report.items] == ["a"]
