"""The spans of a retrieval carry no section outside the filters.

LlamaIndex hands each span's arguments and result to every span handler (tracing
integrations record them as the span's input and output). The span of
``retrieve_with_report`` has the report as its result: a report counts the sections
outside the filters and never carries them, so none of their text reaches a handler.
"""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from llama_index_thresholded import (
    AbstainingQueryEngine,
    MultiCollectionRetriever,
    ThresholdedRetriever,
)

SECRET = "The layoff plan."
# A text test: the store cannot apply it, so the internal section comes back from the search
# and is dropped as outside the filters by the engine's own check.
PUBLIC = MetadataFilters(
    filters=[MetadataFilter(key="doc_type", value="pub", operator=FilterOperator.TEXT_MATCH)]
)


def retrievers(kit: Any) -> list[Any]:
    public = kit.section("pub", 0.9, doc_type="public")
    internal = kit.section("int", 0.8, doc_type="internal", text=SECRET)
    index = kit.build_index([public, internal], kit.embedding())
    policy = kit.policy(min_similarity=0.5)
    common = {"filters": PUBLIC, "neighbours": 0, "parent_summaries": False}
    return [
        ThresholdedRetriever(index, policy, **common),
        MultiCollectionRetriever([index], policy, **common),
    ]


def test_the_span_of_a_report_carries_no_section_outside_the_filters(
    kit: Any, recorder: Any
) -> None:
    for retriever in retrievers(kit):
        for report in (
            retriever.retrieve_with_report(kit.QUESTION),
            asyncio.run(retriever.aretrieve_with_report(kit.QUESTION)),
        ):
            assert (report.dropped, report.outside_filters) == ((), 0)  # held back: not counted
            assert [n.node.node_id for n in report.items] == ["pub"]
    assert any("retrieve" in seen and "Section pub." in seen for seen in recorder.seen)
    assert not [seen for seen in recorder.seen if SECRET in seen]


def test_the_spans_of_a_query_carry_no_section_outside_the_filters(kit: Any, recorder: Any) -> None:
    from llama_index.core.llms import MockLLM

    for retriever in retrievers(kit):
        engine = AbstainingQueryEngine.from_args(retriever, llm=MockLLM())
        engine.query(kit.QUESTION)
    assert not [seen for seen in recorder.seen if SECRET in seen]
