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

Give a store ``connection_args=connection_args(uri)``: its clients then keep gRPC
keepalive pings within what servers accept (``thresholded.milvus_grpc``), so that no
server closes them with GOAWAY ``too_many_pings``.

pymilvus 2.6 deprecates the ORM API langchain-milvus 0.3.3 reads schemas and indexes
with (``PyMilvusDeprecationWarning``); the calls made here run with that warning
silenced (:func:`orm_calls`), and nothing else does.

Importing this module imports neither pymilvus nor langchain-milvus.
"""

from __future__ import annotations

import contextlib
import hashlib
import warnings
from collections.abc import Iterator
from typing import Any

from thresholded.milvus_grpc import client_kwargs
from thresholded.milvus_lite import wait_for_milvus_lite

__all__ = [
    "connection_args",
    "database_alias",
    "ensure_orm_connection",
    "orm_calls",
    "wait_for_milvus_lite",
]

_ORM_DEPRECATION = r".*is an ORM-style PyMilvus API"


def connection_args(uri: str, **kwargs: Any) -> dict[str, Any]:
    """``connection_args`` of a langchain-milvus store, with a keepalive no server refuses.

    ``kwargs`` (``token``, ``db_name``, ``timeout``, ``grpc_options``, ...) are passed
    through; ``grpc_options`` given here win over the keepalive defaults.
    """
    return client_kwargs({"uri": uri, **kwargs})


@contextlib.contextmanager
def orm_calls() -> Iterator[None]:
    """Silence pymilvus's deprecation of its ORM API, for the calls in this block only."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_ORM_DEPRECATION)
        yield


def ensure_orm_connection(store: Any) -> None:
    """Register a langchain-milvus store's connection alias with pymilvus's ORM.

    Call it right after constructing ``langchain_milvus.Milvus`` and before adding
    documents; ``ThresholdedRetriever`` calls it before each search. It does
    nothing when the alias is already registered or the store is not a Milvus
    store. A store over a collection that already exists fails in its
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
    with orm_calls():
        if not connections.has_connection(alias):
            connections.connect(alias=alias, **client_kwargs(connection_args))


def database_alias(connection_args: dict[str, Any]) -> str:
    """An ORM alias of its own for one server, token and database."""
    identity = "|".join(
        str(connection_args.get(key) or "") for key in ("uri", "token", "user", "db_name")
    )
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return f"thresholded-{connection_args['db_name']}-{digest}"
