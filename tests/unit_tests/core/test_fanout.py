"""thresholded.fanout: concurrent searches with deadlines, and the merge across collections."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from thresholded import DropReason, RetrievalPolicy, fanout
from thresholded.core import Candidate, select
from thresholded.engine import Question, Result, log_result
from thresholded.errors import RetrieverClosedError
from thresholded.fanout import (
    CollectionSearchError,
    Found,
    Job,
    WorkerPool,
    acall_each,
    afan_out,
    call_each,
    check_unique_names,
    describe_error,
    fan_out,
    merge,
    statuses,
)
from thresholded.selection import AttachedRole, attach

NO_CAP = {"max_per_source": None, "max_chars": None}


def cand(id_, score, source=None, chars=10, collection=""):
    return Candidate(
        item=id_, id=id_, score=score, source=source, chars=chars, collection=collection
    )


def attachment(id_, anchor, collection):
    return Candidate(
        item=id_,
        id=id_,
        score=None,
        collection=collection,
        is_attachment=True,
        attached_to=anchor,
        attached_role=AttachedRole.NEIGHBOUR,
        chars=5,
    )


def found(floor, *cands):
    policy = RetrievalPolicy(min_similarity=floor, top_k=10, **NO_CAP)
    return Found(len(cands), select(list(cands), policy, floor))


def job(name, result=None, *, floor=0.5, timeout=None, error=None, wait=None, asearch=None):
    def search():
        if wait is not None:
            wait.wait(timeout=10)
        if error is not None:
            raise error
        return result

    return Job(name, floor, timeout, search, asearch)


@pytest.fixture
def pool():
    with ThreadPoolExecutor(max_workers=8) as executor:
        yield executor


def test_outcomes_come_back_in_job_order_with_latencies(pool):
    jobs = [
        job("a", found(0.5, cand("x", 0.9), cand("y", 0.2))),
        job("b", found(0.3, cand("x", 0.4))),
    ]
    outcomes = fan_out(jobs, pool, fail_fast=False)
    assert [(o.name, o.status) for o in outcomes] == [("a", "ok"), ("b", "ok")]
    assert all(o.latency_ms >= 0 for o in outcomes)
    assert [c.id for c in outcomes[0].found.selection.kept] == ["x"]


def test_the_jobs_run_concurrently(pool):
    barrier = threading.Barrier(3)

    def waiting(name):
        def search():
            barrier.wait(timeout=10)
            return found(0.5, cand(name, 0.9))

        return Job(name, 0.5, None, search)

    outcomes = fan_out([waiting(n) for n in "abc"], pool, fail_fast=False)
    assert [o.status for o in outcomes] == ["ok", "ok", "ok"]


def test_a_failure_and_a_timeout_are_outcomes_not_exceptions(pool):
    release = threading.Event()
    jobs = [
        job("ok", found(0.5, cand("x", 0.9))),
        job("down", error=ConnectionError("refused")),
        job("slow", found(0.5, cand("y", 0.9)), timeout=0.2, wait=release),
    ]
    try:
        outcomes = fan_out(jobs, pool, fail_fast=False)
    finally:
        release.set()
    assert [o.status for o in outcomes] == ["ok", "failed", "timeout"]
    assert isinstance(outcomes[1].error, ConnectionError)
    assert outcomes[2].latency_ms == pytest.approx(200)


def test_fail_fast_raises_with_the_collection_named(pool):
    jobs = [job("ok", found(0.5, cand("x", 0.9))), job("down", error=KeyError("gone"))]
    with pytest.raises(CollectionSearchError, match="'down' failed") as raised:
        fan_out(jobs, pool, fail_fast=True)
    assert isinstance(raised.value.__cause__, KeyError)
    assert raised.value.statuses[0].name == "down"


async def test_async_fan_out_awaits_async_searches_and_threads_the_rest(pool):
    async def asearch():
        await asyncio.sleep(0)
        return found(0.5, cand("async", 0.8))

    release = threading.Event()
    jobs = [
        job("sync", found(0.5, cand("sync", 0.9))),
        job("async", None, asearch=asearch),
        job("slow", found(0.5), timeout=0.2, wait=release),
    ]
    try:
        outcomes = await afan_out(jobs, pool, fail_fast=False)
    finally:
        release.set()
    assert [o.status for o in outcomes] == ["ok", "ok", "timeout"]
    assert [c.id for c in outcomes[1].found.selection.kept] == ["async"]
    with pytest.raises(CollectionSearchError, match="'down' failed"):
        await afan_out([job("down", error=ValueError("x"))], pool, fail_fast=True)


def test_merge_orders_by_cosine_and_applies_the_global_policy_once(pool):
    a = [cand("s1", 0.9, "S", collection="a"), cand("s2", 0.55, "S", collection="a")]
    b = [
        cand(i, score, src, collection="b")
        for i, score, src in [("s1", 0.8, "S"), ("s3", 0.7, "S"), ("s4", 0.4, None)]
    ]
    outcomes = fan_out(
        [job("a", found(0.6, *a), floor=0.6), job("b", found(0.3, *b))], pool, fail_fast=False
    )
    policy = RetrievalPolicy(top_k=3, max_per_source=2, max_chars=None)
    selection = merge(outcomes, policy)
    # both collections have an "s1": a section is its collection and its id
    assert [c.key for c in selection.kept] == [("a", "s1"), ("b", "s1"), ("b", "s4")]
    assert {d.candidate.key: d.reason for d in selection.dropped} == {
        ("a", "s2"): DropReason.BELOW_THRESHOLD,
        ("b", "s3"): DropReason.SOURCE_CAP,
    }
    assert selection.min_similarity == 0.5  # the lowest floor of the collections


def test_attachments_join_the_section_of_their_own_collection(pool):
    outcomes = fan_out(
        [
            job("a", found(0.5, cand("s1", 0.9, collection="a"))),
            job("b", found(0.5, cand("s1", 0.8, collection="b"))),
        ],
        pool,
        fail_fast=False,
    )
    policy = RetrievalPolicy(top_k=4, **NO_CAP)
    found_attachments = [
        attachment("s0", "s1", "a"),
        attachment("s0", "s1", "b"),
        attachment("s2", "s1", "b"),
    ]
    selection = attach(merge(outcomes, policy), found_attachments, policy)
    assert [(c.key, c.anchor_key) for c in selection.attached] == [
        (("a", "s0"), ("a", "s1")),
        (("b", "s0"), ("b", "s1")),
        (("b", "s2"), ("b", "s1")),
    ]
    described = statuses(outcomes, selection)
    assert [(s.name, s.kept, s.attached) for s in described] == [("a", 1, 1), ("b", 1, 2)]


def test_when_every_collection_failed_the_merge_raises(pool):
    outcomes = fan_out(
        [job("a", error=OSError("disk")), job("b", error=OSError("net"))], pool, fail_fast=False
    )
    with pytest.raises(CollectionSearchError, match="every collection failed") as raised:
        merge(outcomes, RetrievalPolicy())
    assert [s.error for s in raised.value.statuses] == ["OSError: disk", "OSError: net"]


def test_statuses_describe_and_warn_once(pool, caplog):
    kept = found(0.5, cand("x", 0.9, collection="a"), cand("y", 0.1, collection="a"))
    outcomes = fan_out(
        [job("a", kept), job("b", error=OSError("down"))],
        pool,
        fail_fast=False,
    )
    selection = merge(outcomes, RetrievalPolicy(top_k=4, **NO_CAP))
    described = statuses(outcomes, selection, {"a": TimeoutError("slow docstore")})
    a, b = described
    assert (a.status, a.returned, a.cleared_floor, a.kept) == ("ok", 2, 1, 1)
    assert a.attachment_error == "TimeoutError: slow docstore"
    assert (b.ok, b.error) == (False, "OSError: down")
    with caplog.at_level(logging.WARNING, logger="thresholded.engine"):
        log_result(Result(Question("q"), selection, described))
        log_result(Result(Question("q"), selection, ()))
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "b: failed (OSError: down)" in warnings[0].getMessage()


def test_call_each_returns_failures(pool):
    results = call_each({"a": (lambda: 1, None), "b": (lambda: 1 / 0, None)}, pool)
    assert results["a"] == 1
    assert isinstance(results["b"], ZeroDivisionError)


async def test_acall_each_applies_timeouts():
    async def slow():
        await asyncio.sleep(5)

    async def quick():
        return 2

    results = await acall_each({"slow": (slow, 0.05), "quick": (quick, None)})
    assert isinstance(results["slow"], TimeoutError)
    assert results["quick"] == 2


def _sleeping(seconds, value):
    def call():
        time.sleep(seconds)
        return value

    return call


def _asleeping(seconds, value):
    async def call():
        await asyncio.sleep(seconds)
        return value

    return call


EACH = {"a": 0.6, "b": 1.8}
"""How long each call takes: "a" far within ``EACH_TIMEOUT``, "b" past it, though within it
counted from the end of "a"."""
EACH_TIMEOUT = 1.5


def test_call_each_counts_every_timeout_from_the_start(pool):
    """Each call has its own deadline from the start, as in ``acall_each``: waiting for one
    call first does not give the next one more time."""
    calls = {name: (_sleeping(took, name), EACH_TIMEOUT) for name, took in EACH.items()}
    results = call_each(calls, pool)
    assert results["a"] == "a"
    assert isinstance(results["b"], TimeoutError)


async def test_acall_each_counts_every_timeout_from_the_start():
    calls = {name: (_asleeping(took, name), EACH_TIMEOUT) for name, took in EACH.items()}
    results = await acall_each(calls)
    assert results["a"] == "a"
    assert isinstance(results["b"], TimeoutError)


def _sleeper(name, seconds, timeout):
    def search():
        time.sleep(seconds)
        return found(0.5, cand(name, 0.9))

    return Job(name, 0.5, timeout, search)


def test_a_wait_for_a_thread_does_not_count_against_the_timeout():
    """One thread, two searches of 1 s each within 1.6 s (0.6 s to spare on a loaded
    machine): the second waits 1 s for the thread, then answers in its own 1 s, past the
    timeout had the wait counted."""
    with ThreadPoolExecutor(max_workers=1) as one_thread:
        jobs = [_sleeper("a", 1.0, 1.6), _sleeper("b", 1.0, 1.6)]
        outcomes = fan_out(jobs, one_thread, fail_fast=False)
        assert [o.status for o in outcomes] == ["ok", "ok"]
        outcomes = asyncio.run(afan_out(jobs, one_thread, fail_fast=False))
        assert [o.status for o in outcomes] == ["ok", "ok"]


def test_a_wait_for_a_thread_is_bounded_by_the_timeout():
    """A thread held by a search that hangs: the search queued behind it times out within
    its timeout, rather than wait for the thread."""
    release = threading.Event()
    with ThreadPoolExecutor(max_workers=1) as one_thread:
        try:
            hung = job("hung", found(0.5), timeout=0.3, wait=release)
            queued = _sleeper("queued", 0.0, 0.3)
            start = time.perf_counter()
            outcomes = fan_out([hung, queued], one_thread, fail_fast=False)
            assert [o.status for o in outcomes] == ["timeout", "timeout"]
            outcomes = asyncio.run(afan_out([hung, queued], one_thread, fail_fast=False))
            assert [o.status for o in outcomes] == ["timeout", "timeout"]
            results = call_each(
                {"hung": (release.wait, 0.3), "queued": (lambda: 1, 0.3)}, one_thread
            )
            assert isinstance(results["queued"], TimeoutError)
            assert time.perf_counter() - start < 6.0  # the hung search is released at 10 s
        finally:
            release.set()


def closing_while_queued(pool: WorkerPool):
    """Two jobs on one thread; the pool is shut down (a retriever's ``close()``) while the
    first runs and the second waits for the thread, which is then cancelled."""
    started, release = threading.Event(), threading.Event()

    def first():
        started.set()
        release.wait(timeout=10)
        return found(0.5, cand("x", 0.9))

    def close():
        started.wait(timeout=10)
        time.sleep(0.2)  # the second job is queued by then
        pool.shutdown(wait=False, cancel_futures=True)
        release.set()

    threading.Thread(target=close).start()
    return [Job("running", 0.5, None, first), job("queued", found(0.5, cand("y", 0.9)))]


def test_a_search_cancelled_by_close_raises_an_error_naming_the_close():
    """The queued search failed with a bare ``CancelledError``: its collection was reported
    as failed ("CancelledError"), and the result was partial."""
    pool = WorkerPool(1)
    with pytest.raises(RetrieverClosedError, match=r"closed \(close\(\), or the end"):
        fan_out(closing_while_queued(pool), pool, fail_fast=False)
    outcomes = fan_out([job("again", found(0.5, cand("z", 0.9)))], pool, fail_fast=False)
    assert [o.status for o in outcomes] == ["ok"]  # a closed pool starts again
    pool.shutdown()


def test_an_async_search_cancelled_by_close_raises_an_error_naming_the_close():
    """The async call raised ``asyncio.CancelledError``, as if it were cancelled itself."""
    pool = WorkerPool(1)
    with pytest.raises(RetrieverClosedError, match="during this call"):
        asyncio.run(afan_out(closing_while_queued(pool), pool, fail_fast=False))
    pool.shutdown()


def test_a_walk_cancelled_by_close_raises_an_error_naming_the_close():
    """A cancelled attachment walk was returned as its collection's failure."""
    pool = WorkerPool(1)
    running, queued = closing_while_queued(pool)
    calls = {"running": (running.search, None), "queued": (queued.search, None)}
    with pytest.raises(RetrieverClosedError, match="during this call"):
        call_each(calls, pool)
    pool.shutdown()


def test_helpers():
    assert describe_error(ValueError("")) == "ValueError"
    assert describe_error(ValueError("a\nb")) == "ValueError: a"
    assert len(describe_error(ValueError("x" * 500))) < 220
    check_unique_names(["a", "b"])
    with pytest.raises(ValueError, match="named 'a'"):
        check_unique_names(["a", "a"])


@pytest.mark.parametrize("timeout", [None, 5.0])
async def test_a_timeout_error_of_the_search_itself_is_a_failure_sync_and_async(pool, timeout):
    """A ``TimeoutError`` the search raises (an embedding client's read timeout, say) is
    its failure, with its own message, as in a sync fan-out: not the collection's
    deadline passing, which it never reached (there may be none)."""

    def search():
        raise TimeoutError("read timed out")

    async def asearch():
        raise TimeoutError("read timed out")

    jobs = [Job("threaded", 0.5, timeout, search), Job("async", 0.5, timeout, search, asearch)]
    for outcomes in (
        fan_out(jobs, pool, fail_fast=False),
        await afan_out(jobs, pool, fail_fast=False),
    ):
        assert [o.status for o in outcomes] == ["failed", "failed"]
        assert [str(o.error) for o in outcomes] == ["read timed out"] * 2


def _searches() -> list[Job]:
    return [job("a", found(0.5, cand("x", 0.9))), job("b", found(0.5, cand("y", 0.9)))]


CALLS_BEHIND_ANOTHER = {
    "search without a timeout": lambda pool: fan_out(_searches(), pool, fail_fast=False),
    "attachment walk with a timeout": lambda pool: call_each(
        {"a": (lambda: 1, 30.0), "b": (lambda: 2, 30.0)}, pool
    ),
}


@pytest.mark.parametrize("run", CALLS_BEHIND_ANOTHER.values(), ids=CALLS_BEHIND_ANOTHER.keys())
def test_a_call_whose_searches_all_wait_for_a_thread_raises_when_closed(monkeypatch, run):
    """Another call holds the only thread; this call's searches, all queued, are cancelled
    by ``close()``. The call waited forever without a timeout, and for its whole timeout
    with one: ``concurrent.futures.wait`` never counts a future the pool's shutdown
    cancelled as done."""
    pool = WorkerPool(1)
    holding, release, waiting = threading.Event(), threading.Event(), threading.Event()
    pool.submit(lambda: (holding.set(), release.wait(timeout=60)))
    assert holding.wait(timeout=10)
    real_wait = fanout.wait

    def spied_wait(*args, **kwargs):
        waiting.set()
        return real_wait(*args, **kwargs)

    monkeypatch.setattr(fanout, "wait", spied_wait)
    errors: list[BaseException] = []

    def call() -> None:
        try:
            run(pool)
        except BaseException as exc:
            errors.append(exc)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    try:
        assert waiting.wait(timeout=10)
        pool.shutdown(wait=False, cancel_futures=True)
        caller.join(timeout=5)
        assert not caller.is_alive(), "the call still waits for its cancelled searches"
    finally:
        release.set()
    assert [type(e) for e in errors] == [RetrieverClosedError]
