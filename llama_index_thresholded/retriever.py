"""``ThresholdedRetriever``: over-fetch, keep what clears the policy, then attach context."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks import CallbackManager
from llama_index.core.indices.vector_store.base import VectorStoreIndex
from llama_index.core.indices.vector_store.retrievers.retriever import VectorIndexRetriever
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.schema import NodeWithScore, QueryBundle, QueryType
from llama_index.core.vector_stores.types import MetadataFilters, VectorStoreQueryMode

from llama_index_thresholded.attachments import (
    AttachmentSpec,
    NodeSource,
    arun_plan,
    plan_attachments,
    run_plan,
)
from llama_index_thresholded.embeddings import model_id_of
from llama_index_thresholded.events import announce_selection
from llama_index_thresholded.filters import milvus_expression
from llama_index_thresholded.milvus import CompatibleMilvusVectorStore
from llama_index_thresholded.nodes import attached_node, kept_node, to_candidate
from llama_index_thresholded.pushdown import (
    PushdownSwitch,
    can_push_down,
    is_milvus_store,
    range_search_kwargs,
)
from llama_index_thresholded.report import RetrievalReport
from llama_index_thresholded.rescore import DenseRescorer
from llama_index_thresholded.scoring import collection_dimension, score_kind_for, store_metric
from thresholded.errors import DimensionMismatchError
from thresholded.policy import RetrievalPolicy
from thresholded.rescore import wants_rescore
from thresholded.retry import RetryPolicy, acall_with_retries, call_with_retries, is_transient
from thresholded.scores import Metric, ScoreKind, check_unit_norm, is_valid_score, to_cosine
from thresholded.selection import Candidate, Selection, attach, select

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

_SEARCH_ONLY = (VectorStoreQueryMode.SPARSE, VectorStoreQueryMode.TEXT_SEARCH)


@dataclass(frozen=True)
class _Call:
    """Everything one call needs; built per call so that concurrent calls share nothing."""

    policy: RetrievalPolicy
    min_similarity: float
    filters: MetadataFilters | None
    milvus_expr: str | None = None
    """On Milvus, the filters (and id restrictions) as a safe expression; see ``filters.py``."""


class ThresholdedRetriever(BaseRetriever):
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

    Use ``retrieve_with_report`` to also get what was dropped and why, and to
    override the floor, ``top_k`` or the filters for one call.

    A search that fails because the store is unreachable or too slow is tried
    again up to ``max_retries`` times (waits from ``retry_backoff`` seconds,
    doubling); then :class:`~thresholded.errors.SearchUnavailableError` names
    the collection and the attempts. Other errors are raised at once. The
    deadline of each attempt is the store's: ``milvus_store(..., timeout=5)``.
    """

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
        allowed_filter_keys: Iterable[str] | None = None,
        pushdown: bool = True,
        max_retries: int = 0,
        retry_backoff: float = 0.2,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        self._index = index
        self._retry = RetryPolicy(max_retries=max_retries, backoff=retry_backoff)
        self._allowed_filter_keys = set(allowed_filter_keys) if allowed_filter_keys else None
        self._vector_store = index.vector_store
        self._embed_model = embed_model or index._embed_model
        self._mode = VectorStoreQueryMode(vector_store_query_mode)
        self._score_kind = (
            ScoreKind(score_kind) if score_kind else score_kind_for(self._mode, self._vector_store)
        )
        self._metric = (
            store_metric(self._vector_store, metric)
            if self._score_kind is ScoreKind.COSINE
            else None
        )
        self._search_args: dict[str, Any] = {
            "alpha": alpha,
            "doc_ids": doc_ids,
            "node_ids": node_ids,
            "sparse_top_k": sparse_top_k,
            "hybrid_top_k": hybrid_top_k,
            "vector_store_kwargs": dict(vector_store_kwargs or {}),
        }
        self._filters = filters
        self._attachments = AttachmentSpec(
            neighbours=neighbours, parent_levels=parent_levels if parent_summaries else 0
        )
        self._source = NodeSource(index.docstore, self._vector_store)
        self._dimension = collection_dimension(self._vector_store) if self._embeds else None
        self._model = model_id_of(self._embed_model, self._dimension)
        self._allow_model_mismatch = allow_model_mismatch
        self._policy = self._initial_policy(policy, profile, collection)
        self._min_similarity = self._resolve_floor(self._policy)
        # Dense search on Milvus (IP/COSINE): the floor also goes to the engine as a range
        # search; the client-side floor stays the authority. See ``pushdown.py``.
        self._pushdown = PushdownSwitch(
            pushdown
            and can_push_down(self._vector_store, self._mode, self._score_kind, self._metric)
        )
        self._rescorer = DenseRescorer(
            self._embed_model,
            self._vector_store,
            dimension=self._dimension or self._model.dimension,
        )
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @classmethod
    def from_retriever(
        cls,
        retriever: VectorIndexRetriever,
        policy: RetrievalPolicy | None = None,
        **kwargs: Any,
    ) -> ThresholdedRetriever:
        """Wrap an existing ``VectorIndexRetriever``, keeping its index, mode, filters and model.

        Its ``similarity_top_k`` is replaced by ``policy.top_k * policy.over_fetch``.
        """
        inherited = {
            "filters": retriever._filters,
            "vector_store_query_mode": retriever._vector_store_query_mode,
            "embed_model": retriever._embed_model,
            "alpha": retriever._alpha,
            "doc_ids": retriever._doc_ids,
            "node_ids": retriever._node_ids,
            "sparse_top_k": retriever._sparse_top_k,
            "hybrid_top_k": retriever._hybrid_top_k,
            "vector_store_kwargs": retriever._kwargs,
            "callback_manager": retriever.callback_manager,
        }
        return cls(retriever._index, policy, **{**inherited, **kwargs})

    # Configuration ----------------------------------------------------------------------
    @classmethod
    def class_name(cls) -> str:
        return "ThresholdedRetriever"

    def to_dict(self) -> dict[str, Any]:
        """The retriever's configuration (not its index), e.g. for logs and traces."""
        return {
            "class_name": self.class_name(),
            "policy": self._policy.to_dict(),
            "min_similarity": self._min_similarity,
            "embedding_model": str(self._model),
            "neighbours": self._attachments.neighbours,
            "parent_levels": self._attachments.parent_levels,
            "vector_store_query_mode": self._mode.value,
            "metric": self._metric.value if self._metric else None,
            "score_kind": self._score_kind.value,
            "pushdown": self._pushdown.enabled,
            "max_retries": self._retry.max_retries,
        }

    @property
    def policy(self) -> RetrievalPolicy:
        return self._policy

    @property
    def min_similarity(self) -> float:
        """The floor in force: the policy's, or its model's calibrated default."""
        return self._min_similarity

    @property
    def metric(self) -> Metric | None:
        return self._metric

    @property
    def _embeds(self) -> bool:
        """Every mode but sparse and text search embeds the question."""
        return self._mode not in _SEARCH_ONLY

    def _initial_policy(
        self, policy: RetrievalPolicy | None, profile: str | Path | None, collection: str | None
    ) -> RetrievalPolicy:
        policy = policy or RetrievalPolicy()
        if profile is None:
            return policy
        fields = policy.model_dump(exclude={"min_similarity", "embedding_model"})
        collection = collection or getattr(self._vector_store, "collection_name", None)
        return RetrievalPolicy.from_profile(profile, collection=collection, **fields)

    def _resolve_floor(self, policy: RetrievalPolicy) -> float:
        if self._allow_model_mismatch:
            return policy.resolve_min_similarity(None if policy.embedding_model else self._model)
        return policy.resolve_min_similarity(self._model)

    def _call(
        self,
        *,
        min_similarity: float | None = None,
        top_k: int | None = None,
        filters: MetadataFilters | None = None,
        policy: RetrievalPolicy | None = None,
    ) -> _Call:
        base = policy or self._policy
        resolved = base.with_overrides(min_similarity=min_similarity, top_k=top_k)
        floor = (
            self._resolve_floor(resolved)
            if policy is not None or min_similarity is not None
            else self._min_similarity
        )
        filters = filters if filters is not None else self._filters
        return _Call(resolved, floor, filters, self._milvus_expression(filters))

    def _milvus_expression(self, filters: MetadataFilters | None) -> str | None:
        """Filters for a Milvus store, validated and escaped here, before any query is sent."""
        if not is_milvus_store(self._vector_store):  # subclasses too (milvus_store's)
            if filters is not None and self._allowed_filter_keys is not None:
                milvus_expression(filters, allowed_keys=self._allowed_filter_keys)
            return None
        args = self._search_args
        if not (filters and filters.filters) and not args["doc_ids"] and not args["node_ids"]:
            return None
        return milvus_expression(
            filters,
            allowed_keys=self._allowed_filter_keys,
            doc_ids=args["doc_ids"],
            node_ids=args["node_ids"],
            doc_id_field=getattr(self._vector_store, "doc_id_field", "doc_id"),
        )

    # Retrieval --------------------------------------------------------------------------
    def retrieve_with_report(
        self,
        str_or_query_bundle: QueryType,
        *,
        min_similarity: float | None = None,
        top_k: int | None = None,
        filters: MetadataFilters | None = None,
        policy: RetrievalPolicy | None = None,
    ) -> RetrievalReport:
        """Retrieve, and report what was kept, attached and dropped, for this call only.

        ``min_similarity``, ``top_k``, ``filters`` or a whole ``policy`` override the
        retriever's own for this call; the retriever is not changed.
        """
        bundle = _bundle(str_or_query_bundle)
        call = self._call(
            min_similarity=min_similarity, top_k=top_k, filters=filters, policy=policy
        )
        with self.callback_manager.as_trace("query"):
            return self._run(bundle, call)

    async def aretrieve_with_report(
        self,
        str_or_query_bundle: QueryType,
        *,
        min_similarity: float | None = None,
        top_k: int | None = None,
        filters: MetadataFilters | None = None,
        policy: RetrievalPolicy | None = None,
    ) -> RetrievalReport:
        """Async ``retrieve_with_report``: the embedding, search and lookups are awaited."""
        bundle = _bundle(str_or_query_bundle)
        call = self._call(
            min_similarity=min_similarity, top_k=top_k, filters=filters, policy=policy
        )
        with self.callback_manager.as_trace("query"):
            return await self._arun(bundle, call)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._run(query_bundle, self._call()).nodes

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return (await self._arun(query_bundle, self._call())).nodes

    def _rescores(self, call: _Call) -> bool:
        """True when this call re-scores non-cosine results with the dense model."""
        return wants_rescore(call.policy, self._score_kind)

    def _run(self, bundle: QueryBundle, call: _Call) -> RetrievalReport:
        _check_question(bundle)
        rescoring = self._rescores(call)
        if (self._embeds or rescoring) and bundle.embedding is None:
            embedding = self._embed_model.get_agg_embedding_from_queries(bundle.embedding_strs)
            bundle = _with_embedding(bundle, embedding)
        self._check_query_vector(bundle, rescoring)
        results = self._search(bundle, call)
        candidates = self._candidates(results, call)
        if rescoring:
            candidates = self._rescorer.rescore(bundle.embedding, candidates)  # type: ignore[arg-type]
        selection = select(candidates, call.policy, call.min_similarity)
        if self._attachments.enabled and selection.kept:
            plan = plan_attachments(
                [c.item.node for c in selection.kept], self._attachments, call.policy.source_key
            )
            found = call_with_retries(
                lambda: run_plan(plan, self._source), self._retry, what=self._store_name()
            )
            selection = attach(selection, found, call.policy)
        return self._report(bundle, selection)

    async def _arun(self, bundle: QueryBundle, call: _Call) -> RetrievalReport:
        _check_question(bundle)
        rescoring = self._rescores(call)
        if (self._embeds or rescoring) and bundle.embedding is None:
            embedding = await self._embed_model.aget_agg_embedding_from_queries(
                bundle.embedding_strs
            )
            bundle = _with_embedding(bundle, embedding)
        self._check_query_vector(bundle, rescoring)
        results = await self._asearch(bundle, call)
        candidates = self._candidates(results, call)
        if rescoring:
            candidates = await self._rescorer.arescore(bundle.embedding, candidates)  # type: ignore[arg-type]
        selection = select(candidates, call.policy, call.min_similarity)
        if self._attachments.enabled and selection.kept:
            plan = plan_attachments(
                [c.item.node for c in selection.kept], self._attachments, call.policy.source_key
            )
            found = await acall_with_retries(  # one lookup per hop, each with its deadline
                lambda: arun_plan(plan, self._source), self._retry, what=self._store_name()
            )
            selection = attach(selection, found, call.policy)
        return self._report(bundle, selection)

    def _searcher(self, call: _Call, *, pushdown: bool = False) -> VectorIndexRetriever:
        """A plain vector retriever for this call, over-fetching ``fetch_k`` candidates.

        With ``pushdown`` the floor also goes to Milvus as a range search radius.
        """
        args, filters = self._search_args, call.filters
        if call.milvus_expr is not None:
            store_kwargs = {**args["vector_store_kwargs"], "string_expr": call.milvus_expr}
            args = {**args, "doc_ids": None, "node_ids": None, "vector_store_kwargs": store_kwargs}
            filters = None
        if pushdown:
            store_kwargs = range_search_kwargs(
                args["vector_store_kwargs"], self._vector_store, call.min_similarity
            )
            args = {**args, "vector_store_kwargs": store_kwargs}
        return VectorIndexRetriever(
            self._index,
            similarity_top_k=call.policy.fetch_k,
            vector_store_query_mode=self._mode,
            filters=filters,
            embed_model=self._embed_model,
            callback_manager=self.callback_manager,
            **args,
        )

    def _pushes_down(self, call: _Call) -> bool:
        return self._pushdown.enabled and call.min_similarity != 0.0

    def _search(self, bundle: QueryBundle, call: _Call) -> list[NodeWithScore]:
        """Search, retrying transient failures as configured (see ``thresholded.retry``)."""
        return call_with_retries(
            lambda: self._search_once(bundle, call), self._retry, what=self._store_name()
        )

    async def _asearch(self, bundle: QueryBundle, call: _Call) -> list[NodeWithScore]:
        return await acall_with_retries(
            lambda: self._asearch_once(bundle, call),
            self._retry,
            what=self._store_name(),
            attempt_timeout=self._store_timeout(),
        )

    def _search_once(self, bundle: QueryBundle, call: _Call) -> list[NodeWithScore]:
        """Search; where the engine refuses the pushed-down floor, search again without it."""
        if not self._pushes_down(call):
            return self._searcher(call)._retrieve(bundle)
        try:
            return self._searcher(call, pushdown=True)._retrieve(bundle)
        except Exception as exc:
            if is_transient(exc):  # the server is unreachable, not refusing range search
                raise
            results = self._searcher(call)._retrieve(bundle)  # a real failure raises here
            self._pushdown.refused(self._store_name(), exc)
            return results

    async def _asearch_once(self, bundle: QueryBundle, call: _Call) -> list[NodeWithScore]:
        if not self._pushes_down(call):
            return await self._searcher(call)._aretrieve(bundle)
        try:
            return await self._searcher(call, pushdown=True)._aretrieve(bundle)
        except Exception as exc:
            if is_transient(exc):
                raise
            results = await self._searcher(call)._aretrieve(bundle)
            self._pushdown.refused(self._store_name(), exc)
            return results

    def _store_timeout(self) -> float | None:
        """The deadline of one attempt: the store's ``timeout``, where it has one."""
        timeout = getattr(self._vector_store, "timeout", None)
        return timeout if isinstance(timeout, int | float) and timeout > 0 else None

    def _store_name(self) -> str:
        name = getattr(self._vector_store, "collection_name", None)
        if not name:
            return type(self._vector_store).__name__
        if not isinstance(self._vector_store, CompatibleMilvusVectorStore):
            return f"collection {name!r}"  # LlamaIndex's own store does not keep its uri
        return f"collection {name!r} at {self._vector_store.uri}"

    def _check_query_vector(self, bundle: QueryBundle, rescoring: bool = False) -> None:
        if bundle.embedding is None or not (self._embeds or rescoring):
            return
        dim = len(bundle.embedding)
        if self._dimension is not None and dim != self._dimension:
            raise DimensionMismatchError(
                f"the query embedding has {dim} dimensions but the collection "
                f"{getattr(self._vector_store, 'collection_name', '')!r} holds vectors of "
                f"{self._dimension}: the index was built with another embedding model"
            )
        if self._model.dimension is not None and dim != self._model.dimension:
            raise DimensionMismatchError(
                f"the query embedding has {dim} dimensions, but {self._model} has "
                f"{self._model.dimension}"
            )
        if self._embeds and self._metric is not Metric.COSINE:
            check_unit_norm(bundle.embedding)  # the store's dense search scores by IP

    def _candidates(
        self, results: list[NodeWithScore], call: _Call
    ) -> list[Candidate[NodeWithScore]]:
        kind = self._score_kind
        candidates = []
        for result in results:
            score = result.score
            if kind is ScoreKind.COSINE and self._metric is not None and is_valid_score(score):
                score = to_cosine(score, self._metric)  # type: ignore[arg-type]
            scored = NodeWithScore(node=result.node, score=score)
            candidates.append(
                to_candidate(scored, score_kind=kind, source_key=call.policy.source_key)
            )
        return candidates

    def _report(self, bundle: QueryBundle, selection: Selection[NodeWithScore]) -> RetrievalReport:
        report = RetrievalReport(
            query_str=bundle.query_str,
            selection=selection,
            kept=[kept_node(c) for c in selection.kept],
            attached=[attached_node(c) for c in selection.attached],
            score_kind=self._score_kind,
        )
        self._announce(report)
        return report

    def _announce(self, report: RetrievalReport) -> None:
        """Drop reasons go out as an instrumentation event, a callback event and DEBUG counts."""
        dropped = [
            {"id": d.candidate.id, "reason": d.reason.value, "score": d.candidate.score}
            for d in report.selection.dropped
        ]
        announce_selection(dispatcher, self.callback_manager, report, dropped)
        logger.debug(
            "kept %d, attached %d, dropped %s (floor %g)",
            len(report.kept),
            len(report.attached),
            report.drop_counts(),
            report.min_similarity,
        )


def _bundle(query: QueryType) -> QueryBundle:
    return QueryBundle(query) if isinstance(query, str) else query


def _with_embedding(bundle: QueryBundle, embedding: list[float]) -> QueryBundle:
    """A copy of the bundle with its embedding: the caller's bundle is left as it was."""
    return QueryBundle(
        query_str=bundle.query_str,
        image_path=bundle.image_path,
        custom_embedding_strs=bundle.custom_embedding_strs,
        embedding=embedding,
    )


def _check_question(bundle: QueryBundle) -> None:
    if not bundle.query_str.strip() and bundle.embedding is None:
        raise ValueError("the question is empty: there is nothing to retrieve for")
