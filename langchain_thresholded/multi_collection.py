"""``MultiCollectionRetriever``: one question over several stores, one thresholded answer.

Each collection is a ``ThresholdedRetriever`` (its store, its floor, its
embeddings, its docstore for attachments), optionally wrapped in a
``CollectionSpec`` for a name, a candidate count and a timeout. The question is
embedded once and every store is searched by vector at the same time: in a
thread pool, or with the store's own async by-vector search in async calls
(langchain-milvus on a Milvus server; Milvus Lite and stores without one run in
the pool). Each collection's candidates are cut by its own floor; the survivors
are merged by cosine and the global policy applies once (per-source cap,
character budget, ``k``). Neighbours and parent summaries are attached last,
for kept documents only, from the docstore of the collection each came from.

A collection that fails or times out leaves the others' results, a status in
the report and one warning (``fail_fast=True`` raises instead); when every
collection fails, the call raises. Only the given stores are ever searched.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from langchain_thresholded.report import EVENT_NAME, ThresholdedReport
from langchain_thresholded.retrievers import ThresholdedRetriever
from langchain_thresholded.scoring import is_milvus
from thresholded.errors import ModelMismatchError
from thresholded.fanout import (
    COLLECTION_KEY,
    CollectionSearchError,
    CollectionStatus,
    Found,
    Job,
    Merge,
    Outcome,
    acall_each,
    afan_out,
    call_each,
    check_unique_names,
    fan_out,
    warn_if_partial,
)
from thresholded.models import ModelId
from thresholded.policy import RetrievalPolicy
from thresholded.scores import ScoreKind, to_cosine
from thresholded.selection import Candidate, Selection, select

__all__ = [
    "COLLECTION_KEY",
    "CollectionSearchError",
    "CollectionSpec",
    "CollectionStatus",
    "MultiCollectionReport",
    "MultiCollectionRetriever",
]

logger = logging.getLogger(__name__)

_REPORT_SINK = "_thresholded_report_sink"
_PASSED_ON = ("min_similarity", "filter", "expr", "search_kwargs")
"""Per-call options handed to every collection's retriever (``k`` is the merge's)."""
_IGNORED_OPTIONS = frozenset({"verbose"})


class CollectionSpec(BaseModel):
    """One collection: its ``ThresholdedRetriever``, a name, a candidate count, a timeout.

    ``retrieve_k`` candidates are fetched (default: the global ``top_k * over_fetch``);
    ``timeout`` (seconds) replaces the retriever's default. ``name`` labels the
    collection in reports (default: the store's collection name, else its class and
    position, e.g. ``InMemoryVectorStore[1]``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    retriever: ThresholdedRetriever
    name: str | None = Field(default=None, min_length=1)
    retrieve_k: int | None = Field(default=None, ge=1)
    timeout: float | None = Field(default=None, gt=0)


@dataclass(frozen=True)
class MultiCollectionReport(ThresholdedReport):
    """A ``ThresholdedReport`` over several collections, with each collection's status.

    ``min_similarity`` is the lowest floor of the collections; dropped ids read
    ``"<collection>/<id>"``. Every returned document names its collection in
    ``metadata["source_collection"]``.
    """

    collections: tuple[CollectionStatus, ...] = ()

    @property
    def partial(self) -> bool:
        return any(not s.ok for s in self.collections)

    @property
    def failed(self) -> tuple[CollectionStatus, ...]:
        return tuple(s for s in self.collections if not s.ok)

    def status(self, name: str) -> CollectionStatus:
        for status in self.collections:
            if status.name == name:
                return status
        raise KeyError(name)

    def summary(self) -> str:
        return "; ".join([super().summary(), *(s.describe() for s in self.collections)])


@dataclass(frozen=True)
class _Member:
    name: str
    retriever: ThresholdedRetriever
    retrieve_k: int | None
    timeout: float | None
    threaded: bool


class MultiCollectionRetriever(BaseRetriever):
    """Search several stores at once, each with its own floor; merge by cosine; attach last.

    ``collections``: ``ThresholdedRetriever``s or ``CollectionSpec``s. ``policy`` is the
    global policy of the merged result (cap, budget, ``top_k`` or ``k``, attachment
    budget); each collection's floor is its own retriever's. Every collection must
    use one embedding model (the question is embedded once): policies calibrated
    for different models, or embeddings whose ``model_id`` differ, are refused with
    ``ModelMismatchError``. Dense search only: the merge compares cosines.

    Per call: ``k``, ``min_similarity`` (every collection's floor), and ``filter``,
    ``expr`` or ``search_kwargs`` (given to every store).
    """

    collections: list[ThresholdedRetriever | CollectionSpec]
    policy: RetrievalPolicy = Field(default_factory=RetrievalPolicy)
    k: int | None = Field(default=None, ge=1)
    """LangChain's name for ``policy.top_k``: when set, it replaces it."""
    embeddings: Embeddings | None = None
    """Embeds the question once; default: the collections' (one model)."""
    timeout: float | None = Field(default=None, gt=0)
    """Each collection's default timeout, in seconds."""
    fail_fast: bool = False
    max_workers: int | None = Field(default=None, ge=1)

    _members: tuple[_Member, ...] = PrivateAttr(default=())
    _pool: ThreadPoolExecutor | None = PrivateAttr(default=None)

    @field_validator("collections")
    @classmethod
    def _not_empty(cls, value: list[Any]) -> list[Any]:
        if not value:
            raise ValueError("needs at least one collection")
        return value

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        specs = [
            c if isinstance(c, CollectionSpec) else CollectionSpec(retriever=c)
            for c in self.collections
        ]
        _check_one_model([s.retriever for s in specs], self.policy, self.embeddings)
        self._members = tuple(self._member(spec, i) for i, spec in enumerate(specs))
        check_unique_names([m.name for m in self._members])
        if self.embeddings is None:
            self.embeddings = specs[0].retriever._require_embeddings()

    def _member(self, spec: CollectionSpec, position: int) -> _Member:
        sub = spec.retriever
        if sub.score_kind is not ScoreKind.COSINE or sub.score_mode != "metric":
            raise ValueError(
                "MultiCollectionRetriever merges dense cosine results: every collection's "
                "retriever needs score_kind='cosine' and score_mode='metric'"
            )
        store = sub.vectorstore
        if getattr(store, "similarity_search_with_score_by_vector", None) is None:
            raise ValueError(
                f"{type(store).__name__} cannot search by vector: the question is embedded once "
                "for every collection, so each store needs similarity_search_with_score_by_vector"
            )
        return _Member(
            name=spec.name or _default_name(store, position),
            retriever=sub,
            retrieve_k=spec.retrieve_k,
            timeout=spec.timeout if spec.timeout is not None else self.timeout,
            threaded=_needs_thread(store),
        )

    # Public API ----------------------------------------------------------------------
    @property
    def collection_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self._members)

    def retrieve_with_report(
        self, query: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> MultiCollectionReport:
        """Like ``invoke``, but returns the report, with each collection's status."""
        sink: list[MultiCollectionReport] = []
        self.invoke(query, config, **kwargs, **{_REPORT_SINK: sink})
        return sink[0]

    async def aretrieve_with_report(
        self, query: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> MultiCollectionReport:
        sink: list[MultiCollectionReport] = []
        await self.ainvoke(query, config, **kwargs, **{_REPORT_SINK: sink})
        return sink[0]

    def close(self) -> None:
        """Shut the thread pool down (searches still running finish in the background)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    # BaseRetriever -----------------------------------------------------------------
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        sink = kwargs.pop(_REPORT_SINK, None)
        policy, options = self._options(kwargs)
        assert self.embeddings is not None
        vector = self.embeddings.embed_query(query)
        jobs = self._jobs(vector, policy, options, use_async=False)
        outcomes = fan_out(jobs, self._executor(), fail_fast=self.fail_fast)
        merge = Merge(outcomes, policy)
        found = call_each(
            {
                name: (lambda walk=walk, m=member: _walk_sync(m, walk), member.timeout)
                for name, (member, walk) in self._walks(merge).items()
            },
            self._executor(),
        )
        report = self._report(query, merge, outcomes, found)
        run_manager.on_text(report.summary())
        dispatch_custom_event(
            EVENT_NAME,
            report.to_event_data("multi_collection"),
            config={"callbacks": run_manager.get_child()},
        )
        if sink is not None:
            sink.append(report)
        return report.documents

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        sink = kwargs.pop(_REPORT_SINK, None)
        policy, options = self._options(kwargs)
        assert self.embeddings is not None
        vector = await self.embeddings.aembed_query(query)
        jobs = self._jobs(vector, policy, options, use_async=True)
        outcomes = await afan_out(jobs, self._executor(), fail_fast=self.fail_fast)
        merge = Merge(outcomes, policy)
        found = await acall_each(
            {
                name: (lambda walk=walk, m=member: self._walk_async(m, walk), member.timeout)
                for name, (member, walk) in self._walks(merge).items()
            }
        )
        report = self._report(query, merge, outcomes, found)
        await run_manager.on_text(report.summary())
        await adispatch_custom_event(
            EVENT_NAME,
            report.to_event_data("multi_collection"),
            config={"callbacks": run_manager.get_child()},
        )
        if sink is not None:
            sink.append(report)
        return report.documents

    # One call ------------------------------------------------------------------------
    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            workers = self.max_workers or min(64, 2 * len(self._members))
            self._pool = ThreadPoolExecutor(workers, thread_name_prefix="multi-collection")
        return self._pool

    def _options(self, kwargs: dict[str, Any]) -> tuple[RetrievalPolicy, dict[str, Any]]:
        options = {k: v for k, v in kwargs.items() if k not in _IGNORED_OPTIONS}
        unknown = sorted(set(options) - {"k", *_PASSED_ON})
        if unknown:
            raise TypeError(
                f"{type(self).__name__} got unexpected keyword argument(s) {unknown}; per call "
                f"it accepts {sorted({'k', *_PASSED_ON})}"
            )
        k = options.pop("k", None)
        policy = self.policy.with_overrides(top_k=k if k is not None else self.k)
        return policy, {name: v for name, v in options.items() if v is not None}

    def _jobs(
        self,
        vector: list[float],
        policy: RetrievalPolicy,
        options: dict[str, Any],
        *,
        use_async: bool,
    ) -> list[Job[Document]]:
        """Each collection's search, planned here: a bad option or vector raises, it is not a
        failed collection."""
        jobs = []
        for member in self._members:
            sub = member.retriever
            call = sub._plan(dict(options))
            retrieve_k = member.retrieve_k or policy.fetch_k
            stage = RetrievalPolicy.model_validate(
                {
                    **call.policy.model_dump(),
                    "top_k": retrieve_k,
                    "over_fetch": 1,
                    "max_per_source": None,
                    "max_chars": None,
                    "source_key": policy.source_key,
                }
            )
            metric = sub._metric(call.store_kwargs, vector)  # checks the vector's norm
            search = _Search(sub, vector, retrieve_k, call, stage, metric)
            jobs.append(
                Job(
                    name=member.name,
                    min_similarity=call.floor,
                    timeout=member.timeout,
                    search=search.run,
                    asearch=search.arun if use_async and not member.threaded else None,
                )
            )
        return jobs

    def _walks(self, merge: Merge[Document]) -> dict[str, tuple[_Member, Any]]:
        kept = merge.kept_by_collection()
        walks = {}
        for member in self._members:
            if member.name in kept:
                walk = member.retriever._walk(kept[member.name])
                if walk is not None:
                    walks[member.name] = (member, walk)
        return walks

    async def _walk_async(self, member: _Member, walk: Any) -> list[Candidate[Document]]:
        if member.threaded:
            loop = asyncio.get_running_loop()
            return await asyncio.wrap_future(
                self._executor().submit(_walk_sync, member, walk), loop=loop
            )
        docstore = member.retriever.docstore
        assert docstore is not None
        while keys := walk.pending():
            walk.receive(keys, await docstore.amget(keys))
        return walk.candidates()

    def _report(
        self,
        query: str,
        merge: Merge[Document],
        outcomes: list[Outcome[Document]],
        found: dict[str, list[Candidate[Document]] | BaseException],
    ) -> MultiCollectionReport:
        errors = {name: f for name, f in found.items() if isinstance(f, BaseException)}
        selection = merge.attach(
            {name: f for name, f in found.items() if not isinstance(f, BaseException)}
        )
        marked: Selection[Document] = replace(
            selection,
            kept=tuple(_marked(c, merge.collection_of(c)) for c in selection.kept),
            attached=tuple(_marked(c, merge.collection_of(c)) for c in selection.attached),
        )
        report = MultiCollectionReport.from_selection(query, marked)
        report = replace(report, collections=merge.statuses(outcomes, errors))
        warn_if_partial(logger, query, report.collections)
        return report


@dataclass(frozen=True)
class _Search:
    """One collection's search by vector, sync or async, cut by its own floor."""

    sub: ThresholdedRetriever
    vector: list[float]
    k: int
    call: Any
    stage: RetrievalPolicy
    metric: Any

    def run(self) -> Found[Document]:
        self.sub._prepare_store()
        store = self.sub.vectorstore
        pairs = store.similarity_search_with_score_by_vector(  # type: ignore[attr-defined]
            self.vector, k=self.k, **self.call.store_kwargs
        )
        return self._found(pairs)

    async def arun(self) -> Found[Document]:
        self.sub._prepare_store()
        store = self.sub.vectorstore
        pairs = await store.asimilarity_search_with_score_by_vector(  # type: ignore[attr-defined]
            self.vector, k=self.k, **self.call.store_kwargs
        )
        return self._found(pairs)

    def _found(self, pairs: Sequence[tuple[Document, float]]) -> Found[Document]:
        scored = [(doc, to_cosine(score, self.metric), None) for doc, score in pairs]
        candidates = self.sub._candidates(scored, ScoreKind.COSINE, self.call)
        return Found(len(pairs), select(candidates, self.stage, self.call.floor))


def _walk_sync(member: _Member, walk: Any) -> list[Candidate[Document]]:
    docstore = member.retriever.docstore
    assert docstore is not None
    while keys := walk.pending():
        walk.receive(keys, docstore.mget(keys))
    return walk.candidates()


def _marked(cand: Candidate[Document], collection: str) -> Candidate[Document]:
    """The candidate whose document (already this package's copy) names its collection."""
    doc = cand.item
    item = doc.model_copy(update={"metadata": {**doc.metadata, COLLECTION_KEY: collection}})
    return replace(cand, item=item)


def _default_name(store: Any, position: int) -> str:
    """``db/collection`` (Milvus, outside the default database), the collection name, else
    the store's class and position: ``InMemoryVectorStore[1]``."""
    name = getattr(store, "collection_name", None)
    if not name:
        return f"{type(store).__name__}[{position}]"
    args = getattr(store, "_connection_args", None)
    db = args.get("db_name") if isinstance(args, dict) else None
    return f"{db}/{name}" if db and db != "default" else str(name)


def _needs_thread(store: Any) -> bool:
    """Async calls await a store's own async by-vector search only on a Milvus server."""
    if not is_milvus(store) or not hasattr(store, "asimilarity_search_with_score_by_vector"):
        return True
    client = getattr(store, "client", None)
    uri = str(getattr(getattr(client, "_config", None), "uri", "") or "")
    return not uri.startswith(("http://", "https://", "tcp://", "grpc://"))


def _check_one_model(
    retrievers: Sequence[ThresholdedRetriever],
    policy: RetrievalPolicy,
    embeddings: Embeddings | None,
) -> None:
    """Refuse collections calibrated for, or embedded with, different models."""
    declared: list[tuple[str, ModelId]] = []
    for i, sub in enumerate(retrievers):
        what = f"collection {_default_name(sub.vectorstore, i)!r}"
        if sub.policy.embedding_model:
            declared.append((what, ModelId.parse(sub.policy.embedding_model)))
        model_id = getattr(sub._store_embeddings(), "model_id", None)
        if isinstance(model_id, str):
            declared.append((f"the embeddings of {what}", ModelId.parse(model_id)))
    if policy.embedding_model:
        declared.append(("the global policy", ModelId.parse(policy.embedding_model)))
    model_id = getattr(embeddings, "model_id", None)
    if isinstance(model_id, str):
        declared.append(("embeddings=", ModelId.parse(model_id)))
    for what, model in declared[1:]:
        first_what, first = declared[0]
        if not first.same_model(model):
            raise ModelMismatchError(
                f"{first_what} uses the embedding model {first}, but {what} {model}: the "
                "question is embedded once, with one model, and one model's cosine floor "
                "means nothing for another. Search them with separate retrievers."
            )
