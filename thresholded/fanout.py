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
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Literal, TypeVar

from thresholded import metadata_keys
from thresholded.errors import ModelMismatchError, ThresholdedError
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
    """Results the search returned (with pushdown, only those above the floor)."""
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


# Running the searches --------------------------------------------------------------------
def fan_out(jobs: Sequence[Job[T]], pool: Executor, *, fail_fast: bool) -> list[Outcome[T]]:
    """Run every job in ``pool``; wait for each until its own deadline; outcomes in job order."""
    start = time.perf_counter()
    pending: dict[Future[Found[T]], Job[T]] = {pool.submit(timed(j.search)): j for j in jobs}
    deadlines = {j.name: start + j.timeout for j in jobs if j.timeout is not None}
    outcomes: dict[str, Outcome[T]] = {}
    while pending:
        now = time.perf_counter()
        for future, job in list(pending.items()):
            if job.name in deadlines and now >= deadlines[job.name]:
                future.cancel()
                del pending[future]
                outcomes[job.name] = timed_out(job)
                _raise_if_fail_fast(outcomes[job.name], fail_fast, pending)
        if not pending:
            break
        due = [deadlines[j.name] for j in pending.values() if j.name in deadlines]
        timeout = max(0.0, min(due) - now) if due else None
        done, _ = wait(list(pending), timeout=timeout, return_when=FIRST_COMPLETED)
        for future in done:
            job = pending.pop(future)
            outcomes[job.name] = _outcome(job, future, start)
            _raise_if_fail_fast(outcomes[job.name], fail_fast, pending)
    return [outcomes[j.name] for j in jobs]


async def afan_out(jobs: Sequence[Job[T]], pool: Executor, *, fail_fast: bool) -> list[Outcome[T]]:
    """Async ``fan_out``: awaits ``asearch`` where given, else ``search`` in the pool."""
    loop = asyncio.get_running_loop()
    start = time.perf_counter()

    async def one(job: Job[T]) -> Outcome[T]:
        if job.asearch is not None:
            awaitable: Any = atimed(job.asearch)()
        else:
            awaitable = asyncio.wrap_future(pool.submit(timed(job.search)), loop=loop)
        try:
            found = await asyncio.wait_for(awaitable, job.timeout)
        except TimeoutError:
            return timed_out(job)
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
    """Run named calls in the pool, each within its timeout; a failure is returned, not raised."""
    futures = {name: (pool.submit(fn), timeout) for name, (fn, timeout) in calls.items()}
    results: dict[str, R | BaseException] = {}
    for name, (future, timeout) in futures.items():
        try:
            results[name] = future.result(timeout=timeout)
        except Exception as exc:
            future.cancel()
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
    return dict(zip(names, results, strict=True))


def _outcome(job: Job[T], future: Future[Found[T]], start: float) -> Outcome[T]:
    try:
        return _ok(job, future.result())
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


def check_unique_names(names: Sequence[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(
                f"two collections are named {name!r} (the same collection name in two "
                "databases or URIs?): give each a distinct name"
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
