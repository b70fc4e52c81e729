"""A LangChain retriever that keeps only what clears a true cosine floor."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever, LangSmithRetrieverParams
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import run_in_executor
from langchain_core.stores import BaseStore
from langchain_core.vectorstores import VectorStore
from pydantic import Field, field_validator

from langchain_thresholded._attachments import AttachmentWalk
from langchain_thresholded._documents import scored_candidate
from langchain_thresholded.milvus import ensure_orm_connection
from langchain_thresholded.report import EVENT_NAME, ThresholdedReport
from langchain_thresholded.scoring import (
    is_milvus,
    store_metric,
    supports_metric_detection,
    unknown_store_error,
)
from thresholded.policy import RetrievalPolicy
from thresholded.rescore import cosines, wants_rescore
from thresholded.retry import RetryPolicy, acall_with_retries, call_with_retries
from thresholded.scores import Metric, ScoreKind, check_unit_norm, to_cosine
from thresholded.selection import Candidate, attach, select

T = TypeVar("T")

_REPORT_SINK = "_thresholded_report_sink"
_POLICY_OVERRIDES = ("min_similarity", "max_per_source", "max_chars", "over_fetch")
_CALL_OPTIONS = frozenset({"k", *_POLICY_OVERRIDES, "filter", "expr", "search_kwargs"})
_IGNORED_OPTIONS = frozenset({"verbose"})  # BaseRetriever.invoke reads it and passes it on

ScoredDocs = list[tuple[Document, float | None, float | None]]
"""(document, score, the dense cosine of a non-cosine score when re-scored)."""


@dataclass(frozen=True)
class _Call:
    """One call's effective settings: the retriever's, with the call's overrides."""

    policy: RetrievalPolicy
    floor: float
    store_kwargs: dict[str, Any]


class ThresholdedRetriever(BaseRetriever):
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

    Per call: ``retriever.invoke(q, k=2, min_similarity=0.5, filter=...)``; also
    ``max_per_source``, ``max_chars``, ``over_fetch``, ``expr`` and
    ``search_kwargs`` (merged over the field). ``filter`` and ``expr`` go to the
    store untouched (for langchain-milvus, whose filter argument is ``expr``, a
    ``filter`` is passed as ``expr``).
    """

    vectorstore: VectorStore
    """The store to search; its own filter (``filter``/``expr``) is passed through."""
    policy: RetrievalPolicy = Field(default_factory=RetrievalPolicy)
    """Floor, over-fetch, per-source cap, character budgets and ``top_k``."""
    k: int | None = Field(default=None, ge=1)
    """LangChain's name for ``policy.top_k``: when set, it replaces ``policy.top_k``."""
    min_similarity: float | None = Field(default=None, ge=-1.0, le=1.0)
    """When set, it replaces ``policy.min_similarity``: handy for ``configurable_fields``."""
    embeddings: Embeddings | None = None
    """Embeds the query (and the candidates when re-scoring); default: the store's."""
    metric: Metric | None = None
    """The store's metric, for stores it cannot be read from: ``COSINE``, ``IP`` or ``L2``."""
    score_mode: Literal["metric", "rescore"] = "metric"
    """``metric``: convert the store's raw score from its metric; ``rescore``: embed the
    candidates' text and compute the cosine (any store; one embedding batch per search)."""
    score_kind: ScoreKind = ScoreKind.COSINE
    """What the store's scores are. Other kinds (``rrf``, ``weighted``, ...) are searched by
    query text and never cut by the floor, unless re-scored (``score_mode="rescore"`` or
    ``policy.hybrid_policy="rescore"``): then the floor reads their dense cosine, and their
    own score and order stay."""
    search_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Passed to every search, e.g. ``{"expr": ...}`` or Milvus's ``{"param": ...}``."""
    docstore: BaseStore[str, Document] | None = None
    """Where neighbours and parent summaries are fetched from, by the ids in the metadata."""
    neighbours: int = Field(default=1, ge=0)
    """How many documents to attach on each side of a kept one (0: none)."""
    parent_summaries: bool = True
    """Attach the document named by ``parent_id_key`` (a section's summary)."""
    prev_id_key: str = "prev_id"
    next_id_key: str = "next_id"
    parent_id_key: str = "parent_id"
    id_key: str | None = None
    """Metadata key of a document's id when ``Document.id`` is empty; default: the Milvus
    primary field for langchain-milvus stores. Without an id a document is known by its text."""
    max_retries: int = Field(default=0, ge=0)
    """How often a search that failed because the store was unreachable or too slow is tried
    again; then ``SearchUnavailableError``. Other errors are raised at once. Each attempt's
    deadline is the store's (langchain-milvus: ``Milvus(timeout=...)``)."""
    retry_backoff: float = Field(default=0.2, ge=0, allow_inf_nan=False)
    """Seconds before the first retry; each next wait doubles (at most 2 s)."""
    allow_model_mismatch: bool = False
    """Use ``policy``'s floor even when ``policy.embedding_model`` differs from the embeddings'
    ``model_id``. A floor measured for one model means nothing for another: only when you know."""

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self._check_scoring()  # raise the metric error itself, not wrapped by pydantic

    @field_validator("metric", mode="before")
    @classmethod
    def _parse_metric(cls, value: Any) -> Any:
        return None if value is None else Metric.parse(value)

    @field_validator("score_kind", mode="before")
    @classmethod
    def _parse_score_kind(cls, value: Any) -> Any:
        return ScoreKind(str(value).strip().lower()) if isinstance(value, str) else value

    @field_validator("search_kwargs")
    @classmethod
    def _no_k_in_search_kwargs(cls, value: dict[str, Any]) -> dict[str, Any]:
        if "k" in value:
            raise ValueError("must not contain 'k': the retriever fetches top_k * over_fetch")
        return value

    # Public API --------------------------------------------------------------------
    def retrieve_with_report(
        self, query: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> ThresholdedReport:
        """Like ``invoke``, but returns the report: kept, attached and dropped with reasons."""
        sink: list[ThresholdedReport] = []
        self.invoke(query, config, **kwargs, **{_REPORT_SINK: sink})
        return sink[0]

    async def aretrieve_with_report(
        self, query: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> ThresholdedReport:
        """Async ``retrieve_with_report``."""
        sink: list[ThresholdedReport] = []
        await self.ainvoke(query, config, **kwargs, **{_REPORT_SINK: sink})
        return sink[0]

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

        An ensemble's documents get their weighted RRF score (kind ``rrf``), which is
        never compared with the floor; with ``policy.hybrid_policy="rescore"`` (or
        ``score_mode="rescore"``) the floor meets each document's dense cosine,
        computed with ``embeddings``, and the RRF score and order stay. See
        :class:`langchain_thresholded.ensemble.RetrieverSource`.
        """
        from langchain_thresholded.ensemble import RetrieverSource

        source = RetrieverSource(retriever, embeddings=embeddings, score_key=score_key)
        fields.setdefault("score_kind", source.score_kind)
        return cls(vectorstore=source, embeddings=embeddings, **fields)

    # BaseRetriever -----------------------------------------------------------------
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        sink = kwargs.pop(_REPORT_SINK, None)
        call = self._plan(kwargs)
        scored, kind = self._search(query, call)
        selection = select(self._candidates(scored, kind, call), call.policy, call.floor)
        walk = self._walk(selection.kept)
        if walk is not None:
            assert self.docstore is not None
            while keys := walk.pending():
                walk.receive(keys, self.docstore.mget(keys))
            selection = attach(selection, walk.candidates(), call.policy)
        report = ThresholdedReport.from_selection(query, selection)
        run_manager.on_text(report.summary())
        dispatch_custom_event(
            EVENT_NAME,
            report.to_event_data("retriever"),
            config={"callbacks": run_manager.get_child()},
        )
        if sink is not None:
            sink.append(report)
        return report.documents

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        sink = kwargs.pop(_REPORT_SINK, None)
        call = self._plan(kwargs)
        scored, kind = await self._asearch(query, call)
        selection = select(self._candidates(scored, kind, call), call.policy, call.floor)
        walk = self._walk(selection.kept)
        if walk is not None:
            assert self.docstore is not None
            while keys := walk.pending():
                walk.receive(keys, await self.docstore.amget(keys))
            selection = attach(selection, walk.candidates(), call.policy)
        report = ThresholdedReport.from_selection(query, selection)
        await run_manager.on_text(report.summary())
        await adispatch_custom_event(
            EVENT_NAME,
            report.to_event_data("retriever"),
            config={"callbacks": run_manager.get_child()},
        )
        if sink is not None:
            sink.append(report)
        return report.documents

    def _get_ls_params(self, **kwargs: Any) -> LangSmithRetrieverParams:
        params = super()._get_ls_params(**kwargs)
        params["ls_vector_store_provider"] = type(self.vectorstore).__name__
        embeddings = self._store_embeddings()
        if embeddings is not None:
            params["ls_embedding_provider"] = type(embeddings).__name__
        return params

    # One call ----------------------------------------------------------------------
    def _stored(self, search: Callable[[], T]) -> T:
        """One store search, retried after transient failures (the embedding is not redone)."""
        return call_with_retries(search, self._retry_policy(), what=self._store_name())

    async def _astored(self, search: Callable[[], Awaitable[T]]) -> T:
        return await acall_with_retries(search, self._retry_policy(), what=self._store_name())

    def _retry_policy(self) -> RetryPolicy:
        return RetryPolicy(max_retries=self.max_retries, backoff=self.retry_backoff)

    def _store_name(self) -> str:
        name = getattr(self.vectorstore, "collection_name", None)
        kind = type(self.vectorstore).__name__
        return f"{kind} collection {name!r}" if isinstance(name, str) else kind

    def _plan(self, kwargs: dict[str, Any]) -> _Call:
        """The effective policy, floor and store arguments of one call."""
        options = {k: v for k, v in kwargs.items() if k not in _IGNORED_OPTIONS}
        unknown = sorted(set(options) - _CALL_OPTIONS)
        if unknown:
            hint = " (use k: it is LangChain's name for top_k)" if "top_k" in unknown else ""
            raise TypeError(
                f"{type(self).__name__} got unexpected keyword argument(s) {unknown}{hint}; "
                f"per call it accepts {sorted(_CALL_OPTIONS)}"
            )
        k = options.get("k")
        floor = options.get("min_similarity")
        policy = self.policy.with_overrides(
            top_k=k if k is not None else self.k,
            min_similarity=floor if floor is not None else self.min_similarity,
            **{name: options.get(name) for name in _POLICY_OVERRIDES if name != "min_similarity"},
        )
        store_kwargs = {**self.search_kwargs, **(options.get("search_kwargs") or {})}
        for name in ("filter", "expr"):
            if name in options:
                store_kwargs[name] = options[name]
        if "k" in store_kwargs:
            raise TypeError("search_kwargs must not contain 'k': pass k=... instead")
        if is_milvus(self.vectorstore) and "filter" in store_kwargs and "expr" not in store_kwargs:
            store_kwargs["expr"] = store_kwargs.pop("filter")
        return _Call(policy=policy, floor=self._resolve_floor(policy), store_kwargs=store_kwargs)

    def _resolve_floor(self, policy: RetrievalPolicy) -> float:
        """The floor; the embeddings' ``model_id`` must match the policy's model, if both say."""
        model = getattr(self._store_embeddings(), "model_id", None)
        model = model if isinstance(model, str) else None
        if self.allow_model_mismatch and policy.embedding_model is not None:
            model = None
        return policy.resolve_min_similarity(model)

    def _search(self, query: str, call: _Call) -> tuple[ScoredDocs, ScoreKind]:
        store, fetch_k, kwargs = self.vectorstore, call.policy.fetch_k, call.store_kwargs
        self._prepare_store()
        if self.score_kind is not ScoreKind.COSINE:
            pairs = self._stored(
                lambda: store.similarity_search_with_score(query, k=fetch_k, **kwargs)
            )
            if not self._rescores_non_cosine(call.policy):
                return [(doc, score, None) for doc, score in pairs], self.score_kind
            embeddings = self._require_embeddings()
            vector = embeddings.embed_query(query)
            texts = [doc.page_content for doc, _ in pairs]
            sims = cosines(vector, embeddings.embed_documents(texts)) if texts else []
            return _with_cosines(pairs, sims), self.score_kind
        embeddings = self._require_embeddings()
        vector = embeddings.embed_query(query)
        if self.score_mode == "rescore":
            docs = self._stored(
                lambda: store.similarity_search_by_vector(vector, k=fetch_k, **kwargs)
            )
            texts = [doc.page_content for doc in docs]
            sims = cosines(vector, embeddings.embed_documents(texts)) if texts else []
            return _as_cosines(docs, sims), ScoreKind.COSINE
        metric = self._metric(kwargs, vector)
        by_vector = getattr(store, "similarity_search_with_score_by_vector", None)
        if by_vector is not None:
            pairs = self._stored(lambda: by_vector(vector, k=fetch_k, **kwargs))
        else:  # the store embeds the query again; the vector was still checked
            pairs = self._stored(
                lambda: store.similarity_search_with_score(query, k=fetch_k, **kwargs)
            )
        return [(doc, to_cosine(s, metric), None) for doc, s in pairs], ScoreKind.COSINE

    async def _asearch(self, query: str, call: _Call) -> tuple[ScoredDocs, ScoreKind]:
        store, fetch_k, kwargs = self.vectorstore, call.policy.fetch_k, call.store_kwargs
        self._prepare_store()
        if self.score_kind is not ScoreKind.COSINE:
            pairs = await self._astored(
                lambda: store.asimilarity_search_with_score(query, k=fetch_k, **kwargs)
            )
            if not self._rescores_non_cosine(call.policy):
                return [(doc, score, None) for doc, score in pairs], self.score_kind
            embeddings = self._require_embeddings()
            vector = await embeddings.aembed_query(query)
            texts = [doc.page_content for doc, _ in pairs]
            sims = cosines(vector, await embeddings.aembed_documents(texts)) if texts else []
            return _with_cosines(pairs, sims), self.score_kind
        embeddings = self._require_embeddings()
        vector = await embeddings.aembed_query(query)
        if self.score_mode == "rescore":
            docs = await self._astored(
                lambda: store.asimilarity_search_by_vector(vector, k=fetch_k, **kwargs)
            )
            texts = [doc.page_content for doc in docs]
            sims = cosines(vector, await embeddings.aembed_documents(texts)) if texts else []
            return _as_cosines(docs, sims), ScoreKind.COSINE
        metric = self._metric(kwargs, vector)
        async_by_vector = getattr(store, "asimilarity_search_with_score_by_vector", None)
        by_vector = getattr(store, "similarity_search_with_score_by_vector", None)
        if async_by_vector is not None:
            pairs = await self._astored(lambda: async_by_vector(vector, k=fetch_k, **kwargs))
        elif by_vector is not None:  # e.g. InMemoryVectorStore: no async by-vector search
            pairs = await self._astored(
                lambda: run_in_executor(None, by_vector, vector, k=fetch_k, **kwargs)
            )
        else:
            pairs = await self._astored(
                lambda: store.asimilarity_search_with_score(query, k=fetch_k, **kwargs)
            )
        return [(doc, to_cosine(s, metric), None) for doc, s in pairs], ScoreKind.COSINE

    def _rescores_non_cosine(self, policy: RetrievalPolicy) -> bool:
        """Whether non-cosine results get their dense cosine for the floor."""
        return self.score_mode == "rescore" or wants_rescore(policy, self.score_kind)

    def _candidates(
        self, scored: ScoredDocs, kind: ScoreKind, call: _Call
    ) -> list[Candidate[Document]]:
        id_key = self._id_key()
        return [
            scored_candidate(
                doc, score, kind, cosine=cosine, id_key=id_key, source_key=call.policy.source_key
            )
            for doc, score, cosine in scored
        ]

    def _walk(self, kept: Sequence[Candidate[Document]]) -> AttachmentWalk | None:
        if (
            self.docstore is None
            or not kept
            or (self.neighbours == 0 and not self.parent_summaries)
        ):
            return None
        return AttachmentWalk(
            kept,
            neighbours=self.neighbours,
            parent_summaries=self.parent_summaries,
            prev_id_key=self.prev_id_key,
            next_id_key=self.next_id_key,
            parent_id_key=self.parent_id_key,
            id_key=self._id_key(),
            source_key=self.policy.source_key,
        )

    # The store ---------------------------------------------------------------------
    def _metric(self, store_kwargs: dict[str, Any], vector: list[float]) -> Metric:
        """The store's metric; IP and L2 are cosines only on unit vectors, so check the query."""
        metric = store_metric(self.vectorstore, self.metric, store_kwargs)
        if metric is not Metric.COSINE:
            check_unit_norm(vector)
        return metric

    def _check_scoring(self) -> None:
        """Fail at construction on a store whose scores cannot be read as cosines."""
        needs_metric = self.score_mode == "metric" and self.score_kind is ScoreKind.COSINE
        if needs_metric and self.metric is None and not supports_metric_detection(self.vectorstore):
            raise unknown_store_error(self.vectorstore)
        embeds = self.score_kind is ScoreKind.COSINE or self._rescores_non_cosine(self.policy)
        if embeds and self._store_embeddings() is None:
            raise ValueError(
                f"{type(self.vectorstore).__name__} exposes no embeddings to embed the query "
                "with: pass ThresholdedRetriever(embeddings=...), the model the store was "
                "built with"
            )

    def _store_embeddings(self) -> Embeddings | None:
        if self.embeddings is not None:
            return self.embeddings
        found = self.vectorstore.embeddings
        return found if isinstance(found, Embeddings) else None

    def _require_embeddings(self) -> Embeddings:
        found = self._store_embeddings()
        if found is None:
            raise ValueError(
                f"{type(self.vectorstore).__name__} exposes no single embeddings model: "
                "pass ThresholdedRetriever(embeddings=...)"
            )
        return found

    def _id_key(self) -> str | None:
        if self.id_key is not None:
            return self.id_key
        if is_milvus(self.vectorstore):
            return str(getattr(self.vectorstore, "_primary_field", "pk"))
        return "id"

    def _prepare_store(self) -> None:
        if is_milvus(self.vectorstore):
            ensure_orm_connection(self.vectorstore)


def _as_cosines(docs: Sequence[Document], sims: Sequence[float]) -> ScoredDocs:
    """Dense results re-scored: the computed cosine becomes the score."""
    return [(doc, sim, None) for doc, sim in zip(docs, sims, strict=True)]


def _with_cosines(pairs: Sequence[tuple[Document, float]], sims: Sequence[float]) -> ScoredDocs:
    """Hybrid or sparse results re-scored: the score and order stay, the floor reads the cosine."""
    return [(doc, score, sim) for (doc, score), sim in zip(pairs, sims, strict=True)]
