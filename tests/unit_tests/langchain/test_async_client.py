"""A langchain-milvus store's async calls run from any event loop: an async client per loop."""

from __future__ import annotations

from langchain_thresholded.milvus import _async_client_per_loop
from thresholded.milvus_async import LoopLocalClient


class MilvusShaped:
    """What ``_async_client_per_loop`` reads of a langchain-milvus store."""

    def __init__(self) -> None:
        self._connection_args = {"uri": "http://127.0.0.1:1"}
        self._async_milvus_client = object()


def test_a_milvus_store_gets_an_async_client_per_event_loop_once():
    store = MilvusShaped()
    original = store._async_milvus_client
    _async_client_per_loop(store)
    wrapped = store._async_milvus_client
    assert isinstance(wrapped, LoopLocalClient)
    assert wrapped.current() is original  # synchronous callers keep the store's own client
    _async_client_per_loop(store)
    assert store._async_milvus_client is wrapped


def test_other_stores_keep_their_async_client():
    class NotMilvus:
        _async_milvus_client = "theirs"

    store = NotMilvus()
    _async_client_per_loop(store)
    assert store._async_milvus_client == "theirs"
