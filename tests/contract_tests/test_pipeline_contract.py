"""The pipeline's contract, held by every retriever: both adapters, single and
multi-collection, sync and async, on in-memory stores and on Milvus Lite.

Each variant runs the same fixture (``conftest.py``) and must keep, attach and drop
exactly the same sections for the same reasons. A multi-collection variant runs the
fixture as its only collection.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from contract_data import (
    ATTACHED,
    DIM,
    DROPPED,
    KEPT,
    POLICY,
    QUESTION,
    FixedEmbedding,
    FixedEmbeddings,
    Fixture,
    langchain_docstore,
    langchain_documents,
    llama_index,
)
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.callbacks import CallbackManager, CBEventType, LlamaDebugHandler
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.base import BaseEvent
from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler
from llama_index.core.vector_stores import SimpleVectorStore
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters
from pydantic import PrivateAttr

import langchain_thresholded as lc
import llama_index_thresholded as li
from thresholded import SearchUnavailableError
from thresholded.fanout import CollectionSearchError

VARIANTS = [
    (framework, shape, mode)
    for framework in ("llama_index", "langchain")
    for shape in ("single", "multi")
    for mode in ("sync", "async")
]


def variant_id(v: tuple[str, str, str]) -> str:
    return "-".join(v)


@dataclass(frozen=True)
class Outcome:
    kept: list[str]
    attached: list[str]
    dropped: dict[str, str]
    report: Any


def build(fixture: Any, framework: str, shape: str, **settings: Any) -> Any:
    """A retriever of the variant over the fixture (multi: as its only collection)."""
    extra = settings.pop("extra_collection", None)
    timeout = settings.pop("timeout", None)
    fail_fast = settings.pop("fail_fast", False)
    if framework == "llama_index":
        common = {"neighbours": 1, "parent_levels": 1, "pushdown": False, **settings}
        if shape == "single":
            return li.ThresholdedRetriever(fixture.llama_index, POLICY, **common)
        specs = [li.CollectionSpec(fixture.llama_index, name="kb")]
        if extra is not None:
            specs.append(li.CollectionSpec(extra, name="extra", metric="COSINE"))
        return li.MultiCollectionRetriever(
            specs, POLICY, timeout=timeout, fail_fast=fail_fast, **common
        )
    callback_manager = settings.pop("callback_manager", None)
    assert callback_manager is None
    settings.pop("pushdown", None)  # LangChain has no range-search pushdown
    single = lc.ThresholdedRetriever(
        vectorstore=fixture.langchain_store,
        policy=POLICY,
        docstore=fixture.langchain_docstore,
        neighbours=1,
        parent_summaries=True,
        **settings,
    )
    if shape == "single":
        return single
    specs = [lc.CollectionSpec(retriever=single, name="kb")]
    if extra is not None:
        specs.append(lc.CollectionSpec(retriever=extra, name="extra"))
    return lc.MultiCollectionRetriever(
        collections=specs, policy=POLICY, timeout=timeout, fail_fast=fail_fast
    )


def report_of(retriever: Any, mode: str, **kwargs: Any) -> Any:
    if mode == "sync":
        return retriever.retrieve_with_report(QUESTION, **kwargs)
    return asyncio.run(retriever.aretrieve_with_report(QUESTION, **kwargs))


def outcome(framework: str, report: Any) -> Outcome:
    if framework == "llama_index":
        kept = [n.node.node_id for n in report.kept]
        attached = [n.node.node_id for n in report.attached]
    else:
        kept = [d.id for d in report.kept]
        attached = [d.id for d in report.attached]
    dropped = {d.id: d.reason.value for d in report.dropped}
    return Outcome(kept, attached, dropped, report)


def run(fixture: Any, variant: tuple[str, str, str], **settings: Any) -> Outcome:
    framework, shape, mode = variant
    return outcome(framework, report_of(build(fixture, framework, shape, **settings), mode))


# The rules ----------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_floor_cap_budget_top_k_and_attachments(fixture, variant):
    result = run(fixture, variant)
    assert result.kept == KEPT
    assert result.attached == ATTACHED
    assert result.dropped == DROPPED
    assert result.report.min_similarity == POLICY.min_similarity


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_pushdown_keeps_and_attaches_the_same(fixture, variant):
    result = run(fixture, variant, pushdown=True)
    assert (result.kept, result.attached) == (KEPT, ATTACHED)
    # what the engine dropped never came back; what came back was dropped for the same reason
    assert result.dropped.items() <= DROPPED.items()


@pytest.fixture(scope="module")
def cosine_index(tmp_path_factory: pytest.TempPathFactory) -> VectorStoreIndex:
    """The fixture's sections in a Milvus Lite collection under COSINE, where a LlamaIndex
    retriever pushes its floor down as a range search (under IP it never does)."""
    pytest.importorskip("pymilvus")
    from llama_index_thresholded.milvus import milvus_store

    path = tmp_path_factory.mktemp("cosine") / "cosine.db"
    return llama_index(milvus_store(str(path), "contract", dim=DIM, metric="COSINE"))


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v[0] == "llama_index"], ids=variant_id)
def test_a_floor_pushed_down_keeps_and_attaches_the_same(cosine_index, variant):
    """With the floor pushed into Milvus, nothing below it comes back to be reported, and
    the same sections are kept, attached and dropped above it as without the pushdown."""
    fixture = Fixture("milvus-cosine", cosine_index, None, None)
    pushed = run(fixture, variant, pushdown=True)
    unpushed = run(fixture, variant, pushdown=False)
    assert (
        (pushed.kept, pushed.attached)
        == (unpushed.kept, unpushed.attached)
        == (
            KEPT,
            ATTACHED,
        )
    )
    assert unpushed.dropped == DROPPED
    above = {i: reason for i, reason in DROPPED.items() if reason != "below_threshold"}
    assert pushed.dropped == above  # "n0", exactly at the floor, still came back


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_every_variant_keeps_what_the_first_keeps(fixture, variant):
    baseline = run(fixture, VARIANTS[0])
    result = run(fixture, variant)
    assert (result.kept, result.attached, result.dropped) == (
        baseline.kept,
        baseline.attached,
        baseline.dropped,
    )


# One call's policy -----------------------------------------------------------------------------
ONE_PER_SOURCE = {"max_per_source": 1, "max_chars": 10_000, "over_fetch": 4}


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_every_variant_takes_the_same_per_call_policy(fixture, variant):
    """The same names replace the same fields for one call, in every variant: the cap, the
    budget and the over-fetch one by one, or the whole policy; the retriever is unchanged."""
    framework, shape, mode = variant
    retriever = build(fixture, framework, shape)
    one_each = outcome(framework, report_of(retriever, mode, **ONE_PER_SOURCE))
    assert one_each.kept == ["g1", "f1", "n0"]
    whole = POLICY.model_copy(update=ONE_PER_SOURCE)
    assert outcome(framework, report_of(retriever, mode, policy=whole)).kept == one_each.kept
    assert outcome(framework, report_of(retriever, mode)).kept == KEPT


def build_without_own_floor(fixture: Any, framework: str, shape: str) -> Any:
    """A retriever of the variant whose collection brings no policy of its own (multi: a
    bare index or store), so that the global policy, a call's included, sets its floor."""
    if shape == "single":
        return build(fixture, framework, shape)
    if framework == "llama_index":
        spec = li.CollectionSpec(fixture.llama_index, name="kb")
        return li.MultiCollectionRetriever([spec], POLICY, neighbours=0, parent_summaries=False)
    spec = lc.CollectionSpec(store=fixture.langchain_store, name="kb")
    return lc.MultiCollectionRetriever(collections=[spec], policy=POLICY)


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_a_calls_policy_sets_the_floor_of_a_collection_without_its_own(fixture, variant):
    """A call's ``policy`` replaces the global one, whose floor is that of every collection
    that brings none: the same sections clear it in every variant."""
    framework, shape, mode = variant
    retriever = build_without_own_floor(fixture, framework, shape)
    strict = POLICY.model_copy(update={"min_similarity": 0.8})
    result = outcome(framework, report_of(retriever, mode, policy=strict))
    assert result.kept == ["g1", "g2"]
    assert result.dropped["f2"] == "below_threshold"
    assert result.report.min_similarity == 0.8
    assert outcome(framework, report_of(retriever, mode)).kept == KEPT


# Filters -------------------------------------------------------------------------------------
def in_form(framework: str, condition: str, key: str, value: str) -> Any:
    """``key == value`` (condition "==") or ``key != value`` ("!="), in the framework's form."""
    if framework == "llama_index":
        operator = FilterOperator.EQ if condition == "==" else FilterOperator.NE
        return MetadataFilters(filters=[MetadataFilter(key=key, value=value, operator=operator)])
    return {key: {"$eq" if condition == "==" else "$ne": value}}


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_the_retriever_and_call_filters_both_hold_in_every_variant(fixture, variant):
    framework, shape, mode = variant
    retriever = build(
        fixture, framework, shape, filters=in_form(framework, "!=", "source", "notes")
    )
    report = report_of(retriever, mode, filters=in_form(framework, "!=", "source", "faq"))
    result = outcome(framework, report)
    assert result.kept == ["g1", "g2"]
    assert result.attached == ["guide#summary", "g0", "g3"]
    sources = {item_source(framework, item) for item in report_items(framework, report)}
    assert sources == {"guide"}
    unfiltered = outcome(framework, report_of(retriever, "sync", filters=None))
    assert "n0" not in unfiltered.kept + unfiltered.attached + list(unfiltered.dropped)


def item_source(framework: str, item: Any) -> str:
    return item.node.metadata["source"] if framework == "llama_index" else item.metadata["source"]


def report_items(framework: str, report: Any) -> list[Any]:
    return list(report.items)


# Retries --------------------------------------------------------------------------------------
_SEARCHES = (
    "query",
    "aquery",
    "similarity_search_with_score_by_vector",
    "asimilarity_search_with_score_by_vector",
)


def fail_first_search(monkeypatch: pytest.MonkeyPatch, store: Any, failures: int = 1) -> Counter:
    """The store's searches raise ConnectionError (transient) ``failures`` times, then answer."""
    calls: Counter = Counter()
    targets = [(type(store), name) for name in _SEARCHES]
    # a dense Milvus search under IP or L2 goes to the client, to keep the stored vectors
    for client in ("client", "aclient"):
        if _is_milvus_client(getattr(store, client, None)):
            targets.append((type(getattr(store, client)), "search"))
    for cls, name in targets:
        original = getattr(cls, name, None)
        if original is None:
            continue
        if asyncio.iscoroutinefunction(original):

            async def wrapper(self, *a, _original=original, **k):
                if calls["failed"] < failures:
                    calls["failed"] += 1
                    raise ConnectionError("connection refused")
                return await _original(self, *a, **k)

        else:

            def wrapper(self, *a, _original=original, **k):
                if calls["failed"] < failures:
                    calls["failed"] += 1
                    raise ConnectionError("connection refused")
                return _original(self, *a, **k)

        monkeypatch.setattr(cls, name, wrapper)
    return calls


def _is_milvus_client(client: Any) -> bool:
    return type(client).__name__ in ("MilvusClient", "AsyncMilvusClient")


def store_of(fixture: Any, framework: str) -> Any:
    return (
        fixture.llama_index.vector_store if framework == "llama_index" else fixture.langchain_store
    )


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_a_transient_failure_is_retried_in_every_variant(fixture, variant, monkeypatch):
    calls = fail_first_search(monkeypatch, store_of(fixture, variant[0]))
    result = run(fixture, variant, max_retries=1, retry_backoff=0.0)
    assert (result.kept, result.attached, result.dropped) == (KEPT, ATTACHED, DROPPED)
    assert calls["failed"] == 1  # one attempt failed, the retry answered


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v[1] == "multi"], ids=variant_id)
def test_a_collection_that_comes_back_within_its_retries_is_no_failure_under_fail_fast(
    fixture, variant, monkeypatch
):
    """A member retried as it is alone answers in the fan-out too: ``fail_fast=True`` finds
    nothing to raise, and the call reports every collection ``ok``."""
    calls = fail_first_search(monkeypatch, store_of(fixture, variant[0]))
    result = run(fixture, variant, max_retries=1, retry_backoff=0.0, fail_fast=True)
    assert (result.kept, result.attached, result.dropped) == (KEPT, ATTACHED, DROPPED)
    assert calls["failed"] == 1
    assert not result.report.partial
    assert result.report.status("kb").status == "ok"


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_when_the_attempts_run_out_the_cause_is_search_unavailable(fixture, variant, monkeypatch):
    fail_first_search(monkeypatch, store_of(fixture, variant[0]), failures=10)
    framework, shape, mode = variant
    retriever = build(fixture, framework, shape, max_retries=1, retry_backoff=0.0)
    if shape == "single":
        with pytest.raises(SearchUnavailableError, match="2 attempts"):
            report_of(retriever, mode)
        return
    with pytest.raises(CollectionSearchError, match="every collection failed") as raised:
        report_of(retriever, mode)
    (status,) = raised.value.statuses
    assert status.status == "failed"
    assert isinstance(status.exception, SearchUnavailableError)
    assert "2 attempts" in str(status.exception)  # the member's retries, then no more


# A member that times out ----------------------------------------------------------------------
# A search that must time out hangs until the test ends (never less than any timeout, however
# loaded the machine); one that must answer has a timeout far above what it takes.
HANG = 30.0
"""The longest a hanging search waits for the test to release it."""


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set when the test ends: the searches still hanging then return."""
    event = threading.Event()
    yield event
    event.set()


async def hang_async(release: threading.Event) -> None:
    """Wait for ``release`` without blocking the event loop (cancelled at the timeout)."""
    deadline = time.monotonic() + HANG
    while not release.is_set() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


class SlowSimpleStore(SimpleVectorStore):
    """Answers once the test releases it."""

    _release: threading.Event = PrivateAttr(default_factory=threading.Event)

    def query(self, query: Any, **kwargs: Any) -> Any:
        self._release.wait(HANG)
        return super().query(query, **kwargs)

    async def aquery(self, query: Any, **kwargs: Any) -> Any:
        await hang_async(self._release)
        return super().query(query, **kwargs)


class SlowMemoryStore(InMemoryVectorStore):
    _release: threading.Event

    def similarity_search_with_score_by_vector(self, embedding: Any, k: int = 4, **kwargs: Any):
        self._release.wait(HANG)
        return super().similarity_search_with_score_by_vector(embedding, k, **kwargs)


def slow_collection(framework: str, release: threading.Event) -> Any:
    if framework == "llama_index":
        store = SlowSimpleStore()
        store._release = release
        storage = StorageContext.from_defaults(vector_store=store)
        return VectorStoreIndex([], storage_context=storage, embed_model=FixedEmbedding())
    memory = SlowMemoryStore(FixedEmbeddings())
    memory._release = release
    return lc.ThresholdedRetriever(vectorstore=memory, policy=POLICY)


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v[1] == "multi"], ids=variant_id)
def test_a_member_that_times_out_leaves_the_others(fixture, variant, release):
    """The extra collection hangs past the timeout; "kb", held to the same timeout, answers
    well within it (searched once before, so that a cold store's first search, Milvus
    Lite's, is not what is timed)."""
    framework, shape, mode = variant
    report_of(build(fixture, framework, shape), mode)
    extra = slow_collection(framework, release)
    retriever = build(fixture, framework, shape, extra_collection=extra, timeout=1.5)
    result = outcome(framework, report_of(retriever, mode))
    assert (result.kept, result.attached, result.dropped) == (KEPT, ATTACHED, DROPPED)
    assert result.report.partial
    assert result.report.status("extra").status == "timeout"
    assert result.report.status("kb").status == "ok"


class BlockingSimpleStore(SimpleVectorStore):
    """Its async query blocks the event loop, as LlamaIndex's default ``aquery`` does."""

    _release: threading.Event = PrivateAttr(default_factory=threading.Event)

    def query(self, query: Any, **kwargs: Any) -> Any:
        self._release.wait(HANG)
        return super().query(query, **kwargs)

    async def aquery(self, query: Any, **kwargs: Any) -> Any:
        return self.query(query, **kwargs)


class BlockingMemoryStore(InMemoryVectorStore):
    """Its async search blocks the event loop."""

    _release: threading.Event

    def similarity_search_with_score_by_vector(self, embedding: Any, k: int = 4, **kwargs: Any):
        self._release.wait(HANG)
        return super().similarity_search_with_score_by_vector(embedding, k, **kwargs)

    async def asimilarity_search_with_score_by_vector(self, embedding: Any, k: int = 4, **kw: Any):
        return self.similarity_search_with_score_by_vector(embedding, k, **kw)


def blocking_retriever(framework: str, timeout: float, release: threading.Event) -> Any:
    if framework == "llama_index":
        store = BlockingSimpleStore()
        store._release = release
        storage = StorageContext.from_defaults(vector_store=store)
        index = VectorStoreIndex([], storage_context=storage, embed_model=FixedEmbedding())
        return li.ThresholdedRetriever(index, POLICY, metric="COSINE", timeout=timeout)
    memory = BlockingMemoryStore(FixedEmbeddings())
    memory._release = release
    return lc.ThresholdedRetriever(vectorstore=memory, policy=POLICY, timeout=timeout)


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v[1] == "single"], ids=variant_id)
def test_a_search_that_blocks_past_the_timeout_times_out_sync_and_async(variant, release):
    """A store whose async search blocks the event loop (LlamaIndex's default ``aquery``
    runs the sync query) is held to the retriever's timeout as in a sync call: the call
    raises at the deadline, rather than return the late answer (which comes only once the
    test ends)."""
    framework, _shape, mode = variant
    retriever = blocking_retriever(framework, timeout=0.3, release=release)
    start = time.perf_counter()
    with pytest.raises(CollectionSearchError, match="timeout") as raised:
        report_of(retriever, mode)
    assert time.perf_counter() - start < HANG / 6  # the deadline, not the answer
    (status,) = raised.value.statuses
    assert status.status == "timeout"


SEARCH = 1.0
"""How long a steady store takes to answer a search."""
TIMEOUT = 1.6
"""Far above one search (0.6 s to spare, for a loaded machine), below two (0.4 s short)."""


class SteadySimpleStore(SimpleVectorStore):
    """Answers every search after ``SEARCH`` seconds."""

    def query(self, query: Any, **kwargs: Any) -> Any:
        time.sleep(SEARCH)
        return super().query(query, **kwargs)

    async def aquery(self, query: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(SEARCH)
        return super().query(query, **kwargs)


class SteadyMemoryStore(InMemoryVectorStore):
    def similarity_search_with_score_by_vector(self, embedding: Any, k: int = 4, **kwargs: Any):
        time.sleep(SEARCH)
        return super().similarity_search_with_score_by_vector(embedding, k, **kwargs)


def steady_retriever(framework: str, shape: str, timeout: float) -> Any:
    """A retriever of the variant over the contract's sections, in a store that answers every
    search after ``SEARCH`` seconds."""
    if framework == "llama_index":
        index = llama_index(SteadySimpleStore())
        common = {"neighbours": 1, "parent_levels": 1, "pushdown": False, "timeout": timeout}
        if shape == "single":
            return li.ThresholdedRetriever(index, POLICY, metric="COSINE", **common)
        spec = li.CollectionSpec(index, name="kb", metric="COSINE")
        return li.MultiCollectionRetriever([spec], POLICY, **common)
    documents = langchain_documents()
    store = SteadyMemoryStore(FixedEmbeddings())
    store.add_documents(documents, ids=[d.id for d in documents])
    single = lc.ThresholdedRetriever(
        vectorstore=store,
        policy=POLICY,
        docstore=langchain_docstore(documents),
        neighbours=1,
        parent_summaries=True,
        timeout=timeout,
    )
    if shape == "single":
        return single
    spec = lc.CollectionSpec(retriever=single, name="kb")
    return lc.MultiCollectionRetriever(collections=[spec], policy=POLICY)


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_concurrent_calls_sharing_a_retriever_are_each_held_to_their_own_timeout(variant):
    """Four calls at once, each search answering in ``SEARCH`` seconds, within a timeout of
    ``TIMEOUT``: every call keeps what one call keeps, as a single retriever does. A
    multi-collection retriever's searches wait for a thread of its pool (two per
    collection): that wait (a search, for the last two) is not the collection's, and does
    not count against its timeout (with it, they would take two searches: past it)."""
    framework, shape, mode = variant
    retriever = steady_retriever(framework, shape, timeout=TIMEOUT)
    calls = 4
    if mode == "sync":
        with ThreadPoolExecutor(calls) as callers:
            reports = list(callers.map(lambda _: report_of(retriever, "sync"), range(calls)))
    else:

        async def together() -> list[Any]:
            return await asyncio.gather(
                *(retriever.aretrieve_with_report(QUESTION) for _ in range(calls))
            )

        reports = asyncio.run(together())
    for report in reports:
        result = outcome(framework, report)
        assert (result.kept, result.attached, result.dropped) == (KEPT, ATTACHED, DROPPED)
        assert not getattr(report, "partial", False)


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v[1] == "multi"], ids=variant_id)
def test_a_closed_multi_collection_retriever_searches_again(fixture, variant):
    """``close()`` (or the end of a ``with`` block) shuts the thread pool down; the next call
    searches with a new one, in both adapters, rather than fail in one of them."""
    framework, shape, mode = variant
    retriever = build(fixture, framework, shape)
    retriever.close()
    result = outcome(framework, report_of(retriever, mode))
    assert (result.kept, result.attached, result.dropped) == (KEPT, ATTACHED, DROPPED)
    retriever.close()


# What the stores hand out -----------------------------------------------------------------------
def held_by_the_stores(fixture: Any) -> dict[str, Any]:
    """A deep copy of what the fixture's stores and docstores hold, as a caller could see it."""
    import copy

    held = {
        "llama_index docstore": {
            i: node.model_dump() for i, node in fixture.llama_index.docstore.docs.items()
        },
        "langchain docstore": {
            i: (d.page_content, d.metadata) for i, d in fixture.langchain_docstore.store.items()
        },
    }
    if isinstance(fixture.langchain_store, InMemoryVectorStore):
        held["langchain store"] = fixture.langchain_store.store
    return copy.deepcopy(held)


def stored_objects(fixture: Any) -> list[Any]:
    """The objects the in-memory stores and docstores keep, and would hand out as they are."""
    return [
        *fixture.llama_index.docstore.docs.values(),
        *fixture.langchain_docstore.store.values(),
    ]


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_what_the_stores_return_is_never_marked_in_place(fixture, variant):
    """Every variant returns copies: the sections kept and attached carry the call's marks
    (similarity, role), and a caller may write to them, while what the stores and docstores
    hold (and hand out to the next call) stays as it was."""
    framework, shape, mode = variant
    before = held_by_the_stores(fixture)
    report = report_of(build(fixture, framework, shape), mode)
    items = [n.node if framework == "llama_index" else n for n in report.items]
    assert {id(item) for item in items}.isdisjoint(id(o) for o in stored_objects(fixture))
    assert held_by_the_stores(fixture) == before
    for item in items:
        item.metadata["written-by-caller"] = True
    assert held_by_the_stores(fixture) == before
    again = outcome(framework, report_of(build(fixture, framework, shape), mode))
    assert (again.kept, again.attached, again.dropped) == (KEPT, ATTACHED, DROPPED)


class HandingOutStore(SimpleVectorStore):
    """Keeps the text, and hands out the very node objects it holds (as a store that keeps
    them in memory may): anything that marks a result in place marks what it holds."""

    stores_text: bool = True
    _held: dict[str, Any] = PrivateAttr(default_factory=dict)

    def add(self, nodes: Any, **kwargs: Any) -> list[str]:
        self._held.update((n.node_id, n) for n in nodes)
        return super().add(nodes, **kwargs)

    def query(self, query: Any, **kwargs: Any) -> Any:
        from llama_index.core.vector_stores.types import VectorStoreQueryResult

        result = super().query(query, **kwargs)
        ids = result.ids or []
        return VectorStoreQueryResult(
            nodes=[self._held[i] for i in ids], similarities=result.similarities, ids=ids
        )

    def get_nodes(self, node_ids: Any = None, filters: Any = None, **kwargs: Any) -> list[Any]:
        return [self._held[i] for i in node_ids or [] if i in self._held]


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v[0] == "llama_index"], ids=variant_id)
def test_a_llama_index_store_s_own_nodes_are_never_marked_in_place(variant):
    """The same over a LlamaIndex store that hands out the nodes it holds: its sections, kept
    or attached as neighbours, are returned as copies, and stay as they were."""
    _framework, shape, mode = variant
    store = HandingOutStore()
    index = llama_index(store)
    before = {i: n.model_dump() for i, n in store._held.items()}
    common = {"neighbours": 1, "parent_levels": 1, "pushdown": False}
    if shape == "single":
        retriever = li.ThresholdedRetriever(index, POLICY, metric="COSINE", **common)
    else:
        spec = li.CollectionSpec(index, name="kb", metric="COSINE")
        retriever = li.MultiCollectionRetriever([spec], POLICY, **common)
    report = report_of(retriever, mode)
    result = outcome("llama_index", report)
    assert (result.kept, result.attached, result.dropped) == (KEPT, ATTACHED, DROPPED)
    held = {id(n) for n in store._held.values()}
    assert held.isdisjoint(id(n.node) for n in report.items)
    for item in report.items:
        item.node.metadata["written-by-caller"] = True
    assert {i: n.model_dump() for i, n in store._held.items()} == before


@pytest.mark.parametrize("call", ["retrieve", "retrieve_with_report"])
@pytest.mark.parametrize("variant", [v for v in VARIANTS if v[0] == "llama_index"], ids=variant_id)
def test_no_llama_index_variant_searches_through_a_vector_retriever(
    fixture, variant, call, monkeypatch
):
    """Every LlamaIndex variant searches its store itself: it builds no
    ``VectorIndexRetriever`` for a call, and calls no vector retriever's ``_retrieve``."""
    from llama_index.core.indices.vector_store.retrievers.retriever import VectorIndexRetriever

    framework, shape, mode = variant
    retriever = build(fixture, framework, shape)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a call went through a VectorIndexRetriever")

    for name in ("__init__", "_retrieve", "_aretrieve"):
        monkeypatch.setattr(VectorIndexRetriever, name, refuse)
    result = CALLS[call](retriever, mode)
    nodes = result.items if call == "retrieve_with_report" else result
    assert [n.node.node_id for n in nodes] == KEPT + ATTACHED


# Events, exactly once -------------------------------------------------------------------------
class Selections(BaseEventHandler):
    _events: list[Any] = PrivateAttr(default_factory=list)
    _names: Counter = PrivateAttr(default_factory=Counter)

    @classmethod
    def class_name(cls) -> str:
        return "Selections"

    def handle(self, event: Any, **kwargs: Any) -> None:
        self._names[type(event).__name__] += 1
        if isinstance(event, li.ThresholdSelectionEvent):
            self._events.append(event)


class LangChainEvents(BaseCallbackHandler):
    def __init__(self) -> None:
        self.counts: Counter = Counter()

    def on_retriever_start(self, *args: Any, **kwargs: Any) -> None:
        self.counts["start"] += 1

    def on_retriever_end(self, *args: Any, **kwargs: Any) -> None:
        self.counts["end"] += 1

    def on_custom_event(self, name: str, *args: Any, **kwargs: Any) -> None:
        self.counts[name] += 1


@pytest.fixture
def instrumentation():
    root = get_dispatcher()
    spans, selections = SimpleSpanHandler(), Selections()
    root.add_span_handler(spans)
    root.add_event_handler(selections)
    yield spans, selections
    root.span_handlers.remove(spans)
    root.event_handlers.remove(selections)


CALLS: dict[str, Callable[[Any, str], Any]] = {
    "retrieve": lambda r, mode: (
        r.retrieve(QUESTION) if mode == "sync" else asyncio.run(r.aretrieve(QUESTION))
    ),
    "retrieve_with_report": lambda r, mode: report_of(r, mode),
}


@pytest.mark.parametrize("call", list(CALLS))
@pytest.mark.parametrize("variant", [v for v in VARIANTS if v[0] == "llama_index"], ids=variant_id)
def test_llama_index_events_exactly_once(fixture, variant, call, instrumentation):
    spans, selections = instrumentation
    debug = LlamaDebugHandler()
    framework, shape, mode = variant
    retriever = build(fixture, framework, shape, callback_manager=CallbackManager([debug]))
    CALLS[call](retriever, mode)
    assert len(debug.get_event_pairs(CBEventType.RETRIEVE)) == 1
    _start, end = debug.get_event_pairs(CBEventType.RETRIEVE)[0]
    assert {d["id"] for d in end.payload["thresholded_dropped"]} == set(DROPPED)
    ours = [s for s in spans.completed_spans if "Retriever." in s.id_]
    assert len(ours) == 1, [s.id_ for s in ours]
    assert len(selections._events) == 1
    assert selections._names["RetrievalStartEvent"] == selections._names["RetrievalEndEvent"] == 1


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v[0] == "langchain"], ids=variant_id)
def test_langchain_events_exactly_once(fixture, variant):
    framework, shape, mode = variant
    handler = LangChainEvents()
    retriever = build(fixture, framework, shape)
    config = {"callbacks": [handler]}
    if mode == "sync":
        retriever.invoke(QUESTION, config)
    else:
        asyncio.run(retriever.ainvoke(QUESTION, config))
    assert handler.counts == Counter({"start": 1, "end": 1, lc.EVENT_NAME: 1})


class LangChainSelections(BaseCallbackHandler):
    def __init__(self) -> None:
        self.data: list[dict[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, *args: Any, **kwargs: Any) -> None:
        self.data.append(data)


def event_data(framework: str, retriever: Any, mode: str, selections: Selections) -> tuple:
    """The selection event's data of one ``retrieve_with_report`` call, and its report."""
    if framework == "llama_index":
        report = report_of(retriever, mode)
        (event,) = selections._events
        own = set(li.ThresholdSelectionEvent.model_fields) - set(BaseEvent.model_fields)
        data = {name: getattr(event, name) for name in own}
        return {
            k: v for k, v in data.items() if v is not None or k not in ("collections", "partial")
        }, report
    handler = LangChainSelections()
    report = report_of(retriever, mode, config={"callbacks": [handler]})
    (data,) = handler.data
    return data, report


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_the_selection_event_is_the_calls_report_named_alike_in_both_adapters(
    fixture, variant, instrumentation
):
    """One event per call, its data the report's of the same call, key for key: the same
    kept, attached and dropped sections, and the same ``stage`` for the same retriever in
    both adapters (a multi-collection retriever's said ``retriever`` in LlamaIndex's)."""
    framework, shape, mode = variant
    data, report = event_data(framework, build(fixture, framework, shape), mode, instrumentation[1])
    assert data["stage"] == {"single": "retriever", "multi": "multi_collection"}[shape]
    assert data == report.to_event_data()
    assert [k["id"] for k in data["kept"]] == KEPT
    assert [a["id"] for a in data["attached"]] == ATTACHED
    assert {d["id"]: d["reason"] for d in data["dropped"]} == DROPPED


def test_a_langchain_collection_named_by_uri_keeps_the_same(fixture):
    if fixture.kind != "milvus":
        pytest.skip("a collection named by URI lives on Milvus")
    spec = lc.CollectionSpec(uri=fixture.langchain_uri, collection_name="contract", name="kb")
    retriever = lc.MultiCollectionRetriever(
        collections=[spec], policy=POLICY, embeddings=FixedEmbeddings()
    )
    report = retriever.retrieve_with_report(QUESTION)
    assert [d.id for d in report.kept] == KEPT  # no docstore given: nothing attached
    assert report.attached == ()
    assert {d.id: d.reason.value for d in report.dropped} == DROPPED


def test_a_llama_index_collection_named_by_uri_keeps_the_same(fixture):
    """The README gives both adapters "the same CollectionSpec (... or a Milvus uri and
    collection_name)"; LlamaIndex's took a store only: "unexpected keyword arguments 'uri',
    'collection_name'"."""
    if fixture.kind != "milvus":
        pytest.skip("a collection named by URI lives on Milvus")
    uri = fixture.llama_index.vector_store.uri
    spec = li.CollectionSpec(uri=uri, collection_name="contract", name="kb")
    retriever = li.MultiCollectionRetriever([spec], POLICY, embed_model=FixedEmbedding())
    report = retriever.retrieve_with_report(QUESTION)
    assert [n.node.node_id for n in report.kept] == KEPT
    assert {d.id: d.reason.value for d in report.dropped} == DROPPED
    assert retriever.collection_names == ("kb",)


SPEC_STORES = {
    "langchain": (lc, lambda: InMemoryVectorStore(FixedEmbeddings())),
    "llama_index": (li, SimpleVectorStore),
}


@pytest.mark.parametrize("framework", SPEC_STORES)
def test_a_collection_spec_names_its_collection_one_way(framework):
    adapter, store = SPEC_STORES[framework]
    with pytest.raises(ValueError, match="exactly one of store="):
        adapter.CollectionSpec(name="x")
    with pytest.raises(ValueError, match="both uri and collection_name"):
        adapter.CollectionSpec(uri="kb.db")
    with pytest.raises(ValueError, match="db_name and token belong to a collection named by URI"):
        adapter.CollectionSpec(store(), db_name="faqs")


# The answer gate ------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_below_the_gate_every_variant_keeps_nothing(fixture, variant):
    framework, shape, mode = variant
    retriever = build(fixture, framework, shape)
    report = report_of(retriever, mode, min_top_similarity=0.9)  # the best is 0.875
    result = outcome(framework, report)
    assert (result.kept, result.attached) == ([], [])
    assert set(result.dropped.values()) == {"below_gate"}
    assert (report.best_similarity, report.gate) == (0.875, 0.9)
    assert report.nothing_matched
    assert report.selection.emptied_by == "gate"


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_at_the_gate_every_variant_keeps_what_the_floor_keeps(fixture, variant):
    framework, shape, mode = variant
    report = report_of(build(fixture, framework, shape), mode, min_top_similarity=0.875)
    result = outcome(framework, report)
    assert (result.kept, result.attached, result.dropped) == (KEPT, ATTACHED, DROPPED)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_node_ids_hold_for_attachments_too(fixture, mode):
    """A LlamaIndex retriever limited to some node ids returns no neighbour or summary
    outside them: they are held back, neither named nor counted."""
    allowed = ["g1", "g2", "g3", "f1", "f2"]
    retriever = li.ThresholdedRetriever(
        fixture.llama_index,
        POLICY,
        neighbours=1,
        parent_levels=1,
        pushdown=False,
        node_ids=allowed,
    )
    report = report_of(retriever, mode)
    returned = [n.node.node_id for n in report.items]
    assert returned and set(returned) <= set(allowed)
    assert report.outside_filters == 0  # g0, f3 and both summaries: held back
    assert not {d.id for d in report.dropped} - set(allowed)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_nothing_is_attached_through_a_section_outside_the_filters(fixture, mode):
    """f0 is f2's neighbour two away, through f1; f1 is outside the node ids, so the walk
    stops there and f0, though allowed, is not attached: the call excluded the link."""
    retriever = li.ThresholdedRetriever(
        fixture.llama_index, POLICY, neighbours=2, pushdown=False, node_ids=["g1", "g2", "f2", "f0"]
    )
    report = report_of(retriever, mode)
    assert [n.node.node_id for n in report.kept] == ["g1", "g2", "f2"]
    assert [n.node.node_id for n in report.attached] == []  # g0, f1 and f3 are outside
    assert report.outside_filters == 0  # held back: not counted
