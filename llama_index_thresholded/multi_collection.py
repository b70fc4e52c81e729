"""``MultiCollectionRetriever``: one question, several collections, one thresholded answer.

The question is embedded once and every collection is searched at the same
time, so a call takes about as long as its slowest collection, not the sum of
them: Milvus servers are searched with their async client when the call is
async; Milvus Lite (whose async client is unreliable, milvus-io/pymilvus#3711),
other stores and every sync call use a thread pool.

Each collection's candidates are cut by that collection's own floor (its
policy or calibration profile), up to its ``retrieve_k``. The survivors are
merged by cosine and the global policy applies once to all of them: the
per-source cap, the character budget and ``top_k``. Neighbours and parent
summaries are attached last, for kept sections only, each from the collection
it came from.

A collection that fails or times out does not sink the call: the others'
results come back, the report says what happened to each collection, and one
warning is logged (``fail_fast=True`` raises instead). When every collection
fails, the call raises: an empty answer would read as "nothing matched".

The retriever searches exactly the collections it was built with; nothing in a
question or a filter names a collection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks import CallbackManager
from llama_index.core.indices.vector_store.base import VectorStoreIndex
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.schema import NodeWithScore, QueryBundle, QueryType
from llama_index.core.vector_stores.types import MetadataFilters

from llama_index_thresholded.attachments import (
    AttachmentSpec,
    NodeSource,
    arun_plan,
    plan_attachments,
    run_plan,
)
from llama_index_thresholded.embeddings import model_id_of
from llama_index_thresholded.events import announce_selection
from llama_index_thresholded.nodes import attached_node, kept_node
from llama_index_thresholded.pushdown import is_milvus_store
from llama_index_thresholded.report import RetrievalReport
from llama_index_thresholded.retriever import ThresholdedRetriever
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
from thresholded.retry import RetryPolicy
from thresholded.scores import Metric, ScoreKind
from thresholded.selection import Candidate, select

__all__ = [
    "COLLECTION_KEY",
    "CollectionSearchError",
    "CollectionSpec",
    "CollectionStatus",
    "MultiCollectionReport",
    "MultiCollectionRetriever",
]

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)


@dataclass(frozen=True)
class CollectionSpec:
    """One collection to search, with its own floor, candidate count and timeout.

    ``target`` is a ``VectorStoreIndex`` or a vector store (e.g. a ``MilvusVectorStore``,
    which may live in its own database, ``db_name=``, or on its own URI). The floor
    comes from ``profile`` (a calibration profile of this collection), else from
    ``policy``, else from the retriever's global policy. ``retrieve_k`` candidates are
    fetched (default: the global ``top_k * over_fetch``); ``timeout`` (seconds)
    replaces the retriever's default timeout for this collection. ``name`` labels
    the collection in reports (default: ``db/collection``, or the collection name).
    ``metric`` is the store's metric, for stores it cannot be read from.
    """

    target: Any
    policy: RetrievalPolicy | None = None
    profile: str | Path | None = None
    retrieve_k: int | None = None
    timeout: float | None = None
    name: str | None = None
    metric: Metric | str | None = None

    def __post_init__(self) -> None:
        if self.retrieve_k is not None and self.retrieve_k < 1:
            raise ValueError(f"retrieve_k must be at least 1, got {self.retrieve_k}")
        if self.timeout is not None and not self.timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {self.timeout}")
        if self.name is not None and not self.name.strip():
            raise ValueError("a collection's name must not be blank")


@dataclass(frozen=True)
class MultiCollectionReport(RetrievalReport):
    """A ``RetrievalReport`` over several collections, with each collection's status.

    ``min_similarity`` is the lowest floor of the collections (each collection's
    own floor is in its status). Candidate ids in ``selection`` read
    ``"<collection>/<node id>"``: node ids need not be unique across collections.
    """

    collections: tuple[CollectionStatus, ...] = ()

    @property
    def partial(self) -> bool:
        """True when some collection failed or timed out: the result may lack its sections."""
        return any(not s.ok for s in self.collections)

    @property
    def failed(self) -> tuple[CollectionStatus, ...]:
        return tuple(s for s in self.collections if not s.ok)

    def status(self, name: str) -> CollectionStatus:
        for status in self.collections:
            if status.name == name:
                return status
        raise KeyError(name)

    @staticmethod
    def collection_of(node: NodeWithScore) -> str | None:
        """The collection a returned node came from."""
        return node.node.metadata.get(COLLECTION_KEY)

    def explain(self, width: int = 70) -> str:
        lines = [super().explain(width)]
        lines.extend(f"  collection {s.describe()}" for s in self.collections)
        return "\n".join(lines)


@dataclass(frozen=True)
class _Member:
    """One collection as the retriever holds it."""

    name: str
    retriever: ThresholdedRetriever
    source: NodeSource
    retrieve_k: int | None
    timeout: float | None
    threaded: bool
    """Searched in a thread even by async calls (Milvus Lite, non-Milvus stores)."""


class MultiCollectionRetriever(BaseRetriever):
    """Search several collections at once, each with its own floor; merge by cosine.

    ``collections`` are ``CollectionSpec``s, or bare indexes/stores (which then use
    the global policy's floor). ``policy`` is the global policy: its cap, budget,
    ``top_k`` and attachment budget apply to the merged result; its floor is the
    default of collections that bring none. Every collection must be embedded with
    the same model (the question is embedded once): collections calibrated for
    different models, or holding vectors of different dimensions, are refused with
    ``ModelMismatchError``. Dense search only: the merge compares cosines.

    ``timeout`` (seconds) is each collection's default; ``fail_fast`` raises
    ``CollectionSearchError`` on the first failure instead of returning the others'
    results. ``max_retries`` and ``retry_backoff`` retry a collection's search that
    failed for a transient reason (see ``ThresholdedRetriever``), within its timeout.
    ``pushdown`` sends each floor to Milvus as a range search (see
    ``pushdown.py``). ``max_workers`` sizes the thread pool (default: two per
    collection, at most 64); ``close()`` shuts it down.
    """

    def __init__(
        self,
        collections: Sequence[CollectionSpec | Any],
        policy: RetrievalPolicy | None = None,
        *,
        embed_model: BaseEmbedding | None = None,
        neighbours: int = 1,
        parent_summaries: bool = True,
        parent_levels: int = 1,
        filters: MetadataFilters | None = None,
        timeout: float | None = None,
        fail_fast: bool = False,
        pushdown: bool = True,
        allowed_filter_keys: Sequence[str] | None = None,
        allow_model_mismatch: bool = False,
        max_retries: int = 0,
        retry_backoff: float = 0.2,
        max_workers: int | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        specs = [c if isinstance(c, CollectionSpec) else CollectionSpec(c) for c in collections]
        if not specs:
            raise ValueError("MultiCollectionRetriever needs at least one collection")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout}")
        self._policy = policy or RetrievalPolicy()
        self._embed_model = embed_model or _common_embed_model(specs)
        self._attachments = AttachmentSpec(
            neighbours=neighbours, parent_levels=parent_levels if parent_summaries else 0
        )
        self._fail_fast = fail_fast
        self._members = tuple(
            self._member(
                spec,
                timeout=timeout,
                filters=filters,
                pushdown=pushdown,
                allowed_filter_keys=allowed_filter_keys,
                allow_model_mismatch=allow_model_mismatch,
                retry=RetryPolicy(max_retries=max_retries, backoff=retry_backoff),
            )
            for spec in specs
        )
        check_unique_names([m.name for m in self._members])
        _check_one_model(self._members, self._policy)
        workers = max_workers or min(64, 2 * len(self._members))
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="multi-collection")
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _member(
        self,
        spec: CollectionSpec,
        *,
        timeout: float | None,
        filters: MetadataFilters | None,
        pushdown: bool,
        allowed_filter_keys: Sequence[str] | None,
        allow_model_mismatch: bool,
        retry: RetryPolicy,
    ) -> _Member:
        index = _as_index(spec.target, self._embed_model)
        store = index.vector_store
        base = spec.policy or self._policy
        # The collection's own stage: only its floor and retrieve_k; the cap, the budget
        # and top_k apply once, to the merged candidates.
        stage = RetrievalPolicy.model_validate(
            {
                **base.model_dump(),
                "top_k": spec.retrieve_k or self._policy.fetch_k,
                "over_fetch": 1,
                "max_per_source": None,
                "max_chars": None,
                "max_attachment_chars": None,
                "source_key": self._policy.source_key,
            }
        )
        retriever = ThresholdedRetriever(
            index,
            stage,
            neighbours=0,
            parent_summaries=False,
            profile=spec.profile,
            filters=filters,
            metric=spec.metric,
            embed_model=self._embed_model,
            allow_model_mismatch=allow_model_mismatch,
            allowed_filter_keys=allowed_filter_keys,
            pushdown=pushdown,
            max_retries=retry.max_retries,
            retry_backoff=retry.backoff,
        )
        if retriever._score_kind is not ScoreKind.COSINE:  # pragma: no cover - dense only
            raise ValueError("MultiCollectionRetriever merges dense (cosine) results only")
        return _Member(
            name=spec.name or _default_name(store),
            retriever=retriever,
            source=NodeSource(index.docstore, store),
            retrieve_k=spec.retrieve_k,
            timeout=spec.timeout if spec.timeout is not None else timeout,
            threaded=_needs_thread(store),
        )

    # Configuration ----------------------------------------------------------------------
    @classmethod
    def class_name(cls) -> str:
        return "MultiCollectionRetriever"

    @property
    def policy(self) -> RetrievalPolicy:
        return self._policy

    @property
    def collection_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self._members)

    @property
    def floors(self) -> dict[str, float]:
        """Each collection's floor in force."""
        return {m.name: m.retriever.min_similarity for m in self._members}

    def to_dict(self) -> dict[str, Any]:
        return {
            "class_name": self.class_name(),
            "policy": self._policy.to_dict(),
            "collections": [
                {
                    "name": m.name,
                    "min_similarity": m.retriever.min_similarity,
                    "retrieve_k": m.retrieve_k,
                    "timeout": m.timeout,
                    "pushdown": m.retriever._pushdown.enabled,
                    "threaded": m.threaded,
                }
                for m in self._members
            ],
            "embedding_model": str(model_id_of(self._embed_model)),
            "neighbours": self._attachments.neighbours,
            "parent_levels": self._attachments.parent_levels,
            "fail_fast": self._fail_fast,
        }

    def close(self) -> None:
        """Shut the thread pool down (searches still running finish in the background)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> MultiCollectionRetriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Retrieval --------------------------------------------------------------------------
    def retrieve_with_report(
        self,
        str_or_query_bundle: QueryType,
        *,
        min_similarity: float | None = None,
        top_k: int | None = None,
        filters: MetadataFilters | None = None,
        policy: RetrievalPolicy | None = None,
    ) -> MultiCollectionReport:
        """Retrieve, and report what each collection returned and what was kept and dropped.

        ``min_similarity`` replaces every collection's floor for this call; ``top_k`` and
        ``policy`` replace the global policy's; ``filters`` apply in every collection.
        """
        bundle = _bundle(str_or_query_bundle)
        call = self._call(policy, top_k)
        with self.callback_manager.as_trace("query"):
            return self._run(bundle, call, min_similarity, filters)

    async def aretrieve_with_report(
        self,
        str_or_query_bundle: QueryType,
        *,
        min_similarity: float | None = None,
        top_k: int | None = None,
        filters: MetadataFilters | None = None,
        policy: RetrievalPolicy | None = None,
    ) -> MultiCollectionReport:
        """Async ``retrieve_with_report``."""
        bundle = _bundle(str_or_query_bundle)
        call = self._call(policy, top_k)
        with self.callback_manager.as_trace("query"):
            return await self._arun(bundle, call, min_similarity, filters)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._run(query_bundle, self._call(None, None), None, None).nodes

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return (await self._arun(query_bundle, self._call(None, None), None, None)).nodes

    def _call(self, policy: RetrievalPolicy | None, top_k: int | None) -> RetrievalPolicy:
        return (policy or self._policy).with_overrides(top_k=top_k)

    def _run(
        self,
        bundle: QueryBundle,
        policy: RetrievalPolicy,
        min_similarity: float | None,
        filters: MetadataFilters | None,
    ) -> MultiCollectionReport:
        _check_question(bundle)
        if bundle.embedding is None:
            embedding = self._embed_model.get_agg_embedding_from_queries(bundle.embedding_strs)
            bundle = _with_embedding(bundle, embedding)
        jobs = self._jobs(bundle, policy, min_similarity, filters, use_async=False)
        outcomes = fan_out(jobs, self._pool, fail_fast=self._fail_fast)
        merge = Merge(outcomes, policy)
        plans = self._attachment_plans(merge, policy)
        found = call_each(
            {
                name: (lambda plan=plan, m=member: run_plan(plan, m.source), member.timeout)
                for name, (member, plan) in plans.items()
            },
            self._pool,
        )
        return self._finish(bundle, merge, outcomes, found)

    async def _arun(
        self,
        bundle: QueryBundle,
        policy: RetrievalPolicy,
        min_similarity: float | None,
        filters: MetadataFilters | None,
    ) -> MultiCollectionReport:
        _check_question(bundle)
        if bundle.embedding is None:
            embedding = await self._embed_model.aget_agg_embedding_from_queries(
                bundle.embedding_strs
            )
            bundle = _with_embedding(bundle, embedding)
        jobs = self._jobs(bundle, policy, min_similarity, filters, use_async=True)
        outcomes = await afan_out(jobs, self._pool, fail_fast=self._fail_fast)
        merge = Merge(outcomes, policy)
        plans = self._attachment_plans(merge, policy)
        found = await acall_each(
            {
                name: (lambda plan=plan, m=member: self._aattach(m, plan), member.timeout)
                for name, (member, plan) in plans.items()
            }
        )
        return self._finish(bundle, merge, outcomes, found)

    def _jobs(
        self,
        bundle: QueryBundle,
        policy: RetrievalPolicy,
        min_similarity: float | None,
        filters: MetadataFilters | None,
        *,
        use_async: bool,
    ) -> list[Job[NodeWithScore]]:
        """Each collection's search, checked here: a bad filter or vector is an error, not a
        failed collection. The vector is checked once per kind of collection."""
        jobs = []
        checked: set[tuple[Any, Any]] = set()
        for member in self._members:
            sub = member.retriever
            k = member.retrieve_k or policy.fetch_k
            sub_call = sub._call(
                min_similarity=min_similarity,
                top_k=None if k == sub.policy.top_k else k,
                filters=filters,
            )
            if (sub._dimension, sub._metric) not in checked:
                sub._check_query_vector(bundle)
                checked.add((sub._dimension, sub._metric))
            asearch = None
            if use_async and not member.threaded:
                asearch = _asearching(sub, sub_call, bundle)
            jobs.append(
                Job(
                    name=member.name,
                    min_similarity=sub_call.min_similarity,
                    timeout=member.timeout,
                    search=_searching(sub, sub_call, bundle),
                    asearch=asearch,
                )
            )
        return jobs

    # Attachments ------------------------------------------------------------------------
    def _attachment_plans(
        self, merge: Merge[NodeWithScore], policy: RetrievalPolicy
    ) -> dict[str, tuple[_Member, Any]]:
        """One attachment plan per collection with kept sections, for those sections only."""
        if not self._attachments.enabled:
            return {}
        kept = merge.kept_by_collection()
        return {
            member.name: (
                member,
                plan_attachments(
                    [c.item.node for c in kept[member.name]], self._attachments, policy.source_key
                ),
            )
            for member in self._members
            if member.name in kept
        }

    async def _aattach(self, member: _Member, plan: Any) -> list[Candidate]:
        if member.threaded:
            loop = asyncio.get_running_loop()
            return await asyncio.wrap_future(
                self._pool.submit(run_plan, plan, member.source), loop=loop
            )
        return await arun_plan(plan, member.source)

    def _finish(
        self,
        bundle: QueryBundle,
        merge: Merge[NodeWithScore],
        outcomes: list[Outcome[NodeWithScore]],
        found: dict[str, list[Candidate] | BaseException],
    ) -> MultiCollectionReport:
        errors = {name: f for name, f in found.items() if isinstance(f, BaseException)}
        selection = merge.attach(
            {name: f for name, f in found.items() if not isinstance(f, BaseException)}
        )
        kept = [_marked(kept_node(c), merge.collection_of(c)) for c in selection.kept]
        attached = [
            _marked(attached_node(merge.original(c)), merge.collection_of(c))
            for c in selection.attached
        ]
        report = MultiCollectionReport(
            query_str=bundle.query_str,
            selection=selection,
            kept=kept,
            attached=attached,
            score_kind=ScoreKind.COSINE,
            collections=merge.statuses(outcomes, errors),
        )
        warn_if_partial(logger, report.query_str, report.collections)
        self._announce(report, merge)
        return report

    def _announce(self, report: MultiCollectionReport, merge: Merge[NodeWithScore]) -> None:
        dropped = [
            {
                "id": merge.original(d.candidate).id,
                "collection": merge.collection_of(d.candidate),
                "reason": d.reason.value,
                "score": d.candidate.score,
            }
            for d in report.selection.dropped
        ]
        announce_selection(
            dispatcher,
            self.callback_manager,
            report,
            dropped,
            thresholded_collections=[s.describe() for s in report.collections],
        )


# Searches ------------------------------------------------------------------------------
def _searching(sub: ThresholdedRetriever, sub_call: Any, bundle: QueryBundle):
    """One collection's sync search: its candidates cut by its own floor."""

    def search() -> Found[NodeWithScore]:
        pushed = sub._pushes_down(sub_call)
        results = sub._search(bundle, sub_call)
        return _found(sub, sub_call, results, pushed and sub._pushdown.enabled)

    return search


def _asearching(sub: ThresholdedRetriever, sub_call: Any, bundle: QueryBundle):
    async def asearch() -> Found[NodeWithScore]:
        pushed = sub._pushes_down(sub_call)
        results = await sub._asearch(bundle, sub_call)
        return _found(sub, sub_call, results, pushed and sub._pushdown.enabled)

    return asearch


def _found(
    sub: ThresholdedRetriever, sub_call: Any, results: list[NodeWithScore], pushed: bool
) -> Found[NodeWithScore]:
    candidates = sub._candidates(results, sub_call)
    selection = select(candidates, sub_call.policy, sub_call.min_similarity)
    return Found(len(results), selection, pushdown=pushed)


def _marked(result: NodeWithScore, collection: str) -> NodeWithScore:
    """A copy of a returned node that names its collection, hidden from the LLM and embedder."""
    node = result.node.model_copy()
    node.metadata = {**result.node.metadata, COLLECTION_KEY: collection}
    node.excluded_llm_metadata_keys = _hidden(result.node.excluded_llm_metadata_keys)
    node.excluded_embed_metadata_keys = _hidden(result.node.excluded_embed_metadata_keys)
    return NodeWithScore(node=node, score=result.score)


def _hidden(keys: list[str]) -> list[str]:
    return keys if COLLECTION_KEY in keys else [*keys, COLLECTION_KEY]


# Construction helpers -------------------------------------------------------------------
def _as_index(target: Any, embed_model: BaseEmbedding) -> VectorStoreIndex:
    if isinstance(target, VectorStoreIndex):
        return target
    if hasattr(target, "query") and hasattr(target, "stores_text"):
        return VectorStoreIndex.from_vector_store(target, embed_model=embed_model)
    raise TypeError(
        f"a collection is a VectorStoreIndex or a vector store, got {type(target).__name__}"
    )


def _common_embed_model(specs: Sequence[CollectionSpec]) -> BaseEmbedding:
    """The one embedding model of the given indexes; bare stores need ``embed_model=``."""
    models = [s.target._embed_model for s in specs if isinstance(s.target, VectorStoreIndex)]
    if not models:
        raise ValueError(
            "pass embed_model=...: the collections are bare vector stores, and the question "
            "must be embedded with the model that embedded them"
        )
    ids = {str(model_id_of(m)) for m in models}
    if len(ids) > 1:
        raise ModelMismatchError(
            f"the indexes were built with different embedding models ({', '.join(sorted(ids))}): "
            "the question is embedded once, with one model, so every collection must use it"
        )
    return models[0]


def _default_name(store: Any) -> str:
    name = getattr(store, "collection_name", None) or type(store).__name__
    client = getattr(store, "client", None)
    db = getattr(getattr(client, "_config", None), "db_name", "") or ""
    return f"{db}/{name}" if db and db != "default" else str(name)


def _needs_thread(store: Any) -> bool:
    """Async calls await only a Milvus server's async client; all else runs in threads."""
    if not is_milvus_store(store) or getattr(store, "aclient", None) is None:
        return True
    uri = str(getattr(getattr(store.client, "_config", None), "uri", "") or "")
    return not uri.startswith(("http://", "https://", "tcp://", "grpc://"))


def _check_one_model(members: Sequence[_Member], policy: RetrievalPolicy) -> None:
    """Refuse collections calibrated for different models, or of different dimensions."""
    declared: list[tuple[str, ModelId]] = [
        (f"collection {m.name!r}", ModelId.parse(m.retriever.policy.embedding_model))
        for m in members
        if m.retriever.policy.embedding_model
    ]
    if policy.embedding_model:
        declared.append(("the global policy", ModelId.parse(policy.embedding_model)))
    for what, model in declared[1:]:
        first_what, first = declared[0]
        if not first.same_model(model):
            raise ModelMismatchError(
                f"{first_what} is calibrated for the embedding model {first}, but {what} for "
                f"{model}: the question is embedded once, with one model, and one model's "
                "cosine floor means nothing for another. Search them with separate retrievers."
            )
    dims = {m.name: m.retriever._dimension for m in members if m.retriever._dimension}
    if len(set(dims.values())) > 1:
        shown = ", ".join(f"{name}: {dim}" for name, dim in dims.items())
        raise ModelMismatchError(
            f"the collections hold vectors of different dimensions ({shown}): they were "
            "embedded with different models, and one question vector cannot search them all"
        )
    for what, model in declared:
        for name, dim in dims.items():
            if model.dimension is not None and model.dimension != dim:
                raise ModelMismatchError(
                    f"{what} is calibrated for {model}, but collection {name!r} holds vectors "
                    f"of {dim} dimensions"
                )


def _bundle(query: QueryType) -> QueryBundle:
    return QueryBundle(query) if isinstance(query, str) else query


def _with_embedding(bundle: QueryBundle, embedding: list[float]) -> QueryBundle:
    return QueryBundle(
        query_str=bundle.query_str,
        image_path=bundle.image_path,
        custom_embedding_strs=bundle.custom_embedding_strs,
        embedding=embedding,
    )


def _check_question(bundle: QueryBundle) -> None:
    if not bundle.query_str.strip() and bundle.embedding is None:
        raise ValueError("the question is empty: there is nothing to retrieve for")
