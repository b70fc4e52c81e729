"""A LangChain object given to the LlamaIndex adapter, or the reverse, is named as such,
with the adapter to use: the refusals spoke of the adapter's own types only (a LangChain
store was told to become a ``VectorStoreIndex.from_vector_store``, which cannot take it)."""

from __future__ import annotations

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding

import langchain_thresholded as lc
import llama_index_thresholded as li

POLICY = li.RetrievalPolicy(min_similarity=0.3)


@pytest.fixture
def lc_store() -> InMemoryVectorStore:
    return InMemoryVectorStore(DeterministicFakeEmbedding(size=8))


@pytest.fixture
def li_index() -> VectorStoreIndex:
    return VectorStoreIndex([], embed_model=MockEmbedding(embed_dim=8))


def test_langchain_objects_given_to_the_llama_index_adapter(lc_store) -> None:
    wanted = r"InMemoryVectorStore is a LangChain object: use langchain_thresholded"
    with pytest.raises(TypeError, match=wanted):
        li.ThresholdedRetriever(lc_store, policy=POLICY)
    retriever = lc.ThresholdedRetriever(vectorstore=lc_store, policy=POLICY)
    wanted = r"ThresholdedRetriever is a LangChain object: use langchain_thresholded"
    with pytest.raises(TypeError, match=wanted):
        li.AbstainingQueryEngine.from_args(retriever)


def test_llama_index_objects_given_to_the_langchain_adapter(li_index) -> None:
    wanted = r"VectorStoreIndex is a LlamaIndex object: use llama_index_thresholded"
    with pytest.raises(TypeError, match=wanted):
        lc.ThresholdedRetriever(vectorstore=li_index, policy=POLICY)
    wanted = r"VectorIndexRetriever is a LlamaIndex object: use llama_index_thresholded"
    with pytest.raises(TypeError, match=wanted):
        lc.ThresholdedRetriever.from_retriever(li_index.as_retriever(), policy=POLICY)


def test_a_langchain_embeddings_given_as_embed_model_is_refused(li_index) -> None:
    """It was taken: the retriever named the model by its class (``<class '...'>@8``) in a
    ``ModelMismatchError``, and the multi-collection retriever failed at the first question."""
    embeddings = DeterministicFakeEmbedding(size=8)
    wanted = r"embed_model must be a LlamaIndex BaseEmbedding, got DeterministicFakeEmbedding, a "
    wanted += r"LangChain model: load the LlamaIndex one with load_embed_model"
    with pytest.raises(TypeError, match=wanted):
        li.ThresholdedRetriever(li_index, policy=POLICY, embed_model=embeddings)
    with pytest.raises(TypeError, match=wanted):
        li.MultiCollectionRetriever([li_index], policy=POLICY, embed_model=embeddings)


def test_a_llama_index_model_given_as_embeddings_is_refused(lc_store) -> None:
    """It failed with pydantic's "Input should be an instance of Embeddings", where the
    LlamaIndex adapter names the other framework's model and the loader to use."""
    embed_model = MockEmbedding(embed_dim=8)
    wanted = r"embeddings must be a LangChain Embeddings, got MockEmbedding, a LlamaIndex "
    wanted += r"model: load the LangChain one with load_embeddings"
    with pytest.raises(TypeError, match=wanted):
        lc.ThresholdedRetriever(vectorstore=lc_store, policy=POLICY, embeddings=embed_model)
    with pytest.raises(TypeError, match=wanted):
        lc.MultiCollectionRetriever(collections=[lc_store], policy=POLICY, embeddings=embed_model)
    with pytest.raises(TypeError, match=wanted):
        lc.SimilarityThresholdCompressor(min_similarity=0.3, embeddings=embed_model)
