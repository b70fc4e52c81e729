"""``ThresholdedRetriever``: over-fetch, keep what clears the policy, then attach context."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, TypedDict, Unpack

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks import CallbackManager
from llama_index.core.indices.vector_store.base import VectorStoreIndex
from llama_index.core.indices.vector_store.retrievers.retriever import VectorIndexRetriever
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.schema import NodeWithScore, QueryBundle, QueryType
from llama_index.core.vector_stores.types import (
    FilterCondition,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQueryMode,
)

from llama_index_thresholded.backend import (
    ID_LISTS,
    PARTITIONS,
    index_collection,
    restricting_kwargs,
)
from llama_index_thresholded.events import retrieval_events
from llama_index_thresholded.filters import HeldFilters, HeldRestrictions, to_filter
from llama_index_thresholded.nodes import as_dropped, asked_by, describe, output, unlinked_result
from thresholded.attachments import AttachmentSpec
from thresholded.engine import Call, Collection, Fan, Question, adrive, drive, plan, retrieve
from thresholded.errors import UnsafeFilterError
from thresholded.milvus_collection import checked_partitions
from thresholded.policy import RetrievalPolicy, call_policy, policy_or_none
from thresholded.report import Report
from thresholded.retry import RetryPolicy
from thresholded.scores import Metric, ScoreKind
from thresholded.snapshot import Copied
from thresholded.strict import (
    check_call_options,
    check_switches,
    of_another_framework,
    strict_constructor,
    unawaited,
)
from thresholded.wrapped import merged_restrictions, refuse_replaced

dispatcher = get_dispatcher(__name__)


class CallOptions(TypedDict, total=False):
    """What one call of ``retrieve_with_report`` may set. None, or leaving it out, keeps the
    retriever's: unlike in a policy, ``max_per_source=None`` or ``max_chars=None`` does not
    lift the cap or the budget (pass ``policy`` for that)."""

    min_similarity: float | None
    """The floor, in every collection."""
    min_top_similarity: float | None
    """The answer gate (0 turns it off)."""
    top_k: int | None
    """How many sections to keep."""
    max_per_source: int | None
    """The per-source cap."""
    max_chars: int | None
    """The character budget."""
    over_fetch: int | None
    """How many candidates to fetch per kept section."""
    policy: RetrievalPolicy | None
    """The whole (global) policy, in place of the retriever's."""
    filters: MetadataFilters | None
    """Filters that narrow the retriever's own: both must hold (empty or None: none)."""


class EngineRetriever(BaseRetriever):
    """What this package's LlamaIndex retrievers share: their calls, each sending its
    events once (see ``events.py``), the engine that runs them, and the report of its
    result. A subclass plans a call (``_plan(question, **overrides)``, by ``_planned``
    over its collections); it is not declared here: LlamaIndex would wrap an abstract
    method in a span of its own, and a call opens exactly one.

    Its settings are its constructor's arguments, fixed when it is built: setting one
    afterwards (``retriever.filters = ...``) would change nothing, so it is an error. Only
    what LlamaIndex's ``BaseRetriever`` itself reads (``callback_manager``, ``object_map``)
    can be set."""

    _SETTABLE: ClassVar[frozenset[str]] = frozenset({"callback_manager", "object_map"})
    _report_type: ClassVar[type[Report]] = Report
    _collection_key: ClassVar[str | None] = None
    """The metadata key each output node names its collection under (None: not named)."""
    _policy: RetrievalPolicy

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("_") and name not in self._SETTABLE:
            raise AttributeError(
                f"{type(self).__name__}.{name} cannot be set: a retriever's settings are "
                "fixed when it is built, and a new value would change nothing. Build a new "
                f"retriever ({type(self).__name__}(..., {name}=...)), or give one call its "
                "own: retrieve_with_report(query, filters=..., policy=..., top_k=..., "
                "min_similarity=...)"
            )
        super().__setattr__(name, value)

    @property
    def policy(self) -> RetrievalPolicy:
        return self._policy

    @property
    def restricted(self) -> bool:
        """Whether it returns only some of the sections it searches: its filters, ``doc_ids``
        or ``node_ids``, or a restriction in ``vector_store_kwargs``. A section added to what
        it returned (by a node postprocessor) is held to none of them."""
        return any(stage.holds_back for stage in self._plan(Question("")).stages)

    # Retrieval --------------------------------------------------------------------------
    @dispatcher.span
    def retrieve(self, str_or_query_bundle: QueryType) -> list[NodeWithScore]:
        return self._report(str_or_query_bundle).items

    @dispatcher.span
    async def aretrieve(self, str_or_query_bundle: QueryType) -> list[NodeWithScore]:
        return (await self._areport(str_or_query_bundle)).items

    @dispatcher.span
    def retrieve_with_report(
        self, str_or_query_bundle: QueryType, **options: Unpack[CallOptions]
    ) -> Report[NodeWithScore]:
        """Retrieve, and report what was kept, attached and dropped, for this call only.

        ``options`` (see :class:`CallOptions`) replace the retriever's floor, gate,
        ``top_k``, cap, budget, over-fetch or whole policy for this call, and ``filters``
        narrow its own. The retriever is not changed.
        """
        return self._report(str_or_query_bundle, **_checked(self, options))

    @dispatcher.span
    async def aretrieve_with_report(
        self, str_or_query_bundle: QueryType, **options: Unpack[CallOptions]
    ) -> Report[NodeWithScore]:
        """Async ``retrieve_with_report``: the embedding, search and lookups are awaited."""
        return await self._areport(str_or_query_bundle, **_checked(self, options))

    def _report(self, query: QueryType, **overrides: Any) -> Report[NodeWithScore]:
        call = self._plan(question_of(query), **overrides)  # a bad question raises here
        with retrieval_events(self, dispatcher, query) as announce:
            report = self._finish(drive(retrieve(call)))
            announce(report)
        return report

    async def _areport(self, query: QueryType, **overrides: Any) -> Report[NodeWithScore]:
        call = self._plan(question_of(query), **overrides)
        with retrieval_events(self, dispatcher, query) as announce:
            report = self._finish(await adrive(retrieve(call)))
            announce(report)
        return report

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """Without events (``retrieve`` sends them): for code that calls it directly."""
        return self._finish(drive(retrieve(self._plan(question_of(query_bundle))))).items

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        call = self._plan(question_of(query_bundle))
        return self._finish(await adrive(retrieve(call))).items

    def _planned(
        self,
        question: Question,
        collections: Sequence[Collection[Any]],
        *,
        fan: Fan | None = None,
        min_similarity: float | None = None,
        top_k: int | None = None,
        filters: MetadataFilters | None = None,
        policy: RetrievalPolicy | None = None,
        min_top_similarity: float | None = None,
        **overrides: Any,
    ) -> Call[Any]:
        """A call over ``collections``: the retriever's policy with the call's options."""
        return plan(
            question,
            collections,
            call_policy(self._policy, policy, top_k=top_k, **overrides),
            min_similarity=min_similarity,
            min_top_similarity=min_top_similarity,
            filters=to_filter(filters),
            fan=fan,
        )

    def _finish(self, result: Any) -> Report[NodeWithScore]:
        result = unlinked_result(result)
        asked = asked_by(result)
        key = self._collection_key
        return self._report_type.from_result(
            result,
            output=lambda candidate: output(candidate, asked=asked, collection_key=key),
            as_dropped=as_dropped,
            describe=describe,
        )


class ThresholdedRetriever(EngineRetriever):
    """A vector index retriever that returns nothing rather than unrelated sections.

    It fetches ``top_k * over_fetch`` candidates (metadata filters applied in the
    store), drops those whose cosine similarity is below the floor, caps each
    source, keeps a character budget, stops at ``top_k``, and only then attaches
    prev/next neighbours and parent summaries of what it kept. Put rerankers
    after it. Only dense scores are cosines: hybrid, sparse and text-search
    results pass through the floor untouched, unless the policy's
    ``hybrid_policy`` is ``"rescore"``: then each such candidate's dense cosine
    with the question is computed (stored vector, else its embedded text) and
    the floor applies to that, while the hybrid score and order stay. Every
    kept node says what its score is in ``metadata["score_kind"]``, and carries
    its cosine in ``metadata["similarity"]`` whenever one is known.

    Use ``retrieve_with_report`` to also get what was dropped and why, to set the
    floor or ``top_k`` for one call, and to narrow the filters for one call.

    ``filters`` hold for every section returned, attachments included (one outside them is
    dropped as ``outside_filters``); a call's filters are ANDed with them, never replace them.

    A search that fails because the store is unreachable or too slow is tried
    again up to ``max_retries`` times; then
    :class:`~thresholded.errors.SearchUnavailableError` names the collection and
    the attempts. Other errors are raised at once. The deadline of each attempt
    is the store's (``milvus_store(..., timeout=5)``); ``timeout`` is the deadline
    of the whole search, after which the call raises
    :class:`~thresholded.fanout.CollectionSearchError` (an empty result would read
    as "nothing matched").
    """

    @strict_constructor
    def __init__(
        self,
        index: VectorStoreIndex,
        policy: RetrievalPolicy | None = None,
        *,
        neighbours: int = 1,
        parent_summaries: bool = True,
        parent_levels: int = 1,
        profile: str | Path | None = None,
        collection: str | None = None,
        filters: MetadataFilters | None = None,
        vector_store_query_mode: VectorStoreQueryMode | str = VectorStoreQueryMode.DEFAULT,
        metric: Metric | str | None = None,
        score_kind: ScoreKind | str | None = None,
        embed_model: BaseEmbedding | None = None,
        allow_model_mismatch: bool = False,
        alpha: float | None = None,
        doc_ids: list[str] | None = None,
        node_ids: list[str] | None = None,
        sparse_top_k: int | None = None,
        hybrid_top_k: int | None = None,
        vector_store_kwargs: dict[str, Any] | None = None,
        allowed_filter_keys: Any = None,
        pushdown: bool = True,
        max_retries: int = 0,
        retry_backoff: float = 0.2,
        timeout: float | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        """Args:
        index: The ``VectorStoreIndex`` to search (its store, docstore and model).
        policy: Floor, answer gate, over-fetch, per-source cap, character budget and
            ``top_k``; default: ``RetrievalPolicy()``, whose floor is the embedding
            model's calibrated default.
        neighbours: How many prev/next sections to attach on each side of a kept one
            (0: none).
        parent_summaries: Attach each kept section's parent (its summary).
        parent_levels: How many parent levels to walk up, with ``parent_summaries``
            (0: none; more than 1 with ``parent_summaries=False`` is refused).
        profile: A calibration profile (``thresholded calibrate``): the floor and the
            gate come from it, and a profile measured for another collection or
            model is refused.
        collection: The profile's collection, when it is not the store's name.
        filters: Metadata filters that hold in every call, for every section
            returned, attachments included. Changing them in place afterwards
            (``filters.filters.append(...)``) makes every call an error: build a new
            retriever, or give a call its own ``filters``.
        vector_store_query_mode: The store's query mode (``default``, ``hybrid``,
            ``sparse``, ...); only ``default`` scores are cosines.
        metric: The store's metric (``IP``, ``COSINE``, ``L2``), for stores it cannot
            be read from; one that contradicts the store's is an error.
        score_kind: What the store's scores are (``cosine``, ``rrf``, ...); default:
            read from the query mode.
        embed_model: The model that embeds the question; default: the index's. It
            must be the model that embedded the collection.
        allow_model_mismatch: Apply a floor measured for another model (only when
            you know the two models' cosines agree).
        alpha: The hybrid weight, passed to the store's query.
        doc_ids: Search only these documents' sections (attachments too); an empty
            list names none, so nothing is returned (None: every document).
        node_ids: Search only these sections (attachments too); an empty list names
            none, so nothing is returned (None: every section).
        sparse_top_k: The sparse candidates of a hybrid query, passed to the store.
        hybrid_top_k: The fused candidates of a hybrid query, passed to the store.
        vector_store_kwargs: Passed to the store's query. Those that restrict it hold
            for the neighbours and parent summaries too: Milvus's ``string_expr``,
            ``milvus_scalar_filters`` and ``milvus_partition_names``, Chroma's
            ``where``, ``where_document`` and ``ids`` (all ANDed with ``filters``).
            Milvus's and Chroma's other keywords are refused but those that only tune
            the search; another store's are refused unless nothing is attached.
        allowed_filter_keys: The only metadata keys a filter may name (default: any
            plain field name).
        pushdown: Send the floor to Milvus as a range search (``pushdown.py``).
            LlamaIndex only: langchain-milvus has no range search here.
        max_retries: How often a search that failed for a transient reason is tried
            again.
        retry_backoff: Seconds before the first retry; each next wait doubles (at
            most 2 s).
        timeout: Seconds for the whole search, retries included; None: none.
        callback_manager: LlamaIndex's callback manager (default: the global one).
        verbose: LlamaIndex's verbose flag.
        """
        if not isinstance(index, VectorStoreIndex):
            raise TypeError(
                f"ThresholdedRetriever searches a VectorStoreIndex, got {type(index).__name__}: "
                + (
                    of_another_framework(index, "llama_index_thresholded")
                    or "wrap a retriever with ThresholdedRetriever.from_retriever(retriever, "
                    "policy=...), and a vector store with "
                    "VectorStoreIndex.from_vector_store(store, embed_model=...)"
                )
            )
        check_switches(
            parent_summaries=parent_summaries,
            pushdown=pushdown,
            allow_model_mismatch=allow_model_mismatch,
        )
        self._index = index
        self._wrapped: Copied | None = None
        self._filters = HeldFilters.of(filters)
        self._restrictions = HeldRestrictions.of(
            doc_ids=doc_ids, node_ids=node_ids, vector_store_kwargs=vector_store_kwargs
        )
        held = self._restrictions.as_given
        collection_ = index_collection(
            index,
            policy_or_none(policy),
            embed_model=embed_model,
            profile=profile,
            profile_collection=collection,
            vector_store_query_mode=vector_store_query_mode,
            metric=metric,
            score_kind=score_kind,
            allow_model_mismatch=allow_model_mismatch,
            search_args={
                "alpha": alpha,
                "doc_ids": held["doc_ids"],
                "node_ids": held["node_ids"],
                "sparse_top_k": sparse_top_k,
                "hybrid_top_k": hybrid_top_k,
                "vector_store_kwargs": held["vector_store_kwargs"],
            },
            where=self._filters.where,
            allowed_filter_keys=allowed_filter_keys,
            pushdown=pushdown,
            retry=RetryPolicy.of(max_retries=max_retries, retry_backoff=retry_backoff),
            attachments=AttachmentSpec.of(
                neighbours=neighbours,
                parent_summaries=parent_summaries,
                parent_levels=parent_levels,
            ),
            timeout=timeout,
        )
        # The retriever's policy is the call's unless a call replaces it: not the collection's.
        self._policy = collection_.policy or RetrievalPolicy()
        self._collection = replace(collection_, policy=None)
        self._min_similarity = self._collection.floor(self._policy)  # refuse a bad floor now
        self._plan(QueryBundle("", embedding=[0.0]))  # and bad filters
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @classmethod
    def from_retriever(
        cls,
        retriever: VectorIndexRetriever,
        policy: RetrievalPolicy | None = None,
        **kwargs: Any,
    ) -> ThresholdedRetriever:
        """Wrap an existing ``VectorIndexRetriever``, keeping its index, mode, filters and model.

        Its ``similarity_top_k`` is replaced by ``policy.top_k * policy.over_fetch``. Its
        filters, ``doc_ids``, ``node_ids`` and ``vector_store_kwargs`` restrictions stay in
        force: ``filters=`` given here is combined with its filters (AND), a
        ``string_expr`` with its own (AND), and any other restriction it already has is
        refused rather than replaced. One given as None (or, in ``vector_store_kwargs``, a
        blank expression or an empty clause) restricts nothing, so it leaves the wrapped
        retriever's in force; an empty list of ids names no section. Its settings
        are copied, so a search after the wrapped retriever changed (its ``_filters``,
        ``_node_ids`` or ``_kwargs`` set afterwards, say) is refused: call
        ``from_retriever`` again. Any other
        retriever (e.g. an ``AutoMergingRetriever``) is an error that says to wrap the
        vector retriever inside it.
        """
        if not isinstance(retriever, VectorIndexRetriever):
            raise TypeError(_not_a_vector_retriever(retriever))
        inherited = {
            "filters": _both(retriever._filters, kwargs.pop("filters", None)),
            "vector_store_query_mode": retriever._vector_store_query_mode,
            "embed_model": retriever._embed_model,
            "alpha": retriever._alpha,
            "doc_ids": _inherited_doc_ids(retriever),
            "node_ids": _inherited_node_ids(retriever),
            "sparse_top_k": retriever._sparse_top_k,
            "hybrid_top_k": retriever._hybrid_top_k,
            "vector_store_kwargs": _kwargs_both(
                retriever._vector_store, retriever._kwargs, kwargs.pop("vector_store_kwargs", None)
            ),
            "callback_manager": retriever.callback_manager,
        }
        # an id list given as None ("no restriction") keeps the wrapped retriever's
        given = {k: v for k, v in kwargs.items() if k not in ID_LISTS or v is not None}
        refuse_replaced(inherited, given, ID_LISTS)
        wrapped = _copy_of(retriever)
        built = cls(retriever._index, policy, **{**inherited, **given})
        built._wrapped = wrapped
        return built

    # Configuration ----------------------------------------------------------------------
    @classmethod
    def class_name(cls) -> str:
        return "ThresholdedRetriever"

    def to_dict(self) -> dict[str, Any]:
        """The retriever's configuration (not its index), e.g. for logs and traces."""
        collection = self._collection
        metric = self.metric
        return {
            "class_name": self.class_name(),
            "policy": self._policy.to_dict(),
            "min_similarity": self._min_similarity,
            "embedding_model": str(collection.model),
            "neighbours": collection.attachments.neighbours,
            "parent_levels": collection.attachments.parent_levels,
            "vector_store_query_mode": collection.backend.mode.value,
            "metric": metric.value if metric else None,
            "score_kind": collection.score_kind.value,
            "pushdown": collection.pushdown.enabled,
            "max_retries": collection.retry.max_retries,
            "retry_backoff": collection.retry.backoff,
            "timeout": collection.timeout,
            "allow_model_mismatch": collection.allow_model_mismatch,
        }

    @property
    def min_similarity(self) -> float:
        """The floor in force: the policy's, or its model's calibrated default."""
        return self._min_similarity

    @property
    def min_top_similarity(self) -> float | None:
        """The answer gate in force (None or 0: off): the policy's or its profile's."""
        return self._policy.min_top_similarity

    @property
    def metric(self) -> Metric | None:
        return self._collection.backend.metric(None)

    def _plan(self, question: Question, **options: Any) -> Call[Any]:
        if self._wrapped is not None:
            self._wrapped.check_unchanged()  # before its filters: the message names it
        self._filters.check_unchanged(type(self).__name__)
        self._restrictions.check_unchanged(type(self).__name__)
        return self._planned(question, [self._collection], **options)


def _copied_settings(retriever: VectorIndexRetriever) -> dict[str, Any]:
    """What ``from_retriever`` copies of a vector retriever (its top k is replaced anyway)."""
    return {
        "index": retriever._index,
        "vector_store": retriever._vector_store,
        "embed_model": retriever._embed_model,
        "mode": retriever._vector_store_query_mode,
        "filters": retriever._filters,
        "doc_ids": retriever._doc_ids,
        "node_ids": retriever._node_ids,
        "alpha": retriever._alpha,
        "sparse_top_k": retriever._sparse_top_k,
        "hybrid_top_k": retriever._hybrid_top_k,
        "vector_store_kwargs": retriever._kwargs,
    }


def _copy_of(retriever: VectorIndexRetriever) -> Copied:
    """A vector retriever's settings as ``from_retriever`` copied them."""
    return Copied.of(
        retriever,
        _copied_settings,
        copied="index, filters, doc_ids, node_ids, vector_store_kwargs and search settings",
        instead="give a call its own filters: retrieve_with_report(query, filters=...)",
        by_fields=(MetadataFilters, MetadataFilter),
    )


def question_of(query: QueryType) -> Question:
    """The engine's question: the text, the caller's vector if any, and the bundle itself."""
    if isinstance(query, str):
        return Question(query)
    if isinstance(query, QueryBundle):
        _check_embedding_strs(query)
        return Question(query.query_str, query.embedding, query)
    raise TypeError(
        f"the question must be a str or a QueryBundle, got {type(query).__name__}: {query!r}"
        + unawaited(query)
    )


def _check_embedding_strs(query: QueryBundle) -> None:
    """A bundle without its own vector is embedded from its ``embedding_strs``: none, or a
    blank one, would search with the vector of nothing."""
    if query.embedding is not None or query.custom_embedding_strs is None:
        return
    if not query.custom_embedding_strs:
        raise ValueError(
            "the QueryBundle's custom_embedding_strs is empty: there is no text to embed the "
            "question from; give the texts, leave it None to embed query_str, or give "
            "embedding="
        )
    blank = [i for i, text in enumerate(query.custom_embedding_strs) if not text.strip()]
    if blank:
        raise ValueError(
            f"the QueryBundle's custom_embedding_strs{blank} is empty: a blank text would "
            "be embedded into the question's vector; leave it out"
        )


def _both(*filters: MetadataFilters | None) -> MetadataFilters | None:
    """Filters that must all hold: the wrapped retriever's and the new ones."""
    given = [f for f in filters if to_filter(f) is not None]
    if len(given) <= 1:
        return given[0] if given else None
    return MetadataFilters(filters=list(given), condition=FilterCondition.AND)


def _inherited_node_ids(retriever: VectorIndexRetriever) -> list[str] | None:
    """A wrapped retriever's ``node_ids`` as its store reads them (:func:`_node_ids_read`)."""
    return _node_ids_read(retriever._vector_store, retriever._node_ids)


def _node_ids_read(store: Any, ids: list[str] | None) -> list[str] | None:
    """A retriever's ``node_ids`` as ``store`` reads them: a store that keeps the text
    (Milvus, Chroma, ...) reads an empty list as no restriction, and ``index.as_retriever()``
    passes one to mean every node."""
    if ids is not None and not ids and getattr(store, "stores_text", False):
        return None
    return ids


def _inherited_doc_ids(retriever: VectorIndexRetriever) -> list[str] | None:
    """A wrapped retriever's ``doc_ids``. An empty list is refused where its store reads it
    as every document: ``index.as_retriever()`` never sets it, so it was given, and a list of
    the documents a caller may read that came out empty would open all of them (here an
    empty list names none)."""
    ids = retriever._doc_ids
    if ids is not None and not ids and getattr(retriever._vector_store, "stores_text", False):
        raise UnsafeFilterError(
            f"the wrapped retriever's doc_ids=[] names no document, and "
            f"{type(retriever._vector_store).__name__} searches every document for an empty "
            "list: give it the documents to search, or doc_ids=None to search them all"
        )
    return ids


def _kwargs_both(
    store: Any, inherited: dict[str, Any] | None, given: dict[str, Any] | None
) -> dict[str, Any]:
    """The wrapped retriever's store arguments with the new ones
    (:func:`thresholded.wrapped.merged_restrictions`): a raw ``string_expr`` given by both
    holds twice (AND); any other restriction given by both (``where``,
    ``milvus_scalar_filters``, ``milvus_partition_names``, ...) is refused."""
    inherited = inherited or {}
    checked_partitions((given or {}).get(PARTITIONS), argument=PARTITIONS)  # refused, not dropped
    restricting = restricting_kwargs(store, inherited)
    return merged_restrictions(
        inherited,
        given or {},
        restricting=restricting,
        expr_keys=("string_expr",),
        argument="vector_store_kwargs",
    )


def _checked(retriever: EngineRetriever, options: Mapping[str, Any]) -> dict[str, Any]:
    """One call's options; an unknown one is an error that lists those accepted."""
    check_call_options(
        type(retriever).__name__, options, CallOptions.__annotations__, top_k="top_k"
    )
    return dict(options)


def _not_a_vector_retriever(retriever: object) -> str:
    name = type(retriever).__name__
    inner = getattr(retriever, "_vector_retriever", None)
    if isinstance(inner, VectorIndexRetriever) and vector_retriever_holds_back(inner):
        hint = (
            f"{name} merges in sections from the docstore (parents, sections between kept "
            "ones) held to none of its vector retriever's filters, doc_ids or node_ids, so "
            "do not put a ThresholdedRetriever inside it either: wrap its vector retriever "
            "alone, ThresholdedRetriever.from_retriever(vector_retriever, policy, "
            "parent_summaries=True), whose parents and neighbours are held to them"
        )
    elif isinstance(inner, VectorIndexRetriever):
        hint = (
            f"wrap the vector retriever inside it instead: {name}("
            "ThresholdedRetriever.from_retriever(vector_retriever, policy), ...)"
        )
    else:
        hint = "wrap the VectorIndexRetriever it searches (index.as_retriever()) instead"
    return (
        f"ThresholdedRetriever.from_retriever takes a VectorIndexRetriever, whose scores it "
        f"can read as cosines; {name} is not one (its scores and merged nodes are its own): "
        f"{hint}"
    )


def vector_retriever_holds_back(retriever: VectorIndexRetriever) -> bool:
    """Whether a vector retriever returns only some sections: filters, ids, store restrictions."""
    restrictions = restricting_kwargs(retriever._vector_store, retriever._kwargs or {})
    some_nodes = restricting_node_ids(retriever._index, retriever._node_ids) is not None
    filtered = _filtered(retriever._filters) or bool(restrictions)
    return filtered or some_nodes or retriever._doc_ids is not None


def restricting_node_ids(index: Any, node_ids: list[str] | None) -> list[str] | None:
    """A vector retriever's ``node_ids`` over ``index`` where they name only some of its
    nodes; None where they restrict nothing as its store reads them (:func:`_node_ids_read`)
    or name every node the index lists, as ``index.as_retriever()`` passes them."""
    ids = _node_ids_read(index.vector_store, node_ids)
    if ids is None:
        return None
    listed = list(index.index_struct.nodes_dict.values())
    if ids == listed or (len(ids) >= len(listed) and set(ids) == set(listed)):
        return None  # as_retriever()'s list is the index's, in its order: no set is built
    return ids


def _filtered(filters: MetadataFilters | None) -> bool:
    """Whether LlamaIndex's own filters hold anything back, as LlamaIndex reads them (an empty
    ``MetadataFilters`` is none): not in the core's model, which refuses keys LlamaIndex
    filters on (``content-type``)."""
    return filters is not None and bool(filters.filters)
