"""A neighbour or summary is judged by the copy a search would return: the store's.

An index built with ``store_nodes_override=True`` (or a docstore filled beside the store)
holds two copies of each section. A search returns the store's copy, and LlamaIndex's own
retriever prefers it too. A section reclassified in the store (``doc_type`` now
``internal``) whose docstore copy was left as it was must not come back as a neighbour of
a section the filters keep, when a search under the same filters would never return it.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import IndexNode
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

from llama_index_thresholded import ThresholdedRetriever

PUBLIC = MetadataFilters(filters=[MetadataFilter(key="doc_type", value="public")])
SECRET = "The layoff plan."


def two_copies(kit, store_says: str, docstore_says: str):
    """An index over Chroma whose docstore holds its own copy of each section; section
    ``b``, ``a``'s next, is ``store_says`` in the store and ``docstore_says`` in the docstore."""
    chromadb = pytest.importorskip("chromadb")
    chroma = pytest.importorskip("llama_index.vector_stores.chroma")
    collection = chromadb.EphemeralClient().create_collection(
        f"copies-{uuid.uuid4().hex[:8]}", metadata={"hnsw:space": "cosine"}
    )
    a = kit.section("a", 0.9, doc_type="public")
    b = kit.section("b", 0.2, doc_type=store_says, text=SECRET)
    kit.link_chain([a, b])
    storage = StorageContext.from_defaults(
        vector_store=chroma.ChromaVectorStore(chroma_collection=collection)
    )
    index = VectorStoreIndex(
        [a, b], storage_context=storage, embed_model=kit.embedding(), store_nodes_override=True
    )
    stale = b.model_copy(update={"metadata": {**b.metadata, "doc_type": docstore_says}})
    index.docstore.add_documents([stale], allow_update=True)
    return index


def texts(report) -> list[str]:
    return [n.node.get_content() for n in report.items]


def test_a_neighbour_the_store_holds_outside_the_filters_is_not_attached(kit) -> None:
    index = two_copies(kit, store_says="internal", docstore_says="public")
    retriever = ThresholdedRetriever(index, kit.policy(min_similarity=0.5), filters=PUBLIC)
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert [n.node.node_id for n in report.kept] == ["a"]
    assert SECRET not in texts(report)


async def test_and_not_in_async_calls_either(kit) -> None:
    index = two_copies(kit, store_says="internal", docstore_says="public")
    retriever = ThresholdedRetriever(index, kit.policy(min_similarity=0.5), filters=PUBLIC)
    report = await retriever.aretrieve_with_report(kit.QUESTION)
    assert SECRET not in texts(report)


def test_a_neighbour_the_store_holds_inside_the_filters_is_attached_as_stored(kit) -> None:
    index = two_copies(kit, store_says="public", docstore_says="internal")
    retriever = ThresholdedRetriever(index, kit.policy(min_similarity=0.5), filters=PUBLIC)
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert [(n.node.node_id, n.node.metadata["doc_type"]) for n in report.attached] == [
        ("b", "public")
    ]


def pointer_with_two_copies(kit, store_says: str, docstore_says: str):
    """An index over Chroma where ``a``'s next is an ``IndexNode``, which LlamaIndex keeps in
    the docstore too, and a search reads from there: ``store_says`` in the store,
    ``docstore_says`` in the docstore."""
    chromadb = pytest.importorskip("chromadb")
    chroma = pytest.importorskip("llama_index.vector_stores.chroma")
    collection = chromadb.EphemeralClient().create_collection(
        f"pointer-{uuid.uuid4().hex[:8]}", metadata={"hnsw:space": "cosine"}
    )
    a = kit.section("a", 0.9, doc_type="public")
    meta = {"doc_type": store_says, "source": "manual"}
    ptr = IndexNode(id_="ptr", text=SECRET, index_id="int", embedding=kit.vec(0.2), metadata=meta)
    kit.link_chain([a, ptr])
    storage = StorageContext.from_defaults(
        vector_store=chroma.ChromaVectorStore(chroma_collection=collection)
    )
    index = VectorStoreIndex([a, ptr], storage_context=storage, embed_model=kit.embedding())
    stale = ptr.model_copy(update={"metadata": {**ptr.metadata, "doc_type": docstore_says}})
    index.docstore.add_documents([stale], allow_update=True)
    return index


def test_a_neighbour_a_search_reads_from_the_docstore_is_judged_by_that_copy(kit) -> None:
    """An ``IndexNode`` (or ``ImageNode``) comes back from a search as the docstore's copy:
    as a neighbour it is judged by that copy too, not the store's."""
    index = pointer_with_two_copies(kit, store_says="public", docstore_says="internal")
    retriever = ThresholdedRetriever(index, kit.policy(min_similarity=0.5), filters=PUBLIC)
    assert SECRET not in texts(retriever.retrieve_with_report(kit.QUESTION))
    assert SECRET not in texts(asyncio.run(retriever.aretrieve_with_report(kit.QUESTION)))
    unfiltered = ThresholdedRetriever(index, kit.policy(min_similarity=0.5))
    attached = unfiltered.retrieve_with_report(kit.QUESTION).attached
    assert [(n.node.node_id, n.node.metadata["doc_type"]) for n in attached] == [
        ("ptr", "internal")
    ]


def test_a_neighbour_read_from_the_docstore_is_not_attached_when_the_store_holds_it_outside(
    kit,
) -> None:
    """The other way round: the store holds the ``IndexNode`` outside the filters (it was
    reclassified there) and the docstore's copy, left as it was, inside. A search under the
    filters would never return it (the store tests its own copy), so neither does a walk."""
    index = pointer_with_two_copies(kit, store_says="internal", docstore_says="public")
    assert_only_a(kit, ThresholdedRetriever(index, kit.policy(min_similarity=0.5), filters=PUBLIC))
    unfiltered = ThresholdedRetriever(index, kit.policy(min_similarity=0.5))
    narrowed = unfiltered.retrieve_with_report(kit.QUESTION, filters=PUBLIC)
    assert SECRET not in texts(narrowed)
    assert narrowed.outside_filters == 1  # a call's filters count what they leave out
    attached = unfiltered.retrieve_with_report(kit.QUESTION).attached
    assert [(n.node.node_id, n.node.metadata["doc_type"]) for n in attached] == [("ptr", "public")]


NOT_INTERNAL = MetadataFilters(
    filters=[
        MetadataFilters(
            filters=[MetadataFilter(key="doc_type", value="intern", operator="text_match")],
            condition="not",
        )
    ]
)
"""A filter Chroma cannot hold (a text match): its search returns every row, and the
results are held to it after the search."""


def test_a_search_result_read_from_the_docstore_is_held_to_the_store_copy_too(kit) -> None:
    """A search that could not hold the filters returns an ``IndexNode`` whose store copy
    lies outside them: the docstore's copy, left inside them, does not stand in for it."""
    index = pointer_with_two_copies(kit, store_says="internal", docstore_says="public")
    policy = kit.policy(min_similarity=0.1)  # the pointer clears the floor
    assert_only_a(kit, ThresholdedRetriever(index, policy, filters=NOT_INTERNAL))


def assert_only_a(kit, retriever) -> None:
    """``a`` is kept, and the pointer's text comes back neither kept nor attached, sync or
    async."""
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert [n.node.node_id for n in report.kept] == ["a"]
    assert SECRET not in texts(report)
    assert SECRET not in texts(asyncio.run(retriever.aretrieve_with_report(kit.QUESTION)))
