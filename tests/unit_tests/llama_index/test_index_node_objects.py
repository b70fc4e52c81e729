"""A returned ``IndexNode`` names the object it refers to by its ``index_id`` only.

An ``IndexNode`` stores the object it stands for in ``obj`` (a node, for LlamaIndex's
recursive retrieval), and a vector store keeps it with the node. The filters judge the
``IndexNode``'s own metadata, not its object's: a public pointer to an internal section
came back with the section, text and metadata, in ``obj``, and any LlamaIndex retriever
around this one (``QueryFusionRetriever``) replaced the pointer by it. The copies
returned carry no object; the stored nodes keep theirs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from llama_index.core.llms import MockLLM
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import IndexNode, TextNode
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

from llama_index_thresholded import MultiCollectionRetriever, ThresholdedRetriever

PUBLIC = MetadataFilters(filters=[MetadataFilter(key="doc_type", value="public")])
ATTACHMENTS = {"neighbours": 0, "parent_summaries": False}


def pointer_to_internal(kit: Any) -> IndexNode:
    internal = TextNode(id_="int", text="The layoff plan.", metadata={"doc_type": "internal"})
    return IndexNode(
        id_="ptr",
        text="A public pointer.",
        index_id="int",
        obj=internal,
        metadata={"doc_type": "public"},
        embedding=kit.vec(0.9),
    )


@pytest.fixture(params=["simple", "milvus"])
def index(request: Any, kit: Any, tmp_path: Any) -> Any:
    store = (
        None
        if request.param == "simple"
        else kit.milvus_store(str(tmp_path / "kb.db"), "kb", dim=kit.DIM)
    )
    return kit.build_index([pointer_to_internal(kit)], kit.embedding(), store=store)


def retrievers(index: Any, kit: Any) -> list[Any]:
    policy = kit.policy(min_similarity=0.5)
    return [
        ThresholdedRetriever(index, policy, filters=PUBLIC, pushdown=False, **ATTACHMENTS),
        MultiCollectionRetriever([index], policy, filters=PUBLIC, pushdown=False, **ATTACHMENTS),
    ]


def test_a_returned_index_node_carries_no_object(index: Any, kit: Any) -> None:
    for retriever in retrievers(index, kit):
        for found in (
            retriever.retrieve(kit.QUESTION),
            asyncio.run(retriever.aretrieve(kit.QUESTION)),
        ):
            assert [(n.node.node_id, n.node.index_id, n.node.obj) for n in found] == [
                ("ptr", "int", None)
            ]


def test_a_retriever_around_it_returns_no_section_outside_the_filters(index: Any, kit: Any) -> None:
    for retriever in retrievers(index, kit):
        fusion = QueryFusionRetriever(
            [retriever], num_queries=1, mode="reciprocal_rerank", use_async=False, llm=MockLLM()
        )
        found = fusion.retrieve(kit.QUESTION)
        assert [(n.node.node_id, n.node.metadata["doc_type"]) for n in found] == [("ptr", "public")]


def test_the_stored_index_node_keeps_its_object(kit: Any) -> None:
    node = pointer_to_internal(kit)
    index = kit.build_index([node], kit.embedding())
    ThresholdedRetriever(index, kit.policy(min_similarity=0.5), **ATTACHMENTS).retrieve(
        kit.QUESTION
    )
    assert node.obj is not None and node.obj.node_id == "int"
