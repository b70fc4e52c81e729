"""The LlamaIndex backend of the engine: one index's store, docstore and embedding model.

It only translates (see :class:`thresholded.engine.Backend`): a search is a
``VectorStoreQuery`` on the index's vector store, nodes are read by id from the
docstore and then the vector store, and nodes become candidates and back. The
pipeline itself is the engine's.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.indices.vector_store.base import VectorStoreIndex
from llama_index.core.schema import (
    BaseNode,
    MetadataMode,
    NodeRelationship,
    ObjectType,
    QueryBundle,
)
from llama_index.core.vector_stores.types import (
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)

from llama_index_thresholded.embeddings import checked_embed_model, model_id_of, named_model
from llama_index_thresholded.filters import to_metadata_filters
from llama_index_thresholded.nodes import source_of, text_length
from llama_index_thresholded.pushdown import PUSHED_METRICS, is_milvus_store, range_search_kwargs
from llama_index_thresholded.scoring import (
    chroma_distances,
    collection_dimension,
    declared_mode_kind,
    held_dimension,
    is_chroma_store,
    store_metric,
    store_uri,
)
from thresholded.attachments import AttachmentSpec, Links
from thresholded.chroma_collection import ids_within
from thresholded.classes import collection_name, is_named
from thresholded.engine import Collection, Pipeline, Question, SearchArgs, Step, adrive, drive
from thresholded.filters import (
    Filter,
    UnsafeFilterError,
    matches,
    to_milvus,
)
from thresholded.filters.chroma import and_where, to_chroma
from thresholded.filters.milvus import DeclaredFields, StoreDialect, declared_in
from thresholded.filters.model import keys
from thresholded.milvus_async import async_client_per_loop, needs_thread
from thresholded.milvus_collection import (
    arows_by_id,
    checked_partitions,
    ids_matching,
    rows_by_id,
    vectors_of,
)
from thresholded.milvus_expr import all_of_exprs, membership
from thresholded.models import check_question_model
from thresholded.policy import RetrievalPolicy, profiled_policy
from thresholded.pushdown import PushdownSwitch
from thresholded.rescore import Vector
from thresholded.retriever_arguments import allowed_keys
from thresholded.retry import RetryPolicy
from thresholded.scores import Metric, ScoreKind
from thresholded.stored_vectors import chroma_vectors, faiss_vectors
from thresholded.strict import list_of_strings
from thresholded.wrapped import restricts

logger = logging.getLogger(__name__)

_SEARCH_ONLY = (VectorStoreQueryMode.SPARSE, VectorStoreQueryMode.TEXT_SEARCH)
ID_LISTS = ("doc_ids", "node_ids")
PARTITIONS = "milvus_partition_names"
"""Where a Milvus store's keywords limit a search to the listed partitions."""


@dataclass(frozen=True)
class CallFilters:
    """A call's filters as its store takes them: LlamaIndex's own, or, on Milvus, one
    expression with every restriction in force (the filters, the retriever's ``doc_ids``
    and ``node_ids``, and the store's own ``string_expr`` and ``milvus_scalar_filters``)."""

    filters: MetadataFilters | None
    milvus_expr: str | None = None
    chroma_where: dict[str, Any] | None = None
    """On Chroma, the filters as a ``where`` clause (:func:`thresholded.filters.chroma.to_chroma`),
    AND the retriever's own ``where`` (Chroma takes either LlamaIndex's filters or a
    ``where``, never both; LlamaIndex's translation writes no NOT and no IS_EMPTY)."""
    keys: frozenset[str] = frozenset()
    """On Milvus, the keys the filters name: each result's metadata must hold them."""


class LlamaIndexBackend(StoreDialect):
    """Searches one ``VectorStoreIndex`` for the engine."""

    def __init__(
        self,
        index: VectorStoreIndex,
        *,
        embed_model: BaseEmbedding,
        mode: VectorStoreQueryMode,
        metric: Metric | None,
        search_args: dict[str, Any],
    ) -> None:
        self._index = index
        self._store = index.vector_store
        self._docstore = index.docstore
        self._embed_model = embed_model
        self.mode = mode
        self._metric = metric
        self._args = search_args
        checked_partitions(search_args["vector_store_kwargs"].get(PARTITIONS), argument=PARTITIONS)
        for name in ID_LISTS:  # a lone string would be read as a substring test in memory
            if search_args[name] is not None:
                list_of_strings(search_args[name], argument=name, what="ids")
        self._store_can_fetch = bool(getattr(self._store, "stores_text", False))
        if is_milvus_store(self._store):  # LlamaIndex's own store: its client had one loop
            async_client_per_loop(self._store)
        self.declared_dimension = (
            collection_dimension(self._store) if mode not in _SEARCH_ONLY else None
        )
        """The dimension the store declares (a Milvus collection's, a store's ``dim``), read
        once: the embedding model's identity takes it."""
        self.name = _store_name(self._store)
        self.attempt_timeout = _store_timeout(self._store)
        awaited = is_milvus_store(self._store) and getattr(self._store, "aclient", None) is not None
        self.threaded = needs_thread(awaited, getattr(self._store, "client", None))

    @property
    def vector_store(self) -> Any:
        return self._store

    @property
    def dimension(self) -> int | None:
        """The dimension of the store's vectors, where it can be read: a question of another
        dimension is a ``DimensionMismatchError`` naming both, raised before the search, not
        the store's own error (Milvus's byte counts, numpy's shapes). A Milvus collection's
        is read once; a ``SimpleVectorStore``'s at each call (it may be filled later)."""
        if self.mode in _SEARCH_ONLY:
            return None
        return self.declared_dimension or held_dimension(self._store)

    # Filters -------------------------------------------------------------------------------
    def prepare(self, where: Filter | None, options: Any = None) -> CallFilters:
        """The call's filters for the store, before any query is sent: on Milvus, one
        expression ANDing every restriction in force; on Chroma, one ``where`` clause ANDing
        the retriever's own with them; elsewhere LlamaIndex's filters."""
        _check_no_store_fields(self._store, where)
        if is_chroma_store(self._store):  # its own translation writes no NOT, no IS_EMPTY
            own_where = self._args["vector_store_kwargs"].get("where")
            return CallFilters(None, chroma_where=and_where(own_where, to_chroma(where).where))
        if is_named(self._store, "FaissVectorStore"):  # it refuses any MetadataFilters
            return CallFilters(None)  # the engine holds the results to them after the search
        if not is_milvus_store(self._store):
            return CallFilters(to_metadata_filters(where))
        _check_filter_keys_returned(self._store, where)
        declared = None if where is None else self._declared
        written = to_milvus(where, self._dialect, declared=declared)
        clauses = [written.expr, *self._store_restrictions()]
        if self._args["doc_ids"]:
            doc_id_field = getattr(self._store, "doc_id_field", "doc_id")
            clauses.append(membership(doc_id_field, self._args["doc_ids"]))
        if self._args["node_ids"]:
            clauses.append(membership("id", self._args["node_ids"]))
        return CallFilters(None, all_of_exprs(clauses), keys=frozenset(keys(where)))

    def _store_restrictions(self) -> list[str]:
        return milvus_restrictions(self._args["vector_store_kwargs"])

    @functools.cached_property
    def _declared(self) -> DeclaredFields:
        """Read once, at the first filter: the collection's declared fields."""
        return declared_fields(self._store)

    # Scores --------------------------------------------------------------------------------
    def metric(self, filters: CallFilters) -> Metric | None:
        return self._metric

    def can_push_down(self, metric: Metric | None) -> bool:
        return (
            is_milvus_store(self._store)
            and self.mode is VectorStoreQueryMode.DEFAULT
            and metric in PUSHED_METRICS
        )

    # Embedding -----------------------------------------------------------------------------
    def embed_query(self, question: Question) -> Vector:
        strs = _bundle(question).embedding_strs
        return _aggregated(self._embed_model.get_agg_embedding_from_queries(strs), strs)

    async def aembed_query(self, question: Question) -> Vector:
        strs = _bundle(question).embedding_strs
        return _aggregated(await self._embed_model.aget_agg_embedding_from_queries(strs), strs)

    def searched_vector(self, vector: Vector) -> Vector:
        return vector  # LlamaIndex's stores search with the vector they are given

    def embed_texts(self, items: Sequence[BaseNode]) -> list[Vector]:
        return self._embed_model.get_text_embedding_batch(_texts(items))

    async def aembed_texts(self, items: Sequence[BaseNode]) -> list[Vector]:
        return await self._embed_model.aget_text_embedding_batch(_texts(items))

    # Search --------------------------------------------------------------------------------
    def search(self, args: SearchArgs) -> list[tuple[BaseNode, float | None]]:
        return drive(self._search(args))

    async def asearch(self, args: SearchArgs) -> list[tuple[BaseNode, float | None]]:
        return await adrive(self._search(args))

    def _search(self, args: SearchArgs) -> Pipeline[list[tuple[BaseNode, float | None]]]:
        query, kwargs = self._query(args)
        store = self._store
        if self._keeps_vectors():
            search = self._milvus_search(query, kwargs)
            hits = yield Step(
                lambda: store.client.search(**search), lambda: store.aclient.search(**search)
            )
            result = _milvus_result(store, hits)
        else:
            result = yield Step.call(store, "query", query, **kwargs)
        _check_rows_readable(store, result, args.filters)
        missing = _not_text(result, self._docstore_reader(args.where))
        fetched = (yield self._docstore_nodes(missing)) if missing else []
        return _hits(self._raw(result), fetched, self._index)

    def _docstore_nodes(self, ids: list[str]) -> Step:
        """The docstore's nodes of ``ids`` (those it does not hold left out)."""
        return Step.call(self._docstore, "get_nodes", ids, raise_error=False)

    def _raw(self, result: VectorStoreQueryResult) -> VectorStoreQueryResult:
        """The result with the store's raw scores: LlamaIndex's Chroma store reports
        ``exp(-distance)``, read back here as Chroma's distance (see ``store_metric``) where
        the scores are read in its metric; other modes' scores are left as they are."""
        read = self._metric is not None and result.similarities is not None
        if not read or not is_chroma_store(self._store):
            return result
        return replace(result, similarities=chroma_distances(result.similarities))

    def _query(self, args: SearchArgs) -> tuple[VectorStoreQuery, dict[str, Any]]:
        call: CallFilters = args.filters
        search = self._args
        kwargs = search["vector_store_kwargs"]
        doc_ids, node_ids = search["doc_ids"], search["node_ids"]
        if is_milvus_store(self._store):  # every restriction is in the one expression
            kwargs = {
                k: v for k, v in kwargs.items() if k not in ("string_expr", "milvus_scalar_filters")
            }
            if call.milvus_expr is not None:
                kwargs["string_expr"] = call.milvus_expr
            doc_ids = node_ids = None
        if call.chroma_where is not None:
            kwargs = {**kwargs, "where": call.chroma_where}
        if args.radius is not None:
            kwargs = range_search_kwargs(kwargs, self._store, args.radius)
        query = VectorStoreQuery(
            query_embedding=list(args.vector) if args.vector is not None else None,
            similarity_top_k=args.k,
            node_ids=node_ids,
            doc_ids=doc_ids,
            query_str=args.question.text,
            mode=self.mode,
            alpha=search["alpha"],
            filters=call.filters,
            sparse_top_k=search["sparse_top_k"],
            hybrid_top_k=search["hybrid_top_k"],
        )
        return query, kwargs

    def _keeps_vectors(self) -> bool:
        """A dense Milvus search under IP or L2, whose stored vectors the engine checks: the
        vector field comes back with the hits (``output_fields``), and is kept on each node,
        which the store's own ``query`` would drop."""
        return (
            is_milvus_store(self._store)
            and self.mode is VectorStoreQueryMode.DEFAULT
            and self._metric is not None
            and self._metric.needs_unit_vectors
        )

    def _milvus_search(self, query: VectorStoreQuery, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The arguments of the store's own dense search (``MilvusVectorStore._default_search``),
        its vector field among the output fields."""
        store = self._store
        _, fields = store._prepare_before_search(query, **kwargs)
        if "*" not in fields and store.embedding_field not in fields:
            fields = [*fields, store.embedding_field]
        return {
            "collection_name": store.collection_name,
            "data": [query.query_embedding],
            "filter": kwargs.get("string_expr", ""),
            "limit": query.similarity_top_k,
            "output_fields": fields,
            "search_params": kwargs.get("milvus_search_config", store.search_config),
            "anns_field": store.embedding_field,
            "partition_names": kwargs.get(PARTITIONS),
        }

    # Sections by id ------------------------------------------------------------------------
    def fetch(self, ids: list[str], where: Filter | None = None) -> dict[str, BaseNode]:
        """Sections by id, each the copy a search would return: the store's, where it holds
        the section's text (LlamaIndex's retriever prefers it too), else the docstore's (a
        summary kept there only, a store without text; and, as a search reads them, a
        non-text node such as an ``IndexNode``, where the docstore has it and the store's
        copy lies within ``where`` and the retriever's restrictions, as a search tests it). A
        docstore copy left as it was when the section was changed in the store is never the
        one judged by the filters."""
        return drive(self._fetch(ids, where))

    async def afetch(self, ids: list[str], where: Filter | None = None) -> dict[str, BaseNode]:
        return await adrive(self._fetch(ids, where))

    def _fetch(self, ids: list[str], where: Filter | None) -> Pipeline[dict[str, BaseNode]]:
        stored = (yield from self._store_nodes(ids)) if self._store_can_fetch else []
        found = {n.node_id: n for n in stored}
        wanted = _docstore_copies(ids, found, self._docstore_reader(where))
        if wanted:
            found.update((n.node_id, n) for n in (yield self._docstore_nodes(wanted)))
        return self._admitted(found)

    def _docstore_reader(self, where: Filter | None) -> Callable[[BaseNode], bool]:
        """Whether the store's copy of a node gives way to the docstore's, as a search reads
        it: a non-text node (``IndexNode``, ``ImageNode``; the store's copy stays where the
        docstore has none) whose store copy lies within ``where`` and the retriever's
        ``doc_ids`` and ``node_ids`` (:meth:`admits`). The store tests its own copy
        (inexactly, where it cannot hold them), and a search under them never returns a node
        whose copy there lies outside, whatever the docstore's says (a node reclassified, or
        moved to another document, in the store only): that one stays the store's, which the
        filters and restrictions then drop."""

        def read(node: BaseNode) -> bool:
            return node.get_type() != _TEXT and matches(where, node.metadata) and self.admits(node)

        return read

    def _admitted(self, found: dict[str, BaseNode]) -> dict[str, BaseNode]:
        """Sections fetched by id, held to every restriction of the retriever's
        ``vector_store_kwargs``: the store itself says which of them it would return (a
        section it does not hold, e.g. a summary only in the docstore, is not one)."""
        kwargs = self._args["vector_store_kwargs"]
        restrictions = restricting_kwargs(self._store, kwargs)
        if not restrictions or not found:
            return found
        allowed = ids_held(self._store, list(found), kwargs)
        if allowed is None:  # refused when the retriever was built with attachments
            raise ValueError(_unheld_message(self._store, sorted(restrictions)))
        return {i: n for i, n in found.items() if i in allowed}

    def fetch_vectors(self, ids: list[str]) -> dict[str, Vector]:
        """Stored vectors by id, in one batch: Milvus's vector field, a FAISS index's vectors,
        Chroma's embeddings, else the nodes of a store that can read them back."""
        return drive(self._fetch_vectors(ids))

    async def afetch_vectors(self, ids: list[str]) -> dict[str, Vector]:
        return await adrive(self._fetch_vectors(ids))

    def _fetch_vectors(self, ids: list[str]) -> Pipeline[dict[str, Vector]]:
        store = self._store
        if is_milvus_store(store):
            field = store.embedding_field
            return vectors_of((yield _by_id(store, ids, [field])), "id", field)
        if is_named(store, "FaissVectorStore"):
            return faiss_vectors(store.client, self._index.index_struct.nodes_dict, ids)
        if is_named(store, "ChromaVectorStore"):
            return chroma_vectors(store._collection, ids)
        if not self._store_can_fetch:
            return {}
        return _vectors((yield from self._store_nodes(ids)))

    def _store_nodes(self, ids: list[str]) -> Pipeline[list[BaseNode]]:
        store = self._store
        if is_milvus_store(store):
            return _milvus_nodes(store, (yield _by_id(store, ids, ["*"])))
        try:
            return (yield Step.call(store, "get_nodes", node_ids=ids))
        except NotImplementedError:
            self._store_can_fetch = False
            return []

    # Translation ---------------------------------------------------------------------------
    def stored_vector(self, item: BaseNode) -> Vector | None:
        return item.embedding

    def links(self, item: BaseNode) -> Links:
        return Links(
            _related_id(item, NodeRelationship.PREVIOUS),
            _related_id(item, NodeRelationship.NEXT),
            _related_id(item, NodeRelationship.PARENT),
        )

    def identify(
        self, item: BaseNode, source_key: str, key: str | None = None
    ) -> tuple[str, str | None, int]:
        return item.node_id, source_of(item, source_key), text_length(item)

    def metadata(self, item: BaseNode) -> Mapping[str, Any]:
        return item.metadata

    @property
    def restricted(self) -> bool:
        return self._args["doc_ids"] is not None or self._args["node_ids"] is not None

    @property
    def fetch_holds_back(self) -> bool:
        return bool(restricting_kwargs(self._store, self._args["vector_store_kwargs"]))

    def admits(self, item: BaseNode) -> bool:
        """A node of the retriever's ``node_ids`` and ``doc_ids``, where it names them (an
        empty list names none: it admits nothing)."""
        node_ids, doc_ids = self._args["node_ids"], self._args["doc_ids"]
        if node_ids is not None and item.node_id not in node_ids:
            return False
        return doc_ids is None or item.ref_doc_id in doc_ids

    @property
    def admits_nothing(self) -> bool:
        """``doc_ids=[]`` or ``node_ids=[]``: no section is within them."""
        return any(self._args[k] is not None and len(self._args[k]) == 0 for k in ID_LISTS)


def index_collection(
    index: VectorStoreIndex,
    policy: RetrievalPolicy | None,
    *,
    embed_model: BaseEmbedding | None = None,
    profile: str | Path | None = None,
    profile_collection: str | None = None,
    vector_store_query_mode: VectorStoreQueryMode | str = VectorStoreQueryMode.DEFAULT,
    metric: Metric | str | None = None,
    score_kind: ScoreKind | str | None = None,
    allow_model_mismatch: bool = False,
    search_args: dict[str, Any] | None = None,
    where: Filter | None = None,
    allowed_filter_keys: Iterable[str] | None = None,
    pushdown: bool = True,
    retry: RetryPolicy | None = None,
    attachments: AttachmentSpec | None = None,
    name: str = "",
    timeout: float | None = None,
    retrieve_k: int | None = None,
) -> Collection[BaseNode]:
    """An index as the engine's collection, with ``policy`` (or its profile's) as its own.

    Shared by ``ThresholdedRetriever`` and ``MultiCollectionRetriever``: a collection
    is set up the same way whichever retriever searches it.
    """
    store = index.vector_store
    embed_model = checked_embed_model(embed_model)
    if embed_model is not None and not allow_model_mismatch:
        check_question_model(
            named_model(embed_model), named_model(index_embed_model(index)), given_as="embed_model="
        )
    embed_model = embed_model or index_embed_model(index)
    mode = VectorStoreQueryMode(vector_store_query_mode)
    kind = declared_mode_kind(score_kind, mode, store)
    dense_metric = store_metric(store, metric) if kind is ScoreKind.COSINE else None
    args = {
        "alpha": None,
        "doc_ids": None,
        "node_ids": None,
        "sparse_top_k": None,
        "hybrid_top_k": None,
        **(search_args or {}),
    }
    args["vector_store_kwargs"] = dict(args.get("vector_store_kwargs") or {})
    attachments = attachments or AttachmentSpec()
    _check_store_kwargs(store, args["vector_store_kwargs"], attachments)
    backend = LlamaIndexBackend(
        index,
        embed_model=embed_model,
        mode=mode,
        metric=dense_metric,
        search_args=args,
    )
    policy = profiled_policy(
        policy,
        profile,
        collection=profile_collection,
        store_collection=collection_name(store),
    )
    return Collection(
        backend=backend,
        policy=policy,
        name=name,
        score_kind=kind,
        model=named_model(embed_model) and model_id_of(embed_model, backend.declared_dimension),
        allow_model_mismatch=allow_model_mismatch,
        retry=retry or RetryPolicy(),
        timeout=timeout,
        retrieve_k=retrieve_k,
        pushdown=PushdownSwitch(pushdown and backend.can_push_down(dense_metric)),
        attachments=attachments,
        embeds=mode not in _SEARCH_ONLY,
        where=where,
        allowed_filter_keys=allowed_keys(allowed_filter_keys),
    )


@dataclass(frozen=True)
class _StoreKeywords:
    """The query keywords a store reads: those that restrict what it returns, to which the
    sections fetched by id are held as well, and those that only tune the search."""

    restricting: frozenset[str]
    tuning: frozenset[str]

    @property
    def accepted(self) -> frozenset[str]:
        return self.restricting | self.tuning


_MMR = ("mmr_threshold", "mmr_prefetch_factor", "mmr_prefetch_k")
_MILVUS_KEYWORDS = _StoreKeywords(
    restricting=frozenset({"string_expr", "milvus_scalar_filters", PARTITIONS}),
    tuning=frozenset({"milvus_search_config", "milvus_sparse_search_config", *_MMR}),
)
_CHROMA_KEYWORDS = _StoreKeywords(
    restricting=frozenset({"where", "where_document", "ids"}),
    tuning=frozenset({"include", *_MMR}),
)


def _check_store_kwargs(store: Any, kwargs: Mapping[str, Any], attachments: AttachmentSpec) -> None:
    """Refuse ``vector_store_kwargs`` that could restrict the search but not the neighbours
    and parent summaries fetched by id.

    Milvus's and Chroma's keywords are known: a restricting one holds for the attachments
    too (``fetch``), a tuning one passes, and any other is refused (the store would ignore
    it, or fail on it). Another store's keywords are not known: with attachments, any is
    refused."""
    known = _store_keywords(store)
    if known is None:
        if kwargs and attachments.enabled:
            raise ValueError(_unheld_message(store, sorted(kwargs)))
        return
    _check_restriction_types(kwargs, known.restricting)
    unknown = sorted(set(kwargs) - known.accepted)
    if unknown:
        raise ValueError(
            f"vector_store_kwargs {unknown} are not keywords {type(store).__name__}'s query "
            f"reads (it reads {sorted(known.accepted)}): a restriction given so would hold "
            "neither for the search nor for the neighbours and parent summaries. Give it as "
            "filters=... (MetadataFilters), which hold for both"
        )


_RESTRICTION_TYPES: dict[str, tuple[type, str]] = {
    "string_expr": (str, "a Milvus boolean expression string"),
    "where": (Mapping, "a Chroma where clause (a dict)"),
    "where_document": (Mapping, "a Chroma where_document clause (a dict)"),
}
"""Restricting keywords whose value the store tests for truth before reading it: one of
another type that is false (``string_expr=0``, ``where=[]``) would restrict nothing."""


def _check_restriction_types(kwargs: Mapping[str, Any], restricting: frozenset[str]) -> None:
    """Refuse a restricting keyword of another type than the store reads: a false one would
    be read as no restriction, instead of restricting the search."""
    for key in sorted(restricting & _RESTRICTION_TYPES.keys()):
        kind, what = _RESTRICTION_TYPES[key]
        value = kwargs.get(key)
        if value is not None and not isinstance(value, kind):
            raise TypeError(
                f"vector_store_kwargs[{key!r}] must be {what}, got {type(value).__name__} "
                f"{value!r}: the store reads no other type, and one that is false as no "
                "restriction at all. Leave it out (or None) to restrict nothing"
            )


_NO_KEYWORDS = _StoreKeywords(restricting=frozenset(), tuning=frozenset())
_READS_NO_KEYWORDS = frozenset({"SimpleVectorStore", "FaissVectorStore"})
"""Stores whose query ignores every keyword: a restriction given so would silently not hold
(a subclass may read some)."""


def _store_keywords(store: Any) -> _StoreKeywords | None:
    if is_milvus_store(store):
        return _MILVUS_KEYWORDS
    if is_chroma_store(store):
        return _CHROMA_KEYWORDS
    if type(store).__name__ in _READS_NO_KEYWORDS:
        return _NO_KEYWORDS
    return None


def restricting_kwargs(store: Any, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The keywords among ``kwargs`` whose values restrict what the store returns: on a store
    whose keywords are not known, every one."""
    known = _store_keywords(store)
    if known is None:
        return dict(kwargs)
    return {k: v for k, v in kwargs.items() if k in known.restricting and restricts(v)}


def declared_fields(store: Any) -> DeclaredFields:
    """The metadata keys of a LlamaIndex Milvus store that are declared fields of its
    collection, by kind (``scalar_field_names``; the rest are kept in its dynamic field)."""
    return declared_in(store.client.describe_collection(store.collection_name))


def milvus_restrictions(kwargs: Mapping[str, Any]) -> list[str]:
    """What a Milvus store's ``vector_store_kwargs`` restrict, verbatim: a raw ``string_expr``
    and ``milvus_scalar_filters``, which the store would otherwise drop as soon as another
    filter is given."""
    clauses = []
    if kwargs.get("string_expr"):
        clauses.append(str(kwargs["string_expr"]))
    if kwargs.get("milvus_scalar_filters") is not None:
        from llama_index.vector_stores.milvus.base import _to_milvus_filter

        clauses.append(_to_milvus_filter(None, kwargs["milvus_scalar_filters"]))
    return [c for c in clauses if c.strip()]


def ids_held(
    store: Any, ids: list[str], kwargs: Mapping[str, Any], doc_ids: list[str] | None = None
) -> set[str] | None:
    """The ids among ``ids`` that ``store`` holds within the restrictions of its query's
    ``kwargs`` (``vector_store_kwargs``) and ``doc_ids``, as the store itself says: a Milvus
    store's raw expressions, partitions and documents (it holds a search to ``doc_ids``, where
    they name any), a Chroma store's ``ids``, ``where`` and ``where_document`` (it ignores
    ``doc_ids``). None where the store cannot be asked (neither of them)."""
    if is_milvus_store(store):
        clauses = milvus_restrictions(kwargs)
        if doc_ids:
            clauses.append(membership(getattr(store, "doc_id_field", "doc_id"), doc_ids))
        expr = all_of_exprs(clauses)
        partitions = kwargs.get(PARTITIONS)
        return ids_matching(
            store.client, store.collection_name, "id", ids, expr, partitions=partitions
        )
    if is_chroma_store(store):
        return ids_within(store._collection, ids, restricting_kwargs(store, kwargs))
    return None


def _unheld_message(store: Any, keys: list[str]) -> str:
    name = type(store).__name__
    return (
        f"vector_store_kwargs {keys} go to {name}'s query, whose keywords are not known here: "
        "what they restrict in the search would not hold for the neighbours and parent "
        "summaries fetched by id. Give the restriction as filters=... (MetadataFilters), "
        "which hold for both, or attach nothing (neighbours=0, parent_summaries=False)"
    )


_LLAMA_INDEX_FIELDS = frozenset(
    {"_node_content", "_node_type", "document_id", "doc_id", "ref_doc_id"}
)
"""What LlamaIndex itself writes beside each node's metadata in a store (the node, its type,
its source document): never the node's metadata when it is read back."""


def store_fields(store: Any) -> frozenset[str]:
    """The keys that name a store's own fields rather than metadata: LlamaIndex's own, and on
    Milvus the primary key, the document id, text and vector fields."""
    if not is_milvus_store(store):
        return _LLAMA_INDEX_FIELDS
    fields = ("doc_id_field", "text_key", "embedding_field", "sparse_embedding_field")
    named = {getattr(store, field, None) for field in fields}
    return _LLAMA_INDEX_FIELDS | {"id"} | {str(f) for f in named if f}


def _check_no_store_fields(store: Any, where: Filter | None) -> None:
    """Refuse a filter on a store's own field: the store would apply it to that field, but
    the sections it returns, their neighbours and summaries are checked against their
    metadata, which does not hold it (``doc_id != "x"`` would hold for x's neighbours)."""
    if where is None:
        return
    named = sorted(keys(where) & store_fields(store))
    if named:
        raise UnsafeFilterError(
            f"filter keys {named} name {type(store).__name__}'s own fields, not metadata: the "
            "store applies such a filter to its field, while neighbours and parent summaries "
            "are held to their metadata, which does not have it. Filter on a metadata key "
            "instead; to search some documents or sections only, build the retriever with "
            "doc_ids=[...] or node_ids=[...]"
        )


def _check_filter_keys_returned(store: Any, where: Filter | None) -> None:
    """Refuse a filter on a key that a Milvus store's ``output_fields`` leave out of its
    results. Without ``_node_content`` among them, the store builds each node from those
    fields alone: a filter key outside them reads as missing on every node, so the check
    of the results would let every row through NE, NIN and NOT (wherever the expression is
    inexact, e.g. NOT over an ordering on Milvus Lite 2.5) and drop every row for the rest."""
    returned = set(getattr(store, "output_fields", None) or ())
    if not returned or returned & {"*", "_node_content"}:
        return
    missing = sorted(keys(where) - returned)
    if missing:
        raise UnsafeFilterError(
            f"filter keys {missing} are not among the output_fields {sorted(returned)} of "
            f"{type(store).__name__}, which builds each result from those fields alone (no "
            "'_node_content'): the results could not be checked against the filter. Add "
            "'_node_content' (or the filter keys) to output_fields, or leave output_fields "
            "empty"
        )


def _check_rows_readable(store: Any, result: VectorStoreQueryResult, call: CallFilters) -> None:
    """Refuse results of a filtered Milvus search (``call.keys`` are set on Milvus only)
    whose rows hold no ``_node_content`` (a collection written by another tool, LangChain
    say): LlamaIndex builds such a node from the store's ``output_fields`` alone, with an id
    of its own, so a filter key outside them reads as missing on every node, and the check
    of the results could not hold it."""
    if not call.keys or result.nodes is None or result.ids is None:
        return
    returned = set(getattr(store, "output_fields", None) or ())
    unread = sorted(call.keys - returned)
    if not unread:
        return
    for node, row_id in zip(result.nodes, result.ids, strict=False):
        if node.node_id != str(row_id):
            raise UnsafeFilterError(
                f"the rows of {_store_name(store)} hold no '_node_content' (they were not "
                f"written by LlamaIndex), so their nodes carry only the store's output_fields "
                f"{sorted(returned)}, not the filter keys {unread}: the results could not be "
                "checked against the filter. Search the collection with the framework that "
                "wrote it, or add the filter keys to the store's output_fields"
            )


def index_embed_model(index: VectorStoreIndex) -> BaseEmbedding:
    """The model an index embeds with (LlamaIndex keeps it on a private attribute)."""
    return index._embed_model


# Helpers -----------------------------------------------------------------------------------
def _aggregated(vector: Vector, strs: Sequence[str]) -> Vector:
    """A question embedded from several texts (a bundle's ``custom_embedding_strs``, such as
    HyDE's hypothetical answer beside the question) at unit length. LlamaIndex aggregates
    their vectors by their mean, shorter than the unit vectors it averages: an inner product
    with it is a cosine only once it is unit length again, as a store that ranks by cosine
    reads it. The vector of one text is the model's own, left as it is (a model that does
    not normalise is refused under IP and L2)."""
    if len(strs) < 2:
        return vector
    norm = math.hypot(*vector)
    if norm == 0.0 or not math.isfinite(norm):
        return vector
    return [x / norm for x in vector]


def _bundle(question: Question) -> QueryBundle:
    item = question.item
    return item if isinstance(item, QueryBundle) else QueryBundle(question.text)


def _texts(items: Sequence[BaseNode]) -> list[str]:
    """The text each node was embedded from when it was indexed."""
    return [node.get_content(metadata_mode=MetadataMode.EMBED) for node in items]


def _not_text(result: VectorStoreQueryResult, read: Callable[[BaseNode], bool]) -> list[str]:
    """Ids the docstore must supply: the non-text nodes it reads (``read``:
    :meth:`LlamaIndexBackend._docstore_reader`)."""
    if result.nodes is not None:
        return [n.node_id for n in result.nodes if read(n)]
    return []


def _docstore_copies(
    ids: list[str], stored: Mapping[str, BaseNode], read: Callable[[BaseNode], bool]
) -> list[str]:
    """The ids of ``ids`` whose copy is the docstore's, as a search reads them: those the
    store did not return, and its non-text nodes (``read``:
    :meth:`LlamaIndexBackend._docstore_reader`)."""
    return [i for i in ids if i not in stored or read(stored[i])]


_TEXT = ObjectType.TEXT
"""Read once: an enum member is read slowly off its class."""


def _hits(
    result: VectorStoreQueryResult, fetched: Sequence[BaseNode], index: VectorStoreIndex
) -> list[tuple[BaseNode, float | None]]:
    """The result's nodes with their raw scores; what the store holds no text for comes from
    the docstore."""
    scores = result.similarities
    if result.nodes is not None:
        by_id = {n.node_id: n for n in fetched}
        nodes = [by_id.get(n.node_id, n) for n in result.nodes] if by_id else result.nodes
    elif result.ids is not None:  # a store without text (SimpleVectorStore): the docstore has it
        node_ids = [index.index_struct.nodes_dict[i] for i in result.ids]
        docstore = {n.node_id: n for n in index.docstore.get_nodes(node_ids)}
        nodes = [docstore[i] for i in node_ids]
    else:
        raise ValueError("the vector store's query result has neither nodes nor ids")
    if scores is None:
        return [(node, None) for node in nodes]
    return list(zip(nodes, scores, strict=True))


def _milvus_result(store: Any, hits: Any) -> VectorStoreQueryResult:
    """A Milvus search's hits parsed as the store parses them, each node with its vector."""
    nodes, similarities, ids = store._parse_from_milvus_results(hits)
    for node, hit in zip(nodes, hits[0], strict=True):
        # the parse just built these nodes: set without re-validating every float
        node.__dict__["embedding"] = _plain(hit["entity"].get(store.embedding_field))
    return VectorStoreQueryResult(nodes=nodes, similarities=similarities, ids=ids)


def _by_id(store: Any, ids: list[str], fields: list[str]) -> Step:
    """``fields`` of the rows of ``ids`` in a Milvus collection (:func:`rows_by_id`)."""
    name = store.collection_name
    return Step(
        lambda: rows_by_id(store.client.query, name, "id", ids, fields),
        lambda: arows_by_id(store.aclient.query, name, "id", ids, fields),
    )


def _milvus_nodes(store: Any, rows: Sequence[Mapping[str, Any]]) -> list[BaseNode]:
    """Rows read by id, each parsed as the store parses a search's hit, with its vector."""
    hits = [{"id": row.get("id"), "distance": None, "entity": row} for row in rows]
    nodes, _, _ = store._parse_from_milvus_results([hits])
    for node, row in zip(nodes, rows, strict=True):
        node.__dict__["embedding"] = _plain(row.get(store.embedding_field))
    return nodes


def _plain(vector: Any) -> Vector | None:
    """A vector as a list of floats (pymilvus may hand back its own sequence types)."""
    return vector if vector is None or isinstance(vector, list) else list(vector)


def _vectors(nodes: Sequence[BaseNode]) -> dict[str, Vector]:
    return {n.node_id: n.embedding for n in nodes if n.embedding}


def _related_id(node: BaseNode, relation: NodeRelationship) -> str | None:
    info = node.relationships.get(relation)
    if info is None or isinstance(info, list):
        return None
    return info.node_id


def _store_timeout(store: Any) -> float | None:
    timeout = getattr(store, "timeout", None)
    return timeout if isinstance(timeout, int | float) and timeout > 0 else None


def _store_name(store: Any) -> str:
    name = collection_name(store)
    if name is None:
        return type(store).__name__
    uri = store_uri(store)  # LlamaIndex's own store does not keep its uri
    return f"collection {name!r}" if uri is None else f"collection {name!r} at {uri}"
