"""The abstaining engines refuse what LlamaIndex's own retriever returned outside its
restrictions, naming the restriction those sections are outside of. A store whose query
ignores ``node_ids`` (FAISS, Chroma) returns any of its rows, as LlamaIndex's retriever does
without the engine: ``index.as_retriever()`` on FAISS, which names the nodes its index listed
when it was made, returns the nodes added since, and every question was refused. What the
retriever follows an ``IndexNode`` to, which the store does not hold, is still held to
``node_ids``."""

from __future__ import annotations

import pytest
from llama_index.core.llms import MockLLM
from llama_index.core.retrievers import VectorIndexRetriever
from llama_index.core.schema import IndexNode

from llama_index_thresholded import AbstainingQueryEngine
from thresholded.errors import UnsafeFilterError

faiss = pytest.importorskip("faiss")
pytest.importorskip("llama_index.vector_stores.faiss")


def faiss_index(kit, nodes):
    from llama_index.vector_stores.faiss import FaissVectorStore

    store = FaissVectorStore(faiss_index=faiss.IndexFlatIP(kit.DIM))
    return kit.build_index(nodes, kit.embedding(), store=store)


def sources(engine, kit):
    return sorted(n.node.node_id for n in engine.query(kit.QUESTION).source_nodes)


async def asources(engine, kit):
    return sorted(n.node.node_id for n in (await engine.aquery(kit.QUESTION)).source_nodes)


async def test_nodes_added_after_as_retriever_on_faiss_answer(kit):
    index = faiss_index(kit, [kit.section("first", 0.9, kind="public")])
    engine = AbstainingQueryEngine.from_args(index.as_retriever(similarity_top_k=5), llm=MockLLM())
    index.insert_nodes([kit.section("added", 0.8, axis=2, kind="public")])
    assert sources(engine, kit) == ["added", "first"]
    assert await asources(engine, kit) == ["added", "first"]


def test_rows_past_node_ids_on_a_store_that_ignores_them_answer_as_without_the_engine(kit):
    index = faiss_index(kit, [kit.section("a", 0.9), kit.section("b", 0.8, axis=2)])
    retriever = VectorIndexRetriever(index, node_ids=["a"], similarity_top_k=5)
    raw = sorted(n.node.node_id for n in retriever.retrieve(kit.QUESTION))
    assert raw == ["a", "b"]  # FAISS ignores node_ids
    assert sources(AbstainingQueryEngine.from_args(retriever, llm=MockLLM()), kit) == raw


def test_a_section_followed_past_node_ids_on_a_store_that_ignores_them_is_refused(kit):
    internal = kit.section("internal", 0.1, axis=2, kind="internal", text="INTERNAL ONLY")
    pointer = IndexNode(
        id_="pointer", text="Pointer.", index_id="internal", obj=internal, embedding=kit.vec(0.9)
    )
    index = faiss_index(kit, [pointer, kit.section("other", 0.2, axis=3)])
    retriever = VectorIndexRetriever(index, node_ids=["pointer"], similarity_top_k=1)
    assert [n.node.node_id for n in retriever.retrieve(kit.QUESTION)] == ["internal"]
    engine = AbstainingQueryEngine.from_args(retriever, llm=MockLLM())
    with pytest.raises(UnsafeFilterError) as raised:
        engine.query(kit.QUESTION)
    message = str(raised.value)
    assert "1 section(s) outside its node_ids" in message
    assert "INTERNAL ONLY" not in message and "'internal'" not in message
    assert "doc_ids" not in message and "metadata does not meet" not in message
