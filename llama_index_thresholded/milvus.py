"""Milvus stores set up for cosine thresholds: IP on unit vectors, Lite or server by URI.

The same code serves Milvus Lite (a local file path as URI) and a Milvus
server, standalone or distributed (``http://host:19530``).

``CompatibleMilvusVectorStore`` makes SPARSE and TEXT_SEARCH queries work on
every engine: LlamaIndex's store sends ``drop_ratio_search=0.2`` with them,
which milvus-lite 3.x refuses ("only drop_ratio_search=0 is supported"), and
milvus-lite 3.x returns BM25 scores negated, which would reverse their order
once sorted by score. Its ``timeout`` gives every client call a deadline, which
LlamaIndex's store does not pass through: without one, a frozen server holds a
query forever. On a Milvus Lite file it waits until the engine listens before it
connects (``thresholded.milvus_lite``). Its clients keep gRPC keepalive pings
within what servers accept (``thresholded.milvus_grpc``), so that no server closes
them with GOAWAY ``too_many_pings``.

This module needs the ``llama-index-milvus`` extra; ``llama_index_thresholded``
itself does not import it until one of its names is used.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.bridge.pydantic import Field
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import VectorStoreQuery
from llama_index.vector_stores.milvus import MilvusVectorStore
from llama_index.vector_stores.milvus.utils import BaseSparseEmbeddingFunction
from pymilvus import Function, FunctionType

from thresholded.errors import CollectionNotFoundError
from thresholded.milvus_grpc import client_kwargs
from thresholded.milvus_lite import wait_for_milvus_lite
from thresholded.milvus_timeout import check_timeout, with_timeout
from thresholded.scores import Metric

_SearchResult = tuple[list[BaseNode], list[float], list[str]]


class CompatibleMilvusVectorStore(MilvusVectorStore):
    """A ``MilvusVectorStore`` whose sparse and full-text search work on every Milvus engine.

    Sparse and text search send ``sparse_search_config`` (default: none, so the
    engine's exact search) instead of the hard-coded ``drop_ratio_search=0.2``;
    pass ``milvus_sparse_search_config`` in ``vector_store_kwargs`` to override
    it for one query. BM25 scores come back non-negative, best first, on every
    engine. Dense and hybrid search are LlamaIndex's own.

    ``timeout`` (seconds) is the deadline of each call the store makes after it
    is built (searches, lookups, inserts); ``None`` waits as long as the server
    takes. Unless ``grpc_options`` say otherwise, its clients use
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
        timeout = check_timeout(timeout)
        uri = str(kwargs.get("uri", args[0] if args else type(self).model_fields["uri"].default))
        wait_for_milvus_lite(uri)
        super().__init__(*args, **client_kwargs(kwargs))
        self.sparse_search_config = dict(sparse_search_config or {})
        self.timeout = timeout
        self.uri = uri  # LlamaIndex's store connects to it but leaves the field at the default

    @property
    def client(self) -> Any:
        return with_timeout(self._milvusclient, self.timeout)

    @property
    def aclient(self) -> Any:
        return with_timeout(self._async_milvusclient, self.timeout)

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

    def _sparse_search(
        self, query: VectorStoreQuery, string_expr: str, output_fields: list[str], **kwargs: Any
    ) -> _SearchResult:
        data, params = self._sparse_request(query, **kwargs)
        results = self.client.search(
            collection_name=self.collection_name,
            data=data,
            anns_field=self.sparse_embedding_field,
            limit=query.similarity_top_k,
            filter=string_expr,
            output_fields=output_fields,
            search_params=params,
            partition_names=kwargs.get("milvus_partition_names"),
        )
        return self._parse_sparse(results)

    async def _async_sparse_search(
        self, query: VectorStoreQuery, string_expr: str, output_fields: list[str], **kwargs: Any
    ) -> _SearchResult:
        if self.aclient is None:
            raise ValueError(
                "async search needs the async client: create the store with use_async_client=True"
            )
        data, params = self._sparse_request(query, **kwargs)
        results = await self.aclient.search(
            collection_name=self.collection_name,
            data=data,
            anns_field=self.sparse_embedding_field,
            limit=query.similarity_top_k,
            filter=string_expr,
            output_fields=output_fields,
            search_params=params,
            partition_names=kwargs.get("milvus_partition_names"),
        )
        return self._parse_sparse(results)


def milvus_store(
    uri: str,
    collection_name: str,
    *,
    dim: int,
    metric: Metric | str = Metric.IP,
    overwrite: bool = False,
    **kwargs: Any,
) -> CompatibleMilvusVectorStore:
    """A Milvus store whose dense scores are cosines (IP on unit vectors, or COSINE).

    It is a :class:`CompatibleMilvusVectorStore`, so sparse and text search (with
    ``enable_sparse=True``) work on every engine too.
    """
    metric = Metric.parse(metric)
    return CompatibleMilvusVectorStore(
        uri=uri,
        collection_name=collection_name,
        dim=dim,
        similarity_metric=metric.value,
        overwrite=overwrite,
        **kwargs,
    )


def existing_milvus_store(
    uri: str, collection_name: str, *, token: str = "", **kwargs: Any
) -> CompatibleMilvusVectorStore:
    """A store over a collection that must already exist, with its real dimension and metric.

    A misspelt name would otherwise create a new, empty collection, and every
    question would then quietly "match nothing". The metric is read from the
    collection's dense index, so its scores are read as what they are.
    """
    from pymilvus import MilvusClient

    db_name = kwargs.get("db_name", "")
    timeout = check_timeout(kwargs.get("timeout"))
    wait_for_milvus_lite(uri)
    options = client_kwargs({"grpc_options": kwargs.get("grpc_options")})
    client = with_timeout(
        MilvusClient(uri=uri, token=token, db_name=db_name, timeout=timeout, **options)
        if db_name
        else MilvusClient(uri=uri, token=token, timeout=timeout, **options),
        timeout,
    )
    try:
        names = client.list_collections()
        if collection_name not in names:
            raise CollectionNotFoundError(
                f"collection {collection_name!r} does not exist at {uri}"
                f"{f' (database {db_name!r})' if db_name else ''}; it has: {sorted(names)}"
            )
        field = kwargs.get("embedding_field", "embedding")
        description = client.describe_collection(collection_name)
        dim = next(
            (
                int(spec["params"]["dim"])
                for spec in description.get("fields", [])
                if spec.get("name") == field and "dim" in spec.get("params", {})
            ),
            None,
        )
        if dim is None:
            raise CollectionNotFoundError(
                f"collection {collection_name!r} has no dense vector field {field!r}"
            )
        metric = _index_metric(client, collection_name, field)
    finally:
        client.close()
    return CompatibleMilvusVectorStore(
        uri=uri,
        token=token,
        collection_name=collection_name,
        dim=dim,
        similarity_metric=metric,
        **kwargs,
    )


def _index_metric(client: Any, collection_name: str, field: str) -> str:
    for index_name in client.list_indexes(collection_name, field_name=field):
        described = client.describe_index(collection_name, index_name)
        if described.get("metric_type"):
            return Metric.parse(described["metric_type"]).value
    return Metric.IP.value
