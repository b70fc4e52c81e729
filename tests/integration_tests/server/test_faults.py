"""Faults on a real Milvus server (standalone 2.3.5): frozen, killed mid-run, down in a fan-out.

Each test starts a server of its own (``disposable_server``) and freezes or kills
that server's process group only. The store's ``timeout`` bounds every attempt,
``max_retries`` bounds the attempts, so a query's worst case is known in advance:
``(max_retries + 1) * timeout`` plus the back-off waits.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest
from llama_index.core import StorageContext, VectorStoreIndex

from llama_index_thresholded import (
    CollectionSpec,
    MultiCollectionReport,
    MultiCollectionRetriever,
    ThresholdedRetriever,
)
from llama_index_thresholded.milvus import existing_milvus_store, milvus_store
from thresholded import RetrievalPolicy
from thresholded.errors import SearchUnavailableError

pytestmark = [pytest.mark.server, pytest.mark.integration]

TIMEOUT = 1.5
RETRIES = 2
BACKOFF = 0.1
WORST_CASE = (RETRIES + 1) * TIMEOUT + BACKOFF + 2 * BACKOFF
SLACK = 5.0
"""Scheduling noise on a busy 2-core machine; a hang would take minutes, not seconds."""


def policy(**fields):
    return RetrievalPolicy(**{"max_per_source": None, "max_chars": None, **fields})


def build(uri, collection, hand, embed_model, **store_kwargs):
    store = milvus_store(
        uri, collection, dim=hand.DIM, overwrite=True, consistency_level="Strong", **store_kwargs
    )
    nodes = [hand.section(f"{collection}-{i}", cos, axis=1 + i) for i, cos in enumerate((0.9, 0.6))]
    nodes.append(hand.section(f"{collection}-far", 0.1, axis=4))
    storage = StorageContext.from_defaults(vector_store=store)
    return VectorStoreIndex(nodes, storage_context=storage, embed_model=embed_model)


def retriever_over(index):
    return ThresholdedRetriever(
        index,
        policy(min_similarity=0.3),
        neighbours=0,
        max_retries=RETRIES,
        retry_backoff=BACKOFF,
    )


def timed(call):
    start = time.monotonic()
    try:
        return call(), time.monotonic() - start
    except Exception as exc:  # the test inspects what was raised
        return exc, time.monotonic() - start


def test_a_frozen_server_cannot_hold_a_query_past_its_deadline(
    disposable_server, hand, embed_model
):
    index = build(disposable_server.uri, "frozen", hand, embed_model, timeout=TIMEOUT)
    retriever = retriever_over(index)
    assert [n.node.node_id for n in retriever.retrieve(hand.QUESTION)] == ["frozen-0", "frozen-1"]
    fresh = retriever_over(reopened(disposable_server.uri, "frozen", hand, embed_model))

    disposable_server.freeze()
    try:
        error, took = timed(lambda: retriever.retrieve(hand.QUESTION))
        assert isinstance(error, SearchUnavailableError), error
        assert error.attempts == RETRIES + 1
        assert "collection 'frozen' at http://127.0.0.1:" in str(error)
        assert "DEADLINE_EXCEEDED" in str(error)
        assert (RETRIES + 1) * TIMEOUT <= took <= WORST_CASE + SLACK

        error, took = timed(lambda: asyncio.run(fresh.aretrieve(hand.QUESTION)))
        assert isinstance(error, SearchUnavailableError), error
        assert took <= WORST_CASE + SLACK
    finally:
        disposable_server.thaw()

    # The server was only frozen: once it answers again, so does the same retriever.
    assert [n.node.node_id for n in retriever.retrieve(hand.QUESTION)] == ["frozen-0", "frozen-1"]


def test_a_retry_rides_out_a_short_stall(disposable_server, hand, embed_model, caplog):
    """Frozen for 2.5 s: the first attempt times out at 1.5 s, a retry gets the answer."""
    index = build(disposable_server.uri, "stall", hand, embed_model, timeout=TIMEOUT)
    retriever = retriever_over(index)
    assert len(retriever.retrieve(hand.QUESTION)) == 2

    disposable_server.freeze()
    thaw = threading.Timer(TIMEOUT + 1.0, disposable_server.thaw)
    thaw.start()
    try:
        with caplog.at_level(logging.WARNING, logger="thresholded.retry"):
            nodes, took = timed(lambda: retriever.retrieve(hand.QUESTION))
    finally:
        thaw.join()
        disposable_server.thaw()
    assert not isinstance(nodes, Exception), nodes
    assert [n.node.node_id for n in nodes] == ["stall-0", "stall-1"]
    retried = [r for r in caplog.records if "trying again" in r.getMessage()]
    assert 1 <= len(retried) <= RETRIES
    assert TIMEOUT <= took <= WORST_CASE + SLACK


def test_building_a_store_on_a_frozen_server_is_bounded_by_its_timeout(
    disposable_server, hand, embed_model
):
    """The store's timeout holds while it is built: a clear error naming the URI, not a wait."""
    uri = disposable_server.uri
    build(uri, "cold", hand, embed_model, timeout=TIMEOUT)
    builders = {
        "milvus_store": lambda: milvus_store(uri, "cold", dim=hand.DIM, timeout=TIMEOUT),
        "existing_milvus_store": lambda: existing_milvus_store(uri, "cold", timeout=TIMEOUT),
    }
    disposable_server.freeze()
    rescue = threading.Timer(120, disposable_server.thaw)  # a build without a deadline waits
    rescue.start()
    try:
        for name, make in builders.items():
            error, took = timed(make)
            print(f"{name} on a frozen server: {type(error).__name__} after {took:.2f} s")
            assert isinstance(error, SearchUnavailableError), error
            assert f"Milvus at {uri} did not answer" in str(error)
            assert "collection 'cold'" in str(error)
    finally:
        rescue.cancel()
        disposable_server.thaw()


def reopened(uri, collection, hand, embed_model):
    """A new index over an existing collection, with clients of its own (the async one too).

    Made before the server is frozen: building a store there is a
    ``SearchUnavailableError`` (see the test above).
    """
    store = milvus_store(uri, collection, dim=hand.DIM, consistency_level="Strong", timeout=TIMEOUT)
    return VectorStoreIndex.from_vector_store(store, embed_model=embed_model)


def test_a_server_killed_mid_run_fails_each_query_clearly_and_quickly(
    disposable_server, hand, embed_model
):
    index = build(disposable_server.uri, "killed", hand, embed_model, timeout=TIMEOUT)
    retriever = retriever_over(index)
    outcomes: list[tuple[object, float]] = []
    answered = threading.Event()
    done = threading.Event()

    def run() -> None:
        while len(outcomes) < 200 and not done.is_set():
            outcome = timed(lambda: retriever.retrieve(hand.QUESTION))
            outcomes.append(outcome)
            if len(outcomes) >= 5:
                answered.set()
            if (
                isinstance(outcome[0], Exception)
                and sum(isinstance(o, Exception) for o, _ in outcomes) >= 3
            ):
                return

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    assert answered.wait(60), "the server never answered"
    disposable_server.kill()  # mid-run: the worker is querying in a loop
    worker.join(3 * (WORST_CASE + SLACK))
    done.set()
    assert not worker.is_alive(), "a query hung past its deadline"

    results = [o for o, _ in outcomes if not isinstance(o, Exception)]
    errors = [(o, t) for o, t in outcomes if isinstance(o, Exception)]
    assert len(results) >= 5 and len(errors) == 3
    assert all([n.node.node_id for n in r] == ["killed-0", "killed-1"] for r in results)
    first_error = next(i for i, (o, _) in enumerate(outcomes) if isinstance(o, Exception))
    assert all(isinstance(o, Exception) for o, _ in outcomes[first_error:]), "no answers after"
    for error, took in errors:
        assert isinstance(error, SearchUnavailableError), repr(error)
        assert error.attempts == RETRIES + 1, str(error)
        assert "collection 'killed' at http://127.0.0.1:" in str(error)
        assert took <= WORST_CASE + SLACK


def test_a_fan_out_with_one_server_down_returns_the_others_and_a_status(
    disposable_server, milvus_server_uri, hand, embed_model, caplog
):
    doomed = build(disposable_server.uri, "doomed", hand, embed_model, timeout=TIMEOUT)
    alive = build(milvus_server_uri, "alive", hand, embed_model, timeout=TIMEOUT)
    retriever = MultiCollectionRetriever(
        [CollectionSpec(alive, name="alive"), CollectionSpec(doomed, name="doomed")],
        policy(min_similarity=0.3, top_k=10),
        neighbours=0,
        timeout=2 * TIMEOUT,
    )
    both = retriever.retrieve_with_report(hand.QUESTION)
    assert not both.partial and len(both.kept) == 4

    disposable_server.kill()
    report, took = timed(lambda: retriever.retrieve_with_report(hand.QUESTION))
    assert isinstance(report, MultiCollectionReport), report
    assert [n.node.node_id for n in report.kept] == ["alive-0", "alive-1"]
    status = {s.name: s for s in report.collections}
    assert status["alive"].status == "ok"
    assert status["doomed"].status in ("failed", "timeout")
    assert report.partial
    assert took <= 2 * TIMEOUT + SLACK

    strict = MultiCollectionRetriever(
        [CollectionSpec(alive, name="alive"), CollectionSpec(doomed, name="doomed")],
        policy(min_similarity=0.3, top_k=10),
        neighbours=0,
        timeout=2 * TIMEOUT,
        fail_fast=True,
    )
    with pytest.raises(Exception, match="doomed"):
        strict.retrieve_with_report(hand.QUESTION)
