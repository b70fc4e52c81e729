"""No silent no-op: a filter that cannot judge what it is given says so, or judges it itself.

- LangChain ``ThresholdedRetriever.from_retriever(store.as_retriever())`` searches the store;
- LlamaIndex ``from_retriever`` takes a vector retriever only;
- the postprocessor and the compressor compute the cosines they cannot trust.
"""

from __future__ import annotations

import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.retrievers import AutoMergingRetriever
from llama_index.core.schema import QueryBundle, TextNode
from llama_index.core.vector_stores import MetadataFilter, MetadataFilters, SimpleVectorStore

import langchain_thresholded as lc
import llama_index_thresholded as li
from thresholded import NonCosineScoreError, RetrievalPolicy

QUESTION = "the question"
VECTORS = {
    QUESTION: [1.0, 0.0],
    "near": [0.6, 0.8],  # cosine 0.6
    "close": [0.8, 0.6],  # cosine 0.8
    "far": [0.28, 0.96],  # cosine 0.28
}
POLICY = RetrievalPolicy(min_similarity=0.5, max_per_source=None, max_chars=None)


class Fixed(BaseEmbedding):
    @classmethod
    def class_name(cls) -> str:
        return "Fixed"

    def _get_query_embedding(self, query: str) -> list[float]:
        return VECTORS[query]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return VECTORS[query]

    def _get_text_embedding(self, text: str) -> list[float]:
        return VECTORS[text]


class FixedEmbeddings(Embeddings):
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [VECTORS[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return VECTORS[text]


def langchain_store() -> InMemoryVectorStore:
    store = InMemoryVectorStore(FixedEmbeddings())
    store.add_texts(
        ["near", "close", "far"],
        metadatas=[{"topic": "a"}, {"topic": "b"}, {"topic": "a"}],
        ids=["near", "close", "far"],
    )
    return store


def llama_index() -> VectorStoreIndex:
    nodes = [TextNode(id_=t, text=t, embedding=VECTORS[t]) for t in ("near", "close", "far")]
    storage = StorageContext.from_defaults(vector_store=SimpleVectorStore())
    return VectorStoreIndex(nodes, storage_context=storage, embed_model=Fixed())


def texts(docs) -> list[str]:
    return [d.page_content for d in docs]


# LangChain from_retriever over a VectorStoreRetriever -------------------------------------


def test_from_a_store_retriever_applies_the_floor():
    retriever = langchain_store().as_retriever()
    wrapped = lc.ThresholdedRetriever.from_retriever(retriever, policy=POLICY)
    out = wrapped.invoke(QUESTION)
    assert texts(out) == ["close", "near"]  # far (0.28) is below the floor: it used to pass
    assert [d.metadata["score_kind"] for d in out] == ["cosine", "cosine"]
    assert out[0].metadata["similarity"] == pytest.approx(0.8)


def test_from_a_store_retriever_replaces_its_k():
    wrapped = lc.ThresholdedRetriever.from_retriever(
        langchain_store().as_retriever(search_kwargs={"k": 1}), policy=POLICY
    )
    assert texts(wrapped.invoke(QUESTION)) == ["close", "near"]


def test_from_a_store_retriever_inherits_its_structured_filter():
    retriever = langchain_store().as_retriever(search_kwargs={"filter": {"topic": "a"}})
    wrapped = lc.ThresholdedRetriever.from_retriever(retriever, policy=POLICY)
    assert texts(wrapped.invoke(QUESTION)) == ["near"]
    narrowed = lc.ThresholdedRetriever.from_retriever(
        retriever, policy=POLICY.model_copy(update={"min_similarity": 0.0}), filters={"id": "x"}
    )
    assert narrowed.invoke(QUESTION) == []  # filters= only narrows the inherited one


@pytest.mark.parametrize(
    "raw",
    [lambda doc: True, {"topic": {"$regex": "a.*"}}, "topic == 'a'"],
    ids=["function", "unknown-operator", "raw-string"],
)
def test_from_a_store_retriever_refuses_a_filter_it_cannot_check(raw):
    retriever = langchain_store().as_retriever(search_kwargs={"filter": raw})
    with pytest.raises(ValueError, match="pass filters="):
        lc.ThresholdedRetriever.from_retriever(retriever, policy=POLICY)


def test_from_a_store_retriever_refuses_relevance_score_thresholds():
    retriever = langchain_store().as_retriever(
        search_type="similarity_score_threshold", search_kwargs={"score_threshold": 0.5}
    )
    with pytest.raises(ValueError, match=r"not cosines.*min_similarity"):
        lc.ThresholdedRetriever.from_retriever(retriever, policy=POLICY)


def test_from_an_mmr_retriever_marks_mmr_and_cuts_only_when_re_scored():
    retriever = langchain_store().as_retriever(search_type="mmr", search_kwargs={"fetch_k": 3})
    wrapped = lc.ThresholdedRetriever.from_retriever(retriever, policy=POLICY)
    out = wrapped.invoke(QUESTION)
    assert sorted(texts(out)) == ["close", "far", "near"]  # not cosines: never cut
    assert {d.metadata["score_kind"] for d in out} == {"mmr"}
    rescoring = POLICY.model_copy(update={"hybrid_policy": "rescore"})
    rescored = lc.ThresholdedRetriever.from_retriever(retriever, policy=rescoring)
    assert sorted(texts(rescored.invoke(QUESTION))) == ["close", "near"]


# LlamaIndex from_retriever ----------------------------------------------------------------


def test_from_an_auto_merging_retriever_says_to_wrap_the_vector_retriever():
    index = llama_index()
    merging = AutoMergingRetriever(index.as_retriever(), index.storage_context)
    with pytest.raises(TypeError, match="wrap the vector retriever inside it"):
        li.ThresholdedRetriever.from_retriever(merging, POLICY)


def test_a_filtered_auto_merging_retriever_is_not_said_to_take_a_thresholded_one():
    """It merges parents in from the docstore, held to no filter: the hint proposed putting a
    ThresholdedRetriever inside it, and an internal parent of public sections came back."""
    index = llama_index()
    public = MetadataFilters(filters=[MetadataFilter(key="kind", value="public")])
    merging = AutoMergingRetriever(index.as_retriever(filters=public), index.storage_context)
    with pytest.raises(TypeError, match="held to none of its vector retriever's filters") as e:
        li.ThresholdedRetriever.from_retriever(merging, POLICY)
    assert "wrap its vector retriever alone" in str(e.value)
    assert "AutoMergingRetriever(ThresholdedRetriever" not in str(e.value)


# The postprocessor and the compressor judge what they cannot trust ------------------------


def test_postprocessor_refuses_raw_scores_it_cannot_vouch_for():
    nodes = llama_index().as_retriever(similarity_top_k=3).retrieve(QUESTION)
    post = li.SimilarityThresholdPostprocessor(policy=POLICY)
    with pytest.raises(NonCosineScoreError, match="embed_model="):
        post.postprocess_nodes(nodes, QueryBundle(QUESTION))


def test_postprocessor_computes_the_cosines_with_embed_model():
    nodes = llama_index().as_retriever(similarity_top_k=3).retrieve(QUESTION)
    for n in nodes:  # a store whose scores are not cosines (a distance, a reranker's)
        n.score = 1.0 - (n.score or 0.0)
    post = li.SimilarityThresholdPostprocessor(policy=POLICY, embed_model=Fixed())
    out = post.postprocess_nodes(nodes, QueryBundle(QUESTION))
    assert sorted(n.node.node_id for n in out) == ["close", "near"]
    assert {n.node.metadata["score_kind"] for n in out} == {"cosine"}


def test_compressor_over_a_standard_retriever_computes_the_cosines():
    docs = langchain_store().as_retriever(search_kwargs={"k": 3}).invoke(QUESTION)
    with pytest.raises(NonCosineScoreError, match="embeddings="):
        lc.SimilarityThresholdCompressor(policy=POLICY).compress_documents(docs, QUESTION)
    compressor = lc.SimilarityThresholdCompressor(policy=POLICY, embeddings=FixedEmbeddings())
    assert texts(compressor.compress_documents(docs, QUESTION)) == ["close", "near"]


async def test_the_async_paths_embed_with_the_async_calls():
    nodes = llama_index().as_retriever(similarity_top_k=3).retrieve(QUESTION)
    post = li.SimilarityThresholdPostprocessor(policy=POLICY, embed_model=Fixed())
    out = await post.apostprocess_nodes(nodes, QueryBundle(QUESTION))
    assert sorted(n.node.node_id for n in out) == ["close", "near"]
    docs = langchain_store().as_retriever(search_kwargs={"k": 3}).invoke(QUESTION)
    compressor = lc.SimilarityThresholdCompressor(policy=POLICY, embeddings=FixedEmbeddings())
    assert texts(await compressor.acompress_documents(docs, QUESTION)) == ["close", "near"]


def test_the_postprocessor_round_trips_without_its_model():
    post = li.SimilarityThresholdPostprocessor(policy=POLICY, embed_model=Fixed())
    data = post.to_dict()
    assert "embed_model" not in data
    restored = li.SimilarityThresholdPostprocessor.from_dict(data, embed_model=Fixed())
    assert restored.policy == post.policy and isinstance(restored.embed_model, Fixed)
