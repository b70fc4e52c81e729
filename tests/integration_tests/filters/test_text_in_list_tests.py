"""CONTAINS, ANY and ALL on a stored string look for the text in it (Milvus Lite, both
adapters), as LlamaIndex's reference does (``value in stored``).

Tags kept as one string (``"faq,internal"``, as flat metadata must) were never matched
by a list test: the positive filter found none of them, and "none of the sections tagged
internal" let ``i0`` and ``i1`` through, where LlamaIndex's own retriever over the same
index holds them back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from leak_data import DIM, POLICY, QUESTION, VECTOR, SameEmbedding, SameEmbeddings
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

import langchain_thresholded as lc
import llama_index_thresholded as li

pytestmark = pytest.mark.integration

TAGS = {"p0": "public", "p1": "public,faq", "i0": "internal", "i1": "faq,internal"}
CASES = [  # (operator, value, under NOT, the sections LlamaIndex's reference returns)
    ("contains", "internal", True, ["p0", "p1"]),
    ("any", ["internal", "secret"], True, ["p0", "p1"]),
    ("all", ["faq", "internal"], True, ["i0", "p0", "p1"]),
    ("contains", "faq", False, ["i1", "p1"]),
    ("any", ["faq", "secret"], False, ["i1", "p1"]),
    ("all", ["faq", "internal"], False, ["i1"]),
]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pytest.importorskip("langchain_milvus")
    from langchain_thresholded.milvus import milvus_from_documents
    from llama_index_thresholded.milvus import milvus_store

    folder = Path(tmp_path_factory.mktemp("text_in_lists"))
    nodes = [
        TextNode(id_=name, text=f"{name} text", metadata={"tags": tags}, embedding=list(VECTOR))
        for name, tags in TAGS.items()
    ]
    store = milvus_store(str(folder / "llama.db"), "tags", dim=DIM)
    storage = StorageContext.from_defaults(vector_store=store)
    documents = [
        Document(id=name, page_content=f"{name} text", metadata={"name": name, "tags": tags})
        for name, tags in TAGS.items()
    ]
    return {
        "reference": VectorStoreIndex(nodes, embed_model=SameEmbedding()),
        "llama_index": VectorStoreIndex(
            nodes, storage_context=storage, embed_model=SameEmbedding()
        ),
        "langchain": milvus_from_documents(
            documents, SameEmbeddings(), uri=str(folder / "langchain.db"), collection_name="tags"
        ),
    }


def metadata_filters(operator: str, value: Any, negated: bool) -> MetadataFilters:
    condition = FilterCondition.NOT if negated else FilterCondition.AND
    one = MetadataFilter(key="tags", value=value, operator=FilterOperator(operator))
    return MetadataFilters(filters=[one], condition=condition)


def dict_filter(operator: str, value: Any, negated: bool) -> dict[str, Any]:
    condition = {"tags": {f"${operator}": value}}
    return {"$not": [condition]} if negated else condition


@pytest.mark.parametrize(("operator", "value", "negated", "expected"), CASES)
def test_llama_index_on_milvus_agrees_with_llama_index(
    stores: dict[str, Any], operator: str, value: Any, negated: bool, expected: list[str]
) -> None:
    given = metadata_filters(operator, value, negated)
    reference = stores["reference"].as_retriever(similarity_top_k=10, filters=given)
    assert sorted(n.node.node_id for n in reference.retrieve(QUESTION)) == expected
    retriever = li.ThresholdedRetriever(stores["llama_index"], POLICY, neighbours=0, filters=given)
    assert sorted(n.node.node_id for n in retriever.retrieve(QUESTION)) == expected


@pytest.mark.parametrize(("operator", "value", "negated", "expected"), CASES)
def test_langchain_on_milvus_agrees_with_llama_index(
    stores: dict[str, Any], operator: str, value: Any, negated: bool, expected: list[str]
) -> None:
    retriever = lc.ThresholdedRetriever(vectorstore=stores["langchain"], policy=POLICY)
    found = retriever.invoke(QUESTION, filters=dict_filter(operator, value, negated))
    assert sorted(d.metadata["name"] for d in found) == expected
