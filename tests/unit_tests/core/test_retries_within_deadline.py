"""A collection's retries run inside its deadline, in a sync and an async fan-out alike.

A store that refuses every connection is tried again after waits that double. Once the
next wait would end past the collection's timeout, no attempt is left that could answer
in time: the collection fails then, with ``SearchUnavailableError`` (the attempts made) as
its cause, rather than time out while its thread goes on retrying for a caller that has
stopped waiting, holding a thread of the pool that the next calls share.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from thresholded import RetrievalPolicy, SearchUnavailableError
from thresholded.engine import Collection, Fan, Question, SearchArgs, adrive, drive, plan, retrieve
from thresholded.retry import RetryPolicy
from thresholded.scores import Metric

POLICY = RetrievalPolicy(min_similarity=0.5, top_k=2, max_per_source=None, max_chars=None)
RETRY = RetryPolicy(max_retries=8, backoff=0.1, max_backoff=0.4)  # waits 0.1, 0.2, 0.4, 0.4...
TIMEOUT = 1.0  # the fourth wait (from 0.7 s) would end past it; a fifth attempt, at 1.1 s


class Store:
    """One section at cosine 0.9, or a store that refuses every connection."""

    dimension = 2
    attempt_timeout = None
    restricted = False
    fetch_holds_back = False
    admits_nothing = False

    def __init__(self, name: str, *, down: bool = False, threaded: bool = True) -> None:
        self.name, self.down, self.threaded = name, down, threaded
        self.attempts = 0
        self.lock = threading.Lock()

    def prepare(self, where: Any, options: Any = None) -> Any:
        return None

    def metric(self, filters: Any) -> Metric:
        return Metric.COSINE

    def can_push_down(self, metric: Metric | None) -> bool:
        return False

    def embed_query(self, question: Question) -> list[float]:
        return [1.0, 0.0]

    async def aembed_query(self, question: Question) -> list[float]:
        return [1.0, 0.0]

    def searched_vector(self, vector: list[float]) -> list[float]:
        return vector

    def search(self, args: SearchArgs) -> list[tuple[str, float]]:
        with self.lock:
            self.attempts += 1
        if self.down:
            raise ConnectionRefusedError("connection refused")
        return [(f"{self.name}-1", 0.9)]

    async def asearch(self, args: SearchArgs) -> list[tuple[str, float]]:
        return self.search(args)

    def stored_vector(self, item: str) -> list[float]:
        return [0.9, math.sqrt(1 - 0.81)]

    def identify(self, item: str, source_key: str, key: str | None = None) -> tuple[str, str, int]:
        return item, item, len(item)

    def admits(self, item: str) -> bool:
        return True

    def metadata(self, item: str) -> dict[str, Any]:
        return {}


@pytest.mark.parametrize(("mode", "threaded"), [("sync", True), ("async", True), ("async", False)])
def test_a_member_stops_retrying_at_its_deadline_and_fails_with_search_unavailable(
    mode: str, threaded: bool
) -> None:
    down = Store("down", down=True, threaded=threaded)
    collections = [
        Collection(Store("up"), name="up"),
        Collection(down, name="down", retry=RETRY, timeout=TIMEOUT),
    ]
    with ThreadPoolExecutor(4) as pool:
        call = plan(
            Question("q"), collections, POLICY, fan=Fan(pool, fail_fast=False, inline=False)
        )
        result = drive(retrieve(call)) if mode == "sync" else asyncio.run(adrive(retrieve(call)))
        attempts = down.attempts
        time.sleep(1.0)  # a thread still retrying would try again meanwhile
    up, failed = result.collections
    assert (up.status, [c.id for c in result.selection.kept]) == ("ok", ["up-1"])
    assert failed.status == "failed"  # not "timeout": it gave up before its deadline
    assert isinstance(failed.exception, SearchUnavailableError)
    assert failed.exception.attempts == attempts == down.attempts
    assert attempts > 1


@pytest.mark.parametrize(("mode", "threaded"), [("sync", True), ("async", True), ("async", False)])
def test_a_single_collection_stops_retrying_at_its_deadline(mode: str, threaded: bool) -> None:
    """A retriever's only collection, within its timeout: its own error is raised as it is."""
    down = Store("down", down=True, threaded=threaded)
    call = plan(Question("q"), [Collection(down, retry=RETRY, timeout=TIMEOUT)], POLICY)
    with pytest.raises(SearchUnavailableError) as raised:
        drive(retrieve(call)) if mode == "sync" else asyncio.run(adrive(retrieve(call)))
    attempts = down.attempts
    time.sleep(1.0)  # a thread still retrying would try again meanwhile
    assert raised.value.attempts == attempts == down.attempts


@pytest.mark.parametrize(("mode", "threaded"), [("sync", True), ("async", True), ("async", False)])
def test_a_fan_out_within_an_outer_deadline_retries_within_it(mode: str, threaded: bool) -> None:
    """A multi-collection search made by a search (an ensemble member of a retriever with a
    timeout) keeps to the outer deadline: a collection searched in a thread of the pool,
    which does not see the caller's context, retried on past it, as long as its own
    retries allowed, for a caller that had stopped waiting."""
    from thresholded.retry import retry_deadline

    down = Store("down", down=True, threaded=threaded)
    collections = [Collection(Store("up"), name="up"), Collection(down, name="down", retry=RETRY)]
    with ThreadPoolExecutor(4) as pool:
        call = plan(
            Question("q"), collections, POLICY, fan=Fan(pool, fail_fast=False, inline=False)
        )
        with retry_deadline(TIMEOUT):
            result = (
                drive(retrieve(call)) if mode == "sync" else asyncio.run(adrive(retrieve(call)))
            )
    assert result.collections[1].status == "failed"
    assert down.attempts == 4  # waits 0.1, 0.2 and 0.4 end within 1 s; the next would not
