"""The abstaining engines refuse what LlamaIndex's own retriever returned outside its
restrictions; the error names the restriction those sections are outside of. On FAISS, which
ignores ``node_ids``, ``index.as_retriever()`` (which names the nodes its index listed when it
was made) returns the nodes added since: the error named filters, doc_ids and an IndexNode the
retriever had none of."""

from __future__ import annotations

import pytest
from llama_index.core.llms import MockLLM

from llama_index_thresholded import AbstainingQueryEngine
from thresholded.errors import UnsafeFilterError

faiss = pytest.importorskip("faiss")
pytest.importorskip("llama_index.vector_stores.faiss")


def test_nodes_added_after_as_retriever_on_faiss_are_named_as_outside_its_node_ids(kit):
    from llama_index.vector_stores.faiss import FaissVectorStore

    store = FaissVectorStore(faiss_index=faiss.IndexFlatIP(kit.DIM))
    first = kit.section("first", 0.9, kind="public")
    index = kit.build_index([first], kit.embedding(), store=store)
    engine = AbstainingQueryEngine.from_args(index.as_retriever(similarity_top_k=5), llm=MockLLM())
    index.insert_nodes([kit.section("added", 0.8, axis=2, kind="public")])
    with pytest.raises(UnsafeFilterError) as raised:
        engine.query(kit.QUESTION)
    message = str(raised.value)
    assert "1 section(s) outside its node_ids" in message
    assert "as_retriever()" in message and "again after adding" in message
    assert "doc_ids" not in message and "metadata does not meet" not in message
