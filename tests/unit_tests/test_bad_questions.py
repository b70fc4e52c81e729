"""A question or a policy of the wrong kind is a clear error in both adapters, before any search."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.schema import QueryBundle, TextNode
from llama_index.core.vector_stores import SimpleVectorStore

import langchain_thresholded as lc
import llama_index_thresholded as li
from thresholded import RetrievalPolicy
from thresholded.errors import NotUnitVectorError

POLICY = RetrievalPolicy(min_similarity=0.0)


@pytest.fixture
def llama_retriever():
    storage = StorageContext.from_defaults(vector_store=SimpleVectorStore())
    node = TextNode(id_="a", text="a section", embedding=[1.0, 0.0])
    index = VectorStoreIndex(
        [node], storage_context=storage, embed_model=MockEmbedding(embed_dim=2)
    )
    return li.ThresholdedRetriever(index, POLICY, neighbours=0)


@pytest.fixture
def langchain_retriever():
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=4))
    store.add_texts(["a section"])
    return lc.ThresholdedRetriever(vectorstore=store, policy=POLICY)


@pytest.mark.parametrize("question", [None, 3, b"bytes"])
def test_a_question_that_is_no_text_is_a_type_error_in_llama_index(llama_retriever, question):
    with pytest.raises(TypeError, match="question must be a str"):
        llama_retriever.retrieve(question)
    with pytest.raises(TypeError, match="question must be a str"):
        llama_retriever.retrieve_with_report(question)


@pytest.mark.parametrize("question", ["", "   \n"])
def test_an_empty_question_is_refused_in_both_adapters(
    llama_retriever, langchain_retriever, question
):
    with pytest.raises(ValueError, match="the question is empty"):
        llama_retriever.retrieve(question)
    with pytest.raises(ValueError, match="the question is empty"):
        langchain_retriever.invoke(question)


def test_a_policy_given_as_a_dict_is_read_as_a_stored_policy(llama_retriever):
    """As LangChain's pydantic fields read it; a misspelt field is refused, naming it."""
    retriever = li.ThresholdedRetriever(llama_retriever._index, {"min_similarity": 0.3})
    assert retriever.policy == RetrievalPolicy(min_similarity=0.3)
    with pytest.raises(ValueError, match="min_similarty"):
        li.ThresholdedRetriever(llama_retriever._index, {"min_similarty": 0.3})
    with pytest.raises(ValueError, match="min_similarty"):
        llama_retriever.retrieve_with_report("q", policy={"min_similarty": 0.3})
    with pytest.raises(TypeError, match="RetrievalPolicy or its dict"):
        li.ThresholdedRetriever(llama_retriever._index, "min_similarity=0.3")


@pytest.mark.parametrize(
    ("strs", "named"), [([], r"custom_embedding_strs is empty"), (["q", " "], r"strs\[1\]")]
)
def test_a_query_bundle_with_no_text_to_embed_is_refused(llama_retriever, strs, named):
    """LlamaIndex said "No embeddings to aggregate", or searched with a blank text's vector."""
    bundle = QueryBundle("a question", custom_embedding_strs=strs)
    with pytest.raises(ValueError, match=named):
        llama_retriever.retrieve(bundle)
    with pytest.raises(ValueError, match=named):
        llama_retriever.retrieve_with_report(bundle)


def test_a_query_bundle_with_its_own_vector_needs_no_text(llama_retriever):
    bundle = QueryBundle("a question", custom_embedding_strs=[], embedding=[1.0, 0.0])
    assert [n.node.node_id for n in llama_retriever.retrieve(bundle)] == ["a"]


@pytest.mark.parametrize("vector", [[0.0, 0.0], [float("nan"), 0.0], [float("inf"), 1.0]])
def test_a_question_vector_with_no_direction_is_refused(llama_retriever, vector):
    """Its cosines were NaN: under a floor it came back empty, as if nothing answered it,
    and at floor 0 its sections were kept with a NaN similarity."""
    with pytest.raises(NotUnitVectorError, match="no cosine can be computed"):
        llama_retriever.retrieve(QueryBundle("a question", embedding=vector))


def test_an_embedding_model_that_returns_zeros_is_refused(langchain_retriever):
    class Zeros(DeterministicFakeEmbedding):
        def embed_query(self, text: str) -> list[float]:
            return [0.0] * self.size

    retriever = lc.ThresholdedRetriever(
        vectorstore=langchain_retriever.vectorstore, embeddings=Zeros(size=4), policy=POLICY
    )
    with pytest.raises(NotUnitVectorError, match="no cosine can be computed"):
        retriever.invoke("a question")


async def _question() -> str:
    return "a section"


def test_a_question_that_is_a_coroutine_says_to_await_it(llama_retriever, langchain_retriever):
    """An ``async def`` that makes the question, called without ``await``. The abstaining
    query engine failed inside LlamaIndex's instrumentation, with two pydantic validation
    errors of its ``QueryStartEvent``."""
    engine = li.AbstainingQueryEngine.from_args(llama_retriever, llm=MockLLM())
    calls = [
        llama_retriever.retrieve,
        langchain_retriever.invoke,
        engine.query,
        lambda q: asyncio.run(engine.aquery(q)),
    ]
    for call in calls:
        question = _question()
        with pytest.raises(TypeError, match=r"question must be a str.*got coroutine.*await it"):
            call(question)
        question.close()
