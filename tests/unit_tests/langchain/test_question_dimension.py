"""A question of another dimension than the store's vectors is a ``DimensionMismatchError``.

The LlamaIndex adapter names both dimensions; so must this one, on every store whose
dimension it can read, instead of the store's own error (Milvus's "vector dimension
mismatch" with byte sizes, FAISS's bare ``AssertionError``, numpy's shape error).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_thresholded import ThresholdedRetriever
from langchain_thresholded.milvus import milvus_from_documents
from thresholded import DimensionMismatchError, RetrievalPolicy

QUERY = "the question"
SHORT = "a question of another model"
POLICY = RetrievalPolicy(min_similarity=0.3)
DOCS = [Document(id=i, page_content=i, metadata={"source": i}) for i in ("a", "b")]


class HandEmbeddings(Embeddings):
    """Documents and the question in 4 dimensions; ``SHORT`` in 3, all unit length."""

    vectors: ClassVar[dict[str, list[float]]] = {
        QUERY: [1.0, 0.0, 0.0, 0.0],
        SHORT: [1.0, 0.0, 0.0],
        "a": [0.8, 0.6, 0.0, 0.0],
        "b": [0.0, 1.0, 0.0, 0.0],
    }

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(self.vectors[t]) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return list(self.vectors[text])


def milvus(tmp_path: Path) -> Any:
    uri = str(tmp_path / "dim.db")
    return milvus_from_documents(DOCS, HandEmbeddings(), uri=uri, collection_name="dim")


def faiss(tmp_path: Path) -> Any:
    pytest.importorskip("faiss")
    community = pytest.importorskip("langchain_community.vectorstores")
    return community.FAISS.from_documents(
        DOCS, HandEmbeddings(), distance_strategy="MAX_INNER_PRODUCT"
    )


def in_memory(tmp_path: Path) -> Any:
    return InMemoryVectorStore.from_documents(DOCS, HandEmbeddings())


@pytest.mark.parametrize("make", [milvus, faiss, in_memory])
async def test_a_question_of_another_dimension_names_both_dimensions(tmp_path, make):
    retriever = ThresholdedRetriever(vectorstore=make(tmp_path), policy=POLICY)
    assert [d.id for d in retriever.invoke(QUERY)] == ["a"]
    for call in (retriever.invoke, retriever.ainvoke):
        with pytest.raises(DimensionMismatchError) as err:
            result = call(SHORT)
            if not isinstance(result, list):
                await result
        assert "3 dimensions" in str(err.value) and "of 4" in str(err.value)
