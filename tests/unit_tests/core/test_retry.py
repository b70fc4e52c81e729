"""Bounded retries: only transient failures are tried again, and never more than configured."""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys

import grpc
import pytest
from grpc._channel import _InactiveRpcError, _RPCState
from pymilvus.exceptions import ConnectError, MilvusException, MilvusUnavailableException
from pymilvus.grpc_gen import common_pb2

from thresholded.errors import SearchUnavailableError
from thresholded.retry import (
    RetryPolicy,
    acall_with_retries,
    call_with_retries,
    is_transient,
    retry_deadline,
)


class Flaky:
    """Fails with ``error`` for the first ``failures`` calls, then answers ``"ok"``."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures, self.error, self.calls = failures, error, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "ok"

    async def acall(self) -> str:
        return self()


class FakeStatus:
    def __init__(self, name: str) -> None:
        self.name = name


class FakeRpcError(Exception):
    """Shaped like grpc.RpcError: ``code()`` and ``details()``."""

    def __init__(self, code: str, details: str = "") -> None:
        super().__init__(f"<_InactiveRpcError of RPC that terminated with:\n\tstatus = {code}")
        self._code, self._details = code, details

    def code(self) -> FakeStatus:
        return FakeStatus(self._code)

    def details(self) -> str:
        return self._details


def rpc_error(status: grpc.StatusCode, details: str = "") -> grpc.RpcError:
    """A finished gRPC call's error, as pymilvus receives it."""
    state = _RPCState((), (), (), status, details)
    return _InactiveRpcError(state)


def wrapped(outer: Exception, inner: BaseException) -> Exception:
    """``outer`` raised from ``inner``, as pymilvus wraps the errors it retried."""
    try:
        raise outer from inner
    except Exception as error:
        return error


@pytest.mark.parametrize(
    "error",
    [
        ConnectionError("refused"),
        TimeoutError(),
        FakeRpcError("UNAVAILABLE"),
        FakeRpcError("DEADLINE_EXCEEDED", "Deadline Exceeded"),
        rpc_error(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses"),
        rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"),
        MilvusException(code=2, message="Fail connecting to server on 127.0.0.1:19530"),
        wrapped(
            MilvusException(grpc.StatusCode.UNAVAILABLE, "[search] Retry timeout: 1.5s"),
            rpc_error(grpc.StatusCode.UNAVAILABLE),
        ),
        MilvusException(grpc.StatusCode.UNAVAILABLE, "[search] Retry timeout: 1.5s"),
        wrapped(MilvusException(message="[search] Retry timeout: 1.5s"), TimeoutError()),
        MilvusException(code=8, message="rate limit exceeded"),
        MilvusException(code=1, message="not ready", compatible_code=common_pb2.NotReadyServe),
        MilvusException(
            code=503,
            message="fail to search on QueryNode 1: channel not available[channel=dml_0]",
            compatible_code=common_pb2.NoReplicaAvailable,
        ),
        MilvusException(code=503, message="channel not available"),
        ConnectError(message="connect failed"),
        MilvusUnavailableException(message="server unavailable"),
        grpc.FutureTimeoutError(),
    ],
    ids=[
        "connection",
        "timeout",
        "fake-unavailable",
        "fake-deadline",
        "grpc-unavailable",
        "grpc-deadline",
        "pymilvus-connect-failed",
        "pymilvus-retry-timeout-chained",
        "pymilvus-grpc-status-code",
        "pymilvus-async-timeout",
        "milvus-rate-limit",
        "milvus-not-ready",
        "milvus-no-replica-while-recovering",
        "milvus-channel-not-available",
        "pymilvus-connect-error",
        "pymilvus-unavailable",
        "grpc-future-timeout",
    ],
)
def test_unreachable_and_slow_servers_are_transient(error):
    assert is_transient(error)


@pytest.mark.parametrize(
    "error",
    [
        ValueError("bad filter expression"),
        KeyError("embedding"),
        FakeRpcError("INVALID_ARGUMENT", "field doc_type does not exist"),
        RuntimeError("collection not found"),
        rpc_error(grpc.StatusCode.INVALID_ARGUMENT, "connection refused"),
        MilvusException(code=1100, message='Invalid expr: (doc_type == ["connection refused"])'),
        MilvusException(message="Unexpected error, message=<Event loop is closed>"),
        MilvusException(code=100, message="collection not found[collection=server unavailable]"),
        RuntimeError("Fail connecting to server on 127.0.0.1:19530, server unavailable"),
        ValueError("deadline exceeded; socket closed; failed to connect; retry timeout"),
    ],
    ids=[
        "value",
        "key",
        "invalid-argument",
        "not-found",
        "grpc-invalid-argument-quoting-a-transient-word",
        "bad-filter-quoting-connection-refused",
        "pymilvus-unexpected-error",
        "milvus-not-found-quoting-unavailable",
        "message-only-runtime-error",
        "message-only-value-error",
    ],
)
def test_errors_that_cannot_pass_are_not_transient(error):
    """Judged by type and code: words in a message (e.g. a quoted filter value) do not count."""
    assert not is_transient(error)


def test_a_bad_filter_quoting_connection_refused_is_raised_at_once():
    error = MilvusException(
        code=1100, message='Invalid expr: (doc_type == ["connection refused"]): invalid parameter'
    )
    flaky = Flaky(5, error)
    with pytest.raises(MilvusException) as caught:
        call_with_retries(flaky, RetryPolicy(max_retries=3), what="kb", sleep=pytest.fail)
    assert caught.value is error and flaky.calls == 1


def test_a_transient_cause_makes_the_wrapper_transient():
    try:
        try:
            raise FakeRpcError("UNAVAILABLE")
        except FakeRpcError as inner:
            raise RuntimeError("search failed") from inner
    except RuntimeError as outer:
        assert is_transient(outer)


def test_waits_double_up_to_the_cap():
    assert list(RetryPolicy(max_retries=5, backoff=0.5, max_backoff=3).waits()) == [
        0.5,
        1.0,
        2.0,
        3,
        3,
    ]
    assert list(RetryPolicy().waits()) == []


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"max_retries": -1}, "max_retries must be 0 or more"),
        ({"max_retries": 1.5}, "max_retries must be an int"),
        ({"max_retries": True}, "max_retries must be an int"),
        ({"backoff": math.nan}, "backoff must be a finite number"),
        ({"backoff": -0.1}, "backoff must be a finite number"),
        ({"max_backoff": math.inf}, "max_backoff must be a finite number"),
    ],
)
def test_bad_retry_settings_are_refused(fields, message):
    with pytest.raises((ValueError, TypeError), match=message):
        RetryPolicy(**fields)


def test_transient_failures_are_retried_within_the_budget():
    flaky, waited = Flaky(2, ConnectionError("refused")), []
    result = call_with_retries(
        flaky, RetryPolicy(max_retries=2, backoff=0.1), what="collection 'kb'", sleep=waited.append
    )
    assert (result, flaky.calls, waited) == ("ok", 3, [0.1, 0.2])


def test_when_retries_run_out_the_error_names_what_and_how_often():
    flaky, waited = Flaky(10, ConnectionError("connection refused")), []
    with pytest.raises(SearchUnavailableError) as caught:
        what = "collection 'kb' at http://x"
        call_with_retries(flaky, RetryPolicy(max_retries=2), what=what, sleep=waited.append)
    error = caught.value
    assert flaky.calls == 3 and error.attempts == 3 and len(waited) == 2
    assert "collection 'kb' at http://x did not answer (3 attempts in" in str(error)
    assert "connection refused" in str(error)
    assert isinstance(error.__cause__, ConnectionError)
    assert isinstance(error, ConnectionError)  # callers that catch ConnectionError still do


def test_without_retries_a_transient_failure_is_reported_once():
    flaky = Flaky(1, FakeRpcError("DEADLINE_EXCEEDED", "Deadline Exceeded"))
    with pytest.raises(SearchUnavailableError, match=r"\(1 attempt in .*DEADLINE_EXCEEDED"):
        call_with_retries(flaky, RetryPolicy(), what="kb", sleep=pytest.fail)
    assert flaky.calls == 1


def test_a_permanent_failure_is_raised_at_once_as_it_is():
    flaky = Flaky(1, ValueError("bad filter expression"))
    with pytest.raises(ValueError, match="bad filter expression"):
        call_with_retries(flaky, RetryPolicy(max_retries=5), what="kb", sleep=pytest.fail)
    assert flaky.calls == 1


def test_async_retries_follow_the_same_rules():
    waited: list[float] = []

    async def sleep(seconds: float) -> None:
        waited.append(seconds)

    flaky = Flaky(1, TimeoutError())
    policy = RetryPolicy(max_retries=1, backoff=0.3)
    assert asyncio.run(acall_with_retries(flaky.acall, policy, what="kb", sleep=sleep)) == "ok"
    assert (flaky.calls, waited) == (2, [0.3])

    down = Flaky(5, ConnectionError("refused"))
    with pytest.raises(SearchUnavailableError, match="2 attempts"):
        asyncio.run(acall_with_retries(down.acall, policy, what="kb", sleep=sleep))
    assert down.calls == 2


def test_an_async_attempt_past_its_deadline_is_cancelled_and_counted():
    attempts: list[float] = []

    async def hangs() -> str:
        attempts.append(0.0)
        await asyncio.sleep(30)
        return "late"

    async def no_wait(seconds: float) -> None:
        return None

    policy = RetryPolicy(max_retries=1)
    with pytest.raises(SearchUnavailableError, match="2 attempts"):
        asyncio.run(
            acall_with_retries(hangs, policy, what="kb", attempt_timeout=0.05, sleep=no_wait)
        )
    assert len(attempts) == 2


def test_within_a_deadline_no_wait_is_begun_that_would_end_past_it():
    """The waits here take no time: 0.2, 0.4 and 0.8 each end within 1 s of the start, 1.6
    would not, so the fourth attempt is the last."""
    policy = RetryPolicy(max_retries=5, backoff=0.2, max_backoff=5.0)
    flaky, waited = Flaky(10, ConnectionError("refused")), []
    with retry_deadline(1.0), pytest.raises(SearchUnavailableError) as caught:
        call_with_retries(flaky, policy, what="kb", sleep=waited.append)  # waits take no time
    assert (flaky.calls, caught.value.attempts, waited) == (4, 4, [0.2, 0.4, 0.8])

    async def asleep(seconds: float) -> None:
        waited.append(seconds)

    flaky, waited = Flaky(10, ConnectionError("refused")), []
    with retry_deadline(1.0), pytest.raises(SearchUnavailableError):
        asyncio.run(acall_with_retries(flaky.acall, policy, what="kb", sleep=asleep))
    assert (flaky.calls, waited) == (4, [0.2, 0.4, 0.8])
    flaky, waited = Flaky(5, ConnectionError("refused")), []  # no deadline: every retry
    assert call_with_retries(flaky, policy, what="kb", sleep=waited.append) == "ok"
    assert waited == [0.2, 0.4, 0.8, 1.6, 3.2]


def test_a_deadline_within_another_keeps_the_earlier():
    """A search made within another's deadline (a search by a search: an ensemble member
    that is a retriever with a timeout of its own) retries only within both: its own later
    deadline replaced the outer one, and it retried on after the outer caller had stopped
    waiting, in the thread the outer search holds."""
    policy = RetryPolicy(max_retries=5, backoff=0.2, max_backoff=5.0)
    flaky, waited = Flaky(10, ConnectionError("refused")), []
    with retry_deadline(1.0), retry_deadline(60.0), pytest.raises(SearchUnavailableError):
        call_with_retries(flaky, policy, what="kb", sleep=waited.append)  # waits take no time
    assert (flaky.calls, waited) == (4, [0.2, 0.4, 0.8])
    flaky, waited = Flaky(10, ConnectionError("refused")), []
    with retry_deadline(60.0), retry_deadline(1.0), pytest.raises(SearchUnavailableError):
        call_with_retries(flaky, policy, what="kb", sleep=waited.append)
    assert (flaky.calls, waited) == (4, [0.2, 0.4, 0.8])


def test_judging_a_plain_error_loads_no_client():
    """The first ``ConnectionError`` of a process is judged without importing pymilvus or
    gRPC (half a second, seconds on a busy machine): that time would come out of the wait
    before the retry, and of the collection's deadline, and could turn a retry that answers
    into a timeout. A client's error classes are read once its module is loaded."""
    code = (
        "import sys\n"
        "from thresholded.retry import is_transient\n"
        "judged = [is_transient(ConnectionRefusedError()), is_transient(ValueError('no'))]\n"
        "loaded = sorted({'pymilvus', 'grpc'} & set(sys.modules))\n"
        "import pymilvus.exceptions as e\n"
        "judged.append(is_transient(e.MilvusUnavailableException(message='down')))\n"
        "print(judged, loaded)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[True, False, True] []"
