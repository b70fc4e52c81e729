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


# The question and the configured call_filters read nothing either ---------------------------
class Topics(BaseEmbedding):
    """Each text and question on the unit vector of its first word."""

    def _get_query_embedding(self, query: str) -> list[float]:
        return TOPICS[query.split()[0]]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return TOPICS[text.split()[0]]


TOPICS = {"layoffs": [1.0, 0.0, 0.0, 0.0], "refunds": [0.0, 1.0, 0.0, 0.0]}


def test_a_question_reads_no_count_of_the_sections_the_retriever_holds_back() -> None:
    """Without a call's filters the question is the probe: the store applies no ``<`` test,
    so it returned the held-back sections nearest the question, and their count told a user
    that three internal sections speak of layoffs, and none of refunds."""
    nodes = [
        TextNode(
            id_=f"pub{i}", text="refunds", metadata={"year": 2019}, embedding=TOPICS["refunds"]
        )
        for i in range(2)
    ] + [
        TextNode(
            id_=f"int{i}", text="layoffs", metadata={"year": 2025}, embedding=TOPICS["layoffs"]
        )
        for i in range(3)
    ]
    index = VectorStoreIndex(nodes, embed_model=Topics())
    retriever = li.ThresholdedRetriever(index, POLICY, filters=year_before_2020())
    layoffs = retriever.retrieve_with_report("layoffs plan")
    assert layoffs.items == []
    assert layoffs.outside_filters == 0
    assert "outside_filters" not in layoffs.to_event_data("x")["drop_counts"]


def test_langchain_configured_call_filters_read_no_count_of_held_back_sections(
    tmp_path: Any,
) -> None:
    """``call_filters`` exposed to a config (as the docs advise, to narrow per user) read the
    held-back sections' salaries as a call's filters did: 2 under ``salary == 99``, 0 under
    ``salary == 90``, in the event any ``astream_events`` streams."""
    pytest.importorskip("langchain_milvus")
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.runnables import ConfigurableField

    own = {"$not": [{"tags": {"$contains": "internal"}}]}
    retriever = lc.ThresholdedRetriever(
        vectorstore=langchain_store(tmp_path), policy=POLICY, filters=own
    ).configurable_fields(call_filters=ConfigurableField(id="call_filters"))
    counts: list[dict[str, int]] = []

    class Events(BaseCallbackHandler):
        def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
            counts.append(data["drop_counts"])

    for value in (99, 90):
        config: Any = {"configurable": {"call_filters": {"salary": value}}, "callbacks": [Events()]}
        assert retriever.invoke("q", config=config) == []
    assert counts == [{}, {}]


def test_langchain_neighbour_held_back_is_not_counted() -> None:
    """A kept section's neighbour outside the retriever's own filters is held back: its count
    told that the public section has an internal neighbour."""
    from langchain_core.stores import InMemoryStore
    from langchain_core.vectorstores import InMemoryVectorStore

    public = Document(
        id="pub", page_content="pub", metadata={"doc_type": "public", "next_id": "int"}
    )
    internal = Document(
        id="int", page_content="int", metadata={"doc_type": "internal", "prev_id": "pub"}
    )
    store = InMemoryVectorStore(SameLC())
    store.add_documents([public])
    docstore = InMemoryStore()
    docstore.mset([("pub", public), ("int", internal)])
    retriever = lc.ThresholdedRetriever(
        vectorstore=store, policy=POLICY, docstore=docstore, filters={"doc_type": "public"}
    )
    report = retriever.retrieve_with_report("q")
    assert [d.id for d in report.items] == ["pub"]
    assert report.outside_filters == 0
    assert "outside_filters" not in report.summary()


def test_a_collection_s_returned_counts_no_held_back_section_near_the_question() -> None:
    """The store returned the held-back sections nearest the question, and the search was
    widened past them: "returned" counted the public rows of the widened search, 2, 5 and 6
    with 0, 3 and 10 internal sections about layoffs."""
    summaries = []
    for internal in (0, 3, 10):
        nodes = [
            TextNode(id_=f"pub{i}", text="refunds", metadata={"year": 2019}, embedding=NEAR)
            for i in range(40)
        ] + [
            TextNode(id_=f"int{i}", text="layoffs", metadata={"year": 2025}, embedding=LAYOFFS)
            for i in range(internal)
        ]
        index = VectorStoreIndex(nodes, embed_model=Topics())
        spec = li.CollectionSpec(index, name="kb")
        retriever = li.MultiCollectionRetriever([spec], TWO, filters=year_before_2020())
        report = retriever.retrieve_with_report("layoffs plan")
        assert len(report.items) == 2
        summaries.append(told(report))
    assert "kb: ok, 2 returned" in summaries[0][1]
    assert summaries[1:] == summaries[:1] * 2


NEAR = [0.6, 0.8, 0.0, 0.0]
"""A public section's vector: its cosine with the layoffs question is 0.6, above the floor."""
LAYOFFS = TOPICS["layoffs"]
TWO = POLICY.model_copy(update={"top_k": 2, "over_fetch": 1})
