"""``ensure_orm_connection``: an ORM alias per database, an async client per event loop."""

from __future__ import annotations

from langchain_thresholded.milvus import (
    async_client_per_loop,
    database_alias,
    ensure_orm_connection,
)
from thresholded.milvus_async import LoopLocalClient


def test_one_alias_per_server_token_and_database():
    laws = database_alias({"uri": "http://127.0.0.1:19530", "db_name": "laws"})
    faqs = database_alias({"uri": "http://127.0.0.1:19530", "db_name": "faqs"})
    other = database_alias({"uri": "http://10.0.0.2:19530", "db_name": "laws"})
    assert len({laws, faqs, other}) == 3
    assert laws == database_alias({"uri": "http://127.0.0.1:19530", "db_name": "laws"})
    assert laws.startswith("thresholded-laws-")


def test_stores_that_are_not_milvus_are_left_alone():
    class NotMilvus:
        alias = None

    store = NotMilvus()
    ensure_orm_connection(store)
    assert store.alias is None


class MilvusShaped:
    """What ``async_client_per_loop`` reads of a langchain-milvus store."""

    def __init__(self) -> None:
        self._connection_args = {"uri": "http://127.0.0.1:1"}
        self._async_milvus_client = object()


def test_a_milvus_store_gets_an_async_client_per_event_loop_once():
    store = MilvusShaped()
    original = store._async_milvus_client
    async_client_per_loop(store)
    wrapped = store._async_milvus_client
    assert isinstance(wrapped, LoopLocalClient)
    assert wrapped.current() is original  # synchronous callers keep the store's own client
    async_client_per_loop(store)
    assert store._async_milvus_client is wrapped


def test_other_stores_keep_their_async_client():
    class NotMilvus:
        _async_milvus_client = "theirs"

    store = NotMilvus()
    async_client_per_loop(store)
    assert store._async_milvus_client == "theirs"
