"""A LangChain retriever that keeps only what clears a true cosine floor."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever, LangSmithRetrieverParams
from langchain_core.runnables import Runnable, RunnableConfig, RunnableWithFallbacks, ensure_config
from langchain_core.runnables.configurable import DynamicRunnable, RunnableConfigurableFields
from langchain_core.stores import BaseStore
from langchain_core.structured_query import Expr
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore, VectorStoreRetriever
from pydantic import ConfigDict, Field, PrivateAttr, field_validator

from langchain_thresholded.backend import (
    NEVER_REPLACED,
    LangChainBackend,
    LinkKeys,
    as_dropped,
    describe,
    no_score_threshold,
    output,
    primary_field,
    rows_store,
    source_settings,
    store_name,
)
from langchain_thresholded.embeddings import OptionalEmbeddings, model_of
from langchain_thresholded.ensemble import (
    RetrieverSource,
    as_configured,
    not_configurable,
    searching_members,
    unbound,
)
from langchain_thresholded.events import EVENT_NAME
from langchain_thresholded.filters import to_filter
from langchain_thresholded.scoring import (
    is_chroma,
    is_faiss,
    is_milvus,
    store_metric,
    supports_metric_detection,
    unknown_store_error,
)
from thresholded.attachments import AttachmentSpec
from thresholded.classes import collection_name
from thresholded.engine import (
    Call,
    Collection,
    Pipeline,
    Question,
    Step,
    adrive,
    check_judgeable,
    drive,
    plan,
    retrieve,
)
from thresholded.errors import UnsafeFilterError
from thresholded.filters import all_of
from thresholded.milvus_expr import all_of_exprs
from thresholded.models import check_question_model
from thresholded.policy import (
    CALL_OVERRIDES,
    RetrievalPolicy,
    call_policy,
    policy_or_none,
    profiled_policy,
)
from thresholded.provenance import Asked
from thresholded.report import Report
from thresholded.rescore import wants_rescore
from thresholded.retriever_arguments import AllowedFilterKeys
from thresholded.retry import RetryPolicy
from thresholded.scores import Metric, ScoreKind, declared_kind
from thresholded.snapshot import Copied, same, shape
from thresholded.strict import (
    StrictArguments,
    check_call_options,
    of_another_framework,
    search_ids,
)
from thresholded.wrapped import merged_restrictions, restricts

REPORT_SINK = "_thresholded_report_sink"
STORE_OPTIONS = ("filters", "filter", "expr", "search_kwargs")
CALL_OPTIONS = frozenset(
    {"k", "policy", "min_similarity", "min_top_similarity", *CALL_OVERRIDES, *STORE_OPTIONS}
    - {"top_k"}
)
"""What one call may set: LangChain's ``k`` is the policy's ``top_k``."""
_RAW_FILTERS = ("expr", "filter")
CALL_FILTERS = "call_filters"
"""The field a config narrows a retriever's filters with, once exposed."""
_STRUCTURED_FIELDS = frozenset({"filters", CALL_FILTERS})
_BASE_FILTER_FIELDS = frozenset({"filters", "expr", "search_kwargs", "allowed_filter_keys"})
_CONFIGURED_FILTER_FIELDS = _BASE_FILTER_FIELDS | {CALL_FILTERS}
"""The filter-bearing fields a config may name: refused unless they reach the retriever."""
_SEARCHED_FIELDS = frozenset({"vectorstore", "docstore", "collections"})
"""What a retriever searches and attaches from: choosing it is a restriction too."""
_WATCHED = "<watched>"
"""The key of ``_watched()`` beside the fields (no field can be named so)."""
IGNORED_OPTIONS = frozenset({"verbose"})  # BaseRetriever.invoke reads it and passes it on


class EngineRetriever(StrictArguments, BaseRetriever):
    """What this package's LangChain retrievers share: ``invoke`` and ``retrieve_with_report``
    run the engine once, and send one ``thresholded_selection`` event per call. A subclass
    plans a call (``_plan``) and turns the engine's result into its report (``_report``).
    An unknown field is refused, not ignored.

    What the engine searches is made from the fields (``_build``) when the retriever is
    built, and made again whenever a field has changed since: assigned
    (``retriever.filters = ...``, validated as the constructor validates it), changed by
    ``model_copy(update=...)``, or a dict or list changed in place
    (``retriever.search_kwargs["filter"] = ...``, seen at the next call). No change is
    ignored; an assignment or copy the constructor would refuse is refused, and leaves the
    retriever as it was."""

    model_config = ConfigDict(
        arbitrary_types_allowed=True, extra="forbid", validate_assignment=True
    )

    _report_type: ClassVar[type[Report]] = Report
    _collection_key: ClassVar[str | None] = None
    """The metadata key each output document names its collection under (None: not named)."""
    _built: tuple[dict[str, Any], Any] | None = PrivateAttr(default=None)
    """The fields as ``_build`` read them (their dicts and lists copied), and what it made."""

    def __init__(self, *args: Any, **data: Any) -> None:
        if args:
            raise TypeError(
                f"{type(self).__name__}() takes keyword arguments only, got {len(args)} "
                "positional: name them, e.g. ThresholdedRetriever(vectorstore=store, "
                "policy=...) or MultiCollectionRetriever(collections=[...], policy=...)"
            )
        super().__init__(**data)
        self._state()  # a bad setting is refused now, not at the first call

    @field_validator("policy", mode="before", check_fields=False)
    @classmethod
    def _policy_or_default(cls, value: Any) -> RetrievalPolicy:
        """``None`` is the default policy, as in LlamaIndex (the model's calibrated floor, or
        the profile's); a dict is a stored policy; anything else is a ``TypeError``."""
        return policy_or_none(value) or RetrievalPolicy()

    def __setattr__(self, name: str, value: Any) -> None:
        if name in type(self).model_fields:
            self._change({name: value})
        else:
            super().__setattr__(name, value)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Any:
        """A copy, its ``update`` validated as the constructor validates it and searched: a
        value the constructor would refuse is refused here too."""
        copy = super().model_copy(deep=deep)
        copy._change(dict(update or {}))
        return copy

    @abstractmethod
    def _build(self) -> Any:
        """What the engine searches, made from the fields as they are now."""

    def _watched(self) -> Any:
        """What ``_build`` reads beside the fields, watched for changes as they are."""
        return None

    def _state(self) -> Any:
        """What ``_build`` made of the fields, made again if any changed since."""
        fields = {name: getattr(self, name) for name in type(self).model_fields}
        fields[_WATCHED] = self._watched()
        if self._built is None or not same(self._built[0], fields):
            held = _held(fields)  # before building: a build must not hide a change
            self._built = (held, self._build())
        return self._built[1]

    def _change(self, values: dict[str, Any]) -> None:
        """Set fields (each validated) and build from them; if either fails, nothing changes."""
        before = dict(self.__dict__)
        try:
            for name, value in values.items():
                super().__setattr__(name, value)
            self._state()
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(before)
            raise

    # Public API --------------------------------------------------------------------
    def retrieve_with_report(
        self, query: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Report[Document]:
        """Like ``invoke``, but returns the report: kept, attached and dropped with reasons
        (and, over several collections, each collection's status)."""
        sink: list[Report[Document]] = []
        self.invoke(query, config, **kwargs, **{REPORT_SINK: sink})
        return sink[0]

    async def aretrieve_with_report(
        self, query: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Report[Document]:
        """Async ``retrieve_with_report``."""
        sink: list[Report[Document]] = []
        await self.ainvoke(query, config, **kwargs, **{REPORT_SINK: sink})
        return sink[0]

    # BaseRetriever -----------------------------------------------------------------
    def invoke(
        self, input: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        check_call_filters_read(self, config)
        return super().invoke(input, config, **kwargs)

    async def ainvoke(
        self, input: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        check_call_filters_read(self, config)
        return await super().ainvoke(input, config, **kwargs)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return drive(self._relevant(query, run_manager, kwargs))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return await adrive(self._relevant(query, run_manager, kwargs))

    def _relevant(self, query: str, run_manager: Any, kwargs: dict[str, Any]) -> Pipeline[Any]:
        """A call's documents; its report told to the run's callbacks, and to the sink."""
        sink = kwargs.pop(REPORT_SINK, None)
        report = self._report((yield from retrieve(self._plan(query, kwargs))))
        summary = report.summary()
        yield Step(lambda: run_manager.on_text(summary), lambda: run_manager.on_text(summary))
        data, config = report.to_event_data(), {"callbacks": run_manager.get_child()}
        yield Step(
            lambda: dispatch_custom_event(EVENT_NAME, data, config=config),
            lambda: adispatch_custom_event(EVENT_NAME, data, config=config),
        )
        if sink is not None:
            sink.append(report)
        return report.items

    def configurable_fields(self, **kwargs: Any) -> Any:
        """LangChain's ``configurable_fields``; the retriever's own filters are not among
        them, nor what it searches (its store, docstore or collections), since a configured
        value would replace them. Expose ``call_filters``, which narrows them like a call's
        ``filters``."""
        widening = sorted(set(kwargs) & _BASE_FILTER_FIELDS)
        if widening:
            raise ValueError(
                f"{widening} cannot be configurable: a configured value would replace the "
                "retriever's filters. Expose call_filters instead: it is combined with them"
            )
        searched = sorted(set(kwargs) & _SEARCHED_FIELDS)
        if searched:
            raise ValueError(
                f"{searched} cannot be configurable: a configured value would replace what "
                "the retriever searches, and the restriction its choice is. Build a retriever "
                "for each (configurable_alternatives chooses among retrievers you built), and "
                "expose call_filters to narrow one"
            )
        made = super().configurable_fields(**kwargs)
        return ConfiguredCopies(default=made.default, fields=made.fields)

    @abstractmethod
    def _plan(self, query: str, kwargs: dict[str, Any]) -> Call[Document]:
        """The call: its question, collections, policy, filters and store arguments."""

    def _planned(
        self,
        query: str,
        kwargs: dict[str, Any],
        collections: Sequence[Collection[Document]],
        policy: RetrievalPolicy,
        **extra: Any,
    ) -> Call[Document]:
        """A call over ``collections``: ``policy`` with the call's options (``kwargs``
        checked), its filters and store arguments."""
        options = check_options(self, kwargs, CALL_OPTIONS)
        where, store_options = filters_of_call(options)
        return plan(
            Question(query),
            collections,
            policy_of_call(policy, options),
            min_similarity=options.get("min_similarity"),
            min_top_similarity=options.get("min_top_similarity"),
            filters=where,
            options=store_options,
            **extra,
        )

    def _report(self, result: Any) -> Report[Document]:
        asked = Asked(result.question.text, result.vector, model=result.model)
        key = self._collection_key
        return self._report_type.from_result(
            result,
            output=lambda candidate: output(candidate, asked=asked, collection_key=key),
            as_dropped=as_dropped,
            describe=describe,
        )


class ThresholdedRetriever(EngineRetriever):
    """Dense retrieval over any ``VectorStore`` that drops what is clearly unrelated.

    It fetches ``top_k * over_fetch`` candidates, reads each score as a true
    cosine, and applies the core ``RetrievalPolicy``: the cosine floor, the
    per-source cap (``metadata[policy.source_key]``, else the document id), the
    character budget, then ``top_k``. Neighbours and parent summaries are then
    attached from ``docstore``, for kept documents only.

    Each returned document is a copy whose metadata carries ``similarity`` (the
    cosine) and ``score_kind``; attachments carry ``attached_role`` and
    ``attached_to`` instead. ``retrieve_with_report`` also returns what was dropped
    and why; every call sends the same report to its callbacks as the custom event
    ``thresholded_selection``.

    The floor, the answer gate and ``top_k`` are ``policy``'s (``policy.min_similarity``,
    ``policy.min_top_similarity``, ``policy.top_k``), or a calibration ``profile``'s
    floor, gate and model with ``policy``'s other fields (a ``policy`` that sets another
    floor, gate or model beside a profile is refused); expose ``policy`` with
    ``configurable_fields`` to change them per config.

    Per call: ``retriever.invoke(q, k=2, min_similarity=0.5, filters=...)``; also
    ``min_top_similarity`` (the answer gate; 0 turns it off), ``max_per_source``,
    ``max_chars``, ``over_fetch``, ``policy`` (the whole policy, for this call) and
    ``search_kwargs`` (merged over the field; no filter in them). None leaves a value as it
    is: unlike in a policy, ``max_per_source=None`` or ``max_chars=None`` per call does not
    lift the cap or the budget (pass ``policy`` for that). ``filters`` is a
    structured filter (see :mod:`langchain_thresholded.filters`) and only narrows: it is
    combined (AND) with the retriever's ``filters``, ``expr`` and ``search_kwargs``
    filter. Every document
    returned satisfies every filter in force, attachments included (those outside
    are dropped as ``outside_filters``). A raw Milvus ``expr`` is given when the
    retriever is built, never per call.

    A field changed after construction holds from the next call: assigned
    (``retriever.filters = ...``), in a ``model_copy(update=...)``, or a dict changed in
    place (``retriever.search_kwargs["filter"] = ...``).
    """

    vectorstore: VectorStore
    """The store to search; its own filter (``filter``/``expr``) is passed through."""
    policy: RetrievalPolicy = Field(default_factory=RetrievalPolicy)
    """Floor, answer gate, over-fetch, per-source cap, character budgets and ``top_k``."""
    profile: str | Path | None = None
    """A calibration profile: its floor, gate and model replace ``policy``'s."""
    collection: str | None = None
    """The profile's collection, where it is not the store's ``collection_name``."""
    embeddings: OptionalEmbeddings = None
    """Embeds the query (and the candidates when re-scoring); default: the store's."""
    metric: Metric | None = None
    """The store's metric, for stores it cannot be read from: ``COSINE``, ``IP`` or ``L2``."""
    score_kind: ScoreKind = ScoreKind.COSINE
    """What the store's scores are. Other kinds are never cut by the floor, unless
    ``policy.hybrid_policy="rescore"``: then the floor reads their dense cosine (the
    candidates' texts embedded in one batch), and their own score and order stay.
    ``unknown``: a dense store whose scores are not cosines (searched by vector where the
    store can); ``rrf``, ``weighted``, ...: searched by query text."""
    search_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Passed to every search, e.g. Milvus's ``{"param": ...}``; a raw ``{"expr": ...}`` (or
    ``filter``) here is ANDed with every call's filters. Its restrictions (``expr``,
    ``filter``, ``where``, ``where_document``, Chroma's ``ids``, Milvus's
    ``partition_names``) hold for attachments too, and a call cannot replace them; one the
    store's search does not read (``where`` on Milvus) is refused."""
    filters: Any = None
    """The retriever's own filter, structured (see :mod:`langchain_thresholded.filters`):
    it holds in every call, and a call's ``filters`` narrow it."""
    expr: str | None = None
    """A raw Milvus boolean expression, ANDed verbatim with every call's filters (Milvus
    stores only; you vouch for it: it is not checked)."""
    allowed_filter_keys: AllowedFilterKeys = None
    """The only metadata keys a filter may name; default: any plain field name."""
    call_filters: Any = None
    """Filters combined (AND) with ``filters`` in every call, like a call's own ``filters``:
    the field to expose with ``configurable_fields`` (``filters`` cannot be)."""
    docstore: BaseStore[str, Document] | None = None
    """Where neighbours and parent summaries are fetched from, by the ids in the metadata;
    a section the store reads back by id (``get_by_ids``, a Milvus or Chroma collection's
    query) is its copy, as a search returns it."""
    neighbours: int = Field(default=1, ge=0, strict=True)
    """How many documents to attach on each side of a kept one (0: none), from ``docstore``:
    without one, nothing is attached (and more than one is an error)."""
    parent_summaries: bool = Field(default=True, strict=True)
    """Attach the document named by ``parent_id_key`` (a section's summary)."""
    parent_levels: int = Field(default=1, ge=0, strict=True)
    """How many levels of parent summaries to attach, when ``parent_summaries`` (0: none;
    more than 1 with ``parent_summaries=False`` is refused)."""
    prev_id_key: str = "prev_id"
    """Metadata key of the previous document's id (a neighbour)."""
    next_id_key: str = "next_id"
    """Metadata key of the next document's id (a neighbour)."""
    parent_id_key: str = "parent_id"
    """Metadata key of the parent's id (a summary)."""
    id_key: str | None = None
    """Metadata key of a document's id when ``Document.id`` is empty; default: the Milvus
    primary field for langchain-milvus stores. Without an id a document is known by its text."""
    max_retries: int = Field(default=0, ge=0, strict=True)
    """How often a search that failed because the store was unreachable or too slow is tried
    again; then ``SearchUnavailableError``. Other errors are raised at once. Each attempt's
    deadline is the store's (langchain-milvus: ``Milvus(timeout=...)``)."""
    retry_backoff: float = Field(default=0.2, ge=0, allow_inf_nan=False, strict=True)
    """Seconds before the first retry; each next wait doubles (at most 2 s)."""
    timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False, strict=True)
    """Seconds: the deadline of the whole search, retries included; when it passes, the call
    raises ``CollectionSearchError`` (an empty result would read as "nothing matched")."""
    allow_model_mismatch: bool = Field(default=False, strict=True)
    """Use ``policy``'s floor even when ``policy.embedding_model`` differs from the model the
    embeddings name (``model_id``, ``model_name`` or ``model``), or when they name none (a
    profile or policy for a named model is otherwise refused). A floor measured for one model
    means nothing for another: only when you know."""

    _copied: Copied | None = PrivateAttr(default=None)
    """The ``store.as_retriever(...)`` whose settings ``from_retriever`` copied."""

    @field_validator("vectorstore", mode="before")
    @classmethod
    def _a_store_not_a_retriever(cls, value: Any) -> Any:
        if _a_retriever(value) and not isinstance(value, VectorStore):
            raise TypeError(
                f"vectorstore= takes a VectorStore, got {type(value).__name__}: wrap a "
                "retriever with ThresholdedRetriever.from_retriever(retriever, policy=...)"
            )
        if other := of_another_framework(value, "langchain_thresholded"):
            raise TypeError(f"vectorstore= takes a LangChain VectorStore: {other}")
        return value

    @field_validator("metric", mode="before")
    @classmethod
    def _parse_metric(cls, value: Any) -> Any:
        return None if value is None else Metric.parse(value)

    @field_validator("score_kind", mode="before")
    @classmethod
    def _parse_score_kind(cls, value: Any) -> Any:
        return ScoreKind.parse(value) if isinstance(value, str) else value

    @field_validator("search_kwargs")
    @classmethod
    def _no_k_in_search_kwargs(cls, value: dict[str, Any]) -> dict[str, Any]:
        if "k" in value:
            raise ValueError("must not contain 'k': the retriever fetches top_k * over_fetch")
        no_score_threshold(value)
        return value

    # Public API --------------------------------------------------------------------
    @classmethod
    def from_retriever(
        cls,
        retriever: BaseRetriever,
        *,
        embeddings: Embeddings | None = None,
        score_key: str | None = None,
        **fields: Any,
    ) -> ThresholdedRetriever:
        """Apply the policy to another retriever's results, e.g. an ``EnsembleRetriever``.

        A ``VectorStoreRetriever`` (``store.as_retriever()``) is read for its store, which
        is then searched as ``ThresholdedRetriever(vectorstore=store)`` does: its
        ``search_type="similarity"`` is the normal search, its scores read as cosines;
        ``"mmr"`` runs the retriever's own MMR search, its results of kind ``mmr`` (never
        cut by the floor unless ``policy.hybrid_policy="rescore"``); and
        ``"similarity_score_threshold"`` is refused (its relevance scores are not
        cosines: set the floor with ``policy.min_similarity``). Its ``search_kwargs["k"]``
        is replaced by the ``k`` each search asks for (``policy.top_k * policy.over_fetch``,
        more when a search is widened: an MMR search up to its row limit), and its
        ``search_kwargs["filter"]`` becomes a filter of the new retriever (ANDed with
        ``filters=``) when it is a structured filter or its dict form (a Milvus ``expr``
        string stays the raw expression); any other form (a function, a dict of
        operators the filter model does not accept) is an error that says to pass
        ``filters=``. ``search_kwargs=`` given here are merged with its own: its store
        restrictions stay in force (a Milvus ``expr`` or ``filter`` string given too is
        ANDed with its own; any other restriction it already has, a ``namespace`` included,
        is refused rather than replaced), and one given as None, a blank expression or an empty
        clause restricts nothing (an empty list of ids names no section).
        Its settings are copied, so a search after the retriever changed (a
        filter set on it afterwards, say) is refused: call ``from_retriever`` again.

        With a ``docstore``, the neighbours and summaries it attaches are held to the wrapped
        retriever's restrictions, so those must be readable: a store's ``as_retriever(...)``
        (its store filters, as above) or a ``ThresholdedRetriever`` over a store restricted
        by its ``filters`` alone (an ensemble's members likewise; a document is then held to
        any member's filters). Any other retriever (a ``MultiQueryRetriever``, a retriever of
        your own) is refused with a docstore: pass ``filters=`` instead.

        An ensemble's documents get their weighted RRF score (kind ``rrf``), which is
        never compared with the floor; with ``policy.hybrid_policy="rescore"`` the floor
        meets each document's dense cosine, computed with ``embeddings``, and the RRF
        score and order stay. Any other retriever (a ``MultiQueryRetriever``, one of your
        own) is taken in its own order, each document's score read from
        ``metadata[score_key]`` when ``score_key`` names it (default: no score). A floor
        meets them when ``score_kind="cosine"`` and ``metric=`` say what they are (with
        ``embeddings``), or each document's dense cosine with
        ``policy.hybrid_policy="rescore"`` and ``embeddings``; else it is an error that says
        so. See :class:`langchain_thresholded.ensemble.RetrieverSource`.
        """
        not_configurable(retriever)  # a configurable retriever is no BaseRetriever: say why
        if not _a_retriever(retriever):
            other = of_another_framework(retriever, "langchain_thresholded")
            hint = (
                ": a vector store is searched with ThresholdedRetriever(vectorstore=store, ...)"
                if isinstance(retriever, VectorStore)
                else f": {other}"
                if other
                else ""
            )
            raise TypeError(
                f"from_retriever wraps a LangChain retriever, got {type(retriever).__name__}{hint}"
            )
        no_documents_past_own_filters(retriever)
        if isinstance(retriever, VectorStoreRetriever):
            if score_key is not None:
                raise TypeError(
                    "score_key is for retrievers that return no scores; a VectorStoreRetriever "
                    "is searched through its store, whose scores are read in its metric"
                )
            made = cls._over_store_retriever(retriever, embeddings, fields)
            made._copied = _copy_of(retriever)  # a change to it afterwards is refused
            return made
        source = RetrieverSource(retriever, embeddings=embeddings, score_key=score_key)
        fields["score_kind"] = declared_kind(
            fields.get("score_kind"), source.score_kind, source=type(retriever).__name__
        )
        return cls(vectorstore=source, embeddings=embeddings, **fields)

    @classmethod
    def _over_store_retriever(
        cls, retriever: VectorStoreRetriever, embeddings: Embeddings | None, fields: dict[str, Any]
    ) -> ThresholdedRetriever:
        """``from_retriever`` over ``store.as_retriever(...)``, from its settings (an MMR search
        runs a copy of it): see there."""
        search_type = retriever.search_type
        if search_type == "similarity_score_threshold":
            raise ValueError(
                "a retriever of search_type='similarity_score_threshold' cuts on relevance "
                "scores, which are not cosines (langchain-milvus maps a cosine c to (c+1)/2, and "
                "each store has its own function): build it with search_type='similarity' and "
                "set the floor with policy=RetrievalPolicy(min_similarity=...)"
            )
        store_kwargs = {k: v for k, v in retriever.search_kwargs.items() if k != "k"}
        raw = store_kwargs.pop("filter", None)
        base, raw_expr = _inherited_filter(retriever.vectorstore, raw)
        fields["filters"] = all_of(base, to_filter(fields.get("filters")))
        if search_type == "mmr":
            policy = fields.get("policy") or RetrievalPolicy()
            inner_kwargs = {**retriever.search_kwargs, "k": policy.top_k * policy.over_fetch}
            if base is not None and _mmr_filter_inexact(retriever.vectorstore):
                del inner_kwargs["filter"]  # held as filters, and searched for as far as needed
            inner = retriever.model_copy(update={"search_kwargs": inner_kwargs})
            store_embeddings = embeddings or retriever.vectorstore.embeddings
            source = RetrieverSource(inner, embeddings=store_embeddings, resize=True)
            fields["score_kind"] = declared_kind(
                fields.get("score_kind"), ScoreKind.MMR, source="an MMR search"
            )
            return cls(vectorstore=source, embeddings=store_embeddings, **fields)
        if raw_expr is not None:
            store_kwargs["filter"] = raw_expr
        fields["search_kwargs"] = merged_restrictions(
            _ids_listed(store_kwargs),
            _ids_listed(fields.get("search_kwargs") or {}),
            restricting=NEVER_REPLACED,
            expr_keys=_RAW_FILTERS,
            argument="search_kwargs",
        )
        return cls(vectorstore=retriever.vectorstore, embeddings=embeddings, **fields)

    # BaseRetriever -----------------------------------------------------------------
    def _get_ls_params(self, **kwargs: Any) -> LangSmithRetrieverParams:
        params = super()._get_ls_params(**kwargs)
        params["ls_vector_store_provider"] = type(self.vectorstore).__name__
        embeddings = self._store_embeddings()
        if embeddings is not None:
            params["ls_embedding_provider"] = type(embeddings).__name__
        return params

    # One call ----------------------------------------------------------------------
    def as_collection(self) -> Collection[Document]:
        """This retriever's store and settings as the engine searches them, its filters and
        ``call_filters`` included; a ``MultiCollectionRetriever`` searches its collections
        through it."""
        return self._state().collection

    def as_policy(self) -> RetrievalPolicy:
        """The retriever's policy: ``policy``, or its ``profile``'s. The ``policy`` field
        stays as it was given: with a ``profile``, its floor, gate and model are not those
        in force."""
        return self._state().policy

    @property
    def min_similarity(self) -> float:
        """The floor in force: ``policy``'s or its ``profile``'s, or its model's default."""
        state = self._state()
        return state.collection.floor(state.policy)

    @property
    def min_top_similarity(self) -> float | None:
        """The answer gate in force (None or 0: off): ``policy``'s or its ``profile``'s."""
        return self._state().policy.min_top_similarity

    def _plan(self, query: str, kwargs: dict[str, Any]) -> Call[Document]:
        """One call: its policy with the call's overrides, its filters and store arguments."""
        state = self._state()
        return self._planned(query, kwargs, [state.collection], state.policy)

    def _build(self) -> _Searched:
        """The policy (``policy``, or its ``profile``'s) and the collection of the fields."""
        policy = (
            profiled_policy(
                self.policy,
                self.profile,
                collection=self.collection,
                store_collection=collection_name(self.vectorstore),
            )
            or RetrievalPolicy()
        )
        self._check_scoring(policy)
        self._check_attachments_have_a_docstore()
        collection = self._build_collection()
        check_judgeable(collection, policy, collection.floor(policy))
        return _Searched(policy, collection)

    def _build_collection(self) -> Collection[Document]:
        backend = LangChainBackend(
            self.vectorstore,
            embeddings=self._store_embeddings(),
            metric=self.metric,
            score_kind=self.score_kind,
            search_kwargs=self._search_kwargs(),
            docstore=self.docstore,
            link_keys=LinkKeys(self.prev_id_key, self.next_id_key, self.parent_id_key),
            id_key=self._id_key(),
        )
        where = all_of(to_filter(self.filters), to_filter(self.call_filters))
        backend.check_filter(where)
        model = model_of(self._store_embeddings())
        attachments = AttachmentSpec.of(
            neighbours=self.neighbours,
            parent_summaries=self.parent_summaries,
            parent_levels=self.parent_levels,
        )
        attach = self.docstore is not None
        keys = self.allowed_filter_keys
        return Collection(
            backend=backend,
            score_kind=self.score_kind,
            model=model,
            allow_model_mismatch=self.allow_model_mismatch,
            retry=RetryPolicy.of(max_retries=self.max_retries, retry_backoff=self.retry_backoff),
            attachments=attachments if attach else AttachmentSpec(),
            timeout=self.timeout,
            embeds=self.score_kind is ScoreKind.COSINE,
            where=where,
            allowed_filter_keys=None if keys is None else frozenset(keys),
            capped=isinstance(self.vectorstore, RetrieverSource) and not self.vectorstore.resize,
            **_row_limit(self.vectorstore),
        )

    def _check_attachments_have_a_docstore(self) -> None:
        """Attachments asked for beyond the defaults come from ``docstore``: without one,
        none would. (The defaults pass: they are what every retriever is built with.)"""
        fields = type(self).model_fields
        named = ["neighbours", *(["parent_levels"] if self.parent_summaries else [])]
        asked = [n for n in named if getattr(self, n) not in (0, fields[n].default)]
        if asked and self.docstore is None:
            given = ", ".join(f"{n}={getattr(self, n)!r}" for n in asked)
            raise ValueError(
                f"{given} attach documents fetched from docstore=..., which is not given, so "
                "nothing would be attached: pass the docstore that holds them by id (e.g. an "
                "InMemoryStore), or leave these out"
            )

    def _search_kwargs(self) -> dict[str, Any]:
        """The field ``search_kwargs`` with ``expr``. A raw expression is for Milvus only: on
        another store nothing could hold the neighbours and summaries to it."""
        kwargs = dict(self.search_kwargs)
        raw = kwargs.get("expr") or kwargs.get("filter")
        if isinstance(raw, str) and not is_milvus(self.vectorstore) and self.docstore is not None:
            raise ValueError(
                f"search_kwargs holds a raw filter expression, which "
                f"{store_name(self.vectorstore)} cannot check for the neighbours and "
                "summaries fetched from the docstore: give filters=... instead"
            )
        own = [k for k in ("filter", "where", "where_document") if kwargs.get(k) is not None]
        if own and self.docstore is not None and not _held_by_id(self.vectorstore, kwargs):
            raise ValueError(
                f"search_kwargs holds the store's own filter ({', '.join(own)}), which holds for "
                f"the search of {store_name(self.vectorstore)} but not for the neighbours "
                "and summaries fetched from the docstore: give it as filters=... (a structured "
                "filter or a dict such as {'doc_type': 'faq'}), which holds for both"
            )
        if self.expr:
            if not is_milvus(self.vectorstore):
                raise ValueError(
                    f"expr is a Milvus boolean expression, but the store is "
                    f"{store_name(self.vectorstore)}: give filters=... instead"
                )
            base = kwargs.pop("expr", None) or kwargs.pop("filter", None)
            kwargs["expr"] = all_of_exprs([base, self.expr])
        return kwargs

    def _check_scoring(self, policy: RetrievalPolicy) -> None:
        """Refuse a store whose scores cannot be read as cosines."""
        needs_metric = self.score_kind is ScoreKind.COSINE
        if needs_metric and self.metric is None and not supports_metric_detection(self.vectorstore):
            raise unknown_store_error(self.vectorstore)
        if needs_metric and not is_milvus(self.vectorstore):  # Milvus is read per call
            store_metric(self.vectorstore, self.metric)  # a contradicting metric= is refused
        embeds = needs_metric or wants_rescore(policy, self.score_kind)
        if embeds and self._store_embeddings() is None:
            raise ValueError(
                f"{store_name(self.vectorstore)} exposes no embeddings to embed the query "
                "with: pass embeddings=..., the model the store was built with"
            )
        if self.embeddings is not None and not self.allow_model_mismatch:
            check_question_model(
                model_of(self.embeddings),
                model_of(self.vectorstore.embeddings),
                given_as="embeddings=",
            )

    def _watched(self) -> Any:
        """The retrievers a ``RetrieverSource`` runs and their settings: the backend reads
        them once, to refuse or hold their restrictions, so a change is built again. A store
        retriever ``from_retriever`` copied is not run: a change to it is refused."""
        if self._copied is not None:
            self._copied.check_unchanged()
        return source_settings(self.vectorstore)

    def _store_embeddings(self) -> Embeddings | None:
        if self.embeddings is not None:
            return self.embeddings
        found = self.vectorstore.embeddings
        return found if isinstance(found, Embeddings) else None

    def _id_key(self) -> str | None:
        """The metadata key of each document's id: ``id_key``, else the primary key of the
        Milvus store searched (a wrapped retriever's too), else ``"id"``."""
        if self.id_key is not None:
            return self.id_key
        return primary_field(rows_store(self.vectorstore)) or "id"


@dataclass(frozen=True)
class _Searched:
    """What a ``ThresholdedRetriever``'s fields make: its policy and its collection."""

    policy: RetrievalPolicy
    collection: Collection[Document]


def _copied_settings(retriever: VectorStoreRetriever) -> dict[str, Any]:
    """What ``from_retriever`` copies of a store retriever (its ``k`` is replaced anyway)."""
    return {
        "vectorstore": retriever.vectorstore,
        "search_type": retriever.search_type,
        "search_kwargs": {k: v for k, v in retriever.search_kwargs.items() if k != "k"},
    }


def _held(value: Any) -> Any:
    """What a field held, its structured filters by their fields."""
    return shape(value, by_fields=(Expr,))


def _copy_of(retriever: VectorStoreRetriever) -> Copied:
    """A store retriever's settings as ``from_retriever`` copied them."""
    return Copied.of(
        retriever,
        _copied_settings,
        copied="store, search type and search_kwargs",
        instead=(
            "set filters=... on the ThresholdedRetriever itself (a change to its own fields "
            "holds from the next call)"
        ),
        by_fields=(Expr,),
    )


def _row_limit(store: VectorStore) -> dict[str, Any]:
    """A wrapped retriever's widest search and the advice past it; a store's are the engine's."""
    if not isinstance(store, RetrieverSource):
        return {}
    return {"max_rows": store.max_rows, "max_rows_advice": store.max_rows_advice}


def _a_retriever(value: Any) -> bool:
    """A retriever, or one bound with ``with_config(...)``, ``with_retry()`` (run as it is,
    as an ensemble would run it)."""
    return isinstance(unbound(value)[0], BaseRetriever)


def _mmr_filter_inexact(store: VectorStore) -> bool:
    """Whether a store's MMR search cannot be trusted with a structured filter: an
    ``InMemoryVectorStore`` calls its filter (a dict is no function), and FAISS applies it to
    its ``2 * fetch_k`` nearest rows only, so those within it farther out were never found.
    The engine holds such a filter instead, and widens the search while it drops rows."""
    return isinstance(store, InMemoryVectorStore) or is_faiss(store)


def _ids_listed(search_kwargs: Mapping[str, Any]) -> Mapping[str, Any]:
    """``search_kwargs`` with their ``ids`` as a list of ids (one id given as a string, as
    Chroma takes it, listed: :func:`~thresholded.strict.search_ids`), so that
    the same ids given both ways restrict alike."""
    ids = search_ids(search_kwargs.get("ids"), argument="search_kwargs['ids']")
    return search_kwargs if ids is None else {**search_kwargs, "ids": list(ids)}


def _held_by_id(store: VectorStore, search_kwargs: Mapping[str, Any]) -> bool:
    """Whether the store's own filters in ``search_kwargs`` hold for the sections fetched by
    id too: an ``InMemoryVectorStore``'s function (called on each), Milvus's expressions and
    Chroma's ``where`` and ``where_document`` clauses (the collection asked which ids lie
    within them); not a function Chroma cannot be asked about, nor another store's filter."""
    if isinstance(store, InMemoryVectorStore) or is_milvus(store):
        return True
    return is_chroma(store) and not callable(search_kwargs.get("filter"))


def _inherited_filter(store: VectorStore, raw: Any) -> tuple[Any, str | None]:
    """A wrapped retriever's ``search_kwargs["filter"]``: a structured filter, or a Milvus
    ``expr`` string (kept raw); anything else cannot be checked, so it is refused."""
    if raw is None:
        return None, None
    if isinstance(raw, str) and is_milvus(store):
        return None, raw
    why = "a filter function cannot be checked" if callable(raw) else None
    if why is None and not isinstance(raw, str):
        try:
            return to_filter(raw), None
        except (TypeError, ValueError) as exc:
            why = f"it is not a filter this package can check ({exc})"
    raise ValueError(
        f"the wrapped retriever's search_kwargs['filter'] ({raw!r}) cannot be inherited: "
        f"{why or 'a raw filter string is a Milvus expression, and this store is not Milvus'}. "
        "Build the retriever without it and pass filters=... (a structured filter or a dict "
        "such as {'doc_type': 'public'}), which holds for every result and attachment"
    )


def policy_of_call(own: RetrievalPolicy, options: dict[str, Any]) -> RetrievalPolicy:
    """The merged result's policy for one call: its ``policy``, ``k`` and the other
    :data:`thresholded.policy.CALL_OVERRIDES` it gives."""
    overrides = {name: options.get(name) for name in CALL_OVERRIDES if name != "top_k"}
    return call_policy(
        own, options.get("policy"), named={"top_k": "k"}, top_k=options.get("k"), **overrides
    )


def filters_of_call(options: dict[str, Any], configured: Any = None) -> tuple[Any, dict[str, Any]]:
    """A call's filters in the core model (with the retriever's ``call_filters``, AND), and
    its other store arguments. A raw filter (``expr``, a string ``filter``, or either in
    ``search_kwargs``) is refused: per call, filters are structured, so that they can be
    checked and only narrow."""
    extra = dict(options.get("search_kwargs") or {})
    raw = [name for name in _RAW_FILTERS if name in options and isinstance(options[name], str)]
    raw += [f"search_kwargs[{name!r}]" for name in _RAW_FILTERS if name in extra]
    raw += ["expr"] if "expr" in options and "expr" not in raw else []
    if raw:
        raise TypeError(
            f"a raw store filter per call ({', '.join(raw)}) is not accepted: pass "
            "filters=... (a structured filter or a dict such as {'doc_type': 'public'}), which "
            "is combined with the retriever's filters; a raw Milvus expr belongs in the "
            "retriever (expr=... or search_kwargs={'expr': ...})"
        )
    given = [options.get("filters"), options.get("filter")]
    if any(callable(f) for f in given):
        raise TypeError(
            "a filter function per call cannot be checked: pass filters=... (a structured "
            "filter or a dict such as {'doc_type': 'public'})"
        )
    where = all_of(to_filter(configured), *(to_filter(f) for f in given))
    return where, {"search_kwargs": extra} if extra else {}


class ConfiguredCopies(RunnableConfigurableFields):
    """LangChain's configurable retriever, whose configured retriever is a copy of the
    retriever with the configured fields (``model_copy(update=...)``, validated as the
    constructor validates them). LangChain builds it anew from the fields alone, which
    loses what the retriever holds beside them: the settings ``from_retriever`` copied of
    the wrapped retriever, so a search after it changed (a tenant's filter set on it) went
    on with the copied ones, where the retriever itself refuses it."""

    def _prepare(self, config: RunnableConfig | None = None) -> tuple[Any, RunnableConfig]:
        built, config = super()._prepare(config)
        if built is self.default:
            return built, config
        configured = {name: getattr(built, name) for name in self.fields}
        return self.default.model_copy(update=configured), config


def check_call_filters_read(retriever: EngineRetriever, config: RunnableConfig | None) -> None:
    """Refuse a config that sets a filter-bearing field the retriever does not hold
    (``call_filters`` not exposed; ``filters``, ``expr``, ``search_kwargs`` or
    ``allowed_filter_keys``, which cannot be): they reach it only through
    ``configurable_fields``, and LangChain drops a key no field is exposed under, so the
    search would not be narrowed by them. A value equal to the retriever's own is accepted."""
    configured = ensure_config(config)["configurable"]
    for name in sorted(_CONFIGURED_FILTER_FIELDS & set(configured)):
        if not _holds(retriever, name, configured[name]):
            raise UnsafeFilterError(_unread(retriever, name, configured[name]))


def _holds(retriever: EngineRetriever, name: str, value: Any) -> bool:
    """Whether the retriever's own ``name`` is ``value`` (a filter: as the core reads it)."""
    own = getattr(retriever, name, None)
    if name in _STRUCTURED_FIELDS:
        return to_filter(value) == to_filter(own)
    return bool(value == own)


def _unread(retriever: EngineRetriever, name: str, value: Any) -> str:
    """Why a config's ``name`` would not narrow the search, and what to do instead."""
    expose = "retriever.configurable_fields(call_filters=ConfigurableField(id='call_filters'))"
    fix = f"give the narrowing as configurable call_filters, exposed with {expose}"
    if name == CALL_FILTERS:
        why, fix = "they are not exposed", f"expose them with {expose}"
    elif name not in type(retriever).model_fields:
        why = f"{name} is none of its fields"
    else:
        why = f"{name} cannot be exposed (a configured value would replace the retriever's own)"
    return (
        f"the config's configurable {name} ({value!r}) would not reach this "
        f"{type(retriever).__name__}: LangChain drops a configurable key no field is exposed "
        f"under, and {why}, so the search would not be narrowed: {fix}. For another "
        "runnable in the chain, expose its field under another id"
    )


def check_options(
    retriever: BaseRetriever, kwargs: dict[str, Any], accepted: frozenset[str]
) -> dict[str, Any]:
    """A call's options; an unknown one is an error that lists what the retriever accepts."""
    options = {k: v for k, v in kwargs.items() if k not in IGNORED_OPTIONS}
    check_call_options(type(retriever).__name__, options, accepted, top_k="k")
    return options


def no_documents_past_own_filters(retriever: Any, config: RunnableConfig | None = None) -> None:
    """Refuse a wrapped retriever (or an ensemble's member) that searches its store under a
    store filter but returns documents the filter does not hold for (:func:`_past_filters`):
    the wrapping retriever would seem to keep it in force. Nested ensembles and fallbacks are
    looked into (:func:`searching_members`), and so are the retrievers whose documents
    another returns (:func:`_returning`), each as ``config`` sets it."""
    for member in _returning(retriever, config):
        inner, bound = unbound(member)
        kwargs = {**(getattr(inner, "search_kwargs", None) or {}), **bound}
        if isinstance(inner, ThresholdedRetriever):  # its attachments are held to them
            continue
        how = _past_filters(inner)
        restricting = sorted(k for k in NEVER_REPLACED if restricts(kwargs.get(k)))
        if how is not None and restricting:
            raise UnsafeFilterError(
                f"{type(inner).__name__} {how.format(keys=restricting)}. Build it without "
                "them and pass filters=... (a structured filter or a dict such as "
                "{'doc_type': 'public'}) to from_retriever, which hold for every document it "
                "returns"
            )


_HELD_TO_NONE = (
    "returns documents from {source}, held to none of its search_kwargs {{keys}}, which hold "
    "for its store's search only"
)


def _past_filters(retriever: Any) -> str | None:
    """How ``retriever`` returns documents its ``search_kwargs`` store filters (``{keys}``)
    do not hold for, if it does: from its docstore (a ``MultiVectorRetriever``, a
    ``ParentDocumentRetriever``: the parents of the children it found), from its memory (a
    ``TimeWeightedVectorStoreRetriever``: its most recent documents, found or not), or
    searching under the filter its LLM writes from the question in their place (a
    ``SelfQueryRetriever``: a question asking for internal documents gets them)."""
    if isinstance(getattr(retriever, "docstore", None), BaseStore):
        return _HELD_TO_NONE.format(source="its docstore (the parents of what it found)")
    if isinstance(getattr(retriever, "memory_stream", None), list):
        recent = "its memory stream (its most recent documents, found or not)"
        return _HELD_TO_NONE.format(source=recent)
    if all(hasattr(retriever, n) for n in ("query_constructor", "structured_query_translator")):
        return (
            "replaces its search_kwargs {keys} with the filter its LLM writes from the "
            "question, so a question asking for other documents gets them"
        )
    return None


def _returning(retriever: Any, config: RunnableConfig | None, depth: int = 0) -> list[Any]:
    """The retrievers whose documents ``retriever`` returns, each as ``config`` sets it:
    its searching members (:func:`searching_members`) and, inside each that wraps others (a
    ``ContextualCompressionRetriever``'s ``base_retriever``, a ``MultiQueryRetriever``'s
    ``retriever``, a ``MergerRetriever``'s ``retrievers``: every field holding retrievers),
    theirs. This package's retrievers hold what they return to their own filters."""
    if depth > 8:
        raise ValueError("the retriever nests retrievers more than 8 deep")
    found = []
    for member in searching_members(as_configured(retriever, config)):
        member = as_configured(member, config)
        found.append(member)
        inner = unbound(member)[0]
        if not isinstance(inner, EngineRetriever):
            for held in _held_retrievers(inner):
                found.extend(_returning(held, config, depth + 1))
    return found


def _held_retrievers(retriever: Any) -> list[Any]:
    """The retrievers held in ``retriever``'s fields, alone or in a list."""
    fields = getattr(type(retriever), "model_fields", None) or {}
    values = [getattr(retriever, name, None) for name in fields]
    held = [v for value in values for v in (value if isinstance(value, list) else [value])]
    return [v for v in held if isinstance(v, Runnable) and _retrieves(v)]


def _retrieves(runnable: Runnable[Any, Any]) -> bool:
    """Whether a runnable is a retriever, bound, configurable or with fallbacks."""
    inner = unbound(runnable)[0]
    if isinstance(inner, DynamicRunnable):
        inner = inner.default
    return isinstance(inner, BaseRetriever | RunnableWithFallbacks)
