"""langchain_thresholded.MultiCollectionRetriever on exact in-memory stores.

Every cosine is a multiple of 1/16 (see conftest), so a floor is met exactly.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import warnings
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.runnables import ConfigurableField
from langchain_core.stores import InMemoryStore
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_thresholded import (
    CollectionSearchError,
    CollectionSpec,
    MultiCollectionRetriever,
    RetrievalPolicy,
    ThresholdedRetriever,
)
from thresholded.errors import ModelMismatchError
from thresholded.fanout import COLLECTION_KEY, WorkerPool
from thresholded.selection import DropReason

QUERY = "the question"
LOGGER = "thresholded.engine"
NO_CAP = {"max_per_source": None, "max_chars": None}


def floor(value: float, **fields: Any) -> RetrievalPolicy:
    return RetrievalPolicy(min_similarity=value, **{**NO_CAP, **fields})


def kept(report):
    return [(d.metadata[COLLECTION_KEY], d.id) for d in report.kept]


class FailingStore(InMemoryVectorStore):
    def similarity_search_with_score_by_vector(self, embedding, k=4, **kwargs):
        raise ConnectionError("store is down")


class FlakyStore(InMemoryVectorStore):
    """Fails its first search, then answers."""

    failures: int = 1

    def similarity_search_with_score_by_vector(self, embedding, k=4, **kwargs):
        if self.failures:
            self.failures -= 1
            raise ConnectionError("store is briefly down")
        return super().similarity_search_with_score_by_vector(embedding, k=k, **kwargs)


class BlockingStore(InMemoryVectorStore):
    release: threading.Event | None = None

    def similarity_search_with_score_by_vector(self, embedding, k=4, **kwargs):
        assert self.release is not None
        self.release.wait(timeout=30)
        return super().similarity_search_with_score_by_vector(embedding, k=k, **kwargs)


class BarrierStore(InMemoryVectorStore):
    barrier: threading.Barrier | None = None

    def similarity_search_with_score_by_vector(self, embedding, k=4, **kwargs):
        assert self.barrier is not None
        self.barrier.wait(timeout=10)
        return super().similarity_search_with_score_by_vector(embedding, k=k, **kwargs)


@pytest.fixture
def two(corpus):
    """Collection a at 0.875 and 0.5625; b at 0.75, 0.375 and 0.25."""
    a = corpus([("a1", 0.875, {"source": "A"}), ("a2", 0.5625, {"source": "A"})])
    b = corpus(
        [
            ("b1", 0.75, {"source": "B"}),
            ("b2", 0.375, {"source": "B"}),
            ("b3", 0.25, {"source": "B"}),
        ]
    )
    return a, b


def specs(a, b, fa=0.625, fb=0.3125, **kwargs):
    return [
        CollectionSpec(
            retriever=ThresholdedRetriever(vectorstore=a.store, policy=floor(fa)),
            name="a",
            **kwargs,
        ),
        CollectionSpec(
            retriever=ThresholdedRetriever(vectorstore=b.store, policy=floor(fb)),
            name="b",
            **kwargs,
        ),
    ]


def test_each_collection_is_cut_by_its_own_floor_then_merged_by_cosine(two):
    a, b = two
    retriever = MultiCollectionRetriever(collections=specs(a, b), policy=RetrievalPolicy(top_k=10))
    report = retriever.retrieve_with_report(QUERY)

    # a2 (0.5625) clears b's floor but not its own collection's (0.625)
    assert kept(report) == [("a", "a1"), ("b", "b1"), ("b", "b2")]
    assert [d.metadata["similarity"] for d in report.kept] == [0.875, 0.75, 0.375]
    assert {f"{d.collection}/{d.id}": d.reason for d in report.dropped} == {
        "a/a2": DropReason.BELOW_THRESHOLD,
        "b/b3": DropReason.BELOW_THRESHOLD,
    }
    assert report.min_similarity == 0.3125
    assert [
        (s.name, s.status, s.returned, s.cleared_floor, s.kept) for s in report.collections
    ] == [
        ("a", "ok", 2, 1, 1),
        ("b", "ok", 3, 2, 2),
    ]
    assert not report.partial
    assert retriever.invoke(QUERY) == report.items


def test_per_call_k_and_floor(two):
    a, b = two
    retriever = MultiCollectionRetriever(
        collections=specs(a, b), policy=RetrievalPolicy(top_k=10, **NO_CAP)
    )
    assert kept(retriever.retrieve_with_report(QUERY, k=1)) == [("a", "a1")]
    low = retriever.retrieve_with_report(QUERY, min_similarity=0.25)
    assert len(low.kept) == 5
    with pytest.raises(TypeError, match="top_k"):
        retriever.invoke(QUERY, top_k=2)


def test_the_question_is_embedded_once(two):
    a, b = two
    retriever = MultiCollectionRetriever(collections=specs(a, b))
    retriever.invoke(QUERY)
    assert a.embeddings.query_calls.count(QUERY) + b.embeddings.query_calls.count(QUERY) == 1


def test_cap_and_budget_span_collections(corpus):
    a = corpus([("a1", 0.9375, {"source": "S"}), ("a2", 0.8125, {"source": "S"})], text_len=100)
    b = corpus(
        [
            ("b1", 0.875, {"source": "S"}),
            ("b2", 0.75, {"source": "T"}),
            ("b3", 0.625, {"source": "U"}),
            ("b4", 0.5625, {"source": "V"}),
        ],
        text_len=100,
    )
    collections = [
        CollectionSpec(
            retriever=ThresholdedRetriever(vectorstore=c.store, policy=floor(0.5)), name=name
        )
        for name, c in (("a", a), ("b", b))
    ]
    policy = RetrievalPolicy(top_k=3, max_per_source=2, max_chars=300)
    retriever = MultiCollectionRetriever(collections=collections, policy=policy)
    report = retriever.retrieve_with_report(QUERY)
    # S is capped across collections (a2 after a1 and b1); b3 and b4 overflow the budget
    assert kept(report) == [("a", "a1"), ("b", "b1"), ("b", "b2")]
    assert {f"{d.collection}/{d.id}": d.reason for d in report.dropped} == {
        "a/a2": DropReason.SOURCE_CAP,
        "b/b3": DropReason.BUDGET,
        "b/b4": DropReason.BUDGET,
    }


def test_collections_are_searched_concurrently(corpus):
    barrier = threading.Barrier(3)
    collections = []
    for i in range(3):
        c = corpus([(f"d{i}", 0.5 + i / 16)])
        store = BarrierStore(c.embeddings)
        store.barrier = barrier
        store.add_documents(list(c.documents.values()))
        collections.append(
            CollectionSpec(
                retriever=ThresholdedRetriever(vectorstore=store, policy=floor(0.25)), name=f"c{i}"
            )
        )
    retriever = MultiCollectionRetriever(collections=collections)
    report = retriever.retrieve_with_report(QUERY)
    assert [s.status for s in report.collections] == ["ok"] * 3
    assert [d.id for d in report.kept] == ["d2", "d1", "d0"]
    asynchronous = asyncio.run(retriever.aretrieve_with_report(QUERY))
    assert [s.status for s in asynchronous.collections] == ["ok"] * 3


def test_concurrent_first_calls_share_one_thread_pool(two, monkeypatch):
    """The pool is made at the first call: two first calls at once made one each, and the
    one that lost the race was never shut down."""
    from thresholded import fanout

    made = []

    class SlowPool(fanout.WorkerPool):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            made.append(self)
            threading.Event().wait(0.05)  # both calls reach the pool before either has one
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(fanout, "WorkerPool", SlowPool)
    retriever = MultiCollectionRetriever(collections=specs(*two))
    calls = [threading.Thread(target=retriever.invoke, args=(QUERY,)) for _ in range(2)]
    for call in calls:
        call.start()
    for call in calls:
        call.join()
    assert len(made) == 1
    retriever.close()


def test_calls_configured_by_their_config_share_the_retriever_s_thread_pool(two, monkeypatch):
    """Each call with a config (its ``call_filters``) searches a copy of the retriever; each
    copy made a pool of its own, so ``max_workers`` bounded nothing (64 calls at once ran
    104 threads with ``max_workers=3``), and ``close()`` reached none of them."""
    used = []
    submit = WorkerPool.submit

    def spied(self: WorkerPool, *args: Any, **kwargs: Any) -> Any:
        used.append(self)
        return submit(self, *args, **kwargs)

    monkeypatch.setattr(WorkerPool, "submit", spied)
    retriever = MultiCollectionRetriever(collections=specs(*two), max_workers=1)
    configurable = retriever.configurable_fields(call_filters=ConfigurableField(id="call_filters"))
    for source in ("A", "B"):
        configurable.invoke(QUERY, {"configurable": {"call_filters": {"source": source}}})
    asyncio.run(configurable.ainvoke(QUERY, {"configurable": {"call_filters": {"source": "A"}}}))
    retriever.invoke(QUERY)
    assert used and {id(pool) for pool in used} == {id(retriever._executor())}
    retriever.close()


def test_a_with_block_closes_it_as_in_llama_index(two, monkeypatch):
    """The README's "``close()`` (or the end of a ``with`` block)" was a TypeError here:
    "'MultiCollectionRetriever' object does not support the context manager protocol"."""
    from thresholded import fanout

    made = []

    class CountedPool(fanout.WorkerPool):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            made.append(self)
            super().__init__(*args, **kwargs)

        def shutdown(self, *args: Any, **kwargs: Any) -> None:
            made.append("shut down")
            super().shutdown(*args, **kwargs)

    monkeypatch.setattr(fanout, "WorkerPool", CountedPool)
    with MultiCollectionRetriever(collections=specs(*two)) as retriever:
        assert kept(retriever.retrieve_with_report(QUERY))
    assert made[1:] == ["shut down"]
    assert kept(retriever.retrieve_with_report(QUERY))  # a later call starts a pool again


def _broken(corpus):
    c = corpus([("x1", 0.9375)])
    store = FailingStore(c.embeddings)
    return CollectionSpec(
        retriever=ThresholdedRetriever(vectorstore=store, policy=floor(0.25)), name="broken"
    )


def test_a_failing_collection_leaves_the_others_and_one_warning(two, corpus, caplog):
    a, b = two
    retriever = MultiCollectionRetriever(collections=[*specs(a, b), _broken(corpus)])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        report = retriever.retrieve_with_report(QUERY)
    assert kept(report) == [("a", "a1"), ("b", "b1"), ("b", "b2")]
    assert report.partial
    # the collection's own retries ran out: its status says so, its cause stays
    status = report.status("broken")
    assert status.error.startswith("SearchUnavailableError: FailingStore did not answer")
    assert isinstance(status.exception.__cause__, ConnectionError)
    assert len([r for r in caplog.records if r.name == LOGGER]) == 1
    asynchronous = asyncio.run(retriever.aretrieve_with_report(QUERY))
    assert kept(asynchronous) == kept(report)
    assert asynchronous.status("broken").status == "failed"


def test_nothing_found_while_a_collection_failed_is_an_error_not_i_dont_know(two, corpus):
    # nothing in a or b clears the gate; "broken" (a section at 0.94) was not searched
    from langchain_core.language_models import FakeListChatModel

    from langchain_thresholded import AbstainingChain

    a, b = two
    retriever = MultiCollectionRetriever(
        collections=[*specs(a, b), _broken(corpus)], policy=floor(0.3, min_top_similarity=0.9)
    )
    unsure = r"nothing cleared the policy in 'a', 'b', but 'broken' failed"
    with pytest.raises(CollectionSearchError, match=unsure):
        retriever.invoke(QUERY)
    with pytest.raises(CollectionSearchError, match=unsure):
        asyncio.run(retriever.ainvoke(QUERY))
    chain = AbstainingChain(
        retriever=retriever,
        answer_chain=FakeListChatModel(responses=["an answer"]),
        no_match_message="I don't know.",
    )
    with pytest.raises(CollectionSearchError, match=unsure):
        chain.invoke(QUERY)


def test_fail_fast_and_all_failed_raise(two, corpus):
    a, b = two
    strict = MultiCollectionRetriever(collections=[*specs(a, b), _broken(corpus)], fail_fast=True)
    with pytest.raises(CollectionSearchError, match="'broken' failed"):
        strict.invoke(QUERY)
    with pytest.raises(CollectionSearchError, match="'broken' failed"):
        asyncio.run(strict.ainvoke(QUERY))
    nothing = MultiCollectionRetriever(collections=[_broken(corpus)])
    with pytest.raises(CollectionSearchError, match="every collection failed"):
        nothing.invoke(QUERY)


def test_a_collection_that_times_out(two, corpus):
    a, b = two
    c = corpus([("slow1", 0.9375)])
    store = BlockingStore(c.embeddings)
    store.release = threading.Event()
    store.add_documents(list(c.documents.values()))
    slow = CollectionSpec(
        retriever=ThresholdedRetriever(vectorstore=store, policy=floor(0.25)),
        name="slow",
        timeout=0.2,
    )
    try:
        retriever = MultiCollectionRetriever(collections=[*specs(a, b), slow])
        report = retriever.retrieve_with_report(QUERY)
        assert report.status("slow").status == "timeout"
        assert kept(report) == [("a", "a1"), ("b", "b1"), ("b", "b2")]
        asynchronous = asyncio.run(retriever.aretrieve_with_report(QUERY))
        assert asynchronous.status("slow").status == "timeout"
    finally:
        store.release.set()


def test_a_collection_keeps_its_retriever_s_timeout_and_retries(two, corpus):
    """A ready retriever's timeout and retries hold as they do when it is called alone; the
    multi-collection retriever's timeout is for the collections that set none."""
    a, b = two
    c = corpus([("slow1", 0.9375)])
    slow_store = BlockingStore(c.embeddings)
    slow_store.release = threading.Event()
    slow_store.add_documents(list(c.documents.values()))
    slow = ThresholdedRetriever(vectorstore=slow_store, policy=floor(0.25), timeout=0.2)
    flaky_store = FlakyStore(c.embeddings)
    flaky_store.add_documents(list(c.documents.values()))
    flaky = ThresholdedRetriever(
        vectorstore=flaky_store, policy=floor(0.25), max_retries=1, retry_backoff=0
    )
    try:
        retriever = MultiCollectionRetriever(
            collections=[
                *specs(a, b),
                CollectionSpec(retriever=slow, name="slow"),
                CollectionSpec(retriever=flaky, name="flaky"),
            ],
            timeout=30,
        )
        report = retriever.retrieve_with_report(QUERY)
        assert report.status("slow").status == "timeout"
        assert report.status("flaky").status == "ok"
        assert kept(report)[0] == ("flaky", "slow1")
        flaky_store.failures = 1
        asynchronous = asyncio.run(retriever.aretrieve_with_report(QUERY))
        assert asynchronous.status("slow").status == "timeout"
        assert asynchronous.status("flaky").status == "ok"
    finally:
        slow_store.release.set()


def _linked(prefix: str, cosines: list[float]):
    """Specs of a chain s0..sN whose metadata links prev/next; docstore texts name the prefix."""
    ids = [f"s{i}" for i in range(len(cosines))]
    out = []
    for i, (doc_id, cos) in enumerate(zip(ids, cosines, strict=True)):
        meta = {"source": prefix}
        if i > 0:
            meta["prev_id"] = ids[i - 1]
        if i + 1 < len(ids):
            meta["next_id"] = ids[i + 1]
        out.append((doc_id, cos, meta, f"{prefix} {doc_id}"))
    docstore = InMemoryStore()
    docstore.mset(
        [
            (doc_id, Document(id=doc_id, page_content=f"{prefix} text of {doc_id}", metadata=meta))
            for doc_id, _, meta, _ in out
        ]
    )
    return out, docstore


def test_neighbours_come_from_the_collection_of_each_kept_document(corpus):
    """Both collections use the ids s0..s4: the attachments must not be mixed up. Each store
    reads its sections by id, so they are its copies, not its docstore's."""
    a_specs, a_docstore = _linked("A", [0.125, 0.875, 0.125, 0.25, 0.125])
    b_specs, b_docstore = _linked("B", [0.125, 0.25, 0.125, 0.75, 0.4375])
    a, b = corpus(a_specs), corpus(b_specs)
    collections = [
        CollectionSpec(
            retriever=ThresholdedRetriever(
                vectorstore=c.store, policy=floor(0.5), docstore=store, parent_summaries=False
            ),
            name=name,
        )
        for name, c, store in (("a", a, a_docstore), ("b", b, b_docstore))
    ]
    retriever = MultiCollectionRetriever(collections=collections, policy=RetrievalPolicy(top_k=5))
    report = retriever.retrieve_with_report(QUERY)
    assert kept(report) == [("a", "s1"), ("b", "s3")]
    assert [
        (d.metadata[COLLECTION_KEY], d.id, d.page_content, d.metadata["attached_to"])
        for d in report.attached
    ] == [
        ("a", "s0", "A s0", "s1"),
        ("a", "s2", "A s2", "s1"),
        ("b", "s2", "B s2", "s3"),
        ("b", "s4", "B s4", "s3"),
    ]
    asynchronous = asyncio.run(retriever.aretrieve_with_report(QUERY))
    assert [d.page_content for d in asynchronous.attached] == [
        d.page_content for d in report.attached
    ]


def test_collections_calibrated_for_different_models_are_refused(two):
    a, b = two
    subs = [
        ThresholdedRetriever(
            vectorstore=a.store,
            policy=floor(0.5, embedding_model="test/exact@6"),
            allow_model_mismatch=True,
        ),
        ThresholdedRetriever(
            vectorstore=b.store,
            policy=floor(0.5, embedding_model="other/model@6"),
            allow_model_mismatch=True,
        ),
    ]
    with pytest.raises(ModelMismatchError, match="other/model@6"):
        MultiCollectionRetriever(collections=subs)


def test_collections_embedded_by_two_unnamed_models_are_refused(corpus):
    """The question is embedded once, by the first collection's model. Collection b was
    embedded by another model of the same dimension that names none: under it, b's section
    has cosine 1 with the question; A's question vector gives it 0, and the floor would drop
    it without a word."""
    a, b = corpus([("a1", 0.75)]), corpus([("b1", 0.0)])
    b1 = np.asarray(b.embeddings.vectors["b1"])
    b.embeddings.vectors[QUERY] = list(b1)  # model B puts the question where it puts b1
    question_a = np.asarray(a.embeddings.embed_query(QUERY))
    assert float(question_a @ b1) == 0.0  # the "cosine" b1 would be cut with
    assert float(np.asarray(b.embeddings.embed_query(QUERY)) @ b1) == 1.0  # its true cosine
    for collections in (
        [a.store, b.store],
        [ThresholdedRetriever(vectorstore=s, policy=floor(0.5)) for s in (a.store, b.store)],
    ):
        with pytest.raises(ModelMismatchError, match=r"Store\[1\]'.*naming no model"):
            MultiCollectionRetriever(collections=collections, policy=floor(0.5))
    one_model = MultiCollectionRetriever(
        collections=[a.store, b.store], policy=floor(0.5), embeddings=a.embeddings
    )
    assert one_model.collection_names  # every collection searched with the embeddings given


def test_names_must_differ(two):
    a, b = two
    subs = [ThresholdedRetriever(vectorstore=c.store, policy=floor(0.5)) for c in (a, b)]
    retriever = MultiCollectionRetriever(collections=subs)
    assert retriever.collection_names == ("InMemoryVectorStore[0]", "InMemoryVectorStore[1]")
    same = [CollectionSpec(retriever=sub, name="kb") for sub in subs]
    with pytest.raises(ValueError, match="named 'kb'"):
        MultiCollectionRetriever(collections=same)


def test_a_collection_s_call_filters_hold_for_its_results_and_attachments(corpus):
    """call_filters are the retriever's filters per call (the configurable ones): in a
    collection, they hold as they do when the retriever is called alone."""
    public, secret = {"doc_type": "public"}, {"doc_type": "secret"}
    c = corpus(
        [
            ("p1", 0.875, {**public, "next_id": "x1"}),
            ("s1", 0.75, {**secret, "next_id": "y1"}),
        ]
    )
    docstore = InMemoryStore()
    docstore.mset(
        [
            ("x1", Document(id="x1", page_content="x1", metadata=secret)),
            ("y1", Document(id="y1", page_content="y1", metadata=public)),
        ]
    )
    member = ThresholdedRetriever(
        vectorstore=c.store,
        policy=floor(0.5),
        docstore=docstore,
        parent_summaries=False,
        call_filters=public,
    )
    alone = member.retrieve_with_report(QUERY)
    assert [d.id for d in alone.items] == ["p1"]
    retriever = MultiCollectionRetriever(collections=[member], policy=RetrievalPolicy(top_k=5))
    for report in (
        retriever.retrieve_with_report(QUERY),
        asyncio.run(retriever.aretrieve_with_report(QUERY)),
    ):
        assert [d.id for d in report.items] == ["p1"]
        # s1 is not even asked for: the store searches inside the filters; x1 is held
        # back by the member's own filters: not counted
        assert (report.dropped, report.drop_counts()) == ((), {})


def test_filters_hold_in_every_collection_as_llama_index_s_do(corpus):
    """LlamaIndex's MultiCollectionRetriever took filters=; LangChain's refused the name. They
    hold for results and attachments, with call_filters and a call's filters (AND)."""
    public, secret = {"doc_type": "public"}, {"doc_type": "secret"}
    c = corpus([("p1", 0.875, {**public, "next_id": "x1"}), ("p2", 0.75, dict(public))])
    docstore = InMemoryStore()
    docstore.mset([("x1", Document(id="x1", page_content="x1", metadata=secret))])
    member = ThresholdedRetriever(
        vectorstore=c.store, policy=floor(0.5), docstore=docstore, parent_summaries=False
    )
    retriever = MultiCollectionRetriever(
        collections=[member], policy=RetrievalPolicy(top_k=5), filters=public
    )
    report = retriever.retrieve_with_report(QUERY)
    assert [d.id for d in report.items] == ["p1", "p2"]
    assert report.drop_counts() == {}  # x1, p1's neighbour, held back: not counted
    narrowed = MultiCollectionRetriever(
        collections=[member], policy=RetrievalPolicy(top_k=5), filters=public, call_filters=secret
    )
    assert asyncio.run(narrowed.ainvoke(QUERY)) == []
    assert retriever.invoke(QUERY, filters=secret) == []  # narrows: never replaces


@pytest.mark.parametrize("field", ["filters", "call_filters"])
def test_bad_filters_are_refused_when_built(two, field):
    """call_filters were checked at the first call only: every call failed."""
    a, _ = two
    for bad, error in (("doc_type == 'public'", TypeError), ({COLLECTION_KEY: "a"}, ValueError)):
        with pytest.raises(error, match="filter"):
            MultiCollectionRetriever(collections=[a.store], policy=floor(0.5), **{field: bad})


def test_a_chroma_store_is_a_collection_as_it_is_a_retriever_s_store(two):
    """Chroma searches by vector under another name: the backend knows it, and says so."""
    pytest.importorskip("langchain_chroma")
    import chromadb
    from langchain_chroma import Chroma

    a, b = two
    store = Chroma(
        "multi-collection-b",
        b.embeddings,
        client=chromadb.EphemeralClient(),
        collection_metadata={"hnsw:space": "cosine"},
    )
    documents = list(b.documents.values())
    store.add_documents(documents, ids=[d.id for d in documents])
    chroma = ThresholdedRetriever(vectorstore=store, policy=floor(0.3125))
    assert [d.id for d in chroma.invoke(QUERY)] == ["b1", "b2"]
    retriever = MultiCollectionRetriever(
        collections=[CollectionSpec(retriever=chroma, name="b"), specs(a, b)[0]],
        policy=RetrievalPolicy(top_k=10),
    )
    assert kept(retriever.retrieve_with_report(QUERY)) == [("a", "a1"), ("b", "b1"), ("b", "b2")]
    asynchronous = asyncio.run(retriever.aretrieve_with_report(QUERY))
    assert kept(asynchronous) == [("a", "a1"), ("b", "b1"), ("b", "b2")]


def test_a_configurable_retriever_is_refused_as_a_collection(two):
    """The config of a call does not reach a collection's retriever: searched with its
    defaults, its configured filters would be dropped."""
    a, b = two
    configurable = ThresholdedRetriever(vectorstore=a.store, policy=floor(0.5)).configurable_fields(
        call_filters=ConfigurableField(id="call_filters")
    )
    with pytest.raises(ValueError, match="cannot be a configurable retriever"):
        MultiCollectionRetriever(collections=[configurable, b.store])
    with pytest.raises(ValueError, match="cannot be a configurable retriever"):
        CollectionSpec(retriever=configurable, name="a")


LONG_VECTORS = {QUERY: [2.0, 0.0], "near": [2.0, 0.0], "mid": [1.2, 1.6], "far": [0.0, 2.0]}


class LongVectors(Embeddings):
    """A model that does not normalise: every vector has norm 2."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(LONG_VECTORS[t]) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return list(LONG_VECTORS[text])


def _normalising_faiss() -> tuple[Any, LongVectors]:
    """A FAISS store built with normalize_L2, over vectors of norm 2."""
    pytest.importorskip("faiss")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "`langchain-community` is being sunset")
        from langchain_community.vectorstores import FAISS

    embeddings = LongVectors()
    docs = [Document(id=t, page_content=t, metadata={"source": t}) for t in ("near", "mid", "far")]
    store = FAISS.from_documents(docs, embeddings, ids=[d.id for d in docs], normalize_L2=True)
    return store, embeddings


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_store_that_normalises_the_question_is_searched_alike_from_a_multi_collection(mode):
    """A FAISS store built with normalize_L2 normalises every query: the question is
    checked and searched as that store searches it, whichever model embedded it (the
    retriever's ``embeddings=``) and whichever collection comes first."""
    store, embeddings = _normalising_faiss()
    policy = floor(0.5)
    member = ThresholdedRetriever(vectorstore=store, policy=policy, neighbours=0)
    cosine_first = InMemoryVectorStore(embeddings)
    retrievers = {
        "single": member,
        "multi": MultiCollectionRetriever(collections=[member], policy=policy),
        "multi, embeddings=": MultiCollectionRetriever(
            collections=[member], policy=policy, embeddings=embeddings
        ),
        "multi, another store first": MultiCollectionRetriever(
            collections=[CollectionSpec(store=cosine_first, name="empty"), member],
            policy=policy,
        ),
    }
    for name, retriever in retrievers.items():
        if mode == "sync":
            report = retriever.retrieve_with_report(QUERY)
        else:
            report = asyncio.run(retriever.aretrieve_with_report(QUERY))
        assert [d.id for d in report.kept] == ["near", "mid"], name
        assert report.kept[1].metadata["similarity"] == pytest.approx(0.6), name


class HeldStore(InMemoryVectorStore):
    """A store whose search says it started, then waits until the test releases it."""

    entered: threading.Event | None = None
    release: threading.Event | None = None

    def similarity_search_with_score_by_vector(self, embedding, k=4, **kwargs):
        assert self.entered is not None and self.release is not None
        self.entered.set()
        self.release.wait(timeout=30)
        return super().similarity_search_with_score_by_vector(embedding, k=k, **kwargs)


def test_a_call_running_during_close_raises_an_error_naming_the_close(two):
    """One thread, held by the first collection's search while ``close()`` runs: the other
    searches, waiting for it, were cancelled, and the call returned the held collection's
    sections alone (the others "failed", ``CancelledError``). Calls after ``close()`` search
    as before."""
    from thresholded.errors import RetrieverClosedError

    a, b = two
    store = HeldStore(a.embeddings)
    store.entered, store.release = threading.Event(), threading.Event()
    store.add_documents(list(a.documents.values()))
    held = CollectionSpec(
        retriever=ThresholdedRetriever(vectorstore=store, policy=floor(0.25)), name="held"
    )
    retriever = MultiCollectionRetriever(collections=[held, *specs(a, b)], max_workers=1)

    def close() -> None:
        store.entered.wait(timeout=10)
        threading.Event().wait(0.2)  # the other searches are queued by then
        retriever.close()
        store.release.set()

    threading.Thread(target=close).start()
    with pytest.raises(RetrieverClosedError, match=r"closed \(close\(\), or the end"):
        retriever.invoke(QUERY)
    assert [s.status for s in retriever.retrieve_with_report(QUERY).collections] == ["ok"] * 3
    retriever.close()


@pytest.mark.parametrize(
    "argument", ["neighbours", "parent_levels", "parent_summaries", "docstore"]
)
def test_an_attachment_setting_says_each_collection_s_retriever_takes_it(argument):
    """LlamaIndex's MultiCollectionRetriever takes ``neighbours=`` for the stores it is given;
    here the attachments come from each collection's retriever, and the error said only
    that the keyword was unexpected."""
    with pytest.raises(TypeError, match=rf"'{argument}' \(.*ThresholdedRetriever\(.*docstore="):
        MultiCollectionRetriever(collections=[], **{argument: 1})


def test_a_deep_copy_searches_alike_with_threads_of_its_own(two):
    """``model_copy(deep=True)`` failed: "cannot pickle '_thread.lock' object"."""
    retriever = MultiCollectionRetriever(collections=specs(*two), max_workers=2)
    expected = kept(retriever.retrieve_with_report(QUERY))
    copied = retriever.model_copy(deep=True)
    assert kept(copied.retrieve_with_report(QUERY)) == expected
    assert copied._executor() is not retriever._executor()  # closed by its own close()
    copied.close()
    retriever.close()
