"""Against a real Milvus server (standalone 2.3.5): dense search, pushdown, filters, fan-out."""

from __future__ import annotations

import asyncio
import logging

import numpy as np
import pytest
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters
from pymilvus import AsyncMilvusClient, MilvusClient

from llama_index_thresholded import (
    CollectionSpec,
    MultiCollectionRetriever,
    ThresholdedRetriever,
)
from llama_index_thresholded.milvus import milvus_store
from llama_index_thresholded.multi_collection import collection_of
from llama_index_thresholded.pushdown import PUSHDOWN_EPSILON
from thresholded import RetrievalPolicy

pytestmark = [pytest.mark.server, pytest.mark.integration]

COSINES = {"top": 0.95, "high": 0.75, "half": 0.5, "mid": 0.35, "quarter": 0.25, "neg": -0.25}


def policy(**fields):
    return RetrievalPolicy(**{"max_per_source": None, "max_chars": None, **fields})


def kept(report):
    return [(n.node.node_id, n.score) for n in report.kept]


@pytest.fixture(scope="module")
def sections(hand):
    return [
        hand.section(name, cos, axis=1 + i % 6, doc_type="public" if i % 2 else "internal")
        for i, (name, cos) in enumerate(COSINES.items())
    ]


@pytest.fixture(scope="module")
def index(build_index, sections):
    return build_index("pushdown", sections, metric="COSINE")  # IP: the floor is never pushed


@pytest.fixture
def search_spy(monkeypatch):
    """Every sync search: its search params and how many results came back."""
    calls = []
    original = MilvusClient.search

    def search(client, *args, **kwargs):
        result = original(client, *args, **kwargs)
        params = (kwargs.get("search_params") or {}).get("params") or {}
        calls.append({"params": params, "returned": len(result[0]), **kwargs})
        return result

    monkeypatch.setattr(MilvusClient, "search", search)
    return calls


def test_dense_search_keeps_what_clears_the_floor(hand, index, reopen):
    retriever = ThresholdedRetriever(index, policy(min_similarity=0.3, top_k=10), neighbours=0)
    report = retriever.retrieve_with_report(hand.QUESTION)
    assert [i for i, _ in kept(report)] == ["top", "high", "half", "mid"]
    assert [s for _, s in kept(report)] == pytest.approx([0.95, 0.75, 0.5, 0.35], abs=1e-6)
    fresh = ThresholdedRetriever(reopen(index), policy(min_similarity=0.3, top_k=10), neighbours=0)
    asynchronous = asyncio.run(fresh.aretrieve_with_report(hand.QUESTION))
    assert kept(asynchronous) == kept(report)


def test_async_queries_from_successive_event_loops_match_a_serial_run(
    hand, index, in_new_event_loops
):
    """One store, three ``asyncio.run`` calls of 16 concurrent queries: each as the serial run."""
    retriever = ThresholdedRetriever(index, policy(min_similarity=0.1, top_k=10), neighbours=0)
    floors = [0.9, 0.7, 0.5, 0.3, 0.0, -0.5, 0.8, 0.4] * 2
    serial = [kept(retriever.retrieve_with_report(hand.QUESTION, min_similarity=f)) for f in floors]
    assert len({tuple(answer) for answer in serial}) >= 5
    batches = in_new_event_loops(
        lambda: [retriever.aretrieve_with_report(hand.QUESTION, min_similarity=f) for f in floors]
    )
    assert len(batches) == 3
    for reports in batches:
        assert [kept(report) for report in reports] == serial


@pytest.mark.parametrize("floor", [0.75, 0.5, 0.35, 0.25, -0.25, 0.0, 0.99])
def test_range_search_pushdown_matches_client_side_filtering(hand, index, search_spy, floor):
    pushed = ThresholdedRetriever(index, policy(min_similarity=0.1, top_k=10), neighbours=0)
    plain = ThresholdedRetriever(
        index, policy(min_similarity=0.1, top_k=10), neighbours=0, pushdown=False
    )
    with_pushdown = pushed.retrieve_with_report(hand.QUESTION, min_similarity=floor)
    pushed_call = search_spy[-1]
    without = plain.retrieve_with_report(hand.QUESTION, min_similarity=floor)

    assert kept(with_pushdown) == kept(without)
    scores = {name: float(np.float32(c)) for name, c in COSINES.items()}
    kept_ids = {n for n, s in scores.items() if s >= floor or floor == 0.0}  # 0: floor off
    assert {i for i, _ in kept(with_pushdown)} == kept_ids
    if floor == 0.0:
        assert "radius" not in pushed_call["params"]
        assert pushed_call["returned"] == len(COSINES)
    else:
        assert pushed_call["params"]["radius"] == pytest.approx(floor - PUSHDOWN_EPSILON)
        expected = sum(s > floor - PUSHDOWN_EPSILON for s in scores.values())
        assert pushed_call["returned"] == expected
    assert search_spy[-1]["returned"] == len(COSINES)


def test_async_pushdown_on_the_server(hand, index, reopen, monkeypatch):
    radii = []
    original = AsyncMilvusClient.search

    async def search(client, *args, **kwargs):
        radii.append(((kwargs.get("search_params") or {}).get("params") or {}).get("radius"))
        return await original(client, *args, **kwargs)

    monkeypatch.setattr(AsyncMilvusClient, "search", search)
    retriever = ThresholdedRetriever(
        reopen(index), policy(min_similarity=0.5, top_k=10), neighbours=0
    )
    report = asyncio.run(retriever.aretrieve_with_report(hand.QUESTION))
    assert [i for i, _ in kept(report)] == ["top", "high", "half"]
    assert radii == [pytest.approx(0.5 - PUSHDOWN_EPSILON)]


def test_filters_apply_on_the_server(hand, index):
    retriever = ThresholdedRetriever(index, policy(min_similarity=0.0, top_k=10), neighbours=0)
    public = MetadataFilters(filters=[MetadataFilter(key="doc_type", value="public")])
    report = retriever.retrieve_with_report(hand.QUESTION, filters=public)
    assert [i for i, _ in kept(report)] == ["high", "mid", "neg"]
    floor_and_filter = retriever.retrieve_with_report(
        hand.QUESTION, filters=public, min_similarity=0.3
    )
    assert [i for i, _ in kept(floor_and_filter)] == ["high", "mid"]


# Several databases --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_databases(milvus_server_uri, build_index, hand):
    admin = MilvusClient(uri=milvus_server_uri)
    for db in ("laws", "faqs"):
        if db not in admin.list_databases():
            admin.create_database(db)
    admin.close()
    laws = build_index(
        "kb",
        [hand.section("l1", 0.9, source="law"), hand.section("l2", 0.45, axis=2, source="law")],
        db_name="laws",
        metric="COSINE",
    )
    faqs = build_index(
        "kb",
        [hand.section("f1", 0.8, source="faq"), hand.section("f2", 0.5, axis=2, source="faq")],
        db_name="faqs",
        metric="COSINE",
    )
    return laws, faqs


def _multi(laws, faqs, **kwargs):
    specs = [
        CollectionSpec(laws, policy=policy(min_similarity=0.4)),
        CollectionSpec(faqs, policy=policy(min_similarity=0.6)),
    ]
    return MultiCollectionRetriever(specs, policy(top_k=10), neighbours=0, **kwargs)


def test_multi_collection_across_two_databases(two_databases, hand):
    laws, faqs = two_databases
    retriever = _multi(laws, faqs)
    assert retriever.collection_names == ("laws/kb", "faqs/kb")
    report = retriever.retrieve_with_report(hand.QUESTION)
    got = [(collection_of(n), n.node.node_id) for n in report.kept]
    # f2 (0.5) clears the laws' floor, not its own database's (0.6)
    assert got == [("laws/kb", "l1"), ("faqs/kb", "f1"), ("laws/kb", "l2")]
    assert [s.pushdown for s in report.collections] == [True, True]
    assert [s.returned for s in report.collections] == [2, 1]


def test_async_fan_out_uses_the_async_client(two_databases, hand, reopen, monkeypatch):
    laws, faqs = two_databases
    retriever = _multi(reopen(laws), reopen(faqs))
    assert [c["threaded"] for c in retriever.to_dict()["collections"]] == [False, False]
    searched = []
    original = AsyncMilvusClient.search

    async def search(client, *args, **kwargs):
        searched.append(kwargs.get("collection_name"))
        return await original(client, *args, **kwargs)

    monkeypatch.setattr(AsyncMilvusClient, "search", search)
    sync = retriever.retrieve_with_report(hand.QUESTION)
    asynchronous = asyncio.run(retriever.aretrieve_with_report(hand.QUESTION))
    assert [n.node.node_id for n in asynchronous.kept] == [n.node.node_id for n in sync.kept]
    assert searched == ["kb", "kb"]


def test_a_dropped_collection_leaves_partial_results_and_its_status(
    milvus_server_uri, build_index, hand, caplog
):
    admin = MilvusClient(uri=milvus_server_uri)
    if "gone" not in admin.list_databases():
        admin.create_database("gone")
    keep = build_index("keep", [hand.section("k1", 0.9, source="k")])
    doomed = build_index("doomed", [hand.section("d1", 0.95, source="d")], db_name="gone")
    retriever = MultiCollectionRetriever(
        [keep, doomed], policy(min_similarity=0.3, top_k=5), neighbours=0
    )
    MilvusClient(uri=milvus_server_uri, db_name="gone").drop_collection("doomed")
    admin.close()

    with caplog.at_level(logging.WARNING, logger="llama_index_thresholded.multi_collection"):
        report = retriever.retrieve_with_report(hand.QUESTION)
    assert [n.node.node_id for n in report.kept] == ["k1"]
    assert report.partial
    status = report.status("gone/doomed")
    assert status.status == "failed"
    assert "doomed" in status.error or "collection" in status.error.lower()
    assert report.status("keep").status == "ok"
    assert len([r for r in caplog.records if "partial" in r.getMessage()]) == 1

    asynchronous = asyncio.run(retriever.aretrieve_with_report(hand.QUESTION))
    assert [n.node.node_id for n in asynchronous.kept] == ["k1"]
    assert asynchronous.status("gone/doomed").status == "failed"


def test_a_store_can_be_given_without_an_index(milvus_server_uri, build_index, embed_model, hand):
    build_index("bare", [hand.section("b1", 0.7)])
    store = milvus_store(milvus_server_uri, "bare", dim=hand.DIM, consistency_level="Strong")
    retriever = MultiCollectionRetriever(
        [store], policy(min_similarity=0.5), embed_model=embed_model, neighbours=0
    )
    assert [n.node.node_id for n in retriever.retrieve(hand.QUESTION)] == ["b1"]
