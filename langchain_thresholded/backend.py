"""The LangChain backend of the engine: one ``VectorStore``, its embeddings and docstore.

It only translates (see :class:`thresholded.engine.Backend`): a search is the
store's own ``similarity_search*`` call, neighbours and parent summaries are read by
the ids in a document's metadata (from the store where it reads them by id, else from the
docstore), and documents become
candidates and back. The pipeline itself is the engine's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from operator import attrgetter
from typing import Any, NamedTuple

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableWithFallbacks
from langchain_core.runnables.config import run_in_executor
from langchain_core.stores import BaseStore
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore, VectorStoreRetriever

from langchain_thresholded._documents import (
    document_id,
    marked_copy,
    source_of,
    stored_id,
)
from langchain_thresholded.ensemble import RetrieverSource, is_ensemble, members_of, unbound
from langchain_thresholded.faiss_window import first_window, wider_window
from langchain_thresholded.filters import to_filter
from langchain_thresholded.milvus import (
    RAW_EXPR_KEYS,
    _ensure_orm_connection,
    check_metadata_field,
    declared_fields,
    ensure_collection,
    ids_admit_no_row,
    in_one_expr,
    json_fields,
    json_metadata_field,
    raw_exprs,
    varchar_key,
)
from langchain_thresholded.scoring import is_chroma, is_faiss, is_milvus, store_metric
from thresholded import metadata_keys
from thresholded.attachments import FirstCopies, Links
from thresholded.chroma_collection import ids_within
from thresholded.classes import collection_name, is_named
from thresholded.engine import Pipeline, Question, SearchArgs, Step, adrive, drive
from thresholded.errors import UnsafeFilterError
from thresholded.filters import (
    Combine,
    Filter,
    Group,
    all_of,
    matches,
    to_milvus,
)
from thresholded.filters.chroma import and_where, to_chroma
from thresholded.filters.milvus import StoreDialect
from thresholded.filters.model import keys
from thresholded.milvus_async import needs_thread
from thresholded.milvus_collection import (
    checked_partitions,
    field_dimension,
    ids_matching,
    rows_by_id,
    vectors_of,
)
from thresholded.milvus_expr import all_of_exprs
from thresholded.provenance import Asked, register
from thresholded.rescore import Vector
from thresholded.scores import Metric, ScoreKind
from thresholded.selection import Candidate
from thresholded.stored_vectors import chroma_vectors, faiss_vectors
from thresholded.strict import near_misses, search_ids
from thresholded.wrapped import restricts

_ONLY_IDS = "ids"
"""Where a Chroma store's arguments limit a search to the sections of the listed ids."""
_PARTITIONS = "partition_names"
"""Where a langchain-milvus store's arguments limit a search to the listed partitions."""
_EXPR_PARAMS = "filter_params"
"""Where a langchain-milvus store's arguments give the values of a raw expression's
placeholders (``doc_type == {t}``): they decide what it restricts to."""
STORE_FILTER_KEYS = frozenset(
    {*RAW_EXPR_KEYS, "where", "where_document", _ONLY_IDS, _PARTITIONS, _EXPR_PARAMS}
)
"""Store arguments that limit what a search returns: the retriever's own, never a call's,
never replaced."""
_NAMESPACE = "namespace"
"""Where a langchain-milvus store's arguments name the namespace of a Milvus 2.6 collection
searched (pymilvus sends it with the search): a tenant's rows, as a partition is."""
NEVER_REPLACED = STORE_FILTER_KEYS | {_NAMESPACE}
"""The retriever's own store restrictions, which nothing replaces: a call's ``search_kwargs``
may not hold them, and ``from_retriever``'s may not give the wrapped retriever's anew."""
_STORE_RESTRICTIONS = NEVER_REPLACED - {_EXPR_PARAMS}
"""The store arguments that restrict a search when given (not the values of an expression's
placeholders, which restrict nothing alone)."""
_DENSE = frozenset({ScoreKind.COSINE, ScoreKind.UNKNOWN})
"""Score kinds of a dense search, run by vector where the store can: cosines, and the
scores of a dense store that are not cosines (re-scored, the floor reads their cosine).
Hybrid, sparse and text scores come from a search by query text."""


@dataclass(frozen=True)
class LinkKeys:
    """The metadata keys that hold a document's previous, next and parent ids."""

    prev: str = "prev_id"
    next: str = "next_id"
    parent: str = "parent_id"


class LangChainBackend(StoreDialect):
    """Searches one ``VectorStore`` for the engine."""

    def __init__(
        self,
        store: VectorStore,
        *,
        embeddings: Embeddings | None,
        metric: Metric | None,
        score_kind: ScoreKind,
        search_kwargs: Mapping[str, Any],
        docstore: BaseStore[str, Document] | None,
        link_keys: LinkKeys,
        id_key: str | None,
    ) -> None:
        self._store = store
        self._embeddings = embeddings
        self._metric = metric
        self._kind = score_kind
        self._search_kwargs = dict(search_kwargs)
        self._docstore = docstore
        self._links = link_keys
        self._id_key = id_key
        self._milvus = is_milvus(store)
        self._faiss = is_faiss(store)
        wrapped = _wrapped_retriever(store)
        self._rows = rows_store(store)
        rows_kwargs = self._search_kwargs if wrapped is None else wrapped.search_kwargs
        self._raw_expr = all_of_exprs(raw_exprs(rows_kwargs)) if is_milvus(self._rows) else None
        self._raw_filter = _raw_filter(self._search_kwargs, wrapped)
        self._only_ids = _only_ids(rows_kwargs)
        self._chroma_clauses = _chroma_clauses(rows_kwargs) if is_chroma(self._rows) else {}
        self._admits_nothing = self._only_ids is not None and (
            not self._only_ids
            or (is_milvus(self._rows) and ids_admit_no_row(self._rows, rows_kwargs.get(_ONLY_IDS)))
        )
        self._store_filtered = _store_restricted(rows_kwargs)
        self._partitions = (
            checked_partitions(rows_kwargs.get(_PARTITIONS), argument=_PARTITIONS)
            if is_milvus(self._rows)
            else None
        )
        if docstore is not None:
            _check_held(store)
            _no_expr_params(rows_kwargs)
            _no_namespace(rows_kwargs)
        self._search_type = "similarity" if wrapped is None else wrapped.search_type
        _check_filters_read(
            self._rows, rows_kwargs, held=frozenset({_ONLY_IDS}), search_type=self._search_type
        )
        _check_members(store)
        self._milvus_dimension = _milvus_dimension(self._rows) if is_milvus(self._rows) else None
        self.attempt_timeout: float | None = None  # langchain-milvus applies its own
        self.name = store_name(store)
        by_vector = hasattr(store, "asimilarity_search_with_score_by_vector")
        self.threaded = needs_thread(self._milvus and by_vector, getattr(store, "client", None))
        self.searches_by_vector = _by_vector(store) is not None
        """Whether the store searches by a given vector (else it embeds the question again)."""

    @property
    def embeddings(self) -> Embeddings | None:
        """The model that embeds the question for this store (None: it exposes none)."""
        return self._embeddings

    @property
    def dimension(self) -> int | None:
        """The dimension of the store's vectors, where it can be read: a question of another
        dimension is a ``DimensionMismatchError`` naming both, not the store's own error (a
        Milvus byte count, FAISS's bare ``AssertionError``)."""
        if self._milvus_dimension is not None:
            return self._milvus_dimension
        if is_faiss(self._rows):
            return int(self._rows.index.d) if self._rows.index.ntotal else None
        if isinstance(self._rows, InMemoryVectorStore):
            first = next(iter(self._rows.store.values()), None)
            return len(first["vector"]) if first is not None else None
        return None

    # Filters -------------------------------------------------------------------------------
    def prepare(self, where: Filter | None, options: Mapping[str, Any] | None = None) -> dict:
        """The store arguments of a call: the retriever's ``search_kwargs`` with the call's
        (no store filter: it would replace the retriever's), and the filters in the form the
        store reads, so that it searches inside them: on Milvus one ``expr``
        (:meth:`_with_milvus_expr`), a ``filter`` function on an ``InMemoryVectorStore`` or
        FAISS, a ``where`` clause on Chroma (what it cannot express exactly left out); other
        stores get the retriever's own arguments. The engine checks every document
        against ``where`` whatever the store did."""
        self.check_filter(where)
        extra = dict((options or {}).get("search_kwargs") or {})
        if _filters_read(self._rows) is not None:
            _no_misspelt_restriction(self._rows, extra)
        _no_store_filter_per_call(extra)
        _check_arguments_read(self._rows, extra, "a call's ", self._search_type)
        kwargs = {**self._search_kwargs, **extra}
        if "k" in kwargs:
            raise TypeError("search_kwargs must not contain 'k': pass k=... instead")
        no_score_threshold(kwargs)
        if self._milvus:
            return self._with_milvus_expr(kwargs, where)
        if where is None:
            return kwargs
        if isinstance(self._store, InMemoryVectorStore):
            kwargs["filter"] = _both(kwargs.get("filter"), _matcher(where))
        elif self._faiss:
            kwargs["filter"] = _faiss_filter(self._store, kwargs.get("filter"), where)
        elif is_chroma(self._store):
            written = to_chroma(where).where
            if written is not None:
                kwargs["filter"] = and_where(kwargs.get("filter"), written)
        return kwargs

    def check_filter(self, where: Filter | None) -> None:
        """Refuse a filter the documents of a searched Milvus collection could not be held to
        (see :func:`_check_read_back`, :func:`_check_not_primary_key`)."""
        for searched in _milvus_stores(self._store):
            _check_read_back(searched, where)
            if self._docstore is not None:
                _check_not_primary_key(searched, where)
        if self._milvus:  # a condition Milvus cannot run on its field: refused before a search
            self._milvus_expr(where)

    def _with_milvus_expr(self, kwargs: dict[str, Any], where: Filter | None) -> dict[str, Any]:
        """Milvus reads one ``expr``: the retriever's own restrictions
        (:func:`~langchain_thresholded.milvus.in_one_expr`) AND the filters written by the
        core."""
        return in_one_expr(self._rows, kwargs, self._milvus_expr(where))  # ids held after

    def _milvus_expr(self, where: Filter | None) -> str | None:
        """``where`` written by the core for the store's engine and layout: inside its JSON
        metadata field, or for the type of each declared field it names."""
        rows = self._rows
        layout = {"json_field": json_metadata_field(rows), "declared": declared_fields(rows)}
        return to_milvus(where, self._dialect, **layout).expr

    # Scores --------------------------------------------------------------------------------
    def metric(self, filters: Mapping[str, Any]) -> Metric | None:
        return store_metric(self._store, self._metric, filters)

    def can_push_down(self, metric: Metric | None) -> bool:
        return False

    # Embedding -----------------------------------------------------------------------------
    def embed_query(self, question: Question) -> Vector:
        return self._as_searched(self._require_embeddings().embed_query(question.text))

    async def aembed_query(self, question: Question) -> Vector:
        return self._as_searched(await self._require_embeddings().aembed_query(question.text))

    def searched_vector(self, vector: Vector) -> Vector:
        return self._as_searched(vector)

    def _as_searched(self, vector: Vector) -> Vector:
        """The question as the store searches it: a FAISS store built with ``normalize_L2``
        normalises its vectors and every query, so its scores are cosines of unit vectors."""
        if not getattr(self._store, "_normalize_L2", False):
            return vector
        norm = math.sqrt(math.fsum(x * x for x in vector))
        return [x / norm for x in vector] if norm > 0 else vector

    def embed_texts(self, items: Sequence[Document]) -> list[Vector]:
        return self._require_embeddings().embed_documents([d.page_content for d in items])

    async def aembed_texts(self, items: Sequence[Document]) -> list[Vector]:
        texts = [d.page_content for d in items]
        return await self._require_embeddings().aembed_documents(texts)

    def _require_embeddings(self) -> Embeddings:
        if self._embeddings is None:
            raise ValueError(
                f"{type(self._store).__name__} exposes no single embeddings model: "
                "pass ThresholdedRetriever(embeddings=...)"
            )
        return self._embeddings

    # Search --------------------------------------------------------------------------------
    def search(self, args: SearchArgs) -> list[tuple[Document, float | None]]:
        store, kwargs = self._searched(args), self._with_fetch_k(args)
        found = self._search_once(store, args, kwargs)
        while (wider := self._wider_window(kwargs, args.k, found)) is not None:
            kwargs, found = wider, self._search_once(store, args, wider)
        return found

    async def asearch(self, args: SearchArgs) -> list[tuple[Document, float | None]]:
        store, kwargs = self._searched(args), self._with_fetch_k(args)
        found = await self._asearch_once(store, args, kwargs)
        while (wider := self._wider_window(kwargs, args.k, found)) is not None:
            kwargs, found = wider, await self._asearch_once(store, args, wider)
        return found

    def _search_once(
        self, store: VectorStore, args: SearchArgs, kwargs: Mapping[str, Any]
    ) -> list[tuple[Document, float | None]]:
        k = args.k
        by_vector = _by_vector(store) if self._kind in _DENSE else None
        if by_vector is None or args.vector is None:  # by text (a dense store: checked vector)
            return store.similarity_search_with_score(args.question.text, k=k, **kwargs)
        return by_vector(list(args.vector), k=k, **kwargs)

    async def _asearch_once(
        self, store: VectorStore, args: SearchArgs, kwargs: Mapping[str, Any]
    ) -> list[tuple[Document, float | None]]:
        k = args.k
        if self._kind not in _DENSE or args.vector is None:
            return await store.asimilarity_search_with_score(args.question.text, k=k, **kwargs)
        vector = list(args.vector)
        by_vector = getattr(store, "asimilarity_search_with_score_by_vector", None)
        if by_vector is not None:
            return await by_vector(vector, k=k, **kwargs)
        sync = _by_vector(store)
        if sync is not None:  # e.g. InMemoryVectorStore: no async by-vector search
            return await run_in_executor(None, sync, vector, k=k, **kwargs)
        return await store.asimilarity_search_with_score(args.question.text, k=k, **kwargs)

    def _searched(self, args: SearchArgs) -> VectorStore:
        """The store (Milvus: its ORM connection made, its collection there); a wrapped
        retriever asked for ``k`` documents when widened."""
        store = self._store
        for searched in _milvus_stores(store):
            _ensure_orm_connection(searched)
            ensure_collection(searched)
        return store.resized() if args.widened and isinstance(store, RetrieverSource) else store

    def _with_fetch_k(self, args: SearchArgs) -> Mapping[str, Any]:
        """FAISS filters the ``fetch_k`` nearest rows after its search (20 by default): a
        filtered search is given a window
        (:func:`~langchain_thresholded.faiss_window.first_window`)."""
        kwargs = args.filters
        return first_window(self._store, kwargs, args.k) if self._faiss else kwargs

    def _wider_window(
        self, kwargs: Mapping[str, Any], k: int, found: Sequence[Any]
    ) -> Mapping[str, Any] | None:
        """The filtered FAISS search again over a wider window, when it found too few
        (:func:`~langchain_thresholded.faiss_window.wider_window`); None: it was complete."""
        return wider_window(self._store, kwargs, k, len(found)) if self._faiss else None

    # Sections by id ------------------------------------------------------------------------
    def fetch(self, ids: list[str], where: Filter | None = None) -> dict[str, Document]:
        """Sections by id, each the copy a search would return: the store's (a wrapped
        retriever's, an ensemble member's), where it holds the section and reads it back by id
        (``get_by_ids``, a Milvus or Chroma collection's query), else the docstore's (a
        summary kept there only, a store that cannot read by id). A docstore copy left as it
        was when the section was changed in the store is never the one judged by the
        filters."""
        return drive(self._fetch(ids))

    async def afetch(self, ids: list[str], where: Filter | None = None) -> dict[str, Document]:
        return await adrive(self._fetch(ids))

    def _fetch(self, ids: list[str]) -> Pipeline[dict[str, Document]]:
        """The stores' own copies of ``ids``, by id (:func:`_searched_stores`: a wrapped
        retriever's, an ensemble's members', in order), then the docstore's of those no store
        holds (:class:`~thresholded.attachments.FirstCopies`)."""
        if self._docstore is None:
            return {}
        copies = FirstCopies(ids, attrgetter("metadata"))
        for searched in _searched_stores(self._store):
            if missing := copies.missing:
                copies.take(searched.where, (yield _read_step(searched.store, missing)))
        found, unread = copies.found, copies.unread
        if unread:
            found.update(_found(unread, (yield Step.call(self._docstore, "mget", unread))))
        if found and (self._raw_expr or self._partitions or self._chroma_clauses):
            # the collection is asked by its blocking client: awaited, in a thread
            admitted = partial(self._admitted, found)
            return (yield Step(admitted, partial(run_in_executor, None, admitted)))
        return self._admitted(found)

    def _admitted(self, found: dict[str, Document]) -> dict[str, Document]:
        """What was fetched by id, held to the retriever's raw store restrictions: its
        filter function (or a wrapped retriever's structured filter), its ``ids``, on
        Milvus its ``expr`` and ``partition_names``, on Chroma its ``filter`` (a ``where``)
        and ``where_document`` (a wrapped retriever's too), which the collection itself
        checks by id (a section it does not hold, a summary in the docstore only, is not
        within them)."""
        if self._raw_filter is not None:
            found = {i: d for i, d in found.items() if self._raw_filter(d)}
        if self._only_ids is not None:
            found = {i: d for i, d in found.items() if i in self._only_ids}
        if found and (self._raw_expr or self._partitions):
            allowed = self._milvus_allowed(list(found))
            found = {i: d for i, d in found.items() if i in allowed}
        if found and self._chroma_clauses:
            allowed = ids_within(self._rows._collection, list(found), self._chroma_clauses)
            found = {i: d for i, d in found.items() if i in allowed}
        return found

    def _milvus_allowed(self, ids: list[str]) -> set[str]:
        """The ids among ``ids`` whose rows satisfy the raw expressions and lie in the
        partitions the retriever searches."""
        rows = self._rows
        _ensure_orm_connection(rows)
        pk = primary_field(rows) or "pk"
        name = rows.collection_name
        return ids_matching(
            rows.client,
            name,
            pk,
            ids,
            self._raw_expr,
            partitions=self._partitions,
            integer=not varchar_key(rows),
        )

    def fetch_vectors(self, ids: list[str]) -> dict[str, Vector]:
        """Stored vectors by id: an ``InMemoryVectorStore``'s or a FAISS index's own, a Milvus
        collection's vector field in one query, Chroma's embeddings in one ``get``; other
        stores cannot read theirs back."""
        store = self._store
        if isinstance(store, InMemoryVectorStore):
            return _in_memory_vectors(store, ids)
        if self._milvus:
            _ensure_orm_connection(store)
            return _milvus_vectors(store, ids)
        if is_named(store, "FAISS") and hasattr(store, "index_to_docstore_id"):
            return faiss_vectors(store.index, store.index_to_docstore_id, ids)
        if is_named(store, "Chroma") and hasattr(store, "_collection"):
            return chroma_vectors(store._collection, ids)
        return {}

    async def afetch_vectors(self, ids: list[str]) -> dict[str, Vector]:
        if self._milvus:  # the store's blocking client, in a thread
            return await run_in_executor(None, self.fetch_vectors, ids)
        return self.fetch_vectors(ids)

    # Translation ---------------------------------------------------------------------------
    def stored_vector(self, item: Document) -> Vector | None:
        """An ``InMemoryVectorStore`` holds its vectors in memory: read, not fetched."""
        if isinstance(self._store, InMemoryVectorStore) and item.id is not None:
            return _in_memory_vectors(self._store, [item.id]).get(item.id)
        return None

    def links(self, item: Document) -> Links:
        meta, keys = item.metadata, self._links
        return Links(_link(meta, keys.prev), _link(meta, keys.next), _link(meta, keys.parent))

    def identify(
        self, item: Document, source_key: str, key: str | None = None
    ) -> tuple[str, str | None, int]:
        item_id = stored_id(item, self._id_key) or key or document_id(item)
        return item_id, source_of(item, source_key, item_id), len(item.page_content)

    def metadata(self, item: Document) -> Mapping[str, Any]:
        return item.metadata

    @property
    def restricted(self) -> bool:
        """Its sections are limited by more than the filters: by their ids
        (``search_kwargs["ids"]``, which a store may ignore), or, with a docstore, by the
        ``filters`` of the ``ThresholdedRetriever``s it wraps, which the neighbours and
        summaries fetched from the docstore are held to."""
        return self._only_ids is not None or self._wrapped_where() is not None

    @property
    def fetch_holds_back(self) -> bool:
        """The store's own restrictions hold sections back, those in ``search_kwargs`` or a
        wrapped ensemble's members' (their store filters, any member's ``filters``): ``fetch``
        holds what the docstore returns to them (a store filter they cannot be held to, such
        as a FAISS ``filter``, is refused with a docstore)."""
        raw = self._raw_filter is not None or self._only_ids is not None
        if raw or self._raw_expr or self._partitions or self._store_filtered:
            return True
        members = _store_members(self._store.retriever) if _wraps_an_ensemble(self._store) else []
        restricted = any(_store_restricted(kwargs) for _, kwargs in members)
        return restricted or any(s.where is not None for s in _searched_stores(self._store))

    def admits(self, item: Document) -> bool:
        item_id = stored_id(item, self._id_key) or document_id(item)
        if self._only_ids is not None and item_id not in self._only_ids:
            return False
        where = self._wrapped_where()
        return where is None or matches(where, item.metadata)

    @property
    def admits_nothing(self) -> bool:
        """``search_kwargs={"ids": []}``, or on Milvus ids its primary key cannot be: no
        section is within them."""
        return self._admits_nothing

    def _wrapped_where(self) -> Filter | None:
        """The wrapped retrievers' filters, read when asked: they may have changed."""
        return None if self._docstore is None else _members_where(self._store)


class QuestionEmbedder:
    """Embeds a question with a given model, for the engine (``plan(embedder=...)``)."""

    def __init__(self, embeddings: Embeddings) -> None:
        self._embeddings = embeddings

    def embed_query(self, question: Question) -> Vector:
        return self._embeddings.embed_query(question.text)

    async def aembed_query(self, question: Question) -> Vector:
        return await self._embeddings.aembed_query(question.text)


def output(
    candidate: Candidate[Document], *, asked: Asked, collection_key: str | None = None
) -> Document:
    """The returned copy of a kept section or an attachment, marked; the store's is left as it
    was. Marks the store itself holds are removed first: only this package writes them. The
    copy is registered as this package's (:mod:`thresholded.provenance`)."""
    written = metadata_keys.marks(candidate, collection_key=collection_key)
    copy = marked_copy(candidate.item, written, doc_id=candidate.id)
    return register(copy, asked)


def _by_vector(store: VectorStore) -> Callable[..., list[tuple[Document, float]]] | None:
    """The store's search by vector that returns raw scores, where it has one. Chroma's is
    named ``..._with_relevance_scores`` but returns its space's raw distance."""
    if is_chroma(store):
        return store.similarity_search_by_vector_with_relevance_scores
    return getattr(store, "similarity_search_with_score_by_vector", None)


def _in_memory_vectors(store: InMemoryVectorStore, ids: list[str]) -> dict[str, Vector]:
    entries = ((i, store.store.get(i)) for i in ids)
    return {i: entry["vector"] for i, entry in entries if entry and entry.get("vector") is not None}


def _milvus_vectors(store: Any, ids: list[str]) -> dict[str, Vector]:
    """The vector field of ``ids`` in a langchain-milvus collection, in one query per batch
    of ids."""
    pk, field = str(store._primary_field), store._vector_field
    if not isinstance(field, str):  # several vector fields (hybrid): which one is dense?
        return {}
    return vectors_of(_milvus_rows(store, ids, [pk, field]), pk, field)


def _milvus_documents(store: Any, ids: list[str]) -> dict[str, Document]:
    """The documents of ``ids`` in a langchain-milvus collection, by id, in one query, each
    read as its search reads a row (its primary key among the metadata)."""
    pk = str(store._primary_field)
    rows = _milvus_rows(store, ids, ["*"])
    return {str(row[pk]): store._parse_document(dict(row)) for row in rows}


def _milvus_rows(store: Any, ids: list[str], fields: list[str]) -> list[dict[str, Any]]:
    """The rows of ``ids`` in a langchain-milvus collection, ``fields`` of each, in one query
    per batch of ids (:func:`~thresholded.milvus_collection.rows_by_id`)."""
    pk = str(store._primary_field)
    return rows_by_id(
        store.client.query,
        store.collection_name,
        pk,
        ids,
        fields,
        integer=not varchar_key(store),
        timeout=getattr(store, "timeout", None),
    )


def _chroma_documents(store: Any, ids: list[str]) -> dict[str, Document]:
    """The documents of ``ids`` in a langchain-chroma collection, by id, read as its search
    reads a row: one without metadata has none (its ``get_by_ids`` gives it None, which a
    ``Document`` refuses), one without text is none."""
    rows = store.get(ids=list(ids), include=["documents", "metadatas"])
    found = zip(rows["ids"], rows["documents"], rows["metadatas"], strict=True)
    return {
        i: Document(id=i, page_content=text, metadata=meta or {})
        for i, text, meta in found
        if text is not None
    }


def _milvus_dimension(store: Any) -> int | None:
    """The dimension of a langchain-milvus collection's dense vector field; None where it has
    several, or the collection cannot be read (it may not exist yet)."""
    field = getattr(store, "_vector_field", None)
    if not isinstance(field, str):
        return None
    return field_dimension(store.client, store.collection_name, field)


def _own_fields(store: Any) -> frozenset[str]:
    """The fields of a langchain-milvus collection that a document does not carry in its
    metadata: its text and vector fields, and, where its metadata is one JSON field, that
    field and the primary key."""
    vectors = store._vector_field
    fields = {store._text_field, *([vectors] if isinstance(vectors, str) else vectors)}
    if getattr(store, "_metadata_field", None):
        fields |= {store._metadata_field, str(store._primary_field)}
    return frozenset(fields)


class _Searched(NamedTuple):
    """A store a search of a ``RetrieverSource`` runs, and what the member searching it holds
    its documents to (a ``ThresholdedRetriever``'s filters; None: nothing)."""

    store: VectorStore
    where: Filter | None = None


def _searched_stores(store: VectorStore, depth: int = 0) -> list[_Searched]:
    """The stores whose documents a search of ``store`` returns: itself, or those the
    retrievers a ``RetrieverSource`` runs search (a store's ``as_retriever()``, a
    ``ThresholdedRetriever``, an ensemble's members, however bound), in member order, each
    with the filters of the member that searches it (read when asked: they may change)."""
    if not isinstance(store, RetrieverSource):
        return [_Searched(store)]
    if depth > 8:
        return []
    found = []
    for member in members_of(store.retriever):
        inner = getattr(unbound(member)[0], "vectorstore", None)
        if isinstance(inner, VectorStore) and inner is not store:
            own = _member_where(member) if _filtered_only(member) else None
            found += [
                _Searched(s.store, all_of(own, s.where)) for s in _searched_stores(inner, depth + 1)
            ]
    return found


def _milvus_stores(store: VectorStore) -> list[Any]:
    """The langchain-milvus stores whose documents a search of ``store`` returns
    (:func:`_searched_stores`), which a ``RetrieverSource`` runs without the filters: their
    documents are checked against them as they come back."""
    return [s.store for s in _searched_stores(store) if is_milvus(s.store)]


def _read_by_id(store: VectorStore, ids: list[str]) -> dict[str, Document]:
    """A store's own copies of ``ids``, by id: a Milvus collection's rows in one query, a
    Chroma collection's in one ``get``, both read as a search reads them, another store's
    ``get_by_ids`` (none where it cannot read them by id)."""
    if is_milvus(store):
        _ensure_orm_connection(store)
        return _milvus_documents(store, ids)
    if is_chroma(store):
        return _chroma_documents(store, ids)
    return _by_id(ids, store.get_by_ids(ids)) if _reads_by_id(store) else {}


async def _aread_by_id(store: VectorStore, ids: list[str]) -> dict[str, Document]:
    """:func:`_read_by_id` awaited: a Milvus or Chroma store's blocking client in a thread."""
    if is_milvus(store) or is_chroma(store):
        return await run_in_executor(None, _read_by_id, store, ids)
    return _by_id(ids, await store.aget_by_ids(ids)) if _reads_by_id(store) else {}


def _read_step(store: VectorStore, ids: list[str]) -> Step:
    """A store's own copies of ``ids``, read or awaited."""
    return Step(lambda: _read_by_id(store, ids), lambda: _aread_by_id(store, ids))


def _check_read_back(store: Any, where: Filter | None) -> None:
    """Refuse a filter on a key a langchain-milvus store does not read back (its own fields:
    its text and vectors, or metadata outside its declared fields): Milvus would test it, but
    its documents would carry none of it, so NOT over it (or NE) would let every one through.
    A store whose ``metadata_field`` its collection does not hold is refused outright."""
    check_metadata_field(store)
    own = sorted(keys(where) & _own_fields(store))
    if own:
        raise UnsafeFilterError(
            f"the filter names {', '.join(map(repr, own))}: a field of {store_name(store)} "
            "that is not in the documents' metadata (the text or a vector), which Milvus would "
            "test but the documents returned could not be checked against. Filter on "
            "metadata keys only"
        )
    returned = _returned_fields(store)
    unread = [] if returned is None else sorted(keys(where) - returned)
    if unread:
        raise UnsafeFilterError(
            f"the filter names {', '.join(map(repr, unread))}, which {store_name(store)} does "
            "not read back: the store was opened with enable_dynamic_field=False, so its "
            "documents carry only the collection's declared fields, and could not be "
            f"checked against the filter. {_read_back_fix(store)}"
        )


def _read_back_fix(store: Any) -> str:
    """How to open a store so that it reads its metadata back: with the collection's dynamic
    field where it has one, else with the JSON field its metadata may be kept in."""
    named = " or ".join(f"metadata_field={f!r}" for f in json_fields(store))
    if named and not getattr(store.col.schema, "enable_dynamic_field", False):
        return (
            f"Its collection has no dynamic field: if its metadata is kept in one JSON field, "
            f"open the store with {named}; else filter on declared fields"
        )
    return (
        "Open the store with enable_dynamic_field=True (existing_milvus_store reads it from "
        "the collection), or filter on declared fields"
    )


def _check_not_primary_key(store: Any, where: Filter | None) -> None:
    """Refuse a filter on a langchain-milvus store's primary key where neighbours and
    summaries may come from a docstore: the store adds the key to the documents it returns,
    but the docstore's documents (a summary the collection does not hold, say) do not carry
    it, so every one of them would pass ``pk != x``, x itself included."""
    pk = primary_field(store)
    if pk is not None and pk in keys(where):
        raise UnsafeFilterError(
            f"the filter names {pk!r}, the primary key of {store_name(store)}: langchain-milvus "
            "adds it to the documents it returns, but a neighbour or summary the collection does "
            "not hold comes from the docstore, whose documents do not carry it, so the filter "
            f"could not hold for them (each would pass {pk!r} != ...). Filter on a metadata key "
            "the documents carry (store the id in the metadata under a name of its own), or "
            "leave the docstore out"
        )


def _returned_fields(store: Any) -> frozenset[str] | None:
    """The metadata keys a langchain-milvus store's documents can carry: None (any key) when
    it reads its dynamic field back or keeps metadata in one JSON field; else only the
    collection's declared fields, as the store requests no others."""
    if getattr(store, "enable_dynamic_field", True) or getattr(store, "_metadata_field", None):
        return None
    if getattr(store, "col", None) is None:  # no collection yet: nothing to read back
        return None
    return frozenset(str(f) for f in getattr(store, "fields", None) or ())


def no_score_threshold(search_kwargs: Mapping[str, Any]) -> None:
    """``search_kwargs["score_threshold"]`` is refused: stores read it on their own scale
    (InMemory and Milvus ignore it; FAISS cuts its raw squared L2 distances with it, which
    empties an on-topic result), never as the cosine floor it looks like."""
    if "score_threshold" in search_kwargs:
        raise ValueError(
            "search_kwargs must not contain 'score_threshold': stores read it on their own "
            "scale (some ignore it, FAISS compares it with raw distances), not as a cosine. "
            "Set the floor with policy=RetrievalPolicy(min_similarity=...), or per call "
            "min_similarity=..."
        )


def _only_ids(search_kwargs: Mapping[str, Any]) -> frozenset[str] | None:
    """The ids a store's arguments limit a search to (one id or a list); None: any."""
    given = search_ids(search_kwargs.get(_ONLY_IDS), argument=f"search_kwargs[{_ONLY_IDS!r}]")
    return None if given is None else frozenset(given)


def _wrapped_retriever(store: VectorStore) -> VectorStoreRetriever | None:
    """The ``store.as_retriever(...)`` a ``RetrieverSource`` runs; None for any other store."""
    inner = store.retriever if isinstance(store, RetrieverSource) else None
    return inner if isinstance(inner, VectorStoreRetriever) else None


def rows_store(store: VectorStore) -> VectorStore:
    """The store whose rows a search returns: the store, or the one a wrapped
    ``store.as_retriever(...)`` searches (e.g. its MMR search) with its own arguments."""
    wrapped = _wrapped_retriever(store)
    return store if wrapped is None else wrapped.vectorstore


def primary_field(store: VectorStore) -> str | None:
    """The primary key field of a langchain-milvus store, which it puts in each document's
    metadata; None for any other store."""
    return str(getattr(store, "_primary_field", "pk")) if is_milvus(store) else None


def _raw_filter(
    search_kwargs: Mapping[str, Any], wrapped: VectorStoreRetriever | None
) -> Callable[[Document], bool] | None:
    """What sections fetched by id are held to on their metadata: the retriever's own filter
    function, or the structured filter of a wrapped retriever (of a Milvus store, its
    expressions are held by id instead)."""
    own = search_kwargs.get("filter")
    if callable(own):
        return own
    if wrapped is None or is_milvus(wrapped.vectorstore):
        return None
    held = _structured(wrapped.search_kwargs.get("filter"))
    return None if held is None else _matcher(held)


def _chroma_clauses(search_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """A langchain-chroma store's own restrictions, as its collection's ``get`` reads them:
    its ``filter`` is the ``where`` clause, its ``where_document`` the same."""
    given = {
        "where": search_kwargs.get("filter"),
        "where_document": search_kwargs.get("where_document"),
    }
    return {key: clause for key, clause in given.items() if restricts(clause)}


def _check_held(store: VectorStore) -> None:
    """The restrictions of the retrievers a ``RetrieverSource`` runs hold for their search
    only: refused where the neighbours and summaries fetched from the docstore could not be
    held to them."""
    inner = type(getattr(store, "retriever", store)).__name__
    unread = _unread_members(store)
    if unread:
        raise ValueError(
            f"the restrictions of the wrapped {inner}{''.join(unread)} cannot be read, so the "
            "neighbours and summaries fetched from the docstore could not be held to them: "
            "wrap a retriever that is restricted by filters=... alone (a store's "
            "as_retriever() without a filter, or a ThresholdedRetriever) and pass "
            "filters=... (a structured filter or a dict such as {'doc_type': 'public'}), "
            "which holds for both; or leave the docstore out"
        )
    unheld = _unheld_filters(store)
    if unheld:
        raise ValueError(
            f"the wrapped {inner} holds store filters ({', '.join(unheld)}) that hold for its "
            "search but not for the neighbours and summaries fetched from the docstore: build "
            "it without them and pass filters=... (a structured filter or a dict such as "
            "{'doc_type': 'public'}), which holds for both"
        )


def _unheld_filters(store: VectorStore) -> list[str]:
    """Every store filter of the retrievers a ``RetrieverSource`` runs; of a wrapped
    ``store.as_retriever(...)``, but those held for sections fetched by id: a Milvus
    store's expressions and partitions, a Chroma store's ``filter`` and
    ``where_document`` (held by id), another store's structured filter (held on metadata),
    and its ``ids``."""
    if not isinstance(store, RetrieverSource):
        return []
    wrapped = _wrapped_retriever(store)
    if wrapped is None:
        members = members_of(store.retriever)
        kwargs = [m.search_kwargs for m in members if isinstance(m, VectorStoreRetriever)]
        return sorted({key for each in kwargs for key in _filter_keys(each, NEVER_REPLACED)})
    held: tuple[str, ...] = (_ONLY_IDS,)
    if is_milvus(wrapped.vectorstore):
        held += (*RAW_EXPR_KEYS, _PARTITIONS)
    elif is_chroma(wrapped.vectorstore):
        held += ("filter", "where_document")
    elif _structured(wrapped.search_kwargs.get("filter")):
        held += ("filter",)
    return [key for key in _filter_keys(wrapped.search_kwargs, NEVER_REPLACED) if key not in held]


def source_settings(store: VectorStore) -> list[Any]:
    """What the backend reads of the retrievers a ``RetrieverSource`` runs: the wrapped
    retriever, an ensemble's members, and each one's fields (its store arguments, a
    ``ThresholdedRetriever``'s filters); nothing for any other store."""
    if not isinstance(store, RetrieverSource):
        return []
    inner = store.retriever
    return [inner, *((m, _fields(m)) for m in members_of(inner))]


def _fields(retriever: BaseRetriever) -> dict[str, Any]:
    """A member's pydantic fields; none for a runnable that is no model (a ``RunnableLambda``,
    which an ensemble takes too: the backend reads nothing of it)."""
    names = getattr(type(retriever), "model_fields", None) or {}
    return {name: getattr(retriever, name, None) for name in names}


def _store_restricted(search_kwargs: Mapping[str, Any]) -> bool:
    """Whether a store's arguments restrict its search (an empty or None value does not)."""
    return any(restricts(search_kwargs.get(key)) for key in _STORE_RESTRICTIONS)


def _wraps_an_ensemble(store: VectorStore) -> bool:
    """Whether ``store`` is a ``RetrieverSource`` running other than a store's
    ``as_retriever(...)``: an ensemble, a ``ThresholdedRetriever``..."""
    return isinstance(store, RetrieverSource) and _wrapped_retriever(store) is None


def _check_members(store: VectorStore) -> None:
    """Each ``store.as_retriever(...)`` member of a wrapped ensemble searches with its own
    ``search_kwargs``: they are checked as the retriever's own are (its store filters are
    read by its store; on Milvus, its partitions name some)."""
    if not _wraps_an_ensemble(store):
        return
    for member, search_kwargs in _store_members(store.retriever):
        milvus = is_milvus(member.vectorstore)
        _check_filters_read(
            member.vectorstore,
            search_kwargs,
            "a member's ",
            held=frozenset({_ONLY_IDS}) if milvus else frozenset(),  # a test of its key
            search_type=member.search_type,
        )
        if milvus:
            search_ids(search_kwargs.get(_ONLY_IDS), argument="a member's search_kwargs['ids']")
            partitions = search_kwargs.get(_PARTITIONS)
            checked_partitions(partitions, argument=f"a member's {_PARTITIONS}")


def _filters_read(store: VectorStore) -> frozenset[str] | None:
    """The store filters ``store``'s search reads; None where it is not known."""
    if is_milvus(store):
        return frozenset({*RAW_EXPR_KEYS, _PARTITIONS, _EXPR_PARAMS})
    if is_chroma(store):
        return frozenset({"filter", "where_document", _ONLY_IDS})
    if type(store) is InMemoryVectorStore or is_faiss(store):
        return frozenset({"filter"})
    return None


def _arguments_read(store: VectorStore, search_type: str) -> frozenset[str] | None:
    """Every argument ``store``'s search of ``search_type`` reads besides ``k``, where all are
    known (an ``InMemoryVectorStore``, FAISS); None elsewhere."""
    if type(store) is InMemoryVectorStore:
        read = {"filter"}
    elif is_faiss(store):
        read = {"filter", "fetch_k"}
    else:
        return None
    return frozenset(read | ({"fetch_k", "lambda_mult"} if search_type == "mmr" else set()))


def _check_arguments_read(
    store: VectorStore,
    search_kwargs: Mapping[str, Any],
    whose: str = "",
    search_type: str = "similarity",
    held: frozenset[str] = frozenset(),
) -> None:
    """Refuse an argument ``store``'s search drops without a word (``{"tenant": "a"}`` on an
    ``InMemoryVectorStore``): whatever it was meant to restrict would not be restricted."""
    read = _arguments_read(store, search_type)
    if read is None:
        return
    refused_elsewhere = {"k", "score_threshold"}  # each with an error of its own
    unread = sorted(
        key
        for key, value in search_kwargs.items()
        if value is not None and key not in read | held | refused_elsewhere
    )
    if unread:
        raise TypeError(
            f"{whose}search_kwargs {unread} are no arguments {type(store).__name__}'s "
            f"{search_type} search reads (it reads {sorted(read)}): it would drop them without "
            "a word, so a setting among them would not apply and a restriction would not "
            "hold. Leave them out; restrict with filters=... (a structured filter or a dict "
            "such as {'tenant': 'a'}), which every store applies"
        )


def _check_filters_read(
    store: VectorStore,
    search_kwargs: Mapping[str, Any],
    whose: str = "",
    held: frozenset[str] = frozenset(),
    search_type: str = "similarity",
) -> None:
    """Refuse a store filter the store's search does not read, but those the engine holds
    itself (``held``: the retriever's own ``ids``; a Milvus ensemble member's, a test of its
    key in its expression): a store drops unknown arguments without a word (``where`` on
    Milvus or an ``InMemoryVectorStore``), so the restriction would not hold and every
    document would come back."""
    read = _filters_read(store)
    if read is None:
        _check_function_read(store, search_kwargs, whose)
        return
    _no_misspelt_restriction(store, search_kwargs, whose)
    read |= held
    unread = [k for k in _filter_keys(search_kwargs) if k not in read]
    if unread:
        raise ValueError(
            f"{whose}search_kwargs {unread} are not filters {type(store).__name__}'s search "
            f"reads (it reads {sorted(read)}), which drops them: nothing would be "
            "restricted. Give the restriction as filters=... (a structured filter or a dict "
            "such as {'doc_type': 'public'}), which every store applies"
        )
    _check_filter_callable(store, search_kwargs, whose)
    _check_arguments_read(store, search_kwargs, whose, search_type, held)


def _no_misspelt_restriction(
    store: VectorStore, search_kwargs: Mapping[str, Any], whose: str = ""
) -> None:
    """Refuse a store argument spelt like a store filter but not one (``filtr``, ``filters``,
    ``partition_name``): ``store`` (one whose search arguments are known) drops it without
    a word, so the restriction meant would not hold."""
    for given, meant in near_misses(search_kwargs, NEVER_REPLACED | {"filter"}):
        raise TypeError(
            f"{whose}search_kwargs {given!r} is no argument {type(store).__name__}'s search "
            f"reads (did you mean {meant!r}?): it would be dropped, and nothing restricted. "
            "Restrict with filters=... (a structured filter or a dict such as "
            "{'doc_type': 'public'}), which every store applies"
        )


def _check_function_read(store: VectorStore, search_kwargs: Mapping[str, Any], whose: str) -> None:
    """Refuse a ``filter`` function for a store whose search is not known to read one: the
    engine cannot hold the documents to it (it cannot tell a function of a ``Document`` from
    one of metadata, FAISS's), and a store that drops it (a search that reads no ``filter``,
    or reads a dict there) would restrict nothing. An ``InMemoryVectorStore`` subclass that
    overrides none of its searches reads one as it does."""
    if not callable(search_kwargs.get("filter")) or _searches_in_memory(store):
        return
    raise ValueError(
        f"{whose}search_kwargs['filter'] is a function, and {type(store).__name__}'s search is "
        "not known to read one: a store that drops it would restrict nothing, and every "
        "document would come back. Give the restriction as filters=... (a structured filter "
        "or a dict such as {'doc_type': 'public'}), which every store applies"
    )


def _searches_in_memory(store: VectorStore) -> bool:
    """Whether ``store`` searches as ``InMemoryVectorStore`` does: one, or a subclass that
    defines no search of its own (its searches call the ``filter`` function on each
    document)."""
    if not isinstance(store, InMemoryVectorStore):
        return False
    mro = type(store).__mro__
    below = mro[: mro.index(InMemoryVectorStore)]
    return not any("search" in name for cls in below for name in vars(cls))


def _check_filter_callable(
    store: VectorStore, search_kwargs: Mapping[str, Any], whose: str
) -> None:
    """Refuse an ``InMemoryVectorStore`` ``filter`` that is not a function: the store calls
    it on each document, so a dict (Chroma's or FAISS's form) or an expression failed at the
    first search with "'dict' object is not callable"."""
    raw = search_kwargs.get("filter")
    if type(store) is not InMemoryVectorStore or raw is None or callable(raw):
        return
    raise ValueError(
        f"{whose}search_kwargs['filter'] is a {type(raw).__name__} ({raw!r}), but "
        "InMemoryVectorStore filters with a function of a Document: give the restriction as "
        "filters=... (a structured filter or a dict such as {'doc_type': 'public'}), which "
        "every store applies"
    )


def _store_members(
    retriever: Any, depth: int = 0, bound: Mapping[str, Any] | None = None
) -> list[tuple[VectorStoreRetriever, dict[str, Any]]]:
    """The ``store.as_retriever(...)`` members of an ensemble, however they are wrapped:
    nested ensembles, ``with_retry()``, ``with_config(...)``, ``with_fallbacks(...)`` (each
    fallback searches with its own arguments too), each with the store arguments its
    search gets: its ``search_kwargs`` and those a binding adds (``bind(where=...)``, passed
    on through fallbacks, not through an ensemble, which calls its members without them)."""
    retriever, kwargs = unbound(retriever)
    kwargs = {**kwargs, **(bound or {})}
    if depth > 8:
        return []
    if isinstance(retriever, RunnableWithFallbacks):
        inner, passed = [retriever.runnable, *retriever.fallbacks], kwargs
    elif is_ensemble(retriever):
        inner, passed = members_of(retriever), {}
    elif isinstance(retriever, VectorStoreRetriever):
        return [(retriever, {**retriever.search_kwargs, **kwargs})]
    else:
        return []
    return [m for r in inner for m in _store_members(r, depth + 1, passed)]


def _unread_members(store: VectorStore) -> list[str]:
    """The retrievers a ``RetrieverSource`` runs (not a ``store.as_retriever(...)``) whose
    restrictions cannot be read: any but a store's ``as_retriever(...)`` and a
    ``ThresholdedRetriever`` over a store, restricted by its ``filters`` alone."""
    if not isinstance(store, RetrieverSource) or _wrapped_retriever(store) is not None:
        return []
    if not is_ensemble(store.retriever):
        return [] if _readable(store.retriever) else [""]
    members = enumerate(members_of(store.retriever))
    return [f"'s member {i} ({type(m).__name__})" for i, m in members if not _readable(m)]


def _readable(retriever: BaseRetriever) -> bool:
    """Whether a wrapped retriever's restrictions can be read: a store's
    ``as_retriever(...)`` (its store filters), or a ``ThresholdedRetriever`` restricted by
    its filters alone."""
    return isinstance(retriever, VectorStoreRetriever) or _filtered_only(retriever)


def _filtered_only(retriever: BaseRetriever) -> bool:
    """Whether ``retriever`` is a ``ThresholdedRetriever`` over a store whose only
    restriction is its ``filters`` (and ``call_filters``): what ``as_collection().where``
    says, which holds on metadata; bound in ``bind(filters=...)``, those filters too."""
    inner, kwargs = unbound(retriever)
    store = getattr(inner, "vectorstore", None)
    if not hasattr(inner, "as_collection") or not isinstance(store, VectorStore):
        return False
    if isinstance(store, RetrieverSource) or getattr(inner, "expr", None):
        return False
    if _filter_keys(getattr(inner, "search_kwargs", None) or {}):
        return False
    return all(_readable_filter(kwargs.get(key)) for key in _BOUND_FILTERS)


_BOUND_FILTERS = ("filters", "filter")
"""The call arguments of a ``ThresholdedRetriever`` that filter, which a binding may give."""


def _readable_filter(value: Any) -> bool:
    """Whether a filter is one the filter model reads (None is no filter)."""
    try:
        to_filter(value)
    except (TypeError, ValueError):
        return False
    return True


def _member_where(member: BaseRetriever) -> Filter | None:
    """What a ``ThresholdedRetriever`` restricted by its filters alone returns: its
    ``filters`` and ``call_filters``, and those a binding gives its every search."""
    inner, kwargs = unbound(member)
    bound = (to_filter(kwargs.get(key)) for key in _BOUND_FILTERS)
    return all_of(inner.as_collection().where, *bound)


def _members_where(store: VectorStore) -> Filter | None:
    """What a document must satisfy to be one the retrievers a ``RetrieverSource`` runs may
    return: any member's filters (None when one of them has none)."""
    if not isinstance(store, RetrieverSource) or _wrapped_retriever(store) is not None:
        return None
    wheres = [_member_where(m) if _filtered_only(m) else None for m in members_of(store.retriever)]
    if any(w is None for w in wheres):
        return None
    return wheres[0] if len(wheres) == 1 else Group(Combine.OR, tuple(wheres))


def _filter_keys(
    search_kwargs: Mapping[str, Any], keys: frozenset[str] = STORE_FILTER_KEYS
) -> list[str]:
    """The store filters among a store's arguments (with ``NEVER_REPLACED``, a Milvus
    namespace too)."""
    return sorted(key for key in keys if search_kwargs.get(key) is not None)


def _structured(raw: Any) -> Filter | None:
    """A store filter in the core model, where it is a structured filter or its dict form."""
    try:
        return to_filter(raw)
    except (TypeError, ValueError):
        return None


def _no_namespace(search_kwargs: Mapping[str, Any]) -> None:
    """With a docstore, no Milvus ``namespace``: the neighbours and summaries fetched from it
    are checked by id against the expression and the partitions, never a namespace, so
    another namespace's sections would be attached."""
    if search_kwargs.get(_NAMESPACE) is not None:
        raise ValueError(
            f"search_kwargs[{_NAMESPACE!r}] restricts the search to a namespace, which the "
            "neighbours and summaries fetched from the docstore are not held to: give the "
            "restriction as filters=... (a structured filter or a dict such as "
            "{'tenant': 'a'}), which holds for both, or leave the docstore out"
        )


def _no_expr_params(search_kwargs: Mapping[str, Any]) -> None:
    """With a docstore, a raw expression's placeholders hold no values given apart: the
    neighbours and summaries fetched from it are checked against the expression alone."""
    if search_kwargs.get(_EXPR_PARAMS):
        raise ValueError(
            f"search_kwargs[{_EXPR_PARAMS!r}] fill the placeholders of a raw expression, "
            "which the neighbours and summaries fetched from the docstore are checked "
            "against without them: write the values into the expression, or give "
            "filters=... (a structured filter or a dict such as {'doc_type': 'public'})"
        )


def _no_store_filter_per_call(search_kwargs: Mapping[str, Any]) -> None:
    """A call's ``search_kwargs`` hold no store filter: it would replace the retriever's, and
    the neighbours and summaries fetched from the docstore would not be held to it. A key
    given as None is refused too: it replaces the retriever's own with no restriction."""
    given = sorted(key for key in NEVER_REPLACED if key in search_kwargs)
    if given:
        raise TypeError(
            f"a call's search_kwargs hold a store filter ({', '.join(given)}), which would "
            "replace the retriever's own: pass filters=... (a structured filter), which narrows "
            "it"
        )


def _matcher(where: Filter) -> Callable[[Document], bool]:
    return lambda doc: matches(where, doc.metadata)


def _faiss_filter(
    store: VectorStore, raw: Any, where: Filter
) -> Callable[[Mapping[str, Any]], bool]:
    """FAISS's ``filter`` as a function on metadata: the reference itself, so exact for every
    operator (its dict form compares ``True == 1`` and fails on an ordering of a missing key),
    AND the retriever's own ``filter`` (a function, or a dict FAISS reads)."""
    own = None if raw is None else type(store)._create_filter_func(raw)
    if own is None:
        return lambda meta: matches(where, meta)
    return lambda meta: bool(own(meta)) and matches(where, meta)


def _both(
    first: Callable[[Document], bool] | None, second: Callable[[Document], bool]
) -> Callable[[Document], bool]:
    if first is None:
        return second
    return lambda doc: bool(first(doc)) and second(doc)


def _reads_by_id(store: VectorStore) -> bool:
    """Whether the store reads its documents back by id: it implements ``get_by_ids`` (the
    base class's raises ``NotImplementedError``)."""
    return type(store).get_by_ids is not VectorStore.get_by_ids


def _by_id(ids: list[str], documents: Sequence[Document]) -> dict[str, Document]:
    """The store's copies of ``ids``, by id (it returns them in any order, some missing)."""
    wanted = set(ids)
    return {doc.id: doc for doc in documents if doc.id in wanted}


def _found(ids: list[str], documents: Sequence[Document | None]) -> dict[str, Document]:
    if len(ids) != len(documents):
        raise ValueError(f"the docstore returned {len(documents)} results for {len(ids)} ids")
    return {key: doc for key, doc in zip(ids, documents, strict=True) if doc is not None}


def _link(metadata: Mapping[str, Any], key: str) -> str | None:
    value = metadata.get(key)
    return None if value is None or str(value) == "" else str(value)


def store_name(store: VectorStore) -> str:
    """The store as messages name it: a wrapped retriever by its own type."""
    if isinstance(store, RetrieverSource):
        return type(store.retriever).__name__
    name = collection_name(store)
    kind = type(store).__name__
    return f"{kind} collection {name!r}" if name is not None else kind


def as_dropped(candidate: Candidate[Document]) -> Document:
    """A dropped candidate's document, as the store returned it, for a report."""
    return candidate.item


def describe(document: Document) -> str:
    """A document's text, for a report's ``explain``."""
    return document.page_content
