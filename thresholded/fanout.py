"""Fan-out over several collections: run their searches at once, merge, report each one.

Framework-free: the engine hands in one search stage per collection (a function
that returns that collection's own ``Selection``: its candidates cut by its
floor) and gets back each collection's outcome, within its timeout. ``merge``
then puts the survivors of every collection through one global ``select`` (cap,
budget, ``top_k``); each candidate knows its collection, so attachments are
fetched from the right one.

Sync searches run in a thread pool; async calls await a collection's own async
search where the adapter provides one, and run the sync one in the pool
otherwise. A collection that fails or times out gets a status instead of an
answer, unless ``fail_fast``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence, ValuesView
from concurrent.futures import (
    FIRST_COMPLETED,
    CancelledError,
    Executor,
    Future,
    ThreadPoolExecutor,
    wait,
)
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Generic, Literal, Self, TypeVar

from thresholded import metadata_keys
from thresholded.errors import ModelMismatchError, RetrieverClosedError, ThresholdedError
from thresholded.guarded import Guarded
from thresholded.models import ModelId
from thresholded.policy import RetrievalPolicy
from thresholded.selection import Selection, select

T = TypeVar("T")
R = TypeVar("R")

Status = Literal["ok", "failed", "timeout"]

COLLECTION_KEY = metadata_keys.COLLECTION
"""Metadata key the adapters write on every returned section and attachment: the
collection it came from (hidden from the LLM and the embedder, like the other marks)."""


@dataclass(frozen=True)
class CollectionStatus:
    """What happened to one collection in one call."""

    name: str
    """The collection's name, as reports label it."""
    status: Status
    """``ok``, ``failed`` or ``timeout``."""
    min_similarity: float
    """This collection's floor in this call."""
    latency_ms: float
    """How long its search stage took, retries included."""
    returned: int = 0
    """Results the search returned (with pushdown, only those above the floor), as a store
    applying the filters exactly would have: not the sections the retriever's own filters
    hold back, nor the farther rows of a search widened past them."""
    cleared_floor: int = 0
    """Candidates that cleared this collection's floor and its ``retrieve_k``."""
    kept: int = 0
    """Sections of this collection in the final result."""
    attached: int = 0
    """Neighbours and summaries attached from this collection."""
    pushdown: bool = False
    """The floor went to the engine as a range search."""
    error: str | None = None
    """Why the search failed or timed out; None when it did not."""
    attachment_error: str | None = None
    """Why fetching its attachments failed; its kept sections are returned all the same."""
    exception: BaseException | None = field(default=None, repr=False, compare=False)
    """The exception behind ``error``, for callers that re-raise it."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def describe(self) -> str:
        text = (
            f"{self.name}: {self.status}"
            + (f" ({self.error})" if self.error else "")
            + f", {self.returned} returned, {self.cleared_floor} cleared floor "
            f"{self.min_similarity:g}, {self.kept} kept, {self.latency_ms:.1f} ms"
        )
        if self.attachment_error:
            text += f", attachments failed ({self.attachment_error})"
        return text


class CollectionSearchError(ThresholdedError, RuntimeError):
    """A collection failed or timed out under ``fail_fast``, every collection failed, or one
    did and the others found nothing: no result can be vouched for."""

    def __init__(self, message: str, statuses: Sequence[CollectionStatus] = ()) -> None:
        super().__init__(message)
        self.statuses = tuple(statuses)


@dataclass(frozen=True)
class Found(Generic[T]):
    """What one collection's search found: its own selection, before the merge."""

    returned: int
    selection: Selection[T]
    pushdown: bool = False
    latency_ms: float = 0.0


@dataclass(frozen=True)
class Job(Generic[T]):
    """One collection's search in one call."""

    name: str
    min_similarity: float
    timeout: float | None
    search: Callable[[], Found[T]]
    """The sync search; run in the pool."""
    asearch: Callable[[], Awaitable[Found[T]]] | None = None
    """An async search, for clients that have a working one; else ``search`` in the pool."""


@dataclass(frozen=True)
class Outcome(Generic[T]):
    name: str
    status: Status
    latency_ms: float
    min_similarity: float
    found: Found[T] | None = None
    error: BaseException | None = None


def timed(search: Callable[[], Found[T]]) -> Callable[[], Found[T]]:
    """``search`` with its own latency recorded on what it found."""

    def run() -> Found[T]:
        start = time.perf_counter()
        found = search()
        return replace(found, latency_ms=1000 * (time.perf_counter() - start))

    return run


def atimed(asearch: Callable[[], Awaitable[Found[T]]]) -> Callable[[], Awaitable[Found[T]]]:
    async def run() -> Found[T]:
        start = time.perf_counter()
        found = await asearch()
        return replace(found, latency_ms=1000 * (time.perf_counter() - start))

    return run


class ClosedByWith:
    """A multi-collection retriever in a ``with`` block: the end of the block calls its
    ``close()``, which shuts its threads down (a later call starts them again)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()  # type: ignore[attr-defined]


class FloorsInForce:
    """A multi-collection retriever's floors and gate in force, read off a call planned under
    its own settings (its ``_configured()``, a ``thresholded.engine.Call``)."""

    @property
    def floors(self) -> dict[str, float]:
        """Each collection's floor in force."""
        return self._configured().floors  # type: ignore[attr-defined]

    @property
    def gates(self) -> dict[str, float | None]:
        """Each collection's own answer gate in force (its spec's policy or profile), which
        empties its candidates; None: off. ``min_top_similarity`` is the merged result's."""
        return self._configured().gates  # type: ignore[attr-defined]

    @property
    def min_similarity(self) -> float:
        """The lowest floor in force, as a report's ``min_similarity`` (see ``floors``)."""
        return self._configured().min_similarity  # type: ignore[attr-defined]

    @property
    def min_top_similarity(self) -> float | None:
        """The answer gate in force on the merged result; None or 0: off."""
        return self._configured().min_top_similarity  # type: ignore[attr-defined]


class WorkerPool(Guarded, Executor):
    """A multi-collection retriever's thread pool: its threads are started at its first task,
    and again at the first task after ``shutdown``, so a retriever that was closed
    (``close()``, the end of its ``with`` block) searches again when it is called."""

    _not_copied: ClassVar = {"_pool": lambda: None}  # a copy starts threads of its own

    def __init__(self, max_workers: int, thread_name_prefix: str = "multi-collection") -> None:
        self._max_workers = max_workers
        self._prefix = thread_name_prefix
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._max_workers, thread_name_prefix=self._prefix)
            return self._pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Shut the threads down; tasks still running finish in the background unless
        ``wait``."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=wait, cancel_futures=cancel_futures)


class WorkerPools(Guarded):
    """A retriever's thread pools, one per size (``max_workers``), each made at its first use.

    A copy of the retriever (``model_copy``, a call configured by its config) shares them,
    so its calls share the threads and ``close()`` reaches them; a deep copy gets pools of
    its own.
    """

    _not_copied: ClassVar = {"_pools": dict}

    def __init__(self) -> None:
        self._pools: dict[int, WorkerPool] = {}
        self._lock = threading.Lock()  # held while a pool is made: first calls share one

    def of_size(self, size: int) -> WorkerPool:
        with self._lock:
            if size not in self._pools:
                self._pools[size] = WorkerPool(size)
            return self._pools[size]

    def shutdown(self) -> None:
        """Shut every pool down, cancelling the searches still waiting for a thread."""
        with self._lock:
            pools = list(self._pools.values())
        for pool in pools:
            pool.shutdown(wait=False, cancel_futures=True)


# Running the searches --------------------------------------------------------------------
@dataclass(frozen=True)
class _Task(Generic[R]):
    """A call run in the pool. The pool is shared by the retriever's concurrent calls, so a
    call may wait in its queue before it starts: that wait is not the collection's (a single
    retriever's search starts at once), and its deadline runs from its start. The wait is
    bounded by the same timeout: a pool whose threads all hang on a frozen store times the
    calls behind them out, rather than keep them waiting."""

    future: Future[R]
    started: Future[float]
    queued: float
    settled: Future[None]
    """Done once ``future`` is, cancelled included: ``concurrent.futures.wait`` never counts
    a future the pool's shutdown cancelled as done, so a call waits on this instead."""

    def deadline(self, timeout: float | None) -> float | None:
        """When it times out, queued or running; None: no timeout."""
        if timeout is None:
            return None
        if self.started.done() and not self.started.cancelled():
            return self.started.result() + timeout
        return self.queued + timeout

    def result(self, timeout: float | None) -> R:
        """Its result, within its deadlines; ``TimeoutError`` when one passes."""
        queued_until = self.deadline(timeout)
        if queued_until is not None and not self.started.done():
            left = max(0.0, queued_until - time.perf_counter())
            wait([self.settled, self.started], timeout=left, return_when=FIRST_COMPLETED)
        deadline = self.deadline(timeout)
        if deadline is None or self.future.done():
            return _result(self.future)
        return _result(self.future, timeout=max(0.0, deadline - time.perf_counter()))

    def cancel(self) -> None:
        """Never run it, if it has not started."""
        self.future.cancel()


def _result(future: Future[R], timeout: float | None = None) -> R:
    """The future's result; cancelled by the pool's shutdown (the call never cancels a task
    whose result it then reads), an error naming the close."""
    try:
        return future.result(timeout=timeout)
    except CancelledError:
        raise closed_during_call() from None


def closed_during_call() -> RetrieverClosedError:
    return RetrieverClosedError(
        "the retriever was closed (close(), or the end of its with block) during this call, "
        "and the searches still waiting for a thread were cancelled: call it again, a closed "
        "retriever starts its threads again"
    )


def _submit(pool: Executor, fn: Callable[[], R]) -> _Task[R]:
    started: Future[float] = Future()

    def run() -> R:
        if started.set_running_or_notify_cancel():
            started.set_result(time.perf_counter())
        return fn()

    future = pool.submit(run)
    settled: Future[None] = Future()
    future.add_done_callback(lambda _: settled.set_result(None))
    return _Task(future, started, time.perf_counter(), settled)


class DeadlinePassed(TimeoutError):
    """A call's deadline passed: not a ``TimeoutError`` the call raised itself (an embedding
    client's read timeout, say), which is its failure, as in a sync fan-out."""


async def within_deadline(awaitable: Awaitable[R], timeout: float | None) -> R:
    """``awaitable`` awaited within ``timeout``; :class:`DeadlinePassed` when it passes, any
    ``TimeoutError`` of its own raised as it is."""
    deadline = asyncio.timeout(timeout)
    try:
        async with deadline:
            return await awaitable
    except TimeoutError:
        if deadline.expired():
            raise DeadlinePassed from None
        raise


async def arun_in(pool: Executor, fn: Callable[[], R], timeout: float | None) -> R:
    """``fn()`` run in the pool, awaited within ``timeout`` from when it starts running there,
    after a wait for a thread that is bounded by the same timeout (see ``_Task``);
    :class:`DeadlinePassed` when either passes."""
    loop = asyncio.get_running_loop()
    task = _submit(pool, fn)
    result = asyncio.wrap_future(task.future, loop=loop)
    started = asyncio.wrap_future(task.started, loop=loop)
    try:
        done, _ = await asyncio.wait(
            {result, started}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
    except BaseException:
        result.cancel()  # cancelled while it waited in the queue: it never runs
        raise
    finally:
        started.cancel()  # nothing left to hear from it, whenever the loop closes
    if not done:  # no thread was free: timed out as a sync call's wait times out
        result.cancel()
        raise DeadlinePassed
    try:
        return await within_deadline(result, timeout)
    except asyncio.CancelledError:
        if task.future.cancelled() and not _being_cancelled():
            raise closed_during_call() from None
        raise


def _being_cancelled() -> bool:
    """Whether the running task itself is being cancelled (not a future it awaits)."""
    current = asyncio.current_task()
    return current is not None and current.cancelling() > 0


def fan_out(jobs: Sequence[Job[T]], pool: Executor, *, fail_fast: bool) -> list[Outcome[T]]:
    """Run every job in ``pool``; wait for each until its own deadline, which runs from when
    it starts in the pool (see ``_Task``); outcomes in job order."""
    start = time.perf_counter()
    by_name = {j.name: j for j in jobs}
    pending: dict[str, _Task[Found[T]]] = {j.name: _submit(pool, timed(j.search)) for j in jobs}
    outcomes: dict[str, Outcome[T]] = {}
    while pending:
        now = time.perf_counter()
        for name, task in list(pending.items()):
            job = by_name[name]
            deadline = task.deadline(job.timeout)
            if task.future.done():
                outcomes[name] = _outcome(job, task.future, start)
            elif deadline is not None and now >= deadline:
                task.cancel()
                outcomes[name] = timed_out(job)
            else:
                continue
            del pending[name]
            _raise_if_fail_fast(outcomes[name], fail_fast, [t.future for t in pending.values()])
        if not pending:
            break
        due = [d for n, t in pending.items() if (d := t.deadline(by_name[n].timeout)) is not None]
        waiting = [t.settled for t in pending.values()]
        waiting += [t.started for t in pending.values() if not t.started.done()]
        timeout = max(0.0, min(due) - now) if due else None
        wait(waiting, timeout=timeout, return_when=FIRST_COMPLETED)
    return [outcomes[j.name] for j in jobs]


async def afan_out(jobs: Sequence[Job[T]], pool: Executor, *, fail_fast: bool) -> list[Outcome[T]]:
    """Async ``fan_out``: awaits ``asearch`` where given, else ``search`` in the pool."""
    start = time.perf_counter()

    async def one(job: Job[T]) -> Outcome[T]:
        try:
            if job.asearch is not None:
                found = await within_deadline(atimed(job.asearch)(), job.timeout)
            else:
                found = await arun_in(pool, timed(job.search), job.timeout)
        except DeadlinePassed:
            return timed_out(job)
        except RetrieverClosedError:
            raise
        except Exception as exc:
            return _failed(job, exc, 1000 * (time.perf_counter() - start))
        return _ok(job, found)

    tasks = [asyncio.ensure_future(one(job)) for job in jobs]
    outcomes: dict[str, Outcome[T]] = {}
    try:
        for next_done in asyncio.as_completed(tasks):
            outcome = await next_done
            outcomes[outcome.name] = outcome
            if fail_fast and outcome.status != "ok":
                raise fail_fast_error(outcome)
    finally:
        for task in tasks:
            task.cancel()
    return [outcomes[j.name] for j in jobs]


def call_each(
    calls: dict[str, tuple[Callable[[], R], float | None]], pool: Executor
) -> dict[str, R | BaseException]:
    """Run named calls in the pool, each within its timeout from when it starts there (see
    ``_Task``); a failure is returned, not raised."""
    tasks = {name: (_submit(pool, fn), timeout) for name, (fn, timeout) in calls.items()}
    results: dict[str, R | BaseException] = {}
    for name, (task, timeout) in tasks.items():
        try:
            results[name] = task.result(timeout)
        except RetrieverClosedError:
            raise
        except Exception as exc:
            task.cancel()
            results[name] = exc
    return results


async def acall_each(
    calls: dict[str, tuple[Callable[[], Awaitable[R]], float | None]],
) -> dict[str, R | BaseException]:
    """Async ``call_each``: the awaitables run at once, each within its timeout."""
    names = list(calls)
    results = await asyncio.gather(
        *(asyncio.wait_for(fn(), timeout) for fn, timeout in calls.values()),
        return_exceptions=True,
    )
    closed = [r for r in results if isinstance(r, RetrieverClosedError)]
    if closed:
        raise closed[0]
    return dict(zip(names, results, strict=True))


def _outcome(job: Job[T], future: Future[Found[T]], start: float) -> Outcome[T]:
    try:
        return _ok(job, _result(future))
    except RetrieverClosedError:
        raise
    except Exception as exc:
        return _failed(job, exc, 1000 * (time.perf_counter() - start))


def _ok(job: Job[T], found: Found[T]) -> Outcome[T]:
    return Outcome(job.name, "ok", found.latency_ms, job.min_similarity, found=found)


def _failed(job: Job[T], exc: BaseException, latency_ms: float) -> Outcome[T]:
    return Outcome(job.name, "failed", latency_ms, job.min_similarity, error=exc)


def timed_out(job: Job[T]) -> Outcome[T]:
    timeout = job.timeout or 0.0
    error = TimeoutError(f"no answer within {timeout:g} s")
    return Outcome(job.name, "timeout", 1000 * timeout, job.min_similarity, error=error)


def _raise_if_fail_fast(outcome: Outcome[T], fail_fast: bool, pending: Iterable[Future]) -> None:
    if fail_fast and outcome.status != "ok":
        for future in pending:
            future.cancel()
        raise fail_fast_error(outcome)


def fail_fast_error(outcome: Outcome[Any]) -> CollectionSearchError:
    status = status_of(outcome)
    what = "timed out" if status.status == "timeout" else "failed"
    error = CollectionSearchError(
        f"collection {status.name!r} {what} (fail_fast=True): {status.error}", [status]
    )
    error.__cause__ = outcome.error
    return error


# The merge ---------------------------------------------------------------------------------
def merge(outcomes: Sequence[Outcome[T]], policy: RetrievalPolicy) -> Selection[T]:
    """Every collection's survivors under the global policy: the cap, the budget, ``top_k``.

    The floors (and each collection's gate) were applied per collection, so the merge
    has no floor of its own; its ``min_similarity`` is the lowest floor among the
    collections that answered. The global gate judges the best cosine of them all.
    Candidates are told apart by their collection, so ids need not be unique. An empty
    result while a collection failed is a ``CollectionSearchError``, as when every one
    failed: it cannot be vouched for.
    """
    answered = [o for o in outcomes if o.found is not None]
    if not answered:
        described = [status_of(o) for o in outcomes]
        raise CollectionSearchError(
            "every collection failed: "
            + "; ".join(s.describe() for s in described)
            + ". Nothing was searched, so an empty result would be wrong.",
            described,
        )
    own = [o.found.selection for o in answered if o.found is not None]
    survivors = [c for selection in own for c in selection.kept]
    bests = [s.best_similarity for s in own if s.best_similarity is not None]
    merged = select(survivors, policy, 0.0, best=max(bests) if bests else None)
    if not merged.kept:
        _refuse_unsure_empty(outcomes, answered)
    return Selection(
        kept=merged.kept,
        attached=merged.attached,
        dropped=(*(d for selection in own for d in selection.dropped), *merged.dropped),
        min_similarity=min(o.min_similarity for o in answered),
        passed_through=tuple(sorted({k for s in own for k in s.passed_through})),
        best_similarity=merged.best_similarity,
        gate=merged.gate,
        outside_filters=sum(s.outside_filters for s in own),
    )


def _refuse_unsure_empty(outcomes: Sequence[Outcome[T]], answered: Sequence[Outcome[T]]) -> None:
    """An empty result says "I don't know" for every collection: not when one was not
    searched, whose sections might have cleared the floor and the gate."""
    failed = [status_of(o) for o in outcomes if o.found is None]
    if not failed:
        return
    searched = ", ".join(repr(o.name) for o in answered)
    missed = ", ".join(
        f"{s.name!r} {'timed out' if s.status == 'timeout' else 'failed'}" for s in failed
    )
    raise CollectionSearchError(
        f"nothing cleared the policy in {searched}, but {missed} "
        f"({'; '.join(s.describe() for s in failed)}): an empty result would say that "
        "nothing answers the question, and the collections not searched may. Retry, or "
        "search the others without them",
        failed,
    )


def statuses(
    outcomes: Sequence[Outcome[T]],
    selection: Selection[T],
    attachment_errors: dict[str, BaseException] | None = None,
) -> tuple[CollectionStatus, ...]:
    """Each collection's status in a call, with what it contributed to the final result."""
    kept = _count(c.collection for c in selection.kept)
    attached = _count(c.collection for c in selection.attached)
    errors = attachment_errors or {}
    return tuple(
        status_of(o, kept.get(o.name, 0), attached.get(o.name, 0), errors.get(o.name))
        for o in outcomes
    )


def _count(names: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return counts


def status_of(
    outcome: Outcome[Any],
    kept: int = 0,
    attached: int = 0,
    attachment_error: BaseException | None = None,
) -> CollectionStatus:
    found = outcome.found
    return CollectionStatus(
        name=outcome.name,
        status=outcome.status,
        min_similarity=outcome.min_similarity,
        latency_ms=outcome.latency_ms,
        returned=found.returned if found else 0,
        cleared_floor=len(found.selection.kept) if found else 0,
        kept=kept,
        attached=attached,
        pushdown=found.pushdown if found else False,
        error=None if outcome.error is None else describe_error(outcome.error),
        attachment_error=None if attachment_error is None else describe_error(attachment_error),
        exception=outcome.error,
    )


def describe_error(error: BaseException) -> str:
    text = str(error).strip()
    text = text.splitlines()[0] if text else ""
    if len(text) > 200:
        text = text[:199] + "…"
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def collection_list(collections: Any) -> list[Any]:
    """A multi-collection retriever's ``collections`` as a list: a list or a tuple of them,
    a generator (any iterator) or a dict's ``values()``. One collection given alone would be
    read item by item (a spec or a store as its fields, a dict as its keys, a string as its
    characters), and refused as no collection."""
    if isinstance(collections, list | tuple | Iterator | ValuesView):
        return list(collections)
    raise TypeError(
        f"collections takes a list of collections, got {type(collections).__name__}: write "
        "[collection] for one, or several in one list"
    )


def check_unique_names(names: Sequence[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(
                f"two collections are named {name!r} (the same collection name in two "
                "databases or URIs?): give each a distinct name, "
                "CollectionSpec(store, name=...)"
            )
        seen.add(name)


def check_one_model(
    collections: Sequence[Any],
    policy: RetrievalPolicy,
    *,
    embeddings_model: str | None = None,
) -> None:
    """Refuse collections calibrated for, or embedded with, different models.

    The question is embedded once, with one model, and one model's cosine floor means
    nothing for another: every policy, embedding model and vector dimension that the
    collections (and the global policy, and ``embeddings_model``) name must agree.
    """
    dims = {c.name: c.backend.dimension for c in collections if c.backend.dimension}
    if len(set(dims.values())) > 1:
        shown = ", ".join(f"{name}: {dim}" for name, dim in dims.items())
        raise ModelMismatchError(
            f"the collections hold vectors of different dimensions ({shown}): they were "
            "embedded with different models, and one question vector cannot search them all"
        )
    declared: list[tuple[str, ModelId]] = []
    for c in collections:
        if c.policy is not None and c.policy.embedding_model:
            declared.append((f"collection {c.name!r}", ModelId.parse(c.policy.embedding_model)))
        if c.model is not None and not c.allow_model_mismatch:
            declared.append((f"the embeddings of collection {c.name!r}", ModelId.parse(c.model)))
    if policy.embedding_model:
        declared.append(("the global policy", ModelId.parse(policy.embedding_model)))
    if embeddings_model:
        declared.append(("embeddings=", ModelId.parse(embeddings_model)))
    for what, model in declared[1:]:
        first_what, first = declared[0]
        if not first.same_model(model):
            raise ModelMismatchError(
                f"{first_what} uses the embedding model {first}, but {what} {model}: the "
                "question is embedded once, with one model, and one model's cosine floor "
                "means nothing for another. Search them with separate retrievers."
            )
    for what, model in declared:
        for name, dim in dims.items():
            if model.dimension is not None and model.dimension != dim:
                raise ModelMismatchError(
                    f"{what} is calibrated for {model}, but collection {name!r} holds vectors "
                    f"of {dim} dimensions"
                )
