"""LangChain's standard retriever tests, with the floor off: floor 0, no cap, no budget.

With every limit off, ThresholdedRetriever must behave like any retriever: ``k`` in
``invoke``, documents from ``invoke`` and ``ainvoke``. At construction the number of
documents is ``policy.top_k``, not ``k`` (one name per concept in both adapters): the
suite's ``k`` constructor test is expected to fail with the ``TypeError`` that names it,
and ``policy.top_k`` is tested in its place.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_tests.integration_tests import RetrieversIntegrationTests

from langchain_thresholded import ThresholdedRetriever
from thresholded import RetrievalPolicy

pytestmark = pytest.mark.integration

OPEN_POLICY = RetrievalPolicy(min_similarity=0.0, max_per_source=None, max_chars=None)
TEXTS = [
    "Refunds arrive within 5 to 10 business days.",
    "Request a refund within 30 days of purchase.",
    "Reset your password from the sign-in page.",
    "Turn on two-factor authentication under Settings > Security.",
    "Invoices are emailed on the first day of each month.",
]


def _in_memory_store() -> InMemoryVectorStore:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
    store.add_texts(TEXTS, metadatas=[{"source": f"doc-{i}"} for i in range(len(TEXTS))])
    return store


class TopKInThePolicy(RetrieversIntegrationTests):
    """The suite, with ``policy.top_k`` where it builds the retriever with ``k``."""

    @pytest.mark.xfail(strict=True, raises=TypeError, reason="k at construction is policy.top_k")
    def test_k_constructor_param(self) -> None:
        super().test_k_constructor_param()

    def test_top_k_in_the_policy(self) -> None:
        params = self.retriever_constructor_params
        for k in (1, 3):
            policy = params["policy"].with_overrides(top_k=k)
            retriever = self.retriever_constructor(**{**params, "policy": policy})
            assert len(retriever.invoke(self.retriever_query_example)) == k


class TestThresholdedRetrieverInMemory(TopKInThePolicy):
    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return ThresholdedRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"vectorstore": _in_memory_store(), "policy": OPEN_POLICY, "neighbours": 0}

    @property
    def retriever_query_example(self) -> str:
        return "How long does a refund take?"


class TestThresholdedRetrieverMilvus(TopKInThePolicy):
    """The same suite on Milvus Lite through langchain-milvus, with the packaged MiniLM."""

    store: Any = None

    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def _milvus(cls, tmp_path_factory: pytest.TempPathFactory, minilm: Any) -> None:
        pytest.importorskip("langchain_milvus")
        from langchain_core.documents import Document

        from langchain_thresholded.milvus import milvus_from_documents

        path = str(tmp_path_factory.mktemp("standard") / "standard.db")
        store = milvus_from_documents(
            [
                Document(page_content=text, metadata={"source": f"doc-{i}"})
                for i, text in enumerate(TEXTS)
            ],
            minilm,
            uri=path,
            collection_name="standard",
        )
        cls.store = store

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return ThresholdedRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"vectorstore": self.store, "policy": OPEN_POLICY, "neighbours": 0}

    @property
    def retriever_query_example(self) -> str:
        return "How long does a refund take?"
