"""Every call of a wrapped Milvus client carries a deadline; an explicit one still wins."""

from __future__ import annotations

import asyncio
import math

import pytest

from thresholded.milvus_timeout import TimeoutClient, check_timeout, with_timeout


class FakeClient:
    """Shaped like MilvusClient: some methods take ``timeout``, some do not."""

    name = "fake"

    def search(self, collection_name: str, data: list, timeout: float | None = None, **kw):
        return timeout

    def close(self) -> str:
        return "closed"

    async def query(self, collection_name: str, timeout: float | None = None):
        return timeout

    def list_collections(self, **kwargs):
        return kwargs.get("timeout")


def test_calls_get_the_default_deadline():
    client = TimeoutClient(FakeClient(), 2.5)
    assert client.search("kb", [[1.0]]) == 2.5
    assert client.search("kb", [[1.0]], timeout=None) == 2.5
    assert asyncio.run(client.query("kb")) == 2.5


def test_methods_that_pass_their_kwargs_to_the_server_get_the_deadline_too():
    """pymilvus' list_collections(**kwargs) hands a timeout on to the server call."""
    assert TimeoutClient(FakeClient(), 2.5).list_collections() == 2.5
    assert TimeoutClient(FakeClient(), 2.5).list_collections(timeout=0.5) == 0.5


def test_an_explicit_deadline_wins():
    assert TimeoutClient(FakeClient(), 2.5).search("kb", [], timeout=0.5) == 0.5


def test_methods_without_a_timeout_and_attributes_pass_through():
    client = TimeoutClient(FakeClient(), 1)
    assert client.close() == "closed"
    assert client.name == "fake"
    assert isinstance(client.wrapped, FakeClient)


def test_no_timeout_leaves_the_client_as_it_is():
    raw = FakeClient()
    assert with_timeout(raw, None) is raw
    assert with_timeout(None, 3) is None
    assert with_timeout(raw, 3).search("kb", []) == 3


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, "5", True])
def test_bad_timeouts_are_refused(bad):
    with pytest.raises((ValueError, TypeError), match="timeout must be"):
        check_timeout(bad)


def test_untimed_methods_keep_no_deadline():
    client = TimeoutClient(FakeClient(), 2.5, untimed={"search"})
    assert client.search("kb", [[1.0]]) is None
    assert asyncio.run(client.query("kb")) == 2.5
    assert with_timeout(FakeClient(), 2.5, untimed=["query"]).search("kb", []) == 2.5
