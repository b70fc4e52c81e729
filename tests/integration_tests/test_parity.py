"""LlamaIndex and LangChain keep the same sections, in the same order, with the same cosines.

Same corpus (the example knowledge base), same model (the packaged MiniLM), same questions,
same policy and floor, both on Milvus Lite with IP on unit vectors.
"""

from __future__ import annotations

from typing import Any

import pytest

from thresholded import RetrievalPolicy
from thresholded.knowledge_base import EXAMPLE_KNOWLEDGE_BASE, load_knowledge_base

pytestmark = pytest.mark.integration

QUESTIONS = [
    "How do I get my money back?",
    "I was charged twice",
    "How do I turn on two-factor authentication?",
    "Which integrations are available?",
    "How do I delete my account permanently?",
    "What's the weather in Mumbai today?",
    "Who painted the Mona Lisa?",
]


@pytest.fixture(scope="module")
def policy() -> RetrievalPolicy:
    return RetrievalPolicy.from_profile(EXAMPLE_KNOWLEDGE_BASE / "threshold.json")


@pytest.fixture(scope="module")
def llama_index_retriever(tmp_path_factory, minilm_embed_model, policy) -> Any:
    from llama_index_thresholded import ThresholdedRetriever
    from llama_index_thresholded.knowledge_base import index_knowledge_base
    from llama_index_thresholded.milvus import milvus_store

    store = milvus_store(
        str(tmp_path_factory.mktemp("li") / "kb.db"), "example_support_kb", dim=384
    )
    index = index_knowledge_base(load_knowledge_base(), store, minilm_embed_model)
    return ThresholdedRetriever(index, policy, neighbours=0, parent_summaries=False, pushdown=False)


@pytest.fixture(scope="module")
def langchain_retriever(tmp_path_factory, policy) -> Any:
    pytest.importorskip("langchain_milvus")
    from langchain_core.documents import Document

    from langchain_thresholded import ThresholdedRetriever
    from langchain_thresholded.embeddings import minilm_embeddings
    from langchain_thresholded.milvus import milvus_from_documents

    sections = [s for doc in load_knowledge_base() for s in doc.sections]
    store = milvus_from_documents(
        [
            Document(
                id=s.id, page_content=s.text, metadata={k: str(v) for k, v in s.metadata.items()}
            )
            for s in sections
        ],
        minilm_embeddings(),
        uri=str(tmp_path_factory.mktemp("lc") / "kb.db"),
        collection_name="example_support_kb",
    )
    return ThresholdedRetriever(vectorstore=store, policy=policy, neighbours=0)


@pytest.mark.parametrize("question", QUESTIONS)
def test_same_sections_same_order_same_cosines(
    llama_index_retriever: Any, langchain_retriever: Any, question: str
) -> None:
    ours = llama_index_retriever.retrieve_with_report(question)
    theirs = langchain_retriever.retrieve_with_report(question)
    assert [n.node.node_id for n in ours.kept] == [d.id for d in theirs.kept]
    assert [n.node.metadata["source"] for n in ours.kept] == [
        d.metadata["source"] for d in theirs.kept
    ]
    for node, doc in zip(ours.kept, theirs.kept, strict=True):
        assert node.node.metadata["similarity"] == pytest.approx(
            doc.metadata["similarity"], abs=1e-6
        )
    assert ours.nothing_matched == theirs.nothing_matched


def test_the_weather_question_is_empty_in_both(llama_index_retriever, langchain_retriever) -> None:
    question = "What's the weather in Mumbai today?"
    assert llama_index_retriever.retrieve(question) == []
    assert langchain_retriever.invoke(question) == []
