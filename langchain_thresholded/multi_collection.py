"""``MultiCollectionRetriever``: one question over several stores, one thresholded answer.

Each collection is a ``ThresholdedRetriever`` (its store, its floor, its
embeddings, its docstore for attachments), a store, or a ``CollectionSpec``
with a name, a candidate count and a timeout (a spec of a store or a Milvus
URI builds its ``ThresholdedRetriever`` itself). The question is
embedded once and every store is searched by vector at the same time: in a
thread pool, or with the store's own async by-vector search in async calls
(langchain-milvus on a Milvus server; Milvus Lite and stores without one run in
the pool). Each collection's candidates are cut by its own floor; the survivors
are merged by cosine and the global policy applies once (per-source cap,
character budget, ``k``). Neighbours and parent summaries are attached last,
for kept documents only, from the collection each came from (its store, else its docstore).

A collection that fails or times out leaves the others' results, a status in
the report and one warning (``fail_fast=True`` raises instead); when every
collection fails, the call raises. Only the given stores are ever searched.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar, NamedTuple, cast

from langchain_core.documents import Document
from langchain_core.runnables.configurable import DynamicRunnable
from langchain_core.vectorstores import VectorStore
from pydantic import Field, PrivateAttr, field_validator, model_validator

from langchain_thresholded.backend import (
    LangChainBackend,
    QuestionEmbedder,
)
from langchain_thresholded.embeddings import OptionalEmbeddings, model_of
from langchain_thresholded.filters import to_filter
from langchain_thresholded.retrievers import (
    EngineRetriever,
    ThresholdedRetriever,
)
from thresholded.classes import default_label
from thresholded.collection_spec import CollectionSpec as BaseCollectionSpec
from thresholded.engine import Call, Collection, Fan, Question, plan
from thresholded.errors import FieldNotFoundError, RetrieverClosedError
from thresholded.fanout import (
    COLLECTION_KEY,
    ClosedByWith,
    CollectionSearchError,
    CollectionStatus,
    FloorsInForce,
    WorkerPool,
    WorkerPools,
    check_one_model,
    check_unique_names,
    collection_list,
)
from thresholded.filters import all_of
from thresholded.models import Embedder, check_one_embedder
from thresholded.policy import RetrievalPolicy, unmeasured
from thresholded.report import MultiCollectionReport, Report
from thresholded.retriever_arguments import AllowedFilterKeys, pool_size
from thresholded.scores import ScoreKind

__all__ = [
    "COLLECTION_KEY",
    "CollectionSearchError",
    "CollectionSpec",
    "CollectionStatus",
    "MultiCollectionRetriever",
    "RetrieverClosedError",
]


class CollectionSpec(BaseCollectionSpec):
    """One collection: a ``store``, a ready ``retriever``, or a Milvus collection named by
    ``uri``, ``db_name`` and ``collection_name``; with a name, a candidate count, a timeout.

    A ``store`` (a ``VectorStore``) is searched with the multi-collection retriever's
    ``embeddings`` (default: the store's) under ``profile`` (a calibration profile of
    this collection; ``collection`` names the profile's collection when it is not the
    store's), else ``policy``, else the global policy. A collection named by URI is
    reopened with :func:`langchain_thresholded.milvus.existing_milvus_store` (it must
    exist) and searched the same way. A ready ``retriever`` brings its own policy,
    profile, metric and docstore. ``retrieve_k`` candidates are fetched (default: the
    global ``top_k * over_fetch``); ``timeout`` (seconds) replaces the retriever's
    default. ``name`` labels the collection in reports (default: ``db/collection`` on
    Milvus, the store's collection name, else its class and position, e.g.
    ``InMemoryVectorStore[1]``).
    """

    store: VectorStore | None = None
    retriever: ThresholdedRetriever | None = None
    """A ready retriever over the collection's store."""

    @field_validator("retriever", mode="before")
    @classmethod
    def _not_configurable(cls, value: Any) -> Any:
        return _not_configurable(value)

    @model_validator(mode="after")
    def _one_way_to_name_it(self) -> CollectionSpec:
        given = (self.store is not None) + (self.retriever is not None)
        self.named_by_uri(given, "store=..., retriever=...")
        own = [n for n in ("policy", "profile", "collection", "metric") if getattr(self, n)]
        if self.retriever is not None and own:
            raise ValueError(
                f"{', '.join(own)}: a ready retriever brings its own (give them to the "
                "ThresholdedRetriever, or give store=... instead)"
            )
        return self


class MultiCollectionRetriever(ClosedByWith, FloorsInForce, EngineRetriever):
    """Search several stores at once, each with its own floor; merge by cosine; attach last.

    ``collections``: ``ThresholdedRetriever``s, ``VectorStore``s or ``CollectionSpec``s.
    ``policy`` is the global policy of the merged result (cap, budget, ``top_k``,
    attachment budget); each collection's floor is its own retriever's (a store's: its
    spec's profile or policy, else the global policy's, a call's ``policy`` included).
    Every collection must
    use one embedding model (the question is embedded once): policies calibrated
    for different models, embeddings whose ``model_id`` differ, or different embeddings
    objects of which one names no model (a collection whose retriever allows a model
    mismatch apart), are refused with ``ModelMismatchError``. Dense search only: the
    merge compares cosines.

    ``timeout`` (seconds) is the deadline of each collection that sets none (a spec's
    ``timeout``, else its retriever's own); ``max_retries``, ``retry_backoff`` and
    ``allow_model_mismatch`` are those of the collections it builds from a store or a URI
    (a ready ``ThresholdedRetriever`` keeps its own, its timeout and its docstore:
    neighbours and parent summaries are attached from a retriever's).

    ``filters`` (and ``call_filters``, the configurable ones) hold in every collection,
    combined (AND) with each collection's own.

    Per call: ``k``, ``max_per_source``, ``max_chars``, ``over_fetch`` and ``policy`` (of
    the merged result), ``min_similarity`` (every collection's floor),
    ``min_top_similarity`` (every gate, the global one included), ``filters`` (a
    structured filter, combined with each collection's own) and ``search_kwargs`` (given
    to every store, without filters). Every document returned, attachments included,
    satisfies the filters in force in its collection.

    ``floors`` (each collection's), ``min_similarity`` (the lowest of them) and
    ``min_top_similarity`` (the merged result's gate) read the floors and gate in force.
    """

    collections: list[ThresholdedRetriever | CollectionSpec | VectorStore]
    policy: RetrievalPolicy = Field(default_factory=RetrievalPolicy)
    embeddings: OptionalEmbeddings = None
    """Embeds the question once; default: the first collection's (they share one model)."""
    timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False, strict=True)
    """The deadline of a collection's whole search stage, retries included, in seconds,
    where neither its spec nor its retriever sets one."""
    max_retries: int = Field(default=0, ge=0, strict=True)
    """Retries of a transient search failure, in the collections built from a spec."""
    retry_backoff: float = Field(default=0.2, ge=0, allow_inf_nan=False, strict=True)
    """Seconds before the first retry, in the collections built from a spec."""
    allow_model_mismatch: bool = Field(default=False, strict=True)
    """Of the collections built from a spec (see ``ThresholdedRetriever``)."""
    fail_fast: bool = Field(default=False, strict=True)
    """Raise ``CollectionSearchError`` on the first collection that fails or times out,
    instead of returning the others' results with a partial report."""
    max_workers: int | None = Field(default=None, ge=1, strict=True)
    """The size of the thread pool, which concurrent calls share (a search's wait there for a
    thread does not count against its collection's timeout; it is bounded by it); default:
    two per collection, at most 64."""
    filters: Any = None
    """Filters that hold in every collection, for every document returned, attachments
    included, combined (AND) with each collection's own, ``call_filters`` and a call's
    ``filters``: a structured filter (see :mod:`langchain_thresholded.filters`) or its dict
    form, as LlamaIndex's ``MultiCollectionRetriever(filters=...)``. Not configurable: expose
    ``call_filters``."""
    allowed_filter_keys: AllowedFilterKeys = None
    """The only metadata keys ``filters``, ``call_filters`` and a call's filters may name, in
    every collection (each collection's own ``allowed_filter_keys`` also hold)."""
    call_filters: Any = None
    """Filters combined (AND) with ``filters`` and every call's: the field to expose with
    ``configurable_fields``."""

    _given_elsewhere: ClassVar[dict[str, str]] = dict.fromkeys(
        ("neighbours", "parent_levels", "parent_summaries", "docstore"),
        "each collection's retriever attaches neighbours and summaries: give "
        "CollectionSpec(retriever=ThresholdedRetriever(vectorstore=..., docstore=..., "
        "neighbours=...))",
    )

    _report_type: ClassVar[type[Report]] = MultiCollectionReport
    _collection_key: ClassVar[str | None] = COLLECTION_KEY
    _pools: WorkerPools = PrivateAttr(default_factory=WorkerPools)
    """The thread pools of each ``max_workers``, shared by copies (:class:`WorkerPools`)."""

    @field_validator("collections", mode="before")
    @classmethod
    def _none_configurable(cls, value: Any) -> Any:
        return [_not_configurable(c) for c in collection_list(value)]

    @field_validator("collections")
    @classmethod
    def _not_empty(cls, value: list[Any]) -> list[Any]:
        if not value:
            raise ValueError("needs at least one collection")
        return value

    def _build(self) -> tuple[_Member, ...]:
        """Each collection's retriever (a spec's store or URI is opened here, once), with the
        collections checked together."""
        members = tuple(
            _Member(spec, spec.retriever or self._member(spec))
            for spec in map(_spec, self.collections)
        )
        self._configured(members)  # a bad floor or filter is refused now
        return members

    def _configured(self, members: tuple[_Member, ...] | None = None) -> Call[Document]:
        """A call under the retriever's own settings (over ``members``, default: its own)."""
        searched = self._searched(self._state() if members is None else members)
        return plan(Question(""), searched, self.policy)

    def _filters(self) -> Any:
        """``filters`` and ``call_filters``, ANDed: each collection's own, besides its
        retriever's (a call's filters narrow them)."""
        return all_of(to_filter(self.filters), to_filter(self.call_filters))

    def _searched(self, members: tuple[_Member, ...]) -> tuple[Collection[Document], ...]:
        """Every collection as its retriever searches it now (its filters, timeout and
        retries included), checked to use one model under distinct names."""
        collections = tuple(self._collection(m, i) for i, m in enumerate(members))
        check_one_model(collections, self.policy, embeddings_model=model_of(self.embeddings))
        check_unique_names([c.name for c in collections])
        self._check_one_embedder(collections)
        return collections

    def _check_one_embedder(self, collections: tuple[Collection[Document], ...]) -> None:
        """The question is embedded once, with ``embeddings`` (else the first collection's),
        and searches every collection: each must be shown to be embedded by that model (a
        collection that allows a model mismatch is taken at its word)."""
        first = cast(LangChainBackend, collections[0].backend).embeddings
        given = self.embeddings is not None
        question = Embedder(
            "embeddings=" if given else f"the embeddings of collection {collections[0].name!r}",
            self.embeddings if given else first,
            model_of(self.embeddings if given else first),
        )
        own = []
        for collection in collections:
            if not collection.allow_model_mismatch:
                embeddings = cast(LangChainBackend, collection.backend).embeddings
                what = f"collection {collection.name!r}"
                own.append(Embedder(what, embeddings, model_of(embeddings)))
        check_one_embedder(
            question,
            own,
            fix="Give every collection's retriever the same embeddings object (and "
            "MultiCollectionRetriever(embeddings=...) that one), or embeddings that name their "
            "model (model_name=...).",
        )

    def _collection(self, member: _Member, position: int) -> Collection[Document]:
        spec, sub = member
        if sub.score_kind is not ScoreKind.COSINE:
            raise ValueError(
                "MultiCollectionRetriever merges dense cosine results: every collection's "
                f"retriever needs score_kind='cosine', not {sub.score_kind.value!r}"
            )
        collection = sub.as_collection()
        store = sub.vectorstore
        if not cast(LangChainBackend, collection.backend).searches_by_vector:
            raise ValueError(
                f"{type(store).__name__} cannot search by vector: the question is embedded once "
                "for every collection, so each store needs a search by vector"
            )
        keys = _narrowest(collection.allowed_filter_keys, self.allowed_filter_keys)
        return replace(
            collection,
            where=all_of(collection.where, self._filters()),
            allowed_filter_keys=keys,
            policy=sub.as_policy() if _brings_a_policy(spec) else None,
            name=spec.name or _default_name(store, position),
            timeout=spec.timeout_or(collection.timeout, self.timeout),
            retrieve_k=spec.retrieve_k,
        )

    def _member(self, spec: CollectionSpec) -> ThresholdedRetriever:
        """The retriever of a spec's store, or of the Milvus collection it names by URI."""
        return ThresholdedRetriever(
            vectorstore=spec.store if spec.store is not None else self._opened(spec),
            policy=spec.policy or (unmeasured(self.policy) if spec.profile else self.policy),
            profile=spec.profile,
            collection=spec.collection,
            metric=spec.metric,
            embeddings=self.embeddings,
            max_retries=self.max_retries,
            retry_backoff=self.retry_backoff,
            allow_model_mismatch=self.allow_model_mismatch,
        )

    def _opened(self, spec: CollectionSpec) -> VectorStore:
        """A Milvus collection named by URI, database and name."""
        from langchain_thresholded.milvus import existing_milvus_store

        if self.embeddings is None:
            raise ValueError(
                f"collection {spec.collection_name!r} is named by URI: pass "
                "MultiCollectionRetriever(embeddings=...), the model its vectors come from"
            )
        try:
            return existing_milvus_store(
                **spec.reopen_arguments(self.timeout), embeddings=self.embeddings
            )
        except FieldNotFoundError as exc:  # the spec takes no field names: say where they go
            raise FieldNotFoundError(
                exc.fact,
                argument=exc.argument,
                advice=f"pass {exc.argument}=... to existing_milvus_store(uri, name, "
                "embeddings=...) and give the store as CollectionSpec(store=...): a "
                "CollectionSpec named by URI opens LangChain's field names only",
            ) from exc

    # Public API ----------------------------------------------------------------------
    @property
    def collection_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self._searched(self._state()))

    def close(self) -> None:
        """Shut the thread pool down (searches still running finish in the background); a
        later call starts it again. A call running meanwhile raises
        :class:`~thresholded.errors.RetrieverClosedError` when some of its searches were
        still waiting for a thread (they are cancelled); call it again. A copy
        (``model_copy``, a call configured by its config) shares the threads: closing either
        shuts them down for both."""
        self._pools.shutdown()

    # One call ------------------------------------------------------------------------
    def _plan(self, query: str, kwargs: dict[str, Any]) -> Call[Document]:
        return self._planned(
            query,
            kwargs,
            self._searched(self._state()),
            self.policy,
            fan=Fan(self._executor(), self.fail_fast, inline=False),
            embedder=None if self.embeddings is None else QuestionEmbedder(self.embeddings),
        )

    def _executor(self) -> WorkerPool:
        return self._pools.of_size(pool_size(self.max_workers, len(self.collections)))


class _Member(NamedTuple):
    """A collection as given, and the retriever that searches it."""

    spec: CollectionSpec
    retriever: ThresholdedRetriever


def _not_configurable(collection: Any) -> Any:
    """A configurable retriever is configured by a call's config, which its collection's
    search does not get: it is refused, not searched with its defaults."""
    if isinstance(collection, DynamicRunnable):
        raise ValueError(
            f"a collection cannot be a configurable retriever ({type(collection).__name__}): "
            "the config of a call does not reach a collection's retriever. Give the "
            "ThresholdedRetriever itself, and make the MultiCollectionRetriever configurable "
            "instead (its call_filters and policy hold in every collection)"
        )
    return collection


def _spec(collection: Any) -> CollectionSpec:
    """A ``CollectionSpec``, or a bare retriever or store as one."""
    if isinstance(collection, CollectionSpec):
        return collection
    if isinstance(collection, ThresholdedRetriever):
        return CollectionSpec(retriever=collection)
    return CollectionSpec(store=collection)


def _brings_a_policy(spec: CollectionSpec) -> bool:
    """Whether a collection has a floor of its own: a ready retriever's, or its spec's policy
    or profile. One that has none takes the call's global policy (a call's ``policy=``)."""
    return spec.retriever is not None or spec.policy is not None or spec.profile is not None


def _narrowest(own: frozenset[str] | None, given: list[str] | None) -> frozenset[str] | None:
    """The keys both lists allow; None when neither limits them."""
    if given is None:
        return own
    return frozenset(given) if own is None else own & frozenset(given)


def _default_name(store: Any, position: int) -> str:
    """:func:`~thresholded.classes.default_label` of a store (a Milvus store's database read
    from its connection arguments)."""
    args = getattr(store, "_connection_args", None)
    return default_label(store, position, args.get("db_name") if isinstance(args, dict) else None)
