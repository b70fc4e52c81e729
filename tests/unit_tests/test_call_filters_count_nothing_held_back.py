"""A call's filters (an agent's, built from a user's words) tell nothing of the sections the
retriever's own filters hold back.

The retriever's own filter (``year < 2020``) is one a store cannot apply in its search here
(LlamaIndex's ``SimpleVectorStore`` takes only equality tests; Milvus Lite 2.5 has no
expression for NOT over a list test), so the store returns sections it holds back, which
the engine drops. Were they counted (``outside_filters``, a collection's "returned"), a
call filter such as ``salary == 99`` would read the held-back sections' salaries, one value
at a time, from the report or the event: a count of 2 under ``salary == 99`` and of 0
under ``salary == 90``. The sections the retriever's own filters admit and the call's leave
out are still counted.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from llama_index.core import VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

import langchain_thresholded as lc
import llama_index_thresholded as li
from thresholded import RetrievalPolicy

POLICY = RetrievalPolicy(
    min_similarity=0.5, top_k=10, over_fetch=2, max_per_source=None, max_chars=None
)
VECTOR = [1.0, 0.0, 0.0, 0.0]
# (id, year, salary): the retriever admits year < 2020 only; r2 and r3 are held back.
ROWS = [("r0", 2019, 10), ("r1", 2019, 20), ("r2", 2021, 99), ("r3", 2022, 99)]
SALARIES = [99, 90, 10]


class Same(BaseEmbedding):
    """Every text and question on one unit vector: only filters decide."""

    def _get_query_embedding(self, query: str) -> list[float]:
        return VECTOR

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return VECTOR

    def _get_text_embedding(self, text: str) -> list[float]:
        return VECTOR


class SameLC(Embeddings):
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [VECTOR for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return VECTOR


def year_before_2020() -> MetadataFilters:
    return MetadataFilters(filters=[MetadataFilter(key="year", value=2020, operator="<")])


def salary(value: int, operator: str = "==") -> MetadataFilters:
    return MetadataFilters(filters=[MetadataFilter(key="salary", value=value, operator=operator)])


def llama_index() -> VectorStoreIndex:
    nodes = [
        TextNode(id_=i, text=i, metadata={"year": y, "salary": s}, embedding=VECTOR)
        for i, y, s in ROWS
    ]
    return VectorStoreIndex(nodes, embed_model=Same())


def langchain_store(tmp_path: Any) -> Any:
    from langchain_thresholded.milvus import milvus_from_documents

    documents = [
        Document(id=i, page_content=i, metadata={"salary": s, "tags": [_tag(y)]})
        for i, y, s in ROWS
    ]
    uri = str(tmp_path / "kb.db")
    return milvus_from_documents(documents, SameLC(), uri=uri, collection_name="kb")


def _tag(year: int) -> str:
    return "public" if year < 2020 else "internal"


def told(report: Any) -> tuple[int, str]:
    """What a report tells beyond its sections: its count and its summary (but the time)."""
    return report.outside_filters, re.sub(r", [0-9.]+ ms", "", report.summary())


def test_llama_index_call_filters_read_no_count_of_held_back_sections() -> None:
    retriever = li.ThresholdedRetriever(llama_index(), POLICY, filters=year_before_2020())
    reports = {s: retriever.retrieve_with_report("q", filters=salary(s)) for s in SALARIES}
    assert [r.items for r in (reports[99], reports[90])] == [[], []]
    assert reports[99].outside_filters == reports[90].outside_filters == 0
    assert reports[99].to_event_data("x") == reports[90].to_event_data("x")
    # the store applies neither ``<`` test: r1 is counted (the retriever admits it), r2 and
    # r3 are not
    below = retriever.retrieve_with_report("q", filters=salary(15, "<"))
    assert [n.node.node_id for n in below.items] == ["r0"]
    assert below.outside_filters == 1


def test_llama_index_multi_collection_returned_counts_no_held_back_section() -> None:
    retriever = li.MultiCollectionRetriever(
        [li.CollectionSpec(llama_index(), name="kb")], POLICY, filters=year_before_2020()
    )
    reports = {s: retriever.retrieve_with_report("q", filters=salary(s)) for s in SALARIES}
    assert told(reports[99]) == told(reports[90])
    assert "0 returned" in reports[99].summary()
    below = retriever.retrieve_with_report("q", filters=salary(15, "<"))
    assert "2 returned" in below.summary()  # r0 and r1: the store applies neither test


@pytest.mark.parametrize("multi", [False, True])
def test_langchain_call_filters_read_no_count_of_held_back_sections(
    tmp_path: Any, multi: bool
) -> None:
    """On Milvus Lite 2.5, NOT over a list test has no expression: the store applies the
    call's ``salary == ...`` alone, and returns the held-back sections that match it."""
    pytest.importorskip("langchain_milvus")
    own = {"$not": [{"tags": {"$contains": "internal"}}]}
    single = lc.ThresholdedRetriever(
        vectorstore=langchain_store(tmp_path), policy=POLICY, filters=None if multi else own
    )
    retriever: Any = single
    if multi:
        spec = lc.CollectionSpec(retriever=single, name="kb")
        retriever = lc.MultiCollectionRetriever(collections=[spec], policy=POLICY, filters=own)
    reports = {s: retriever.retrieve_with_report("q", filters={"salary": s}) for s in SALARIES}
    assert [r.items for r in (reports[99], reports[90])] == [[], []]
    assert told(reports[99]) == told(reports[90])
    assert reports[99].outside_filters == 0
    assert [d.page_content for d in reports[10].items] == ["r0"]
