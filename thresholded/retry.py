"""Bounded retries for searches that meet a server which is down, restarting or frozen.

A vector store call either answers, fails for good (a bad filter, a missing
field: trying again cannot help, so it is raised at once), or fails for a
reason that may pass (connection refused, deadline exceeded, server
unavailable). Only the last kind is tried again, at most ``max_retries`` times,
with a doubling wait in between. When the attempts run out, the caller gets one
:class:`~thresholded.errors.SearchUnavailableError` that says what was
searched, how many attempts were made and how long they took, chained to the
engine's own error.

Retries never make a call wait on a frozen server: that is the per-call
timeout's job, which belongs to the client (e.g. ``milvus_store(timeout=...)``).
A query therefore takes at most ``(max_retries + 1) * timeout`` plus the waits.
Within a deadline (:func:`retry_deadline`: a collection's timeout), no wait is begun
that would end past it: the attempts made so far are a ``SearchUnavailableError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from thresholded.errors import SearchUnavailableError

logger = logging.getLogger(__name__)

T = TypeVar("T")

_TRANSIENT_STATUS = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED"})
"""gRPC status codes of a server that is unreachable, restarting or too slow."""

_CONNECT_FAILED = 2
"""pymilvus' code for a connection that could not be made (Milvus: "service unavailable")."""
_RATE_LIMITED = 8
"""Milvus' code for a request refused by its rate limiter."""
_CHANNEL_NOT_AVAILABLE = 503
"""Milvus' code for a collection no query node serves at the moment ("channel not available").

A server answers it while it recovers from a stall or a restart, until a query node
serves the collection again; each attempt still has its deadline.
"""
_TRANSIENT_CODES = frozenset({_CONNECT_FAILED, _RATE_LIMITED, _CHANNEL_NOT_AVAILABLE})

_TRANSIENT_COMPATIBLE = frozenset(
    {"ConnectFailed", "RateLimit", "NotReadyServe", "NoReplicaAvailable"}
)
"""Milvus' older ``ErrorCode`` names for the same conditions (a server that is not ready yet)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How often a transient failure is tried again, and how long to wait in between.

    The first wait is ``backoff`` seconds; each next one doubles, up to ``max_backoff``.
    """

    max_retries: int = 0
    """How many times a failed attempt is tried again (0: never)."""
    backoff: float = 0.2
    """Seconds before the first retry."""
    max_backoff: float = 2.0
    """The longest wait between two attempts, in seconds."""

    def __post_init__(self) -> None:
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int):
            raise TypeError(f"max_retries must be an int, got {self.max_retries!r}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, got {self.max_retries}")
        check_seconds("backoff", self.backoff)
        check_seconds("max_backoff", self.max_backoff)

    @classmethod
    def of(cls, *, max_retries: int, retry_backoff: float) -> RetryPolicy:
        """A retriever's ``max_retries`` and ``retry_backoff``; a bad one is an error naming it."""
        check_seconds("retry_backoff", retry_backoff)
        return cls(max_retries=max_retries, backoff=retry_backoff)

    def waits(self) -> Iterator[float]:
        """The wait before each retry, in order."""
        wait = self.backoff
        for _ in range(self.max_retries):
            yield min(wait, self.max_backoff)
            wait *= 2


def check_seconds(name: str, value: Any) -> None:
    """A wait is a finite number of seconds, 0 or more: a bool or a string is none (``True``
    was read as one second)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds, got {value!r}")
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")


def is_transient(error: BaseException) -> bool:
    """True for failures that may pass: the server is unreachable, restarting or too slow.

    Judged by type and status code only, on the error and the errors it was raised
    from: Python's ``TimeoutError`` and ``ConnectionError``; pymilvus'
    ``ConnectError`` and ``MilvusUnavailableException``; a gRPC status of
    UNAVAILABLE or DEADLINE_EXCEEDED, on a ``grpc.RpcError`` or carried by a
    ``MilvusException``; Milvus' codes for a failed connection, a rate limit, a
    server not ready yet and a collection no query node serves while it recovers.
    Never by the message: its text may quote a filter value
    (``"connection refused"``) of a request that will fail however often it is sent.
    """
    return any(_is_transient_itself(e) for e in _chain(error))


def _chain(error: BaseException) -> Iterator[BaseException]:
    """The error, then each error it was raised from or while handling, each once."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _is_transient_itself(error: BaseException) -> bool:
    if isinstance(error, (TimeoutError, ConnectionError, *_transient_client_errors())):
        return True
    code = getattr(error, "code", None)
    if callable(code):  # a grpc.RpcError: code() is its status
        return _status_name(error) in _TRANSIENT_STATUS
    if _is_milvus_exception(error):
        return _is_transient_milvus_code(code, getattr(error, "compatible_code", None))
    return False


def _is_transient_milvus_code(code: object, compatible_code: object) -> bool:
    """A ``MilvusException``'s code: a gRPC status (wrapped RPC error) or a Milvus code."""
    if getattr(code, "name", None) in _TRANSIENT_STATUS:  # a grpc.StatusCode
        return True
    if isinstance(code, int) and code in _TRANSIENT_CODES:
        return True
    return _compatible_code_name(compatible_code) in _TRANSIENT_COMPATIBLE


def _status_name(error: BaseException) -> str | None:
    try:
        return getattr(error.code(), "name", None)  # type: ignore[attr-defined]
    except Exception:  # a code() that needs more than a finished call: no status to read
        return None


def _transient_client_errors() -> tuple[type[BaseException], ...]:
    """Client error classes that mean "no connection": pymilvus' and gRPC's, where loaded."""
    return (
        *_loaded("pymilvus.exceptions", "ConnectError", "MilvusUnavailableException"),
        *_loaded("grpc", "FutureTimeoutError"),
    )


def _is_milvus_exception(error: BaseException) -> bool:
    return isinstance(error, _loaded("pymilvus.exceptions", "MilvusException"))


def _loaded(module: str, *names: str) -> tuple[type[BaseException], ...]:
    """The classes ``names`` of ``module`` once it is imported, else none: an error cannot be
    of a class not loaded, and importing a client (pymilvus takes half a second, longer on a
    busy machine) to judge a plain ``ConnectionError`` would spend a retry's deadline on it."""
    found = sys.modules.get(module)
    classes = (getattr(found, name, None) for name in names)
    return tuple(c for c in classes if isinstance(c, type))


def _compatible_code_name(value: object) -> str | None:
    """The ``common_pb2.ErrorCode`` name of a ``MilvusException.compatible_code``."""
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    try:
        from pymilvus.grpc_gen import common_pb2

        return common_pb2.ErrorCode.Name(value)
    except (ImportError, ValueError):
        return None


def call_with_retries(
    fn: Callable[[], T],
    policy: RetryPolicy,
    *,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``fn()``, tried again after transient failures as ``policy`` allows.

    ``what`` names the thing searched in the error (e.g. "collection 'kb' at
    http://127.0.0.1:19530").
    """
    start = time.monotonic()
    waits = policy.waits()
    attempt = 1
    while True:
        try:
            return fn()
        except Exception as error:
            wait = _next_wait(error, waits)
            if wait is None:
                _give_up(error, what, attempt, start)
            _log_retry(what, attempt, wait, error)
            sleep(wait)
            attempt += 1


async def acall_with_retries(
    fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    what: str,
    attempt_timeout: float | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """Async ``call_with_retries``: ``fn()`` returns a fresh awaitable per attempt.

    ``attempt_timeout`` cancels an attempt that takes longer (a ``TimeoutError``,
    so transient): an async client may spend longer than its call deadline on
    connecting first.
    """
    start = time.monotonic()
    waits = policy.waits()
    attempt = 1
    while True:
        try:
            return await asyncio.wait_for(fn(), attempt_timeout)
        except Exception as error:
            wait = _next_wait(error, waits)
            if wait is None:
                _give_up(error, what, attempt, start)
            _log_retry(what, attempt, wait, error)
            await sleep(wait)
            attempt += 1


_DEADLINE: ContextVar[float | None] = ContextVar("thresholded_retry_deadline", default=None)
"""When the retries of the calls made within :func:`retry_deadline` stop (``time.monotonic``)."""


@contextlib.contextmanager
def retry_deadline(timeout: float | None, *, outer: float | None = None) -> Iterator[None]:
    """The calls made within it are tried again only while a retry can still begin within
    ``timeout`` seconds from now (a collection's timeout): past it, the caller has stopped
    waiting, and a thread retrying on would only hold a thread of the pool. None: no limit.
    Within another (a search made by a search: an ensemble member that is a retriever of
    its own), the earlier of the two holds; ``outer`` is the other one's deadline
    (:func:`current_deadline`) carried to a thread of a pool, which does not see the
    caller's context."""
    deadlines = [d for d in (_DEADLINE.get(), outer) if d is not None]
    if timeout is not None:
        deadlines.append(time.monotonic() + timeout)
    if not deadlines:
        yield
        return
    token = _DEADLINE.set(min(deadlines))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def current_deadline() -> float | None:
    """The deadline the calls made here retry within (``time.monotonic``; None: none), for a
    search run for them in a thread of a pool to keep (:func:`retry_deadline`'s ``outer``)."""
    return _DEADLINE.get()


def _next_wait(error: Exception, waits: Iterator[float]) -> float | None:
    if not is_transient(error):
        return None
    wait = next(waits, None)
    deadline = _DEADLINE.get()
    if wait is not None and deadline is not None and time.monotonic() + wait >= deadline:
        return None  # the retry would begin past the deadline
    return wait


def _give_up(error: Exception, what: str, attempts: int, start: float) -> None:
    """Raise: a permanent error as it is; a transient one as SearchUnavailableError."""
    if not is_transient(error):
        raise error
    elapsed = time.monotonic() - start
    tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
    raise SearchUnavailableError(
        f"{what} did not answer ({tries} in {elapsed:.1f} s): {describe_error(error)}",
        attempts=attempts,
    ) from error


def _log_retry(what: str, attempt: int, wait: float, error: Exception) -> None:
    logger.warning(
        "%s failed (attempt %d: %s); trying again in %.2f s",
        what,
        attempt,
        describe_error(error),
        wait,
    )


def describe_error(error: BaseException) -> str:
    """One readable line: a gRPC error's status and details, else the message's first line.

    For messages only: whether an error may pass is :func:`is_transient`'s to judge.
    """
    code, details = getattr(error, "code", None), getattr(error, "details", None)
    if callable(code) and callable(details):
        try:
            return f"{code().name}: {details()}"[:300]
        except Exception:  # fall back to the text
            pass
    lines = str(error).strip().splitlines()
    return lines[0][:300] if lines else type(error).__name__
