"""Milvus stores set up for cosine thresholds: IP on unit vectors, Lite or server by URI.

The same code serves Milvus Lite (a local file path as URI) and a Milvus server,
standalone or distributed (``http://host:19530``). :class:`CompatibleMilvusVectorStore`
does what LlamaIndex's store does not on every engine: sparse and text search
(LlamaIndex sends ``drop_ratio_search=0.2``, which milvus-lite 3.x refuses, and
milvus-lite 3.x returns BM25 scores negated, which would reverse their order), a
deadline for every call (``timeout``; creating, indexing and loading a collection keep
none), waiting until a Milvus Lite file's engine listens (``thresholded.milvus_lite``),
async calls from any event loop (``thresholded.milvus_async``), and gRPC keepalive pings
within what servers accept (``thresholded.milvus_grpc``), so that none closes them with
GOAWAY ``too_many_pings``.

This module needs the ``llama-index-milvus`` extra; ``llama_index_thresholded``
itself does not import it until one of its names is used.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from contextvars import ContextVar
from os import PathLike
from typing import Any

from llama_index.core.bridge.pydantic import Field
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import VectorStoreQuery
from llama_index.vector_stores.milvus import MilvusVectorStore
from llama_index.vector_stores.milvus.utils import BaseSparseEmbeddingFunction
from pymilvus import AsyncMilvusClient, Function, FunctionType

from thresholded.milvus_async import LoopLocalClient
from thresholded.milvus_collection import (
    check_dimension,
    check_fits_existing,
    refuse_drop,
    refuse_metric_named_otherwise,
    refuse_read_metric,
    reopened,
    require_lite_file,
)
from thresholded.milvus_connect import client_arguments, unavailable_as_error
from thresholded.milvus_grpc import client_kwargs, connection_kwargs
from thresholded.milvus_lite import milvus_uri, wait_for_milvus_lite
from thresholded.milvus_timeout import READS, check_timeout, with_timeout
from thresholded.scores import Metric
from thresholded.strict import check_arguments, named_parameters

_SearchResult = tuple[list[BaseNode], list[float], list[str]]

_TIMEOUT_WHILE_BUILDING: ContextVar[float | None] = ContextVar(
    "_TIMEOUT_WHILE_BUILDING", default=None
)
"""The ``timeout`` of the store being built: LlamaIndex's constructor calls Milvus."""


class CompatibleMilvusVectorStore(MilvusVectorStore):
    """A ``MilvusVectorStore`` whose sparse and full-text search work on every Milvus engine.

    Sparse and text search send ``sparse_search_config`` (default: none, so the
    engine's exact search) instead of the hard-coded ``drop_ratio_search=0.2``;
    pass ``milvus_sparse_search_config`` in ``vector_store_kwargs`` to override
    it for one query. BM25 scores come back non-negative, best first, on every
    engine. Dense and hybrid search are LlamaIndex's own.

    ``timeout`` (seconds) is the deadline of each call the store makes once it
    is built (searches, lookups, inserts), and of connecting and reading the
    collection's description while it is built; ``None`` waits as long as the
    server takes. A server that cannot be reached while the store is built is a
    ``SearchUnavailableError`` naming the URI.

    Async calls (``aquery``, ``aretrieve``...) work from any event loop, one after
    another or at once: each loop gets an ``AsyncMilvusClient`` of its own. Unless
    ``grpc_options`` say otherwise, its clients use
    ``thresholded.milvus_grpc.KEEPALIVE_OPTIONS``.
    """

    sparse_search_config: dict[str, Any] = Field(
        default_factory=dict,
        description="search_params of sparse and text search; {} lets the engine choose.",
    )
    timeout: float | None = Field(
        default=None, description="Deadline of each Milvus call, in seconds; None: no deadline."
    )

    def __init__(
        self,
        *args: Any,
        sparse_search_config: dict[str, Any] | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        check_arguments("CompatibleMilvusVectorStore()", kwargs, _accepted_arguments())
        timeout = check_timeout(timeout)
        kwargs = client_kwargs(kwargs)
        uri = str(self._argument("uri", 0, args, kwargs))
        collection = str(self._argument("collection_name", 2, args, kwargs))
        check_dimension(_given_dim(args, kwargs), optional=True)
        wait_for_milvus_lite(uri)
        if timeout is not None:
            kwargs.setdefault("timeout", timeout)  # pymilvus' deadline for connecting
        building = _TIMEOUT_WHILE_BUILDING.set(timeout)
        try:
            with unavailable_as_error(uri, collection, timeout):
                super().__init__(*args, **kwargs)
        finally:
            _TIMEOUT_WHILE_BUILDING.reset(building)
        if self._async_milvusclient is not None:
            self._async_milvusclient = LoopLocalClient(
                self._async_client_factory(args, kwargs), home=self._async_milvusclient
            )
        self.sparse_search_config = dict(sparse_search_config or {})
        self.timeout = timeout
        self.uri = uri  # LlamaIndex's store connects to it but leaves the field at the default

    @staticmethod
    def _async_client_factory(args: tuple, kwargs: dict[str, Any]) -> Callable[[], Any]:
        """Makes async clients as LlamaIndex's constructor made the first one."""
        bound = inspect.signature(MilvusVectorStore.__init__).bind_partial(None, *args, **kwargs)
        bound.apply_defaults()
        extra = {k: v for k, v in bound.arguments["kwargs"].items() if k != "alias"}
        uri, token = bound.arguments["uri"], bound.arguments["token"]
        return functools.partial(AsyncMilvusClient, uri=uri, token=token, **extra)

    @classmethod
    def _argument(cls, name: str, position: int, args: tuple, kwargs: dict[str, Any]) -> Any:
        """A constructor argument of ``MilvusVectorStore``, given by name or position."""
        if name in kwargs:
            return kwargs[name]
        return args[position] if len(args) > position else cls.model_fields[name].default

    @property
    def client(self) -> Any:
        building = _TIMEOUT_WHILE_BUILDING.get()
        if self.timeout is None and building is not None:  # LlamaIndex's constructor calls
            return with_timeout(self._milvusclient, building, only=READS)
        return with_timeout(self._milvusclient, self.timeout)

    @property
    def aclient(self) -> Any:
        """The async client of the running event loop, with the store's deadline."""
        client = self._async_milvusclient
        if isinstance(client, LoopLocalClient):
            client = client.current()
        return with_timeout(client, self.timeout)

    def _sparse_request(self, query: VectorStoreQuery, **kwargs: Any) -> tuple[list, dict]:
        function = self.sparse_embedding_function
        if isinstance(function, BaseSparseEmbeddingFunction):
            data = [function.encode_queries([query.query_str])[0]]
        elif isinstance(function, Function):
            data = [query.query_str]
        else:
            raise ValueError(
                "sparse and text search need a sparse_embedding_function "
                f"(e.g. BM25BuiltInFunction()), got {function!r}"
            )
        params = kwargs.get("milvus_sparse_search_config", self.sparse_search_config)
        return data, dict(params)

    def _is_bm25(self) -> bool:
        function = self.sparse_embedding_function
        return isinstance(function, Function) and function.type == FunctionType.BM25

    def _parse_sparse(self, results: list) -> _SearchResult:
        nodes, scores, ids = self._parse_from_milvus_results(results)
        if self._is_bm25():
            # BM25 is never negative; milvus-lite 3.x returns it negated (best first).
            scores = [abs(s) for s in scores]
        return nodes, scores, ids

    def _sparse_search_args(
        self, query: VectorStoreQuery, string_expr: str, output_fields: list[str], **kwargs: Any
    ) -> dict[str, Any]:
        data, params = self._sparse_request(query, **kwargs)
        return {
            "collection_name": self.collection_name,
            "data": data,
            "anns_field": self.sparse_embedding_field,
            "limit": query.similarity_top_k,
            "filter": string_expr,
            "output_fields": output_fields,
            "search_params": params,
            "partition_names": kwargs.get("milvus_partition_names"),
        }

    def _sparse_search(
        self, query: VectorStoreQuery, string_expr: str, output_fields: list[str], **kwargs: Any
    ) -> _SearchResult:
        search = self._sparse_search_args(query, string_expr, output_fields, **kwargs)
        return self._parse_sparse(self.client.search(**search))

    async def _async_sparse_search(
        self, query: VectorStoreQuery, string_expr: str, output_fields: list[str], **kwargs: Any
    ) -> _SearchResult:
        if self.aclient is None:
            raise ValueError(
                "async search needs the async client: create the store with use_async_client=True"
            )
        search = self._sparse_search_args(query, string_expr, output_fields, **kwargs)
        return self._parse_sparse(await self.aclient.search(**search))


@functools.cache
def _accepted_arguments() -> frozenset[str]:
    """What the store takes: LlamaIndex's store's arguments, and those of the ``MilvusClient``
    it passes the others to. Anything else would be passed on and silently ignored (a
    misspelt ``embeding_field`` would leave the default)."""
    return frozenset(
        (
            *named_parameters(CompatibleMilvusVectorStore.__init__),
            *named_parameters(MilvusVectorStore.__init__),
            *client_arguments(),
        )
    )


def _given_dim(args: tuple, kwargs: dict[str, Any]) -> Any:
    """The ``dim`` given to ``MilvusVectorStore``'s constructor, by name or position."""
    bound = inspect.signature(MilvusVectorStore.__init__).bind_partial(None, *args, **kwargs)
    return bound.arguments.get("dim")


def milvus_store(
    uri: str | PathLike[str],
    collection_name: str,
    *,
    dim: int,
    metric: Metric | str = Metric.IP,
    overwrite: bool = False,
    **kwargs: Any,
) -> CompatibleMilvusVectorStore:
    """A Milvus store whose dense scores are cosines (IP on unit vectors, or COSINE).

    ``uri`` is the Milvus server (``http://127.0.0.1:19530``) or a Milvus Lite file (a
    path ending in ``.db``, a ``pathlib.Path`` too), ``collection_name`` the collection.
    ``dim`` is the embedding model's dimension; ``metric`` (``IP``, the default, or
    ``COSINE``; ``L2`` on unit vectors) is the store's ``similarity_metric``, the metric of
    a new collection's index; ``overwrite=True`` drops an existing collection first, else
    its rows are kept and nodes indexed through the store are added to them, and its
    dimension and index metric must be ``dim`` and ``metric`` (reopen a collection with
    :func:`existing_milvus_store`, which reads them). A node indexed under an id the
    collection holds replaces that row (``upsert_mode=True``, LlamaIndex's default being
    a second row under the same id). ``kwargs`` go to the store
    (``timeout``, ``token``, ``db_name``...). It is a :class:`CompatibleMilvusVectorStore`,
    so sparse and text search (with ``enable_sparse=True``) work on every engine too.
    """
    refuse_metric_named_otherwise("milvus_store", kwargs)
    metric = Metric.parse(metric)
    store = CompatibleMilvusVectorStore(
        uri=milvus_uri(uri),
        collection_name=collection_name,
        dim=check_dimension(dim),
        similarity_metric=metric.value,
        overwrite=overwrite,
        **{"upsert_mode": True, **kwargs, "index_config": _with_metric(kwargs, metric)},
    )
    if not overwrite:  # a dropped collection is made again as asked
        with unavailable_as_error(store.uri, collection_name, store.timeout):
            check_fits_existing(
                store.client, collection_name, store.embedding_field, dim=dim, metric=metric
            )
    return store


def _with_metric(kwargs: dict[str, Any], metric: Metric) -> dict[str, Any]:
    """The store's ``index_config`` (given in ``kwargs``) with ``metric`` as its metric unless
    it names one: LlamaIndex indexes an existing collection that has no index before it
    reads its ``similarity_metric``, so with ``IP`` whatever ``metric`` says."""
    return {"metric_type": metric.value, **(kwargs.get("index_config") or {})}


def existing_milvus_store(
    uri: str | PathLike[str], collection_name: str, *, token: str = "", **kwargs: Any
) -> CompatibleMilvusVectorStore:
    """A store over a collection that must already exist, with its real dimension and metric.

    ``uri`` and ``collection_name`` say where it is, as for :func:`milvus_store`; ``token``
    reaches it (``user:password`` or an API key; empty: none); ``kwargs`` go to the store
    (``db_name``, ``timeout``...). A missing collection is an error naming those that exist:
    a misspelt name would otherwise create a new, empty collection, and every
    question would then quietly "match nothing". The metric is read from the
    collection's dense index, so its scores are read as what they are. A node indexed
    under an id the collection holds replaces that row, as with :func:`milvus_store`.
    """
    from pymilvus import MilvusClient

    refuse_read_metric("existing_milvus_store", kwargs, "dim")
    refuse_drop("existing_milvus_store", kwargs, rebuild="milvus_store")
    uri = milvus_uri(uri)
    db_name = kwargs.get("db_name", "")
    timeout = check_timeout(kwargs.get("timeout"))
    require_lite_file(uri, collection_name)
    wait_for_milvus_lite(uri)
    connection = connection_kwargs(
        uri, token=token, db_name=db_name, timeout=timeout, grpc_options=kwargs.get("grpc_options")
    )
    with unavailable_as_error(uri, collection_name, timeout):
        client = with_timeout(MilvusClient(**connection), timeout)
        dim, metric = _describe_existing(client, uri, collection_name, db_name, kwargs)
    return CompatibleMilvusVectorStore(
        uri=uri,
        token=token,
        collection_name=collection_name,
        dim=dim,
        similarity_metric=metric,
        **{"upsert_mode": True, **kwargs},
    )


def _describe_existing(
    client: Any, uri: str, collection_name: str, db_name: str, kwargs: dict[str, Any]
) -> tuple[int, str]:
    """The dimension and metric of an existing collection; a missing one is an error."""
    try:
        field = kwargs.get("embedding_field", "embedding")
        _, dim, live = reopened(
            client, collection_name, field, uri=uri, db_name=db_name, argument="embedding_field"
        )
        metric = Metric.parse(live or Metric.IP).value
    finally:
        client.close()
    return dim, metric
