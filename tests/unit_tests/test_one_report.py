"""One report type: every retriever of both adapters returns ``thresholded.Report``.

LlamaIndex and LangChain, single and multi-collection, over the contract fixture on
in-memory stores: the same type, the same kept, attached and dropped sections, and
an ``explain()`` that renders in both frameworks.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core.schema import NodeWithScore
from llama_index.core.vector_stores import SimpleVectorStore

import langchain_thresholded as lc
import llama_index_thresholded as li
import thresholded

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contract_tests"))

from contract_data import (
    ATTACHED,
    DROPPED,
    FLOOR,
    KEPT,
    POLICY,
    QUESTION,
    FixedEmbeddings,
    langchain_docstore,
    langchain_documents,
    llama_index,
)

RETRIEVERS = [
    (framework, shape)
    for framework in ("llama_index", "langchain")
    for shape in ("single", "multi")
]
IDS = [f"{framework}-{shape}" for framework, shape in RETRIEVERS]


@pytest.fixture(scope="module")
def stores() -> dict[str, Any]:
    documents = langchain_documents()
    store = InMemoryVectorStore(FixedEmbeddings())
    store.add_documents(documents, ids=[d.id for d in documents])
    return {
        "llama_index": llama_index(SimpleVectorStore()),
        "langchain": store,
        "docstore": langchain_docstore(documents),
    }


def build(stores: dict[str, Any], framework: str, shape: str) -> Any:
    if framework == "llama_index":
        if shape == "single":
            return li.ThresholdedRetriever(stores["llama_index"], POLICY, neighbours=1)
        spec = li.CollectionSpec(stores["llama_index"], name="kb")
        return li.MultiCollectionRetriever([spec], POLICY, neighbours=1)
    single = lc.ThresholdedRetriever(
        vectorstore=stores["langchain"], policy=POLICY, docstore=stores["docstore"], neighbours=1
    )
    if shape == "single":
        return single
    spec = lc.CollectionSpec(retriever=single, name="kb")
    return lc.MultiCollectionRetriever(collections=[spec], policy=POLICY)


def item_id(framework: str, item: Any) -> str:
    if framework == "llama_index":
        assert isinstance(item, NodeWithScore)
        return str(item.node.node_id)
    assert isinstance(item, Document)
    return str(item.id)


def expected_type(shape: str) -> type:
    return thresholded.MultiCollectionReport if shape == "multi" else thresholded.Report


@pytest.mark.parametrize(("framework", "shape"), RETRIEVERS, ids=IDS)
def test_every_retriever_returns_the_core_report(stores, framework, shape):
    retriever = build(stores, framework, shape)
    report = retriever.retrieve_with_report(QUESTION)
    assert type(report) is expected_type(shape)
    assert [item_id(framework, i) for i in report.kept] == KEPT
    assert [item_id(framework, i) for i in report.attached] == ATTACHED
    assert [item_id(framework, i) for i in report.items] == KEPT + ATTACHED
    assert all(isinstance(d, thresholded.DroppedItem) for d in report.dropped)
    assert {d.id: d.reason.value for d in report.dropped} == DROPPED
    assert {item_id(framework, d.item) for d in report.dropped} == set(DROPPED)
    assert report.query == QUESTION
    assert report.min_similarity == FLOOR
    assert not report.nothing_matched and report.emptied_by is None


@pytest.mark.parametrize(("framework", "shape"), RETRIEVERS, ids=IDS)
def test_the_async_report_is_the_same(stores, framework, shape):
    retriever = build(stores, framework, shape)
    report = asyncio.run(retriever.aretrieve_with_report(QUESTION))
    assert type(report) is expected_type(shape)
    assert [item_id(framework, i) for i in report.kept] == KEPT
    assert {d.id: d.reason.value for d in report.dropped} == DROPPED


@pytest.mark.parametrize(("framework", "shape"), RETRIEVERS, ids=IDS)
def test_explain_renders_in_both_frameworks(stores, framework, shape):
    text = build(stores, framework, shape).retrieve_with_report(QUESTION).explain()
    lines = text.splitlines()
    assert lines[0] == f"query: {QUESTION!r}  (floor {FLOOR:g})"
    kept = [line for line in lines if line.lstrip().startswith("kept")]
    assert len(kept) == len(KEPT)
    assert " 0.875  guide  g1 ..." in kept[0]  # its cosine, its source, its own text
    assert sum(line.lstrip().startswith("+ ") for line in lines) == len(ATTACHED)
    assert sum(line.lstrip().startswith("dropped") for line in lines) == len(DROPPED)
    for reason in set(DROPPED.values()):
        assert reason in text
    assert ("  collection kb: ok" in text) == (shape == "multi")


def test_all_four_keep_the_same_and_tell_it_the_same_way(stores):
    reports = {r: build(stores, *r).retrieve_with_report(QUESTION) for r in RETRIEVERS}
    kept = {r: [item_id(r[0], i) for i in report.kept] for r, report in reports.items()}
    assert set(map(tuple, kept.values())) == {tuple(KEPT)}
    summaries = {report.summary().split(";")[0] for report in reports.values()}
    assert len(summaries) == 1, summaries
    first, *others = [report.to_event_data("retriever")["kept"] for report in reports.values()]
    assert all(kept == first for kept in others)


def test_a_dropped_item_is_the_stores_own_with_its_raw_score(stores):
    nodes = build(stores, "llama_index", "single").retrieve_with_report(QUESTION)
    (below,) = [d for d in nodes.dropped if d.id == "g4"]
    assert below.item.score == pytest.approx(0.3125)
    assert "similarity" not in below.item.node.metadata  # unmarked
    documents = build(stores, "langchain", "single").retrieve_with_report(QUESTION)
    (below,) = [d for d in documents.dropped if d.id == "g4"]
    assert "similarity" not in below.item.metadata
    assert below.similarity == pytest.approx(0.3125)


@pytest.mark.parametrize(("framework", "shape"), RETRIEVERS, ids=IDS)
def test_explain_says_when_a_dropped_section_came_back_attached(stores, framework, shape):
    """g3 and f3 (over the source cap), f1 (over the budget) and g0 (below the floor) were
    listed as dropped and again as neighbours, without a word that the drop did not keep
    them out of the result."""
    report = build(stores, framework, shape).retrieve_with_report(QUESTION)
    dropped = {
        line.split()[4]: line
        for line in report.explain().splitlines()
        if line.lstrip().startswith("dropped")
    }
    assert set(dropped) == set(DROPPED)
    again = {i for i in dropped if i in ATTACHED}
    assert again == {"g3", "f1", "f3", "g0"}
    for section, line in dropped.items():
        assert line.endswith("(attached as neighbour)") == (section in again), line
    assert {report.attached_as(d) for d in report.dropped if d.id in again} == {"neighbour"}
    assert {report.attached_as(d) for d in report.dropped if d.id not in again} == {None}
