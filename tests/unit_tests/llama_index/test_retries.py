"""ThresholdedRetriever retries a store that is down, as configured, and then says so clearly."""

from __future__ import annotations

import asyncio
import logging
import socket
import time

import pytest
from llama_index.vector_stores.milvus import base as llama_milvus_base
from pydantic import PrivateAttr
from pymilvus import MilvusClient
from pymilvus.exceptions import MilvusException

from llama_index_thresholded import ThresholdedRetriever
from llama_index_thresholded.milvus import existing_milvus_store, milvus_store
from thresholded.errors import SearchUnavailableError
from thresholded.milvus_timeout import TimeoutClient


def flaky_store(kit, failures: int, error: Exception):
    class FlakyStore(kit.SpyStore):
        """Fails the first ``failures`` searches with ``error``, then answers."""

        _attempts: int = PrivateAttr(default=0)

        def query(self, query, **kwargs):
            self._attempts += 1
            if self._attempts <= failures:
                raise error
            return super().query(query, **kwargs)

    return FlakyStore()


def retriever_over(kit, store, **kwargs):
    sections = [kit.section("a", 0.9), kit.section("b", 0.2, axis=2)]
    index = kit.build_index(sections, kit.embedding(), store=store)
    policy = kit.policy(min_similarity=0.3)
    return ThresholdedRetriever(index, policy, metric="cosine", neighbours=0, **kwargs)


def test_a_store_that_comes_back_is_retried_and_answers(kit, caplog):
    store = flaky_store(kit, 2, ConnectionError("connection refused"))
    retriever = retriever_over(kit, store, max_retries=2, retry_backoff=0.01)
    with caplog.at_level(logging.WARNING, logger="thresholded.retry"):
        nodes = retriever.retrieve(kit.QUESTION)
    assert [n.node.node_id for n in nodes] == ["a"]
    assert store._attempts == 3
    assert sum("trying again" in r.message for r in caplog.records) == 2


def test_a_store_that_stays_down_gives_one_clear_error_after_the_configured_attempts(kit):
    store = flaky_store(kit, 100, ConnectionError("connection refused"))
    retriever = retriever_over(kit, store, max_retries=1, retry_backoff=0.01)
    with pytest.raises(SearchUnavailableError, match=r"did not answer \(2 attempts in") as caught:
        retriever.retrieve(kit.QUESTION)
    assert store._attempts == 2 and caught.value.attempts == 2
    with pytest.raises(SearchUnavailableError, match="2 attempts"):
        asyncio.run(retriever.aretrieve(kit.QUESTION))
    assert store._attempts == 4


def test_no_retries_by_default(kit):
    store = flaky_store(kit, 1, TimeoutError("deadline exceeded"))
    with pytest.raises(SearchUnavailableError, match=r"\(1 attempt in"):
        retriever_over(kit, store).retrieve(kit.QUESTION)
    assert store._attempts == 1


def test_an_error_retrying_cannot_fix_is_raised_at_once(kit):
    store = flaky_store(kit, 1, ValueError("field doc_type does not exist"))
    with pytest.raises(ValueError, match="field doc_type does not exist"):
        retriever_over(kit, store, max_retries=3, retry_backoff=0.01).retrieve(kit.QUESTION)
    assert store._attempts == 1


@pytest.mark.parametrize("bad", [{"max_retries": -1}, {"retry_backoff": float("nan")}])
def test_bad_retry_settings_are_refused(kit, bad):
    with pytest.raises(ValueError, match=r"max_retries|backoff"):
        retriever_over(kit, kit.SpyStore(), **bad)


def test_milvus_store_gives_every_call_its_timeout(kit, milvus_uri, monkeypatch):
    seen = []
    original = MilvusClient.search

    def search(client, *args, timeout=None, **kwargs):
        seen.append(timeout)
        return original(client, *args, timeout=timeout, **kwargs)

    monkeypatch.setattr(MilvusClient, "search", search)
    store = kit.milvus_store(milvus_uri, "timed", dim=kit.DIM, timeout=7.5)
    assert isinstance(store.client, TimeoutClient) and store.timeout == 7.5
    sections = [kit.section("a", 0.9), kit.section("b", 0.2, axis=2)]
    index = kit.build_index(sections, kit.embedding(), store=store)
    retriever = ThresholdedRetriever(index, kit.policy(min_similarity=0.3), neighbours=0)
    assert [n.node.node_id for n in retriever.retrieve(kit.QUESTION)] == ["a"]
    assert seen and set(seen) == {7.5}


def test_milvus_store_refuses_a_bad_timeout(kit, milvus_uri):
    with pytest.raises(ValueError, match="timeout must be a finite number of seconds above 0"):
        kit.milvus_store(milvus_uri, "timed", dim=kit.DIM, timeout=0)


def unused_local_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound for a moment, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize(
    "build",
    [
        lambda uri: milvus_store(uri, "kb", dim=8, timeout=2),
        lambda uri: existing_milvus_store(uri, "kb", timeout=2),
    ],
    ids=["milvus_store", "existing_milvus_store"],
)
def test_building_a_store_without_a_server_names_the_uri(build):
    uri = f"http://127.0.0.1:{unused_local_port()}"
    start = time.monotonic()
    with pytest.raises(SearchUnavailableError) as caught:
        build(uri)
    print(f"no server at {uri}: SearchUnavailableError after {time.monotonic() - start:.2f} s")
    message = str(caught.value)
    assert f"Milvus at {uri} did not answer" in message
    assert "collection 'kb'" in message and "deadline 2 s" in message
    assert isinstance(caught.value.__cause__, MilvusException)


def test_building_a_store_gives_its_timeout_to_connecting_and_reading(kit, milvus_uri, monkeypatch):
    """Connecting and reading the collection carry the store's deadline; creating it does not.

    Creating, indexing and loading a collection can take longer than a search's
    deadline on a busy server.
    """
    import pymilvus

    connects, seen = [], {"list_collections": [], "create_collection": []}
    client_class = pymilvus.MilvusClient

    def connect(*args, **kwargs):
        connects.append(kwargs.get("timeout"))
        return client_class(*args, **kwargs)

    def spy(name):
        original = getattr(MilvusClient, name)

        def call(client, *args, **kwargs):
            seen[name].append(kwargs.get("timeout"))
            return original(client, *args, **kwargs)

        return call

    monkeypatch.setattr(llama_milvus_base, "MilvusClient", connect)
    for name in seen:
        monkeypatch.setattr(MilvusClient, name, spy(name))
    kit.milvus_store(milvus_uri, "deadline", dim=kit.DIM, timeout=3.5)
    assert connects == [3.5]
    assert seen["list_collections"] and set(seen["list_collections"]) == {3.5}
    assert seen["create_collection"] == [None]


def test_a_fan_out_retries_a_collection_that_comes_back(kit):
    from llama_index_thresholded import CollectionSpec, MultiCollectionRetriever

    steady = kit.build_index([kit.section("s1", 0.8)], kit.embedding(), store=kit.SpyStore())
    store = flaky_store(kit, 1, ConnectionError("connection refused"))
    flaky = kit.build_index([kit.section("f1", 0.9)], kit.embedding(), store=store)
    specs = [
        CollectionSpec(steady, name="steady", metric="cosine"),
        CollectionSpec(flaky, name="flaky", metric="cosine"),
    ]
    policy = kit.policy(min_similarity=0.3)
    retriever = MultiCollectionRetriever(
        specs, policy, neighbours=0, max_retries=1, retry_backoff=0.01
    )
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert [n.node.node_id for n in report.kept] == ["f1", "s1"]
    assert not report.partial and store._attempts == 2
    retriever.close()
