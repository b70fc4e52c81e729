"""``MultiCollectionRetriever``: one question, several collections, one thresholded answer.

The question is embedded once and every collection is searched at the same
time (on the engine of :mod:`thresholded.engine`, as the single retriever), so a
call takes about as long as its slowest collection, not the sum of them: Milvus
servers are searched with their async client when the call is async; Milvus Lite
(whose async client is unreliable, milvus-io/pymilvus#3711), other stores and
every sync call use a thread pool.

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

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks import CallbackManager
from llama_index.core.indices.vector_store.base import VectorStoreIndex
from llama_index.core.schema import NodeWithScore
from llama_index.core.vector_stores.types import MetadataFilters
from pydantic import field_validator, model_validator

from llama_index_thresholded.backend import index_collection, index_embed_model
from llama_index_thresholded.embeddings import checked_embed_model, model_id_of, named_model
from llama_index_thresholded.filters import HeldFilters
from llama_index_thresholded.retriever import EngineRetriever
from thresholded.attachments import AttachmentSpec
from thresholded.classes import default_label
from thresholded.collection_spec import CollectionSpec as BaseCollectionSpec
from thresholded.engine import Call, Fan, Question, check_timeout
from thresholded.errors import ModelMismatchError, RetrieverClosedError
from thresholded.fanout import (
    COLLECTION_KEY,
    ClosedByWith,
    CollectionSearchError,
    CollectionStatus,
    FloorsInForce,
    WorkerPool,
    check_one_model,
    check_unique_names,
    collection_list,
)
from thresholded.models import Embedder, check_one_embedder
from thresholded.policy import RetrievalPolicy, policy_or_none
from thresholded.report import MultiCollectionReport
from thresholded.retriever_arguments import check_max_workers, pool_size
from thresholded.retry import RetryPolicy
from thresholded.scores import ScoreKind
from thresholded.strict import check_switches, strict_constructor

__all__ = [
    "COLLECTION_KEY",
    "CollectionSearchError",
    "CollectionSpec",
    "CollectionStatus",
    "MultiCollectionRetriever",
    "RetrieverClosedError",
    "collection_of",
]


class CollectionSpec(BaseCollectionSpec):
    """One collection to search, with its own floor, candidate count and timeout.

    ``store`` is a ``VectorStoreIndex`` or a vector store (e.g. a ``MilvusVectorStore``,
    which may live in its own database, ``db_name=``, or on its own URI). The floor
    comes from ``profile`` (a calibration profile of this collection; ``collection``
    names the profile's collection when it is not the store's), else from ``policy``,
    else from the retriever's global policy. ``retrieve_k`` candidates are fetched
    (default: the global ``top_k * over_fetch``); ``timeout`` (seconds) replaces the
    retriever's default timeout for this collection. ``name`` labels the collection
    in reports (default: ``db/collection``, or the collection name). ``metric`` is the
    store's metric, for stores it cannot be read from. A Milvus collection may be named
    instead of given, by ``uri`` and ``collection_name`` (with ``db_name`` and ``token``):
    it is reopened with :func:`llama_index_thresholded.milvus.existing_milvus_store` (it
    must exist), and searched with the retriever's ``embed_model``.
    """

    store: Any = None

    @field_validator("store")
    @classmethod
    def _index_or_store(cls, value: Any) -> Any:
        if value is None or isinstance(value, VectorStoreIndex) or _is_vector_store(value):
            return value
        raise ValueError(
            f"a collection is a VectorStoreIndex or a vector store, got {type(value).__name__}"
        )

    @model_validator(mode="after")
    def _one_way_to_name_it(self) -> CollectionSpec:
        self.named_by_uri(self.store is not None, "store=...")
        return self


class MultiCollectionRetriever(ClosedByWith, FloorsInForce, EngineRetriever):
    """Search several collections at once, each with its own floor; merge by cosine.

    ``collections`` are ``CollectionSpec``s, or bare indexes/stores (which then use
    the global policy's floor). ``policy`` is the global policy: its cap, budget,
    ``top_k`` and attachment budget apply to the merged result; its floor is the
    default of collections that bring none. Every collection must be embedded with
    the same model (the question is embedded once): collections calibrated for
    different models, holding vectors of different dimensions, or built with different
    models of which one names none (``model_name``: ``"unknown"``), are refused with
    ``ModelMismatchError``. Dense search only: the merge compares cosines.

    ``timeout`` (seconds) is each collection's default; ``fail_fast`` raises
    ``CollectionSearchError`` on the first failure instead of returning the others'
    results. ``max_retries`` and ``retry_backoff`` retry a collection's search that
    failed for a transient reason (see ``ThresholdedRetriever``), within its timeout.
    ``pushdown`` sends each floor to Milvus as a range search (see
    ``pushdown.py``). ``filters`` hold in every collection, for every section returned,
    neighbours and summaries included (changing them in place afterwards makes every call
    an error: build a new retriever); a call's ``filters`` narrow them (AND), and
    ``allowed_filter_keys`` limits the keys either may name. ``max_workers`` sizes the
    thread pool (default: two per collection, at most 64), which concurrent calls share: a
    search's wait there for a thread does not count against its collection's timeout (it is
    bounded by it).
    ``close()`` shuts it down.

    ``embed_model`` embeds the question (default: the indexes' one model; needed when
    the collections are bare stores); ``neighbours``, ``parent_summaries`` and
    ``parent_levels`` say what is attached to each kept section, as in
    ``ThresholdedRetriever``; ``allow_model_mismatch`` applies a floor measured for
    another model. ``callback_manager`` and ``verbose`` are LlamaIndex's.

    ``floors`` (each collection's), ``min_similarity`` (the lowest of them) and
    ``min_top_similarity`` (the merged result's gate) read the floors and gate in force.
    """

    _report_type = MultiCollectionReport
    _collection_key = COLLECTION_KEY

    @strict_constructor
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
        check_switches(
            parent_summaries=parent_summaries,
            fail_fast=fail_fast,
            pushdown=pushdown,
            allow_model_mismatch=allow_model_mismatch,
        )
        check_max_workers(max_workers)
        specs = [_opened(_spec(c), timeout) for c in collection_list(collections)]
        if not specs:
            raise ValueError("MultiCollectionRetriever needs at least one collection")
        check_timeout(timeout)
        self._policy = policy_or_none(policy) or RetrievalPolicy()
        self._filters = HeldFilters.of(filters)
        embed_model = checked_embed_model(embed_model) or _common_embed_model(specs)
        self._collections = tuple(
            index_collection(
                _as_index(spec.store, embed_model),
                spec.policy,
                embed_model=embed_model,
                profile=spec.profile,
                profile_collection=spec.collection,
                metric=spec.metric,
                allow_model_mismatch=allow_model_mismatch,
                where=self._filters.where,
                allowed_filter_keys=allowed_filter_keys,
                pushdown=pushdown,
                retry=RetryPolicy.of(max_retries=max_retries, retry_backoff=retry_backoff),
                attachments=AttachmentSpec.of(
                    neighbours=neighbours,
                    parent_summaries=parent_summaries,
                    parent_levels=parent_levels,
                ),
                name=spec.name or _default_name(spec.store, position),
                timeout=spec.timeout_or(timeout),
                retrieve_k=spec.retrieve_k,
            )
            for position, spec in enumerate(specs)
        )
        for collection in self._collections:
            if collection.score_kind is not ScoreKind.COSINE:  # pragma: no cover - dense only
                raise ValueError("MultiCollectionRetriever merges dense (cosine) results only")
        check_unique_names([c.name for c in self._collections])
        check_one_model(self._collections, self._policy)
        self._fail_fast = fail_fast
        self._model = model_id_of(embed_model)
        self._plan(Question(""))  # refuse bad floors and filters now
        self._pool = WorkerPool(pool_size(max_workers, len(self._collections)))
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    # Configuration ----------------------------------------------------------------------
    @classmethod
    def class_name(cls) -> str:
        return "MultiCollectionRetriever"

    @property
    def collection_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self._collections)

    def _configured(self) -> Call[Any]:
        """A call under the retriever's own settings."""
        return self._plan(Question(""))

    def to_dict(self) -> dict[str, Any]:
        floors = self.floors
        return {
            "class_name": self.class_name(),
            "policy": self._policy.to_dict(),
            "collections": [
                {
                    "name": c.name,
                    "min_similarity": floors[c.name],
                    "retrieve_k": c.retrieve_k,
                    "timeout": c.timeout,
                    "pushdown": c.pushdown.enabled,
                    "threaded": c.backend.threaded,
                }
                for c in self._collections
            ],
            "embedding_model": str(self._model),
            "neighbours": self._collections[0].attachments.neighbours,
            "parent_levels": self._collections[0].attachments.parent_levels,
            "fail_fast": self._fail_fast,
        }

    def close(self) -> None:
        """Shut the thread pool down (searches still running finish in the background); a
        later call starts it again. A call running meanwhile raises
        :class:`~thresholded.errors.RetrieverClosedError` when some of its searches were
        still waiting for a thread (they are cancelled); call it again."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    # One call ---------------------------------------------------------------------------
    def _plan(self, question: Question, **options: Any) -> Call[Any]:
        self._filters.check_unchanged(type(self).__name__)
        fan = Fan(getattr(self, "_pool", None), self._fail_fast, inline=False)
        return self._planned(question, self._collections, fan=fan, **options)


def collection_of(node: NodeWithScore) -> str | None:
    """The collection a returned node came from (its ``source_collection`` metadata)."""
    return node.node.metadata.get(COLLECTION_KEY)


# Construction helpers -------------------------------------------------------------------
def _spec(collection: Any) -> CollectionSpec:
    """A ``CollectionSpec``, or a bare index or store as one."""
    if isinstance(collection, CollectionSpec):
        return collection
    if isinstance(collection, BaseCollectionSpec):
        raise TypeError(
            f"{type(collection).__module__}.{type(collection).__name__} is another adapter's "
            "spec: use llama_index_thresholded.CollectionSpec"
        )
    if isinstance(collection, VectorStoreIndex) or _is_vector_store(collection):
        return CollectionSpec(store=collection)
    hint = (
        ": give the index it searches, with its floor in CollectionSpec(index, policy=...) "
        "(neighbours and summaries are this retriever's neighbours= and parent_summaries=)"
        if isinstance(collection, BaseRetriever)
        else ""
    )
    raise TypeError(
        f"a collection is a CollectionSpec, a VectorStoreIndex or a vector store, got "
        f"{type(collection).__name__}{hint}"
    )


def _opened(spec: CollectionSpec, timeout: float | None) -> CollectionSpec:
    """The spec with its store: a Milvus collection named by URI is reopened."""
    if spec.store is not None:
        return spec
    from llama_index_thresholded.milvus import existing_milvus_store

    store = existing_milvus_store(**spec.reopen_arguments(timeout))
    return spec.model_copy(update={"store": store})


def _is_vector_store(value: Any) -> bool:
    return hasattr(value, "query") and hasattr(value, "stores_text")


def _as_index(store: Any, embed_model: BaseEmbedding) -> VectorStoreIndex:
    if isinstance(store, VectorStoreIndex):
        return store
    return VectorStoreIndex.from_vector_store(store, embed_model=embed_model)


def _common_embed_model(specs: Sequence[CollectionSpec]) -> BaseEmbedding:
    """The one embedding model of the given indexes; bare stores need ``embed_model=``."""
    indexes = [(p, s) for p, s in enumerate(specs) if isinstance(s.store, VectorStoreIndex)]
    models = [index_embed_model(s.store) for _, s in indexes]
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
    built_with = [
        Embedder(f"collection {s.name or _default_name(s.store, p)!r}", m, named_model(m))
        for (p, s), m in zip(indexes, models, strict=True)
    ]
    question = replace(built_with[0], what=f"the model of {built_with[0].what}")
    check_one_embedder(
        question,
        built_with[1:],
        fix="Pass embed_model=... (the one model every index was built with), or build the "
        "indexes with a model that names itself (model_name=...).",
    )
    return models[0]


def _default_name(target: Any, position: int) -> str:
    """:func:`~thresholded.classes.default_label` of an index's store, or of a store."""
    store = target.vector_store if isinstance(target, VectorStoreIndex) else target
    client = getattr(store, "client", None)  # a Milvus store's: its database
    return default_label(store, position, getattr(getattr(client, "_config", None), "db_name", ""))
