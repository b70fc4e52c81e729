"""A floor belongs to one model: where nothing names the model, a named profile is refused.

A MiniLM profile applied to a store whose embeddings name no model
(``DeterministicFakeEmbedding``, ``MockEmbedding``) used to pass without a word in LangChain.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores import SimpleVectorStore

import langchain_thresholded as lc
import llama_index_thresholded as li
from thresholded import ModelMismatchError, RetrievalPolicy

PROFILE = Path(__file__).parents[2] / "data" / "profiles" / "xquad-minilm-en.json"
MINILM = "sentence-transformers/all-MiniLM-L6-v2@384"


def langchain_store() -> InMemoryVectorStore:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=8))
    store.add_texts(["one", "two"])
    return store


def llama_index() -> VectorStoreIndex:
    nodes = [TextNode(id_=t, text=t, embedding=[1.0] + [0.0] * 7) for t in ("one", "two")]
    storage = StorageContext.from_defaults(vector_store=SimpleVectorStore())
    return VectorStoreIndex(nodes, storage_context=storage, embed_model=MockEmbedding(embed_dim=8))


def test_langchain_refuses_a_named_profile_for_embeddings_that_name_no_model():
    with pytest.raises(ModelMismatchError, match="allow_model_mismatch=True"):
        lc.ThresholdedRetriever(
            vectorstore=langchain_store(), profile=PROFILE, collection="xquad-bench"
        )


def test_langchain_refuses_a_named_policy_for_embeddings_that_name_no_model():
    policy = RetrievalPolicy(min_similarity=0.3, embedding_model=MINILM)
    with pytest.raises(
        ModelMismatchError, match="no model is named by the embeddings or InMemoryVectorStore"
    ):
        lc.ThresholdedRetriever(vectorstore=langchain_store(), policy=policy)


def test_langchain_allows_it_when_told():
    retriever = lc.ThresholdedRetriever(
        vectorstore=langchain_store(),
        profile=PROFILE,
        collection="xquad-bench",
        allow_model_mismatch=True,
    )
    retriever.invoke("one")  # no error


def test_langchain_reads_the_model_the_embeddings_name():
    class Named(DeterministicFakeEmbedding):
        model_name: str = "sentence-transformers/all-MiniLM-L6-v2"

    store = InMemoryVectorStore(Named(size=8))
    store.add_texts(["one"])
    policy = RetrievalPolicy(min_similarity=0.3, embedding_model=MINILM)
    lc.ThresholdedRetriever(vectorstore=store, policy=policy).invoke("one")  # the same model
    other = RetrievalPolicy(min_similarity=0.3, embedding_model="BAAI/bge-m3")
    with pytest.raises(ModelMismatchError, match="measured for the embedding model BAAI/bge-m3"):
        lc.ThresholdedRetriever(vectorstore=store, policy=other)


def test_an_unnamed_policy_needs_no_model():
    policy = RetrievalPolicy(min_similarity=0.3)
    lc.ThresholdedRetriever(vectorstore=langchain_store(), policy=policy).invoke("one")
    li.ThresholdedRetriever(llama_index(), policy).retrieve("one")


def test_llama_index_refuses_a_named_profile_for_a_model_that_names_none():
    """It said "... but unknown@8 is in use", LlamaIndex's default model_name read as a model's;
    it says, as LangChain's adapter does, that nothing names the model."""
    with pytest.raises(ModelMismatchError, match=r"no model is named by .*allow_model_mismatch"):
        li.ThresholdedRetriever(llama_index(), profile=PROFILE, collection="xquad-bench")
    allowed = li.ThresholdedRetriever(
        llama_index(), profile=PROFILE, collection="xquad-bench", allow_model_mismatch=True
    )
    allowed.retrieve("one")


def test_the_filters_refuse_a_model_that_is_not_the_policy_s():
    policy = RetrievalPolicy(min_similarity=0.3, embedding_model=MINILM)
    with pytest.raises(ModelMismatchError, match="no model is named by the embeddings"):
        lc.SimilarityThresholdCompressor(
            policy=policy, embeddings=DeterministicFakeEmbedding(size=8)
        )
    with pytest.raises(ModelMismatchError, match="no model is named by embed_model"):
        li.SimilarityThresholdPostprocessor(policy=policy, embed_model=MockEmbedding(embed_dim=8))
    lc.SimilarityThresholdCompressor(
        policy=policy, embeddings=DeterministicFakeEmbedding(size=8), allow_model_mismatch=True
    )
    li.SimilarityThresholdPostprocessor(
        policy=policy, embed_model=MockEmbedding(embed_dim=8), allow_model_mismatch=True
    )
    unnamed = RetrievalPolicy(min_similarity=0.3)
    lc.SimilarityThresholdCompressor(policy=unnamed, embeddings=DeterministicFakeEmbedding(size=8))


# The marks of results: cosines of the model they were retrieved with ------------------------------
class NamedLangChain(DeterministicFakeEmbedding):
    model_name: str = "sentence-transformers/all-MiniLM-L6-v2"


class OtherLangChain(DeterministicFakeEmbedding):
    model_name: str = "acme/encoder"


class NamedLlamaIndex(MockEmbedding):
    model_name: str = "acme/encoder"


BGE_M3 = RetrievalPolicy(min_similarity=0.3, embedding_model="BAAI/bge-m3")
FLOOR = RetrievalPolicy(min_similarity=0.0)


def test_the_compressor_refuses_marks_of_another_model_than_its_floor_s():
    store = InMemoryVectorStore(NamedLangChain(size=8))
    store.add_texts(["one", "two"])
    unnamed = RetrievalPolicy(min_similarity=-1.0, max_per_source=None, max_chars=None)
    found = lc.ThresholdedRetriever(vectorstore=store, policy=unnamed).invoke("one")
    assert found
    with pytest.raises(ModelMismatchError, match="measured for the embedding model BAAI/bge-m3"):
        lc.SimilarityThresholdCompressor(policy=BGE_M3).compress_documents(found, "one")
    with pytest.raises(ModelMismatchError, match="retrieved with the embedding model"):
        lc.SimilarityThresholdCompressor(
            min_similarity=0.3, embeddings=OtherLangChain(size=8)
        ).compress_documents(found, "one")
    allowed = lc.SimilarityThresholdCompressor(policy=BGE_M3, allow_model_mismatch=True)
    assert allowed.compress_documents(found, "one")


def test_the_postprocessor_refuses_marks_of_another_model_than_its_floor_s():
    nodes = [TextNode(id_=t, text=t, embedding=[1.0] + [0.0] * 7) for t in ("one", "two")]
    storage = StorageContext.from_defaults(vector_store=SimpleVectorStore())
    named = NamedLlamaIndex(embed_dim=8)
    index = VectorStoreIndex(nodes, storage_context=storage, embed_model=named)
    unnamed = RetrievalPolicy(min_similarity=-1.0, max_per_source=None, max_chars=None)
    found = li.ThresholdedRetriever(index, unnamed, neighbours=0).retrieve("one")
    assert found
    with pytest.raises(ModelMismatchError, match="measured for the embedding model BAAI/bge-m3"):
        li.SimilarityThresholdPostprocessor(policy=BGE_M3).postprocess_nodes(found, query_str="one")
    allowed = li.SimilarityThresholdPostprocessor(policy=BGE_M3, allow_model_mismatch=True)
    assert allowed.postprocess_nodes(found, query_str="one")


def test_questions_embedded_by_another_model_than_the_store_s_are_refused():
    store = InMemoryVectorStore(NamedLangChain(size=8))
    store.add_texts(["one"])
    with pytest.raises(ModelMismatchError, match="embeddings= is acme/encoder, but the store"):
        lc.ThresholdedRetriever(vectorstore=store, policy=FLOOR, embeddings=OtherLangChain(size=8))
    lc.ThresholdedRetriever(
        vectorstore=store, policy=FLOOR, embeddings=NamedLangChain(size=8)
    ).invoke("one")
    lc.ThresholdedRetriever(
        vectorstore=store,
        policy=FLOOR,
        embeddings=OtherLangChain(size=8),
        allow_model_mismatch=True,
    )
    unnamed = lc.ThresholdedRetriever(
        vectorstore=store, policy=FLOOR, embeddings=DeterministicFakeEmbedding(size=8)
    )
    assert unnamed.invoke("one")  # nothing names the question's model: nothing to compare

    class MiniLM(MockEmbedding):
        model_name: str = "sentence-transformers/all-MiniLM-L6-v2"

    nodes = [TextNode(id_="one", text="one", embedding=[1.0] + [0.0] * 7)]
    storage = StorageContext.from_defaults(vector_store=SimpleVectorStore())
    index = VectorStoreIndex(nodes, storage_context=storage, embed_model=MiniLM(embed_dim=8))
    with pytest.raises(ModelMismatchError, match="embed_model= is acme/encoder, but the store"):
        li.ThresholdedRetriever(index, FLOOR, embed_model=NamedLlamaIndex(embed_dim=8))
    li.ThresholdedRetriever(index, FLOOR, embed_model=MockEmbedding(embed_dim=8))  # names none


@pytest.mark.parametrize(
    "built", ["the store was built with", "the results were retrieved with the embedding model"]
)
def test_a_question_model_mismatch_says_which_model_to_pass(built):
    from thresholded.models import check_question_model

    with pytest.raises(ModelMismatchError) as info:
        check_question_model(MINILM, "acme/encoder@8", given_as="embeddings=", built=built)
    message = str(info.value)
    assert f"but {built} acme/encoder@8" in message
    assert "Pass that model (acme/encoder@8)" in message
