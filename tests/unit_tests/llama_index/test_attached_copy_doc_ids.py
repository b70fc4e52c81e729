"""A non-text node read from the docstore is held to the retriever's ``doc_ids`` by the
store's copy, as a search holds it: the docstore's copy, left as it was when the node was
moved to another document in the store, does not stand in for it."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import IndexNode, NodeRelationship, RelatedNodeInfo

from llama_index_thresholded import ThresholdedRetriever

SECRET = "The layoff plan."


def moved_pointer(kit):
    """An index over Chroma where ``a`` (document ``open``) links to an ``IndexNode`` of
    document ``closed`` in the store, whose docstore copy still says ``open``."""
    chromadb = pytest.importorskip("chromadb")
    chroma = pytest.importorskip("llama_index.vector_stores.chroma")
    collection = chromadb.EphemeralClient().create_collection(
        f"moved-{uuid.uuid4().hex[:8]}", metadata={"hnsw:space": "cosine"}
    )
    a = kit.section("a", 0.9)
    a.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="open")
    ptr = IndexNode(id_="ptr", text=SECRET, index_id="int", embedding=kit.vec(0.2))
    ptr.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="closed")
    kit.link_chain([a, ptr])
    storage = StorageContext.from_defaults(
        vector_store=chroma.ChromaVectorStore(chroma_collection=collection)
    )
    index = VectorStoreIndex([a, ptr], storage_context=storage, embed_model=kit.embedding())
    stale = ptr.model_copy(deep=True)
    stale.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="open")
    index.docstore.add_documents([stale], allow_update=True)
    return index


def texts(report) -> list[str]:
    return [n.node.get_content() for n in report.items]


def test_a_neighbour_the_store_holds_in_another_document_is_not_attached(kit) -> None:
    index = moved_pointer(kit)
    retriever = ThresholdedRetriever(index, kit.policy(min_similarity=0.5), doc_ids=["open"])
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert [n.node.node_id for n in report.kept] == ["a"]
    assert SECRET not in texts(report)
    assert SECRET not in texts(asyncio.run(retriever.aretrieve_with_report(kit.QUESTION)))


def test_a_search_result_the_store_holds_in_another_document_is_not_kept(kit) -> None:
    index = moved_pointer(kit)
    retriever = ThresholdedRetriever(
        index, kit.policy(min_similarity=0.1), doc_ids=["open"], neighbours=0
    )
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert SECRET not in texts(report)
    assert SECRET not in texts(asyncio.run(retriever.aretrieve_with_report(kit.QUESTION)))
