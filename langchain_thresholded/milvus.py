"""A workaround that lets langchain-milvus 0.3.3 run on pymilvus 2.6.10 and later.

langchain-milvus 0.3.3 reads a collection's schema and index through pymilvus's
ORM ``Collection(name, using=store.alias)``, where ``alias`` is the
``MilvusClient``'s. Since pymilvus 2.6.10 a ``MilvusClient`` no longer registers
that alias with the ORM, so every operation on an existing collection fails
with ``ConnectionNotExistException: should create connection first``
(langchain-ai/langchain-milvus#130). Registering the alias fixes it.

With Milvus Lite, call ``wait_for_milvus_lite(path)`` before ``Milvus(...)``: its
engine may not listen yet when langchain-milvus connects (see ``thresholded.milvus_lite``).

pymilvus 2.6 also shares one client connection, and so one alias, between every
client of a server, whatever their database. Registered as it is, the alias
would send each store's schema and index calls to the database of whichever
store registered it first. A store in a named database therefore gets an alias
of its own: one per server, token and database.

langchain-milvus also makes one ``AsyncMilvusClient`` per store and uses it from
every event loop; its connection belongs to the first loop, so after that loop
closes every async call fails with ``Event loop is closed``.
:func:`async_client_per_loop` gives the store an async client per event loop.
"""

from __future__ import annotations

import functools
import hashlib
import threading
import warnings
from typing import Any

from thresholded.milvus_async import LoopLocalClient
from thresholded.milvus_lite import wait_for_milvus_lite

__all__ = [
    "async_client_per_loop",
    "database_alias",
    "ensure_orm_connection",
    "wait_for_milvus_lite",
]

_WRAPPING = threading.Lock()


def ensure_orm_connection(store: Any) -> None:
    """Register a langchain-milvus store's connection alias with pymilvus's ORM.

    Call it right after constructing ``langchain_milvus.Milvus`` and before adding
    documents; ``ThresholdedRetriever`` calls it before each search. It does
    nothing when the alias is already registered or the store is not a Milvus
    store. It also gives the store an async client per event loop
    (:func:`async_client_per_loop`). A store over a collection that already exists fails in its
    constructor, before this can run: on such pymilvus versions, create it with
    ``drop_old=True`` or use a langchain-milvus release that fixed #130.
    """
    alias = getattr(store, "alias", None)
    connection_args = getattr(store, "_connection_args", None)
    if not isinstance(alias, str) or not isinstance(connection_args, dict):
        return
    from pymilvus import connections

    if connection_args.get("db_name"):
        alias = database_alias(connection_args)
        store.alias = alias  # langchain-milvus uses it for ORM calls (and their cache) only
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*ORM-style PyMilvus API.*")
        if not connections.has_connection(alias):
            connections.connect(alias=alias, **connection_args)
    async_client_per_loop(store)


def async_client_per_loop(store: Any) -> None:
    """Let a langchain-milvus store's async calls run from any event loop.

    The store's ``aclient`` becomes a :class:`~thresholded.milvus_async.LoopLocalClient`:
    each event loop gets an ``AsyncMilvusClient`` of its own, made from the
    store's connection arguments as langchain-milvus makes its own. Safe to call
    again; does nothing for a store that is not a langchain-milvus ``Milvus``.
    """
    connection_args = getattr(store, "_connection_args", None)
    if not isinstance(connection_args, dict) or not hasattr(store, "_async_milvus_client"):
        return
    from pymilvus import AsyncMilvusClient

    with _WRAPPING:
        current = store._async_milvus_client
        if isinstance(current, LoopLocalClient):
            return
        factory = functools.partial(AsyncMilvusClient, **connection_args)
        store._async_milvus_client = LoopLocalClient(factory, home=current)


def database_alias(connection_args: dict[str, Any]) -> str:
    """An ORM alias of its own for one server, token and database."""
    identity = "|".join(
        str(connection_args.get(key) or "") for key in ("uri", "token", "user", "db_name")
    )
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return f"thresholded-{connection_args['db_name']}-{digest}"
