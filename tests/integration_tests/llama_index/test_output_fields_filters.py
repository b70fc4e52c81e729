"""A filter on a key a Milvus store's ``output_fields`` leave out is refused (Milvus Lite).

With ``output_fields`` set and ``_node_content`` not among them, LlamaIndex's Milvus store
builds each result from those fields alone: a filter key outside them read as missing on
every node. Where the expression is inexact (Milvus Lite 2.5 runs no NOT over an ordering
or a list test), the store returned every row, and the check of the results let every one
through ``NOT (level > 2)`` and ``NOT (tags contains "internal")``: levels 3 to 5 and the
internal sections came back.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from llama_index_thresholded import ThresholdedRetriever
from llama_index_thresholded.milvus import milvus_store
from thresholded import RetrievalPolicy
from thresholded.errors import UnsafeFilterError

pytestmark = pytest.mark.integration

DIM = 4
VECTOR = [1.0, 0.0, 0.0, 0.0]
POLICY = RetrievalPolicy(min_similarity=0.1, top_k=10, max_per_source=None, max_chars=None)
NOT_ABOVE_2 = MetadataFilters(
    filters=[MetadataFilter(key="level", value=2, operator=FilterOperator.GT)],
    condition=FilterCondition.NOT,
)
NOT_INTERNAL = MetadataFilters(
    filters=[MetadataFilter(key="tags", value="internal", operator=FilterOperator.CONTAINS)],
    condition=FilterCondition.NOT,
)


class SameEmbedding(BaseEmbedding):
    def _get_query_embedding(self, query: str) -> list[float]:
        return list(VECTOR)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return list(VECTOR)

    def _get_text_embedding(self, text: str) -> list[float]:
        return list(VECTOR)


def index_with(tmp_path: Path, output_fields: list[str]) -> VectorStoreIndex:
    store = milvus_store(str(tmp_path / "kb.db"), "kb", dim=DIM, output_fields=output_fields)
    nodes = [
        TextNode(
            id_=f"n{i}",
            text=f"level {i}",
            metadata={"source": "kb", "level": i, "tags": ["internal" if i > 2 else "public"]},
            embedding=list(VECTOR),
        )
        for i in range(6)
    ]
    storage = StorageContext.from_defaults(vector_store=store)
    return VectorStoreIndex(nodes, storage_context=storage, embed_model=SameEmbedding())


def texts(retriever: ThresholdedRetriever) -> list[str]:
    return sorted(n.node.get_content() for n in retriever.retrieve("q"))


@pytest.mark.parametrize("filters", [NOT_ABOVE_2, NOT_INTERNAL], ids=["not-gt", "not-contains"])
def test_a_filter_key_left_out_of_output_fields_is_refused(tmp_path: Path, filters) -> None:
    index = index_with(tmp_path, ["source"])
    with pytest.raises(UnsafeFilterError, match=r"not among the output_fields \['source'\]"):
        ThresholdedRetriever(index, POLICY, filters=filters, neighbours=0, pushdown=False)
    plain = ThresholdedRetriever(index, POLICY, neighbours=0, pushdown=False)
    with pytest.raises(UnsafeFilterError, match=r"not among the output_fields"):
        plain.retrieve_with_report("q", filters=filters)


@pytest.mark.parametrize(
    "output_fields", [["source", "level", "tags"], ["source", "_node_content"]]
)
@pytest.mark.parametrize("filters", [NOT_ABOVE_2, NOT_INTERNAL], ids=["not-gt", "not-contains"])
def test_a_filter_key_among_the_results_holds(tmp_path: Path, output_fields, filters) -> None:
    index = index_with(tmp_path, output_fields)
    retriever = ThresholdedRetriever(index, POLICY, filters=filters, neighbours=0, pushdown=False)
    assert texts(retriever) == ["level 0", "level 1", "level 2"]


def langchain_collection(tmp_path: Path) -> VectorStoreIndex:
    """The sections written by LangChain: rows of metadata fields, no ``_node_content``."""
    pytest.importorskip("langchain_milvus")
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings

    from langchain_thresholded.milvus import milvus_from_documents
    from llama_index_thresholded.milvus import existing_milvus_store

    class Same(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [list(VECTOR) for _ in texts]

        def embed_query(self, text: str) -> list[float]:
            return list(VECTOR)

    documents = [
        Document(
            id=f"n{i}",
            page_content=f"level {i}",
            metadata={"source": "kb", "level": i, "tags": ["internal" if i > 2 else "public"]},
        )
        for i in range(6)
    ]
    uri = str(tmp_path / "langchain.db")
    milvus_from_documents(documents, Same(), uri=uri, collection_name="kb")
    store = existing_milvus_store(uri, "kb", embedding_field="vector")
    return VectorStoreIndex.from_vector_store(store, embed_model=SameEmbedding())


@pytest.mark.parametrize("filters", [NOT_ABOVE_2, NOT_INTERNAL], ids=["not-gt", "not-contains"])
async def test_rows_not_written_by_llama_index_are_refused_under_a_filter(
    tmp_path: Path, filters
) -> None:
    """Every node read back with empty metadata: all six levels came back."""
    index = langchain_collection(tmp_path)
    retriever = ThresholdedRetriever(index, POLICY, filters=filters, neighbours=0, pushdown=False)
    with pytest.raises(UnsafeFilterError, match=r"hold no '_node_content'"):
        retriever.retrieve("q")
    with pytest.raises(UnsafeFilterError, match=r"hold no '_node_content'"):
        await retriever.aretrieve("q")
    unfiltered = ThresholdedRetriever(index, POLICY, neighbours=0, pushdown=False)
    assert len(unfiltered.retrieve("q")) == 6
