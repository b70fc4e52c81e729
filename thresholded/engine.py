"""The retrieval pipeline, written once: embed, search, score, select, attach, report.

Every retriever of both adapters, single and multi-collection, sync and async,
runs :func:`retrieve`. It is a generator: it *yields* what it needs done
(embed the question, search a collection, fetch sections by id, ...) and
receives the answer. :func:`drive` carries the requests out with blocking
calls, :func:`adrive` by awaiting them; both are a few lines. A framework
adapter only translates: its :class:`Backend` searches the store and turns
the framework's objects into :class:`~thresholded.selection.Candidate` and back.

A single retriever is one collection searched inline: its errors are raised as
they are. A multi-collection retriever fans the search stage out over its
collections, each within its own timeout, and reports a status for each.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import math
import threading
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from concurrent.futures import Executor, Future, wait
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Protocol, TypeVar

from thresholded.attachments import AttachmentSpec, Links, walk
from thresholded.errors import (
    DimensionMismatchError,
    InexactFilterError,
    NonCosineScoreError,
    ScoreRangeError,
)
from thresholded.fanout import (
    CollectionStatus,
    DeadlinePassed,
    Found,
    Job,
    Outcome,
    acall_each,
    afan_out,
    arun_in,
    call_each,
    fan_out,
    merge,
    statuses,
    timed_out,
    within_deadline,
)
from thresholded.filters import Filter, all_of, matches, none_match
from thresholded.filters.model import check_keys, check_not_marks
from thresholded.gate import gate_is_on
from thresholded.metadata_keys import COLLECTION, COLLECTION_HINT, NOT_STORED
from thresholded.models import ModelId, check_named_model
from thresholded.norms import check_stored_norms
from thresholded.policy import RetrievalPolicy
from thresholded.pushdown import PUSHDOWN_EPSILON, PushdownSwitch
from thresholded.rescore import Vector, needs_cosine, rescore, wants_rescore
from thresholded.retry import (
    RetryPolicy,
    acall_with_retries,
    call_with_retries,
    current_deadline,
    is_transient,
    retry_deadline,
)
from thresholded.scores import (
    Metric,
    ScoreKind,
    check_has_direction,
    check_unit_norm,
    is_valid_score,
    to_cosines,
)
from thresholded.selection import Candidate, Dropped, DropReason, Selection, attach, select
from thresholded.strict import unawaited

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

Pipeline = Generator["Request", Any, R]
"""A step of the pipeline: yields requests, receives their answers, returns ``R``."""


# What the adapters provide ----------------------------------------------------------------
@dataclass(frozen=True)
class Question:
    """The question of one call."""

    text: str
    vector: Vector | None = None
    """A vector the caller computed already: it is not embedded again."""
    item: Any = None
    """The framework's own query object (e.g. a LlamaIndex ``QueryBundle``), for the backend."""


@dataclass(frozen=True)
class SearchArgs:
    """One search of one collection."""

    question: Question
    vector: Vector | None
    k: int
    filters: Any
    """The call's filters, in the backend's own form."""
    radius: float | None = None
    """Pushdown: the engine keeps only scores strictly above it (a range search)."""
    widened: bool = False
    """Asked again, for more rows, as too few of the last search's lay within the filters."""
    where: Filter | None = None
    """Every filter in force, in the core model: of a section the store holds in two copies
    (one its search tests, one it returns), the copy returned is one a search under them
    could return (see ``Backend.fetch``)."""


class Backend(Protocol[T]):
    """What a framework adapter does for the engine; it translates and nothing more.

    Each blocking method has an ``a``-prefixed async twin. ``T`` is the framework's
    result object (a LlamaIndex ``NodeWithScore``, a LangChain ``Document``).
    """

    name: str
    """The store, for error messages: ``collection 'kb' at http://...``."""
    dimension: int | None
    """The dimension of the collection's vectors, where known."""
    attempt_timeout: float | None
    """The deadline of one attempt: the store's own per-call timeout, where it has one."""
    threaded: bool
    """Async fan-out runs this store's blocking calls in a thread (no usable async client)."""

    def prepare(self, where: Filter | None, options: Any = None) -> Any:
        """A call's filters (the retriever's own and the call's, combined) translated for
        this store, before any request, with the call's other store ``options``."""

    def metric(self, filters: Any) -> Metric | None:
        """The metric of the dense scores a search with these (prepared) filters returns."""

    def can_push_down(self, metric: Metric | None) -> bool:
        """Whether a floor can be sent to this store as a range search."""

    def embed_query(self, question: Question) -> Vector: ...
    async def aembed_query(self, question: Question) -> Vector: ...
    def searched_vector(self, vector: Vector) -> Vector:
        """The question's vector as this store searches with it, whoever embedded it (a
        store that normalises every query gets it normalised); the vector itself when the
        store takes it as it is."""

    def embed_texts(self, items: Sequence[T]) -> list[Vector]:
        """The items' texts embedded as the index embedded them, in one batch."""

    async def aembed_texts(self, items: Sequence[T]) -> list[Vector]: ...
    def search(self, args: SearchArgs) -> Sequence[tuple[T, float | None]]:
        """Items and their raw scores, best first."""

    async def asearch(self, args: SearchArgs) -> Sequence[tuple[T, float | None]]: ...
    def fetch(self, ids: list[str], where: Filter | None = None) -> dict[str, T]:
        """Sections by id; missing ids are left out. ``where`` is every filter in force: of a
        section the store holds in two copies (one its search tests, one it returns), the
        copy returned is one a search under them could return."""

    async def afetch(self, ids: list[str], where: Filter | None = None) -> dict[str, T]: ...
    def fetch_vectors(self, ids: list[str]) -> dict[str, Vector]:
        """Stored dense vectors by id, where the store can read them back."""

    async def afetch_vectors(self, ids: list[str]) -> dict[str, Vector]: ...
    def stored_vector(self, item: T) -> Vector | None:
        """The vector a search returned with the item, if any."""

    def links(self, item: T) -> Links:
        """The ids of an item's previous, next and parent sections."""

    def identify(
        self, item: T, source_key: str, key: str | None = None
    ) -> tuple[str, str | None, int]:
        """An item's id (``key`` when it has none of its own), source, and text length."""

    restricted: bool
    """The retriever limits its sections by more than their metadata (ids, documents)."""

    fetch_holds_back: bool
    """``fetch`` leaves out sections it found that the retriever's store restrictions exclude
    (a raw expression, partitions, ids): an id it does not return may exist."""

    def admits(self, item: T) -> bool:
        """Whether an item is within those limits (see ``restricted``)."""

    admits_nothing: bool
    """No section is within those limits (an empty list of ids): nothing is searched, as a
    store would read the empty list as no limit at all, or ignore it."""

    def metadata(self, item: T) -> Mapping[str, Any]:
        """The item's metadata, as filters read it."""


# A collection, and one call over collections ----------------------------------------------
@dataclass(frozen=True, eq=False)
class Collection(Generic[T]):
    """One collection as the engine searches it: a backend and its settings."""

    backend: Backend[T]
    policy: RetrievalPolicy | None = None
    """Its own policy (floor, re-scoring); None: the call's policy."""
    name: str = ""
    """Its label in multi-collection results; "" for a retriever's only collection."""
    score_kind: ScoreKind = ScoreKind.COSINE
    model: ModelId | str | None = None
    """The embedding model in use, to resolve and check the floor (read once, as a
    :class:`~thresholded.models.ModelId`)."""
    allow_model_mismatch: bool = False
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout: float | None = None
    """The deadline of its whole search stage in a fan-out, retries included."""
    retrieve_k: int | None = None
    pushdown: PushdownSwitch = field(default_factory=lambda: PushdownSwitch(False))
    attachments: AttachmentSpec = field(default_factory=AttachmentSpec)
    embeds: bool = True
    """The search needs the question's vector (dense and hybrid search)."""
    where: Filter | None = None
    """The collection's own filters: every call's filters are combined with them (AND)."""
    allowed_filter_keys: frozenset[str] | None = None
    """The only keys a filter may name; None: any plain field name."""
    capped: bool = False
    """Its first search returns at most a number of rows of its own, whatever is asked (an
    ensemble, whose members keep their ``k``): fewer rows than asked are not all it has, and
    a widened search asks it for more."""
    max_rows: int | None = None
    """The most rows a widened search asks it for; None: :data:`MAX_FILTERED_SEARCH_ROWS`. A
    store whose search costs grow faster than its rows (an MMR search) sets fewer."""
    max_rows_advice: str | None = None
    """What the error past its widest search advises: why the search stops there and what
    reaches farther. None: a filter the store applies exactly, or fewer candidates."""

    def __post_init__(self) -> None:
        if isinstance(self.model, str):
            object.__setattr__(self, "model", ModelId.parse(self.model))
        check_timeout(self.timeout)
        if self.retrieve_k is not None and self.retrieve_k < 1:
            raise ValueError(f"retrieve_k must be at least 1, got {self.retrieve_k}")

    def floor(self, policy: RetrievalPolicy) -> float:
        """The floor in force under ``policy``, checked against the model in use. A policy
        (or profile) for a named model is refused when the collection names no model,
        unless ``allow_model_mismatch``."""
        model = self.model
        if self.allow_model_mismatch and policy.embedding_model is not None:
            model = None
        elif model is None and policy.embedding_model is not None:
            check_named_model(
                policy.embedding_model,
                what="this policy's threshold",
                where=f"the embeddings or {self.backend.name or 'the store'}",
            )
        return policy.resolve_min_similarity(model)

    def rescores(self, policy: RetrievalPolicy) -> bool:
        """Whether this collection's non-cosine results get their dense cosine."""
        return wants_rescore(policy, self.score_kind)


def check_timeout(timeout: float | None) -> None:
    """A deadline is a positive number of seconds, or None (no deadline)."""
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")


@dataclass(frozen=True)
class Stage(Generic[T]):
    """One collection's search in one call: how many, under which floor and filters."""

    collection: Collection[T]
    policy: RetrievalPolicy
    """The floor's policy, its ``top_k`` the number of candidates to fetch."""
    floor: float
    where: Filter | None = None
    """Every filter in force: the collection's own and the call's, combined (AND)."""
    filters: Any = None
    """``where`` as the backend prepared it for its store."""
    metric: Metric | None = None
    """The metric of its dense scores, which are converted to cosines; None: not read."""

    @property
    def needs_vector(self) -> bool:
        return self.collection.embeds or self.collection.rescores(self.policy)

    @property
    def holds_back(self) -> bool:
        """Whether it returns only some of the collection's sections: filters, ids or
        documents, or a restriction of the store's."""
        backend = self.collection.backend
        return self.where is not None or backend.restricted or backend.fetch_holds_back


@dataclass(frozen=True)
class Fan:
    """How a call runs its collections' stages."""

    pool: Executor | None = None
    fail_fast: bool = True
    inline: bool = True
    """One collection, run in the caller's thread or task; its errors raised as they are."""


_INLINE = Fan()


@dataclass(frozen=True)
class Call(Generic[T]):
    """Everything one call needs; built per call, so concurrent calls share nothing."""

    question: Question
    policy: RetrievalPolicy
    """The selection over every collection's survivors: cap, budget, ``top_k``."""
    stages: tuple[Stage[T], ...]
    fan: Fan = field(default_factory=Fan)
    embedder: Any = None
    """Embeds the question (``embed_query``/``aembed_query``); default: the backend of the
    first collection that needs a vector (every collection uses one model)."""

    @property
    def floors(self) -> dict[str, float]:
        """Each collection's floor in this call, by its name."""
        return {stage.collection.name: stage.floor for stage in self.stages}

    @property
    def gates(self) -> dict[str, float | None]:
        """Each collection's own answer gate in this call, by its name; None: off."""
        return {stage.collection.name: stage.policy.min_top_similarity for stage in self.stages}

    @property
    def min_similarity(self) -> float:
        """The lowest floor of its collections (a multi-collection report's
        ``min_similarity``); over one collection, its floor."""
        return min(stage.floor for stage in self.stages)

    @property
    def min_top_similarity(self) -> float | None:
        """The answer gate on the merged result (each collection's own gate applies to its
        candidates); None or 0: off."""
        return self.policy.min_top_similarity


def plan(
    question: Question,
    collections: Sequence[Collection[T]],
    policy: RetrievalPolicy,
    *,
    min_similarity: float | None = None,
    min_top_similarity: float | None = None,
    filters: Filter | None = None,
    options: Any = None,
    fan: Fan | None = None,
    embedder: Any = None,
) -> Call[T]:
    """One call: each collection's stage under its own floor, the global ``policy`` after.

    ``min_similarity`` replaces every collection's floor and ``min_top_similarity`` every
    gate, the global one included. ``filters`` apply in every collection, combined with
    the collection's own (AND: a call's filters only narrow); their keys are checked and
    each backend prepares them before any request is sent, so a bad filter is an error
    of the call. ``options`` are the call's other store arguments, in the adapter's form.
    A stage only applies the floor: the cap, the budget and ``top_k`` apply once, to
    what every collection kept.
    """
    policy = policy.with_overrides(min_top_similarity=min_top_similarity)
    marks = _marks(collections)
    stages = []
    for collection in collections:
        own = (collection.policy or policy).with_overrides(
            min_similarity=min_similarity, min_top_similarity=min_top_similarity
        )
        k = collection.retrieve_k or policy.fetch_k
        stage_policy = _stage_policy(own, k, policy.source_key)
        where = all_of(collection.where, filters)
        check_keys(where, collection.allowed_filter_keys)
        check_not_marks(where, marks)
        prepared = collection.backend.prepare(where, options)
        metric = collection.backend.metric(prepared) if _reads_metric(collection) else None
        floor = collection.floor(own)
        check_judgeable(collection, own, floor)
        stages.append(Stage(collection, stage_policy, floor, where, prepared, metric))
    return Call(question, policy, tuple(stages), fan or _INLINE, embedder)


def _marks(collections: Sequence[Collection[Any]]) -> dict[str, str]:
    """The keys the results carry that the stored sections lack: the marks, and the
    collection a multi-collection retriever labels each result with."""
    if not any(c.name for c in collections):
        return NOT_STORED
    return {**NOT_STORED, COLLECTION: COLLECTION_HINT}


@functools.lru_cache(maxsize=256)
def _stage_policy(own: RetrievalPolicy, k: int, source_key: str) -> RetrievalPolicy:
    """A stage's policy: its own floor and gate, ``k`` candidates, no cap and no budget
    (those apply once, to what every collection kept). Policies are frozen: one is made
    per policy, not per call."""
    return own.model_copy(
        update={
            "top_k": k,
            "over_fetch": 1,
            "max_per_source": None,
            "max_chars": None,
            "max_attachment_chars": None,
            "source_key": source_key,
        }
    )


def check_judgeable(collection: Collection[Any], policy: RetrievalPolicy, floor: float) -> None:
    """Scores of kind ``unknown`` meet a floor or an answer gate only once re-scored:
    unjudged, every result would pass them, and they would silently do nothing."""
    if collection.score_kind is not ScoreKind.UNKNOWN or collection.rescores(policy):
        return
    gate = policy.min_top_similarity
    limits = [f"the floor {floor:g}"] if floor != 0.0 else []
    limits += [f"the answer gate {gate:g}"] if gate else []
    if limits:
        raise NonCosineScoreError(
            f"the scores of {collection.backend.name or 'this retriever'} are of kind "
            f"'unknown': they cannot be compared with {' or '.join(limits)}, and every result "
            "would pass. Re-score them with the dense model: hybrid_policy='rescore' in the "
            "policy, with the embeddings the collection was built with."
        )


def _model_of(stages: Sequence[Stage[Any]]) -> ModelId | None:
    """The one model every collection names (None where one names none, or they differ)."""
    models = {stage.collection.model for stage in stages}
    model = models.pop() if len(models) == 1 else None
    return ModelId.parse(model) if isinstance(model, str) else model


# The pipeline ------------------------------------------------------------------------------
def retrieve(call: Call[T]) -> Pipeline[Result[T]]:
    """One retrieval, in order: every adapter, sync or async, runs exactly this."""
    check_question(call.question)
    vector = yield from _question_vector(call)
    searched = [(stage, searched_vector(stage, vector)) for stage in call.stages]
    for stage, stage_vector in searched:
        check_vector(stage_vector, stage)
    outcomes = yield SearchEach(call.fan, [(s, _searching(s, call, v)) for s, v in searched])
    selection = merge(outcomes, call.policy)
    walks = _attachment_walks(call, selection)
    found = (yield AttachEach(call.fan, walks)) if walks else {}
    errors = {name: f for name, f in found.items() if isinstance(f, BaseException)}
    walked = [c for name, f in found.items() if name not in errors for c in f]
    inside, outside = within_filters(call.stages, walked) if walked else ([], [])
    if inside:
        selection = attach(selection, inside, call.policy)
    selection = counted(selection, told(call.stages, outside))
    model = _model_of(call.stages)
    status = statuses(outcomes, selection, errors)
    held_back = any(stage.holds_back for stage in call.stages)
    result = Result(call.question, selection, status, vector, model, held_back)
    log_result(result)
    return result


def check_question(question: Question) -> None:
    if not isinstance(question.text, str):
        raise TypeError(
            f"the question must be a str, got {type(question.text).__name__}"
            + unawaited(question.text)
        )
    if question.vector is not None and len(question.vector) == 0:
        raise ValueError("the question's vector is empty: give its embedding, or none")
    if not question.text.strip() and question.vector is None:
        raise ValueError("the question is empty: there is nothing to retrieve for")


def _question_vector(call: Call[T]) -> Pipeline[Vector | None]:
    """The question's vector, embedded once for every collection that needs one."""
    if call.question.vector is not None:
        return call.question.vector
    needing = [s for s in call.stages if s.needs_vector]
    if not needing:
        return None
    embedder = call.embedder or needing[0].collection.backend
    return (yield Step.call(embedder, "embed_query", call.question))


def searched_vector(stage: Stage[Any], vector: Vector | None) -> Vector | None:
    """The question's vector as the stage's store searches with it: embedded once for every
    collection, by whichever model, it is checked and searched as each store takes it."""
    if vector is None or not stage.needs_vector:
        return vector
    return stage.collection.backend.searched_vector(vector)


def check_vector(vector: Vector | None, stage: Stage[Any]) -> None:
    """A question vector of the collection's model: its dimension, and unit length for IP/L2."""
    if vector is None or not stage.needs_vector:
        return
    collection, dim = stage.collection, len(vector)
    expected = collection.backend.dimension
    if expected is not None and dim != expected:
        raise DimensionMismatchError(
            f"the query embedding has {dim} dimensions but {collection.backend.name} holds "
            f"vectors of {expected}: the index was built with another embedding model"
        )
    model = ModelId.parse(collection.model) if collection.model is not None else None
    if model is not None and model.dimension is not None and dim != model.dimension:
        raise DimensionMismatchError(
            f"the query embedding has {dim} dimensions, but {model} has {model.dimension}"
        )
    check_has_direction(vector, what="query vector")
    if stage.metric is not None and stage.metric.needs_unit_vectors:
        check_unit_norm(vector)  # inner product and L2 are cosines on unit vectors only


def _reads_metric(collection: Collection[Any]) -> bool:
    """Whether the collection's scores are dense scores of a metric, converted to cosines."""
    return collection.embeds and collection.score_kind is ScoreKind.COSINE


def _searching(
    stage: Stage[T], call: Call[T], vector: Vector | None
) -> Callable[[], Pipeline[Found[T]]]:
    return lambda: search_stage(stage, call.question, vector)


def search_stage(stage: Stage[T], question: Question, vector: Vector | None) -> Pipeline[Found[T]]:
    """One collection: search, convert the scores to cosines, re-score, cut by its floor."""
    collection = stage.collection
    if none_match(stage.where) or collection.backend.admits_nothing:  # e.g. ``IN []``, ids=[]
        return Found(0, select([], stage.policy, stage.floor))
    k, radius = stage.policy.top_k, _radius(stage)
    args = SearchArgs(question, vector, k, stage.filters, radius, where=stage.where)
    hits, pushed = yield from _search(collection, args)
    candidates, outside, order = _candidates(stage, hits)
    while _short_within_filters(stage, args, hits, candidates, outside):
        k, radius = _widened(stage, args.k, candidates), _kept_radius(args, pushed)
        args = replace(args, k=k, radius=radius, widened=True)
        hits, pushed = yield from _search(collection, args)
        candidates, outside, order = _candidates(stage, hits)
    candidates, outside = _nearest_within(stage.policy.top_k, candidates, outside, order)
    outside = told([stage], outside)
    if stage.metric is not None and stage.metric.needs_unit_vectors:
        yield from _check_stored_norms(stage, candidates)
    if collection.rescores(stage.policy) and vector is not None:
        candidates = yield from _rescore(collection, vector, candidates)
    selection = select(candidates, stage.policy, stage.floor)
    return Found(len(candidates) + len(outside), counted(selection, outside), pushed)


MAX_FILTERED_SEARCH_ROWS = 16_384
"""The most rows one search is widened to when the store returned too few inside the
filters (Milvus's own limit on a search): beyond it, the call is an error."""


def _short_within_filters(
    stage: Stage[T],
    args: SearchArgs,
    hits: Sequence[Any],
    inside: Sequence[Candidate[T]],
    outside: Sequence[Dropped[T]],
) -> bool:
    """Whether the search must be widened: the store applied the filters inexactly (a
    superset, or not at all), so some of the nearest rows it returned lie outside them,
    fewer than the candidates asked for are left, and farther rows may hold more. Not
    when the store returned every row it has (fewer than asked, but for a capped store's
    first search), nor when the farthest row is below the floor already: every row beyond
    it is too (cosines, best first)."""
    if not outside or len(inside) >= stage.policy.top_k:
        return False
    if len(hits) < args.k and (args.widened or not stage.collection.capped):
        return False
    return not _beyond_the_floor(stage, [*inside, *(d.candidate for d in outside)])


def _beyond_the_floor(stage: Stage[T], candidates: Sequence[Candidate[T]]) -> bool:
    """Whether the farthest of these store-ordered cosines is below the stage's floor."""
    if stage.floor == 0.0 or stage.collection.score_kind is not ScoreKind.COSINE:
        return False
    scores = [c.score for c in candidates]
    if not all(is_valid_score(s) for s in scores):
        return False
    return min(scores) < stage.floor  # type: ignore[type-var]


_STORE_ADVICE = (
    "Write the filter in a form the store applies (on Milvus Lite 2.5, e.g. a scalar field "
    "instead of NOT over a list test), or ask for fewer candidates"
)


def _widened(stage: Stage[T], asked: int, inside: Sequence[Candidate[T]]) -> int:
    """Twice as many rows, up to the collection's limit (``Collection.max_rows``); at it, an error:
    a result that may lack sections within the filters is not returned as complete."""
    limit = stage.collection.max_rows or MAX_FILTERED_SEARCH_ROWS
    if asked >= limit:
        collection = stage.collection
        raise InexactFilterError(
            f"{_label(collection)} does not apply the filters exactly in its search, and "
            f"its {asked} nearest rows hold only {len(inside)} of the "
            f"{stage.policy.top_k} candidates asked for within them: the rest may lie "
            f"farther. {collection.max_rows_advice or _STORE_ADVICE}"
        )
    return min(2 * asked, limit)


def _kept_radius(args: SearchArgs, pushed: bool) -> float | None:
    """The range search's radius, unless the engine refused it."""
    return args.radius if pushed else None


def _nearest_within(
    k: int, inside: list[Candidate[T]], outside: list[Dropped[T]], order: Sequence[bool]
) -> tuple[list[Candidate[T]], list[Dropped[T]]]:
    """The ``k`` nearest candidates within the filters, and the rows outside them that the
    store returned before the last of those: what a store applying the filters exactly
    would have returned, and what it would have skipped. A widened search returns more.
    ``order`` says of each row, in the store's order, whether it lies within the filters:
    a row is before the last by that order, whatever its score (one outside the filters may
    read as NaN)."""
    if len(inside) <= k:
        return inside, outside
    last = [row for row, ok in enumerate(order) if ok][k - 1]
    return inside[:k], outside[: order[:last].count(False)]


def within_filters(
    stages: Sequence[Stage[T]], candidates: Sequence[Candidate[T]]
) -> tuple[list[Candidate[T]], list[Dropped[T]]]:
    """The candidates whose metadata satisfies their collection's filters, and the others,
    dropped as ``outside_filters``: whatever the store did with the filters, nothing
    outside them is returned, neither a section nor a neighbour nor a parent summary."""
    if not any(s.where is not None or s.collection.backend.restricted for s in stages):
        return list(candidates), []
    by_name = {s.collection.name: s for s in stages}
    inside: list[Candidate[T]] = []
    outside: list[Dropped[T]] = []
    for cand in candidates:
        if is_within(by_name[cand.collection], cand.item):
            inside.append(cand)
        else:
            outside.append(Dropped(cand, DropReason.OUTSIDE_FILTERS))
    return inside, outside


def is_within(stage: Stage[T], item: T) -> bool:
    """Whether the item's metadata satisfies the stage's filters and its backend admits it."""
    backend = stage.collection.backend
    return (stage.where is None or matches(stage.where, backend.metadata(item))) and (
        backend.admits(item)
    )


def told(stages: Sequence[Stage[T]], outside: Sequence[Dropped[T]]) -> list[Dropped[T]]:
    """The rows outside the filters that a report may count: those the call's filters leave
    out, never those outside the collection's own filters and restrictions (the sections
    the retriever holds back). Which of those the store returned depends on the question
    and on the call's filters (the parts it applies), so a count of them would tell how
    many sections the retriever holds back lie near a question ("layoffs": 3), or match a
    call's filter (an agent's ``salary == 99``, reading their metadata one value at a time);
    so would a count of the held-back neighbours of a kept section."""
    by_name = {s.collection.name: s for s in stages}
    return [d for d in outside if _countable(by_name[d.candidate.collection], d.candidate.item)]


def _countable(stage: Stage[T], item: T) -> bool:
    """Whether a row outside the stage's filters may be counted (see :func:`told`)."""
    own, backend = stage.collection.where, stage.collection.backend
    return (own is None or matches(own, backend.metadata(item))) and backend.admits(item)


def counted(selection: Selection[T], outside: Sequence[Dropped[T]]) -> Selection[T]:
    """The selection with the rows outside the filters counted, not carried: not even
    their ids reach a report, an event or a log (see ``Selection.outside_filters``)."""
    if not outside:
        return selection
    return replace(selection, outside_filters=selection.outside_filters + len(outside))


def _radius(stage: Stage[Any]) -> float | None:
    """The floor as a range-search radius, where it can be pushed into the engine.

    Never under a metric whose scores are cosines only on unit vectors (IP): there a
    stored vector that is too short scores below the radius though its cosine is above
    the floor, and the store never returns it, so its length is never checked
    (:func:`_check_stored_norms`). The same data would silently lose sections that a
    search without the radius refuses with ``NotUnitVectorError``. Checking them would
    mean reading back the very candidates the range search saves sending, so such a
    collection is filtered on the client only; under COSINE the store normalises every
    vector and nothing can hide below the radius.
    """
    collection = stage.collection
    if stage.floor == 0.0 or not collection.pushdown.enabled:
        return None
    if stage.metric is not None and stage.metric.needs_unit_vectors:
        return None
    if not collection.backend.can_push_down(stage.metric):
        return None
    return stage.floor - PUSHDOWN_EPSILON


def _search(
    collection: Collection[T], args: SearchArgs
) -> Pipeline[tuple[Sequence[tuple[T, float | None]], bool]]:
    """Search; where the engine refuses the pushed-down floor, search again without it."""
    if args.radius is None:
        return (yield Search(collection, args)), False
    try:
        return (yield Search(collection, args)), True
    except Exception as exc:
        if is_transient(exc):  # the server is unreachable, not refusing range search
            raise
        hits = yield Search(collection, replace(args, radius=None))  # a real failure raises
        collection.pushdown.refused(collection.backend.name, exc)
        return hits, False


def _candidates(
    stage: Stage[T], hits: Sequence[tuple[T, float | None]]
) -> tuple[list[Candidate[T]], list[Dropped[T]], list[bool]]:
    """The hits as candidates, dense scores converted from the store's metric to cosines:
    those within the stage's filters, the others, dropped as ``outside_filters``
    (:func:`within_filters`), and whether each hit lies within them, in the store's order.
    Only the scores within them are checked: a section outside says nothing, and an error
    naming its score would say it to the caller the filters hold it from, so a score of
    one that cannot be a cosine reads as none (NaN)."""
    inside = _within_each(stage, [item for item, _ in hits])
    collection = stage.collection
    backend, source_key = collection.backend, stage.policy.source_key
    scores = [
        _score(raw, backend.name, checked) for (_, raw), checked in zip(hits, inside, strict=True)
    ]
    if stage.metric is not None:  # range-checked, whatever the metric
        scores = to_cosines(scores, stage.metric, store=backend.name, unchecked=_not(inside))
    kind, name = collection.score_kind, collection.name
    within: list[Candidate[T]] = []
    outside: list[Dropped[T]] = []
    for (item, _), score, ok in zip(hits, scores, inside, strict=True):
        item_id, source, chars = backend.identify(item, source_key)
        cand = Candidate(item, item_id, score, kind, source, chars, collection=name)
        if ok:
            within.append(cand)
        else:
            outside.append(Dropped(cand, DropReason.OUTSIDE_FILTERS))
    return within, outside, inside


def _within_each(stage: Stage[T], items: Sequence[T]) -> list[bool]:
    """Whether each item lies within the stage's filters and restrictions (:func:`is_within`)."""
    if stage.where is None and not stage.collection.backend.restricted:
        return [True] * len(items)
    return [is_within(stage, item) for item in items]


def _not(flags: Sequence[bool]) -> list[bool]:
    return [not flag for flag in flags]


def _score(raw: Any, store: str, checked: bool) -> float | None:
    """A raw score as a float (:func:`_number`); one that is no number is NaN, unchecked."""
    if checked:
        return _number(raw, store)
    try:
        return _number(raw, store)
    except ScoreRangeError:
        return math.nan


def _number(raw: Any, store: str) -> float | None:
    """A store's raw score as a Python float (numpy's are not JSON data, nor ``float``)."""
    if raw is None:
        return None
    try:
        return float(raw)
    except (TypeError, ValueError):
        raise ScoreRangeError(
            f"{store} returned the score {raw!r} ({type(raw).__name__}), which is not a number"
        ) from None


def _check_stored_norms(stage: Stage[T], candidates: Sequence[Candidate[T]]) -> Pipeline[None]:
    """Every candidate that could be kept has a unit stored vector (IP and L2 only): the one
    the search returned with it, else read back by id, in one batch. Below-floor candidates
    are checked too: a vector that is too short hides a cosine above the floor."""
    collection = stage.collection
    backend = collection.backend
    vectors = {c.id: backend.stored_vector(c.item) for c in candidates if is_valid_score(c.score)}
    missing = [i for i, v in vectors.items() if v is None]
    if missing:
        vectors.update((yield FetchVectors(collection, missing)))
    assert stage.metric is not None
    check_stored_norms(vectors, store=_label(collection), metric=stage.metric)


def _label(collection: Collection[Any]) -> str:
    """The collection, for messages: its store, and its label among several."""
    name = collection.backend.name
    return f"collection {collection.name!r} ({name})" if collection.name else name


def _rescore(
    collection: Collection[T], vector: Vector, candidates: list[Candidate[T]]
) -> Pipeline[list[Candidate[T]]]:
    """The dense cosine of every candidate whose score is not one: its stored vector where
    the search returned it or the store can read it back, else its text embedded."""
    wanted = {c.id: c for c in candidates if needs_cosine(c)}
    backend, dim = collection.backend, len(vector)
    vectors = _usable({i: backend.stored_vector(c.item) for i, c in wanted.items()}, dim)
    missing = [i for i in wanted if i not in vectors]
    if missing:
        vectors.update(_usable((yield FetchVectors(collection, missing)), dim))
        missing = [i for i in wanted if i not in vectors]
    if missing:
        embedded = yield Step.call(backend, "embed_texts", [wanted[i].item for i in missing])
        vectors.update(zip(missing, embedded, strict=True))
    logger.debug(
        "re-scored %d candidate(s): %d stored vector(s), %d embedded",
        len(wanted),
        len(wanted) - len(missing),
        len(missing),
    )
    return rescore(candidates, vector, vectors)


def _usable(found: dict[str, Vector | None], dim: int) -> dict[str, Vector]:
    """Vectors that exist and have the question's dimension (another model's are not)."""
    return {i: v for i, v in found.items() if v is not None and len(v) == dim}


def _attachment_walks(
    call: Call[T], selection: Selection[T]
) -> list[tuple[Collection[T], Callable[[], Pipeline[list[Candidate[T]]]]]]:
    """One walk per collection with kept sections, for those sections only."""
    attaching = [stage for stage in call.stages if stage.collection.attachments.enabled]
    if not attaching:
        return []
    kept: dict[str, list[Candidate[T]]] = {}
    for cand in selection.kept:
        kept.setdefault(cand.collection, []).append(cand)
    walks = []
    for stage in attaching:
        collection = stage.collection
        if collection.name in kept:
            sections = kept[collection.name]
            walks.append((collection, _walking(stage, sections, call.policy.source_key)))
    return walks


def _walking(
    stage: Stage[T], kept: list[Candidate[T]], source_key: str
) -> Callable[[], Pipeline[list[Candidate[T]]]]:
    within = functools.partial(is_within, stage)
    fetch = functools.partial(Fetch, where=stage.where)
    return lambda: walk(stage.collection, kept, source_key, fetch=fetch, within=within)


# The result --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Result(Generic[T]):
    """What one call kept, attached and dropped, and what each collection did."""

    question: Question
    selection: Selection[T]
    collections: tuple[CollectionStatus, ...] = ()
    vector: Vector | None = None
    """The question's vector as the collections were searched with it: the caller's, else
    the embedded one (None: no search needed one)."""
    model: ModelId | None = None
    """The embedding model whose cosines the scores are (None: no collection names one)."""
    held_back: bool = False
    """Some collection returned only some of its sections: filters, ids or a store's
    restrictions (see ``Stage.holds_back``)."""

    @property
    def emptied_by(self) -> str | None:
        """Why nothing was kept (see ``Selection.emptied_by``); a floor pushed down into the
        engine drops below-floor results before they come back, so it counts as the floor,
        or as the gate when the gate stands at or above that floor (the gate is judged
        first, as on the client). ``empty`` when no search held anything back and none
        returned a section: the collections hold none, and there is no filter to blame."""
        why = self.selection.emptied_by
        pushed = [s.min_similarity for s in self.collections if s.pushdown]
        if why == "filters" and pushed:
            gate = self.selection.gate
            return "gate" if gate_is_on(gate) and gate >= max(pushed) else "floor"
        if why == "filters" and not self.held_back:
            return "empty"
        return why


def log_result(result: Result[Any]) -> None:
    """DEBUG counts per call, and one warning when a collection (or its attachments) failed."""
    troubles = [s for s in result.collections if not s.ok or s.attachment_error]
    if troubles:
        logger.warning(
            "multi-collection retrieval for %r is partial: %s",
            result.question.text,
            "; ".join(s.describe() for s in troubles),
        )
    if logger.isEnabledFor(logging.DEBUG):
        selection = result.selection
        logger.debug(
            "kept %d, attached %d, dropped %s (floor %g)",
            len(selection.kept),
            len(selection.attached),
            selection.drop_counts(),
            selection.min_similarity,
        )


# Requests and the two drivers ---------------------------------------------------------------
class Request(ABC):
    """Something the pipeline needs done; ``run`` does it blocking, ``arun`` awaiting."""

    __slots__ = ()

    @abstractmethod
    def run(self) -> Any: ...

    @abstractmethod
    async def arun(self) -> Any: ...


def drive(pipeline: Pipeline[R]) -> R:
    """Run a pipeline with blocking calls."""
    answer: Any = None
    error: BaseException | None = None
    while True:
        try:
            request = pipeline.throw(error) if error is not None else pipeline.send(answer)
        except StopIteration as done:
            return done.value
        try:
            answer, error = request.run(), None
        except Exception as exc:
            answer, error = None, exc


async def adrive(pipeline: Pipeline[R]) -> R:
    """Run a pipeline, awaiting each request."""
    answer: Any = None
    error: BaseException | None = None
    while True:
        try:
            request = pipeline.throw(error) if error is not None else pipeline.send(answer)
        except StopIteration as done:
            return done.value
        try:
            answer, error = await request.arun(), None
        except Exception as exc:
            answer, error = None, exc


class Step(Request):
    """A call a blocking body and its awaited twin make differently: the body, written once
    as a pipeline, yields it there; ``drive`` makes the blocking call, ``adrive`` awaits the
    other."""

    __slots__ = ("awaited", "blocking")

    def __init__(self, blocking: Callable[[], Any], awaited: Callable[[], Awaitable[Any]]) -> None:
        self.blocking, self.awaited = blocking, awaited

    def run(self) -> Any:
        return self.blocking()

    async def arun(self) -> Any:
        return await self.awaited()

    @classmethod
    def call(cls, owner: Any, name: str, *args: Any, **kwargs: Any) -> Step:
        """``owner.name(...)``, or ``owner.aname(...)`` awaited: LangChain's and LlamaIndex's
        name of a method's awaited twin."""
        return cls(
            lambda: getattr(owner, name)(*args, **kwargs),
            lambda: getattr(owner, "a" + name)(*args, **kwargs),
        )


@dataclass(frozen=True)
class _StoreCall(Request):
    """A call to a collection's store, tried again after transient failures."""

    collection: Collection[Any]

    @abstractmethod
    def _call(self, backend: Backend[Any]) -> Any: ...

    @abstractmethod
    async def _acall(self, backend: Backend[Any]) -> Any: ...

    def run(self) -> Any:
        backend = self.collection.backend
        return call_with_retries(
            lambda: self._call(backend), self.collection.retry, what=backend.name
        )

    async def arun(self) -> Any:
        backend = self.collection.backend
        return await acall_with_retries(
            lambda: self._acall(backend),
            self.collection.retry,
            what=backend.name,
            attempt_timeout=backend.attempt_timeout,
        )


@dataclass(frozen=True)
class Search(_StoreCall):
    args: SearchArgs

    def _call(self, backend: Backend[Any]) -> Any:
        return backend.search(self.args)

    async def _acall(self, backend: Backend[Any]) -> Any:
        return await backend.asearch(self.args)


@dataclass(frozen=True)
class Fetch(_StoreCall):
    ids: list[str]
    where: Filter | None = None
    """Every filter in force (see ``Backend.fetch``)."""

    def _call(self, backend: Backend[Any]) -> Any:
        return backend.fetch(self.ids, self.where)

    async def _acall(self, backend: Backend[Any]) -> Any:
        return await backend.afetch(self.ids, self.where)


@dataclass(frozen=True)
class FetchVectors(_StoreCall):
    ids: list[str]

    def _call(self, backend: Backend[Any]) -> Any:
        return backend.fetch_vectors(self.ids)

    async def _acall(self, backend: Backend[Any]) -> Any:
        return await backend.afetch_vectors(self.ids)


@dataclass(frozen=True)
class SearchEach(Request):
    """Every collection's search stage: inline, or fanned out, each within its timeout."""

    fan: Fan
    stages: Sequence[tuple[Stage[Any], Callable[[], Pipeline[Found[Any]]]]]

    def run(self) -> list[Outcome[Any]]:
        if self.fan.inline:
            return [_inline(stage, make) for stage, make in self.stages]
        assert self.fan.pool is not None
        jobs = [_job(stage, make, awaited=False) for stage, make in self.stages]
        return fan_out(jobs, self.fan.pool, fail_fast=self.fan.fail_fast)

    async def arun(self) -> list[Outcome[Any]]:
        if self.fan.inline:
            return [await _ainline(stage, make) for stage, make in self.stages]
        assert self.fan.pool is not None
        jobs = [_job(stage, make, awaited=True) for stage, make in self.stages]
        return await afan_out(jobs, self.fan.pool, fail_fast=self.fan.fail_fast)


def _job(stage: Stage[Any], make: Callable[[], Pipeline[Found[Any]]], *, awaited: bool) -> Job[Any]:
    """A collection's search in a fan-out, within its timeout; awaited where the call is
    and its store has a usable async client, else run in the pool."""
    collection = stage.collection
    timeout = collection.timeout
    asearch = None
    if awaited and not collection.backend.threaded:
        asearch = functools.partial(_adrive_within, make, timeout)
    return Job(collection.name, stage.floor, timeout, _driven_within(make, timeout), asearch)


def _driven_within(make: Callable[[], Pipeline[R]], timeout: float | None) -> Callable[[], R]:
    """:func:`_drive_within` for a thread of the pool, which does not see the caller's
    context: the caller's own deadline (a search made by a search) is carried to it."""
    return functools.partial(_drive_within, make, timeout, current_deadline())


def _drive_within(
    make: Callable[[], Pipeline[R]], timeout: float | None, outer: float | None = None
) -> R:
    """``make()``'s pipeline driven with blocking calls, its store calls retried only while a
    retry can begin within ``timeout`` and before ``outer`` (see
    :func:`~thresholded.retry.retry_deadline`)."""
    with retry_deadline(timeout, outer=outer):
        return drive(make())


async def _adrive_within(make: Callable[[], Pipeline[R]], timeout: float | None) -> R:
    """Async :func:`_drive_within`."""
    with retry_deadline(timeout):
        return await adrive(make())


def _inline(stage: Stage[Any], make: Callable[[], Pipeline[Found[Any]]]) -> Outcome[Any]:
    """One collection's search in the caller's thread: its errors are raised as they are.
    Within a deadline (``Collection.timeout``) it runs in a thread of its own, which the
    call stops waiting for when the deadline passes: the collection has timed out."""
    timeout = stage.collection.timeout
    if timeout is None:
        return _ok_inline(stage, drive(make()))
    future = _in_thread(make, timeout)
    done, _ = wait([future], timeout=timeout)
    if not done:
        future.cancel()
        return _timed_out_inline(stage, timeout)
    return _ok_inline(stage, future.result())  # the store's own error is raised as it is


async def _ainline(stage: Stage[Any], make: Callable[[], Pipeline[Found[Any]]]) -> Outcome[Any]:
    """Async ``_inline``: the search is awaited, within the collection's deadline. A store
    without a usable async client (``Backend.threaded``: its async calls may block the event
    loop, where no deadline can stop them) is searched in a thread of its own, as in a sync
    call and in an async fan-out, so that the deadline holds."""
    timeout = stage.collection.timeout
    if timeout is None:
        return _ok_inline(stage, await adrive(make()))
    if stage.collection.backend.threaded:
        return await _ain_thread(stage, make, timeout)
    try:
        found = await within_deadline(_adrive_within(make, timeout), timeout)
    except DeadlinePassed:  # the store's own timeout is raised as it is
        return _timed_out_inline(stage, timeout)
    return _ok_inline(stage, found)


async def _ain_thread(
    stage: Stage[Any], make: Callable[[], Pipeline[Found[Any]]], timeout: float
) -> Outcome[Any]:
    """The search driven with blocking calls in a thread of its own, awaited until the
    deadline: the collection has timed out when it passes."""
    future = asyncio.wrap_future(_in_thread(make, timeout))
    try:
        done, _ = await asyncio.wait({future}, timeout=timeout)
    finally:
        if not future.done():
            future.cancel()
    if not done:
        return _timed_out_inline(stage, timeout)
    return _ok_inline(stage, future.result())  # the store's own error is raised as it is


def _in_thread(make: Callable[[], Pipeline[Found[Any]]], timeout: float) -> Future[Found[Any]]:
    """``make()``'s pipeline driven with blocking calls in a daemon thread, which sees the
    caller's context (callbacks and spans), within ``timeout`` (:func:`_drive_within`); a
    caller that stops waiting leaves it to end."""
    future: Future[Found[Any]] = Future()

    def search() -> None:
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(_drive_within(make, timeout))
            except BaseException as exc:  # handed to the caller, raised there
                future.set_exception(exc)

    context = contextvars.copy_context()
    threading.Thread(
        target=context.run, args=(search,), name="thresholded-search", daemon=True
    ).start()
    return future


def _ok_inline(stage: Stage[Any], found: Found[Any]) -> Outcome[Any]:
    return Outcome(stage.collection.name, "ok", found.latency_ms, stage.floor, found=found)


def _timed_out_inline(stage: Stage[Any], timeout: float) -> Outcome[Any]:
    """A timed-out status; with no collection answering, the merge raises
    ``CollectionSearchError``: an empty result would read as "nothing matched"."""
    collection = stage.collection
    job: Job[Any] = Job(collection.name or collection.backend.name, stage.floor, timeout, _never)
    return timed_out(job)


def _never() -> Found[Any]:  # pragma: no cover - a timed-out job is never run
    raise AssertionError("not run")


@dataclass(frozen=True)
class AttachEach(Request):
    """Every collection's attachment walk; in a fan-out, a failure is kept, not raised."""

    fan: Fan
    walks: Sequence[tuple[Collection[Any], Callable[[], Pipeline[list[Candidate[Any]]]]]]

    def run(self) -> dict[str, list[Candidate[Any]] | BaseException]:
        if self.fan.inline:
            return {c.name: drive(make()) for c, make in self.walks}
        assert self.fan.pool is not None
        return call_each(
            {c.name: (_driven_within(make, c.timeout), c.timeout) for c, make in self.walks},
            self.fan.pool,
        )

    async def arun(self) -> dict[str, list[Candidate[Any]] | BaseException]:
        if self.fan.inline:
            return {c.name: await adrive(make()) for c, make in self.walks}
        return await acall_each(
            {c.name: (lambda c=c, m=make: self._aone(c, m), None) for c, make in self.walks}
        )

    async def _aone(
        self, collection: Collection[Any], make: Callable[[], Pipeline[list[Candidate[Any]]]]
    ) -> list[Candidate[Any]]:
        """One collection's walk within its timeout: awaited where its store has an async
        client; else in the pool, its deadline running from when it starts there."""
        timeout = collection.timeout
        if not collection.backend.threaded:
            return await asyncio.wait_for(_adrive_within(make, timeout), timeout)
        assert self.fan.pool is not None
        try:
            return await arun_in(self.fan.pool, _driven_within(make, timeout), timeout)
        except DeadlinePassed:
            raise TimeoutError from None  # as a sync walk's deadline reads
