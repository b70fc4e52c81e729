"""LangChain's standard retriever tests, with the floor off: floor 0, no cap, no budget.

With every limit off, ThresholdedRetriever must behave like any retriever: ``k``
in the constructor and in ``invoke``, documents from ``invoke`` and ``ainvoke``.
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


class TestThresholdedRetrieverInMemory(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return ThresholdedRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"vectorstore": _in_memory_store(), "policy": OPEN_POLICY, "neighbours": 0}

    @property
    def retriever_query_example(self) -> str:
        return "How long does a refund take?"


class TestThresholdedRetrieverMilvus(RetrieversIntegrationTests):
    """The same suite on Milvus Lite through langchain-milvus, with the packaged MiniLM."""

    store: Any = None

    @pytest.fixture(autouse=True, scope="class")
    def _milvus(
        self, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, minilm: Any
    ) -> None:
        pytest.importorskip("langchain_milvus")
        from langchain_milvus import Milvus

        from langchain_thresholded import ensure_orm_connection, wait_for_milvus_lite
        from langchain_thresholded.milvus import connection_args, orm_calls

        path = str(tmp_path_factory.mktemp("standard") / "standard.db")
        wait_for_milvus_lite(path)
        store = Milvus(
            embedding_function=minilm,
            connection_args=connection_args(path),
            index_params={"metric_type": "IP", "index_type": "FLAT", "params": {}},
            drop_old=True,
            auto_id=True,
        )
        ensure_orm_connection(store)
        with orm_calls():  # langchain-milvus reads its index through the ORM
            store.add_texts(TEXTS, metadatas=[{"source": f"doc-{i}"} for i in range(len(TEXTS))])
        request.cls.store = store

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return ThresholdedRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"vectorstore": self.store, "policy": OPEN_POLICY, "neighbours": 0}

    @property
    def retriever_query_example(self) -> str:
        return "How long does a refund take?"
