"""LlamaIndex's Milvus store writes a TEXT_MATCH filter as a prefix (``title like 'v%'``):
the abstaining engines refused every question of LlamaIndex's retriever so filtered, though
the store answers it. What it returns is now checked as the prefix the store matched; a
section followed past it that holds the text elsewhere is still refused, as is a value
Milvus would read wildcards in."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core.llms import MockLLM
from llama_index.core.schema import IndexNode
from llama_index.core.vector_stores import (
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from llama_index_thresholded import AbstainingQueryEngine
from thresholded.errors import UnsafeFilterError


def text_match(value):
    match = MetadataFilter(key="title", value=value, operator=FilterOperator.TEXT_MATCH)
    return MetadataFilters(filters=[match])


@pytest.fixture
def milvus_index(kit, tmp_path):
    def build(nodes):
        store = kit.milvus_store(str(tmp_path / "kb.db"), "kb", dim=kit.DIM)
        return kit.build_index(nodes, kit.embedding(), store=store)

    return build


def sources(retriever, kit):
    engine = AbstainingQueryEngine.from_args(retriever, llm=MockLLM())
    blocking = sorted(n.node.node_id for n in engine.query(kit.QUESTION).source_nodes)
    awaited = asyncio.run(engine.aquery(kit.QUESTION)).source_nodes
    assert sorted(n.node.node_id for n in awaited) == blocking
    return blocking


def test_the_rows_milvus_matched_by_prefix_answer(kit, milvus_index):
    index = milvus_index(
        [
            kit.section("refunds", 0.9, title="Refund policy"),
            kit.section("prefixed", 0.8, axis=2, title="Refunds, yearly"),
            kit.section("elsewhere", 0.7, axis=3, title="Our Refund policy"),
            kit.section("number", 0.6, axis=4, title=7),
        ]
    )
    retriever = index.as_retriever(similarity_top_k=4, filters=text_match("Refund"))
    assert sources(retriever, kit) == ["prefixed", "refunds"]


def test_a_section_followed_past_the_prefix_is_refused(kit, milvus_index):
    internal = kit.section("internal", 0.1, axis=2, title="staff: public internal")
    pointer = IndexNode(
        id_="pointer",
        text="Pointer.",
        index_id="internal",
        obj=internal,
        metadata={"title": "public pointer"},
        embedding=kit.vec(0.9),
    )
    index = milvus_index([pointer])
    with pytest.raises(UnsafeFilterError, match="outside its filters") as raised:
        sources(index.as_retriever(filters=text_match("public")), kit)
    assert "staff" not in str(raised.value)


@pytest.mark.parametrize("value", ["50%", "user_name", 'say "hi"'])
def test_a_value_milvus_reads_wildcards_in_is_refused(kit, milvus_index, value):
    index = milvus_index([kit.section("sale", 0.9, title=f"{value} off")])
    with pytest.raises(UnsafeFilterError, match=r"'title' by TEXT_MATCH.*wildcard"):
        sources(index.as_retriever(filters=text_match(value)), kit)
