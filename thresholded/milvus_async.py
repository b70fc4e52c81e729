"""An async Milvus client per event loop, so that async calls work from any loop.

pymilvus' ``AsyncMilvusClient`` connects on its first call and keeps that
connection, whose gRPC channel belongs to the event loop it was opened in. Once
that loop is closed (the end of an ``asyncio.run``), every call from another loop
fails for good with ``Event loop is closed``. Notebooks, scripts, web servers and
test runners start new loops all the time.

:class:`LoopLocalClient` stands where a store keeps its async client: each event
loop that calls it gets an async client of its own, made on its first call there.
Outside any running loop (a synchronous caller reading an attribute) it is the
store's original client. Clients of loops that have closed are forgotten; their
connections went with their loop. :func:`async_client_per_loop` puts one in a store
built elsewhere (LlamaIndex's own ``MilvusVectorStore``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)


class LoopLocalClient:
    """An async client per running event loop, each made by ``factory`` when first needed.

    Attribute access is passed on to the current loop's client, so the object
    can replace a store's ``AsyncMilvusClient`` as it is:
    ``await store.aclient.search(...)`` runs on the client of the loop that awaits.
    """

    def __init__(self, factory: Callable[[], Any], *, home: Any = None) -> None:
        self._factory = factory
        self._home = home
        self._lock = threading.Lock()
        self._clients: dict[int, tuple[weakref.ref[asyncio.AbstractEventLoop], Any]] = {}

    def current(self) -> Any:
        """The client of the running event loop; outside a loop, the original client."""
        loop = _running_loop()
        if loop is None:
            with self._lock:
                if self._home is None:
                    self._home = self._factory()
                return self._home
        with self._lock:
            entry = self._clients.get(id(loop))
            if entry is not None and entry[0]() is loop:
                return entry[1]
            self._forget_closed_loops()
            client = self._factory()
            self._clients[id(loop)] = (weakref.ref(loop), client)
        logger.debug("made an async Milvus client for event loop %#x", id(loop))
        return client

    @property
    def loops(self) -> int:
        """How many open event loops hold a client of their own."""
        with self._lock:
            self._forget_closed_loops()
            return len(self._clients)

    def _forget_closed_loops(self) -> None:
        """Drop the clients of loops that are closed or gone (the lock is held)."""
        for key, (ref, _client) in list(self._clients.items()):
            loop = ref()
            if loop is None or loop.is_closed():
                del self._clients[key]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in _OWN_ATTRIBUTES:  # not set up (yet): not the client's
            raise AttributeError(name)
        return getattr(self.current(), name)

    def __repr__(self) -> str:
        return f"LoopLocalClient(home={self._home!r}, loops={len(self._clients)})"


_install_lock = threading.Lock()


def async_client_per_loop(store: Any, attribute: str = "_async_milvusclient") -> None:
    """Let a store's async calls run from any event loop, whoever built it.

    The store's ``AsyncMilvusClient`` (in ``attribute``) becomes a
    :class:`LoopLocalClient` that gives each event loop a client of the same
    configuration (address, token, database, deadline, connection options). A
    store without one, or whose client is already loop-local, is left as it is.
    Safe to call again.
    """
    with _install_lock:
        client = getattr(store, attribute, None)
        if client is None or isinstance(client, LoopLocalClient):
            return
        factory = _same_configuration(client)
        if factory is not None:
            setattr(store, attribute, LoopLocalClient(factory, home=client))


def _same_configuration(client: Any) -> Callable[[], Any] | None:
    """Makes ``AsyncMilvusClient`` s configured as ``client``; None when it is not one."""
    config = getattr(client, "_config", None)
    if not all(hasattr(config, name) for name in ("uri", "token", "db_name", "handler_kwargs")):
        return None
    timeout = getattr(client, "_timeout", None)
    dedicated = getattr(client, "_dedicated", False)
    kind = type(client)

    def make() -> Any:
        return kind(
            uri=config.uri,
            token=config.token,
            db_name=config.db_name,
            timeout=timeout,
            dedicated=dedicated,
            **dict(config.handler_kwargs),
        )

    return make


_OWN_ATTRIBUTES = frozenset({"_factory", "_home", "_lock", "_clients"})


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


REMOTE_SCHEMES = ("http://", "https://", "tcp://", "grpc://")


def is_remote_client(client: Any) -> bool:
    """Whether a pymilvus client talks to a Milvus server (not to a Milvus Lite file)."""
    uri = str(getattr(getattr(client, "_config", None), "uri", "") or "")
    return uri.startswith(REMOTE_SCHEMES)


def needs_thread(milvus_async: bool, client: Any) -> bool:
    """Whether async fan-out runs a store's search in a thread: all but a Milvus store's own
    async search (``milvus_async``) on a Milvus server, whose client is awaited."""
    return not (milvus_async and is_remote_client(client))
