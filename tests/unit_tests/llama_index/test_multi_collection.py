"""MultiCollectionRetriever: per-collection floors, one merge, attachments, partial failure.

Every cosine is chosen (see conftest): the question is e0 and a section made with
``kit.section(id, cos)`` scores exactly ``cos`` (float32 in Milvus).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from typing import Any

import numpy as np
import pytest
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores import SimpleVectorStore
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters
from pydantic import PrivateAttr
from pymilvus import MilvusClient

from llama_index_thresholded import (
    CollectionSearchError,
    CollectionSpec,
    MultiCollectionRetriever,
    ThresholdedRetriever,
)
from llama_index_thresholded.multi_collection import COLLECTION_KEY, collection_of
from thresholded.errors import ModelMismatchError
from thresholded.selection import DropReason

LOGGER = "thresholded.engine"


def kept(report):
    return [(collection_of(n), n.node.node_id) for n in report.kept]


def reasons(report):
    return {
        f"{d.candidate.collection}/{d.candidate.id}": d.reason for d in report.selection.dropped
    }


class FailingStore(SimpleVectorStore):
    """A store whose every search fails."""

    def query(self, query, **kwargs):
        raise ConnectionError("store is down")


class BarrierStore(SimpleVectorStore):
    """A store whose search waits until all of its siblings are searching too."""

    _barrier: Any = PrivateAttr(default=None)

    def query(self, query, **kwargs):
        self._barrier.wait(timeout=10)
        return super().query(query, **kwargs)


class BlockingStore(SimpleVectorStore):
    """A store whose search hangs until the test releases it."""

    _release: Any = PrivateAttr(default=None)

    def query(self, query, **kwargs):
        self._release.wait(timeout=30)
        return super().query(query, **kwargs)


@pytest.fixture
def two(kit, tmp_path):
    """Collection a (Milvus Lite, COSINE) at 0.9 and 0.55; collection b at 0.8, 0.4 and 0.25."""
    uri = str(tmp_path / "multi.db")
    emb = kit.embedding()
    a = kit.build_index(
        [kit.section("a1", 0.9, source="A"), kit.section("a2", 0.55, axis=2, source="A")],
        emb,
        store=kit.milvus_store(uri, "a", dim=kit.DIM, metric="COSINE"),
    )
    b = kit.build_index(
        [
            kit.section("b1", 0.8, source="B"),
            kit.section("b2", 0.4, axis=2, source="B"),
            kit.section("b3", 0.25, axis=3, source="B"),
        ],
        emb,
        store=kit.milvus_store(uri, "b", dim=kit.DIM, metric="COSINE"),
    )
    return a, b


def floors(kit, a, b, fa=0.6, fb=0.3, **specs):
    return [
        CollectionSpec(a, policy=kit.policy(min_similarity=fa), **specs),
        CollectionSpec(b, policy=kit.policy(min_similarity=fb), **specs),
    ]


def test_a_retriever_as_a_collection_says_to_give_its_index(kit):
    """LangChain's takes a ready ``ThresholdedRetriever``; here it was refused without a
    word on what to give instead."""
    from llama_index_thresholded import ThresholdedRetriever

    index = kit.build_index([kit.section("a1", 0.9)], kit.embedding())
    retriever = ThresholdedRetriever(index, kit.policy(min_similarity=0.5))
    wanted = r"got \w+: give the index it searches.*CollectionSpec\(index, policy="
    for given in (retriever, index.as_retriever()):
        with pytest.raises(TypeError, match=wanted):
            MultiCollectionRetriever([given], policy=kit.policy(min_similarity=0.5))


def test_each_collection_is_cut_by_its_own_floor_then_merged_by_cosine(kit, two):
    a, b = two
    retriever = MultiCollectionRetriever(
        floors(kit, a, b), kit.policy(top_k=10), neighbours=0, pushdown=False
    )
    report = retriever.retrieve_with_report(kit.QUESTION)

    # a2 (0.55) clears b's floor but not its own collection's (0.6).
    assert kept(report) == [("a", "a1"), ("b", "b1"), ("b", "b2")]
    assert [n.score for n in report.kept] == pytest.approx([0.9, 0.8, 0.4])
    assert reasons(report) == {
        "a/a2": DropReason.BELOW_THRESHOLD,
        "b/b3": DropReason.BELOW_THRESHOLD,
    }
    assert retriever.floors == {"a": 0.6, "b": 0.3}
    assert report.min_similarity == 0.3
    assert [
        (s.name, s.status, s.returned, s.cleared_floor, s.kept) for s in report.collections
    ] == [
        ("a", "ok", 2, 1, 1),
        ("b", "ok", 3, 2, 2),
    ]
    assert not report.partial


def test_pushdown_gives_the_same_result_with_less_transfer(kit, two):
    a, b = two
    plain = MultiCollectionRetriever(floors(kit, a, b), kit.policy(), neighbours=0, pushdown=False)
    pushed = MultiCollectionRetriever(floors(kit, a, b), kit.policy(), neighbours=0)
    report = pushed.retrieve_with_report(kit.QUESTION)
    assert kept(report) == kept(plain.retrieve_with_report(kit.QUESTION))
    assert [(s.returned, s.pushdown) for s in report.collections] == [(1, True), (2, True)]


def test_the_global_cap_budget_and_top_k_apply_after_the_merge(kit, tmp_path):
    uri = str(tmp_path / "cap.db")
    emb = kit.embedding()
    a = kit.build_index(
        [
            kit.section("a1", 0.9, source="S", text="x" * 100),
            kit.section("a2", 0.8, axis=2, source="S", text="x" * 100),
        ],
        emb,
        store=kit.milvus_store(uri, "a", dim=kit.DIM, metric="COSINE"),
    )
    b = kit.build_index(
        [
            kit.section("b1", 0.85, source="S", text="y" * 100),
            kit.section("b2", 0.7, axis=2, source="T", text="y" * 300),
            kit.section("b3", 0.6, axis=3, source="U", text="y" * 100),
            kit.section("b4", 0.5, axis=4, source="V", text="y" * 100),
        ],
        emb,
        store=kit.milvus_store(uri, "b", dim=kit.DIM, metric="COSINE"),
    )
    policy = kit.policy(min_similarity=0.3, top_k=3, max_per_source=2, max_chars=400)
    retriever = MultiCollectionRetriever([a, b], policy, neighbours=0)
    report = retriever.retrieve_with_report(kit.QUESTION)

    # Source S is capped across collections; b2 would overflow the budget; b4 is beyond top_k.
    assert kept(report) == [("a", "a1"), ("b", "b1"), ("b", "b3")]
    assert reasons(report) == {
        "a/a2": DropReason.SOURCE_CAP,
        "b/b2": DropReason.BUDGET,
        "b/b4": DropReason.BEYOND_TOP_K,
    }


def test_retrieve_k_limits_what_one_collection_contributes(kit, two):
    a, b = two
    specs = [
        CollectionSpec(a, policy=kit.policy(min_similarity=0.3)),
        CollectionSpec(b, policy=kit.policy(min_similarity=0.3), retrieve_k=1),
    ]
    retriever = MultiCollectionRetriever(specs, kit.policy(top_k=10), neighbours=0)
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert kept(report) == [("a", "a1"), ("b", "b1"), ("a", "a2")]
    assert report.status("b").returned == 1


def test_the_question_is_embedded_once(kit, two):
    a, b = two
    emb = a._embed_model
    retriever = MultiCollectionRetriever(floors(kit, a, b), kit.policy(), neighbours=0)
    before = emb._calls.count(kit.QUESTION)
    retriever.retrieve(kit.QUESTION)
    assert emb._calls.count(kit.QUESTION) - before == 1


def test_sync_and_async_agree(kit, two):
    a, b = two
    retriever = MultiCollectionRetriever(floors(kit, a, b), kit.policy(), neighbours=0)
    sync = retriever.retrieve_with_report(kit.QUESTION)
    asynchronous = asyncio.run(retriever.aretrieve_with_report(kit.QUESTION))
    assert kept(sync) == kept(asynchronous) == [("a", "a1"), ("b", "b1"), ("b", "b2")]
    nodes = asyncio.run(retriever.aretrieve(kit.QUESTION))
    assert [n.node.node_id for n in nodes] == ["a1", "b1", "b2"]
    # Milvus Lite is searched in threads, even by async calls.
    assert all(c["threaded"] for c in retriever.to_dict()["collections"])


def _barrier_indexes(kit, n):
    barrier = threading.Barrier(n)
    indexes = []
    for i in range(n):
        store = BarrierStore()
        store._barrier = barrier
        indexes.append(
            CollectionSpec(
                kit.build_index([kit.section(f"s{i}", 0.5 + i / 10)], kit.embedding(), store=store),
                name=f"c{i}",
                metric="COSINE",
            )
        )
    return indexes


def test_collections_are_searched_concurrently(kit):
    specs = _barrier_indexes(kit, 4)
    retriever = MultiCollectionRetriever(
        specs, kit.policy(min_similarity=0.3), neighbours=0, max_workers=4
    )
    report = retriever.retrieve_with_report(kit.QUESTION)
    # Each search waited for all four to be running: a serial fan-out would fail them all.
    assert [s.status for s in report.collections] == ["ok"] * 4
    assert [n.node.node_id for n in report.kept] == ["s3", "s2", "s1", "s0"]


async def test_async_calls_search_concurrently_too(kit):
    specs = _barrier_indexes(kit, 3)
    retriever = MultiCollectionRetriever(specs, kit.policy(min_similarity=0.3), neighbours=0)
    report = await retriever.aretrieve_with_report(kit.QUESTION)
    assert [s.status for s in report.collections] == ["ok"] * 3


def test_a_failing_collection_leaves_the_others_results_and_one_warning(kit, two, caplog):
    a, b = two
    broken = kit.build_index([kit.section("x1", 0.99)], kit.embedding(), store=FailingStore())
    specs = [*floors(kit, a, b), CollectionSpec(broken, name="broken", metric="COSINE")]
    retriever = MultiCollectionRetriever(specs, kit.policy(min_similarity=0.3), neighbours=0)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        report = retriever.retrieve_with_report(kit.QUESTION)

    assert kept(report) == [("a", "a1"), ("b", "b1"), ("b", "b2")]
    assert report.partial
    status = report.status("broken")
    assert (status.status, status.returned, status.kept) == ("failed", 0, 0)
    assert status.error == (
        "SearchUnavailableError: FailingStore did not answer (1 attempt in 0.0 s): store is down"
    )
    assert isinstance(status.exception, ConnectionError)
    assert [s.name for s in report.failed] == ["broken"]
    warnings = [r for r in caplog.records if r.name == LOGGER]
    assert len(warnings) == 1
    assert "broken: failed" in warnings[0].getMessage()
    assert "broken: failed (SearchUnavailableError: FailingStore did not answer" in report.explain()


async def test_async_partial_failure(kit, two):
    a, b = two
    broken = kit.build_index([kit.section("x1", 0.99)], kit.embedding(), store=FailingStore())
    specs = [*floors(kit, a, b), CollectionSpec(broken, name="broken", metric="COSINE")]
    retriever = MultiCollectionRetriever(specs, kit.policy(min_similarity=0.3), neighbours=0)
    report = await retriever.aretrieve_with_report(kit.QUESTION)
    assert kept(report) == [("a", "a1"), ("b", "b1"), ("b", "b2")]
    assert report.status("broken").status == "failed"


def test_fail_fast_raises_naming_the_collection(kit, two):
    a, b = two
    broken = kit.build_index([kit.section("x1", 0.99)], kit.embedding(), store=FailingStore())
    specs = [*floors(kit, a, b), CollectionSpec(broken, name="broken", metric="COSINE")]
    retriever = MultiCollectionRetriever(
        specs, kit.policy(min_similarity=0.3), neighbours=0, fail_fast=True
    )
    with pytest.raises(CollectionSearchError, match="'broken' failed") as raised:
        retriever.retrieve(kit.QUESTION)
    assert isinstance(raised.value.__cause__, ConnectionError)
    assert [s.name for s in raised.value.statuses] == ["broken"]
    with pytest.raises(CollectionSearchError, match="'broken' failed"):
        asyncio.run(retriever.aretrieve(kit.QUESTION))


def test_nothing_found_while_a_collection_failed_is_an_error_not_i_dont_know(kit, two):
    # a's best (0.9) is below the gate, b's sections below its floor; "broken", which holds
    # a section at 0.99, was not searched: the empty result said "I don't know" for it too
    from llama_index.core.llms import MockLLM

    from llama_index_thresholded import AbstainingQueryEngine

    a, b = two
    broken = kit.build_index([kit.section("x1", 0.99)], kit.embedding(), store=FailingStore())
    specs = [*floors(kit, a, b, fb=0.85), CollectionSpec(broken, name="broken", metric="COSINE")]
    retriever = MultiCollectionRetriever(
        specs, kit.policy(min_similarity=0.3, min_top_similarity=0.95), neighbours=0, pushdown=False
    )
    unsure = r"nothing cleared the policy in 'a', 'b', but 'broken' failed"
    with pytest.raises(CollectionSearchError, match=unsure) as raised:
        retriever.retrieve_with_report(kit.QUESTION)
    assert [s.name for s in raised.value.statuses] == ["broken"]
    with pytest.raises(CollectionSearchError, match=unsure):
        asyncio.run(retriever.aretrieve(kit.QUESTION))
    engine = AbstainingQueryEngine.from_args(retriever, llm=MockLLM())
    with pytest.raises(CollectionSearchError, match=unsure):
        engine.query(kit.QUESTION)
    # what the collections that answered found still comes back, the failure in the report
    lower = retriever.retrieve_with_report(kit.QUESTION, min_top_similarity=0.5)
    assert kept(lower) == [("a", "a1")] and lower.partial


def test_when_every_collection_fails_the_call_raises(kit):
    specs = [
        CollectionSpec(
            kit.build_index([kit.section(f"x{i}", 0.9)], kit.embedding(), store=FailingStore()),
            name=f"down{i}",
            metric="COSINE",
        )
        for i in range(2)
    ]
    retriever = MultiCollectionRetriever(specs, kit.policy(min_similarity=0.3), neighbours=0)
    with pytest.raises(CollectionSearchError, match="every collection failed") as raised:
        retriever.retrieve(kit.QUESTION)
    assert [s.status for s in raised.value.statuses] == ["failed", "failed"]


@pytest.fixture
def hanging(kit):
    release = threading.Event()
    store = BlockingStore()
    store._release = release
    index = kit.build_index([kit.section("h1", 0.99)], kit.embedding(), store=store)
    yield CollectionSpec(index, name="slow", metric="COSINE", timeout=0.3)
    release.set()


def test_a_collection_that_times_out_is_reported_and_the_others_answer(kit, two, hanging, caplog):
    a, b = two
    retriever = MultiCollectionRetriever(
        [*floors(kit, a, b), hanging], kit.policy(min_similarity=0.3), neighbours=0
    )
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        report = retriever.retrieve_with_report(kit.QUESTION)
    assert kept(report) == [("a", "a1"), ("b", "b1"), ("b", "b2")]
    assert report.status("slow").status == "timeout"
    assert report.status("slow").latency_ms == pytest.approx(300)
    assert len([r for r in caplog.records if r.name == LOGGER]) == 1


async def test_async_timeout(kit, two, hanging):
    a, b = two
    retriever = MultiCollectionRetriever(
        [*floors(kit, a, b), hanging], kit.policy(min_similarity=0.3), neighbours=0
    )
    report = await retriever.aretrieve_with_report(kit.QUESTION)
    assert report.status("slow").status == "timeout"
    assert kept(report) == [("a", "a1"), ("b", "b1"), ("b", "b2")]


def test_fail_fast_raises_on_timeout(kit, two, hanging):
    a, b = two
    retriever = MultiCollectionRetriever(
        [*floors(kit, a, b), hanging], kit.policy(min_similarity=0.3), neighbours=0, fail_fast=True
    )
    with pytest.raises(CollectionSearchError, match="'slow' timed out"):
        retriever.retrieve(kit.QUESTION)


# Attachments ------------------------------------------------------------------------------


def _chain(kit, prefix, cosines, source):
    nodes = [
        kit.section(f"s{i}", c, axis=1 + i % 6, source=source, text=f"{prefix} section {i}")
        for i, c in enumerate(cosines)
    ]
    kit.link_chain(nodes)
    return nodes


def test_neighbours_come_from_the_collection_of_each_kept_section(kit):
    """Both collections use the ids s0..s4: the attachments must not be mixed up."""
    emb = kit.embedding()
    a = kit.build_index(_chain(kit, "A", [0.1, 0.9, 0.1, 0.2, 0.1], "A"), emb)
    b = kit.build_index(_chain(kit, "B", [0.1, 0.2, 0.1, 0.8, 0.45], "B"), emb)
    specs = [
        CollectionSpec(a, name="a", policy=kit.policy(min_similarity=0.5)),
        CollectionSpec(b, name="b", policy=kit.policy(min_similarity=0.5)),
    ]
    retriever = MultiCollectionRetriever(specs, kit.policy(top_k=5), neighbours=1)
    report = retriever.retrieve_with_report(kit.QUESTION)

    assert kept(report) == [("a", "s1"), ("b", "s3")]
    attached = [
        (
            n.node.metadata[COLLECTION_KEY],
            n.node.node_id,
            n.node.get_content(),
            n.node.metadata["attached_to"],
        )
        for n in report.attached
    ]
    assert attached == [
        ("a", "s0", "A section 0", "s1"),
        ("a", "s2", "A section 2", "s1"),
        ("b", "s2", "B section 2", "s3"),
        ("b", "s4", "B section 4", "s3"),
    ]
    assert [(s.name, s.kept, s.attached) for s in report.collections] == [
        ("a", 1, 2),
        ("b", 1, 2),
    ]
    # the collection mark is hidden from the LLM and the embedder
    node = report.kept[0].node
    assert COLLECTION_KEY in node.excluded_llm_metadata_keys
    assert COLLECTION_KEY in node.excluded_embed_metadata_keys


def test_attachments_only_for_sections_kept_after_the_merge(kit):
    emb = kit.embedding()
    a = kit.build_index(_chain(kit, "A", [0.9, 0.1, 0.1], "A"), emb)
    b = kit.build_index(_chain(kit, "B", [0.1, 0.8, 0.1], "B"), emb)
    specs = [
        CollectionSpec(a, name="a", policy=kit.policy(min_similarity=0.5)),
        CollectionSpec(b, name="b", policy=kit.policy(min_similarity=0.5)),
    ]
    # top_k=1: b's s1 cleared its floor but lost the merge; its neighbours are not fetched.
    retriever = MultiCollectionRetriever(specs, kit.policy(top_k=1), neighbours=1)
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert kept(report) == [("a", "s0")]
    assert [(n.node.metadata[COLLECTION_KEY], n.node.node_id) for n in report.attached] == [
        ("a", "s1")
    ]
    assert reasons(report)["b/s1"] is DropReason.BEYOND_TOP_K


async def test_async_attachments(kit):
    emb = kit.embedding()
    a = kit.build_index(_chain(kit, "A", [0.1, 0.9, 0.1], "A"), emb)
    retriever = MultiCollectionRetriever(
        [CollectionSpec(a, name="a")], kit.policy(min_similarity=0.5), neighbours=1
    )
    report = await retriever.aretrieve_with_report(kit.QUESTION)
    assert [n.node.node_id for n in report.items] == ["s1", "s0", "s2"]


def test_attachments_from_milvus_lite_collections(kit, tmp_path):
    uri = str(tmp_path / "att.db")
    emb = kit.embedding()
    a = kit.build_index(
        _chain(kit, "A", [0.1, 0.9, 0.1], "A"), emb, store=kit.milvus_store(uri, "a", dim=kit.DIM)
    )
    b = kit.build_index(
        _chain(kit, "B", [0.7, 0.1, 0.1], "B"), emb, store=kit.milvus_store(uri, "b", dim=kit.DIM)
    )
    retriever = MultiCollectionRetriever([a, b], kit.policy(min_similarity=0.5), neighbours=1)
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert kept(report) == [("a", "s1"), ("b", "s0")]
    assert [(n.node.metadata[COLLECTION_KEY], n.node.get_content()) for n in report.attached] == [
        ("a", "A section 0"),
        ("a", "A section 2"),
        ("b", "B section 1"),
    ]


# One model, the given collections only --------------------------------------------------


def test_collections_calibrated_for_different_models_are_refused(kit, two):
    a, b = two
    specs = [
        CollectionSpec(a, policy=kit.policy(min_similarity=0.5, embedding_model="test/hand-made")),
        CollectionSpec(b, policy=kit.policy(min_similarity=0.5, embedding_model="minilm@8")),
    ]
    with pytest.raises(ModelMismatchError, match=r"collection 'a'.*collection 'b'"):
        MultiCollectionRetriever(specs, kit.policy(), allow_model_mismatch=True)


def test_profiles_of_different_models_are_refused(kit, two, tmp_path):
    a, b = two
    paths = []
    for name, model in (("a", "test/hand-made@8"), ("b", "other/model@8")):
        path = tmp_path / f"{name}.json"
        profile = {"version": 1, "min_similarity": 0.4, "embedding_model": model}
        path.write_text(json.dumps({**profile, "collection": name}))
        paths.append(path)
    same = [CollectionSpec(a, profile=paths[0]), CollectionSpec(b, profile=paths[0])]
    with pytest.raises(Exception, match="measured for collection 'a', not 'b'"):
        MultiCollectionRetriever(same, kit.policy())
    mixed = [CollectionSpec(a, profile=paths[0]), CollectionSpec(b, profile=paths[1])]
    with pytest.raises(ModelMismatchError, match="other/model@8"):
        MultiCollectionRetriever(mixed, kit.policy(), allow_model_mismatch=True)


def test_the_same_model_under_two_spellings_is_one_model(kit, two):
    a, b = two
    specs = [
        CollectionSpec(a, policy=kit.policy(min_similarity=0.5, embedding_model="minilm")),
        CollectionSpec(
            b,
            policy=kit.policy(
                min_similarity=0.5, embedding_model="sentence-transformers/all-MiniLM-L6-v2@8"
            ),
        ),
    ]
    retriever = MultiCollectionRetriever(specs, kit.policy(), allow_model_mismatch=True)
    assert retriever.floors == {"a": 0.5, "b": 0.5}


def test_collections_of_different_dimensions_are_refused(kit, tmp_path):
    uri = str(tmp_path / "dims.db")
    emb = kit.embedding()
    a = kit.build_index([kit.section("a1", 0.9)], emb, store=kit.milvus_store(uri, "a", dim=8))
    store16 = kit.milvus_store(uri, "b", dim=16)
    with pytest.raises(ModelMismatchError, match="different dimensions"):
        MultiCollectionRetriever(
            [a, CollectionSpec(store16)], kit.policy(min_similarity=0.5), embed_model=emb
        )


def test_indexes_built_with_different_embedding_models_are_refused(kit):
    a = kit.build_index([kit.section("a1", 0.9)], kit.embedding())
    b = kit.build_index([kit.section("b1", 0.9)], kit.embedding(model_name="test/other"))
    with pytest.raises(ModelMismatchError, match="different embedding models"):
        MultiCollectionRetriever([a, b], kit.policy(min_similarity=0.5))


def test_indexes_built_with_two_unnamed_models_are_refused(kit):
    """The question is embedded once, by the first index's model. Index b was built by
    another model of the same dimension that names none: under it, b1 has cosine 1 with
    the question; a's question vector gives it 0, and the floor would drop it without a
    word."""
    model_a = kit.HandEmbedding(vectors={kit.QUESTION: kit.E0}, model_name="unknown")
    model_b = kit.HandEmbedding(vectors={kit.QUESTION: kit.E7}, model_name="unknown")
    a = kit.build_index([kit.section("a1", 0.75)], model_a)
    b = kit.build_index([kit.section("b1", embedding=kit.E7)], model_b)
    b1 = np.asarray(kit.E7)
    assert float(np.asarray(model_a.get_query_embedding(kit.QUESTION)) @ b1) == 0.0
    assert float(np.asarray(model_b.get_query_embedding(kit.QUESTION)) @ b1) == 1.0
    specs = [CollectionSpec(a, name="a"), CollectionSpec(b, name="b")]
    with pytest.raises(ModelMismatchError, match=r"collection 'b'.*naming no model.*embed_model="):
        MultiCollectionRetriever(specs, kit.policy(min_similarity=0.5))
    shared = kit.build_index([kit.section("b1", embedding=kit.E7)], model_a)
    one_model = [CollectionSpec(a, name="a"), CollectionSpec(shared, name="b")]
    assert MultiCollectionRetriever(one_model, kit.policy(min_similarity=0.5)).collection_names
    given = MultiCollectionRetriever(specs, kit.policy(min_similarity=0.5), embed_model=model_a)
    assert given.collection_names == ("a", "b")  # the model given embeds every collection


def test_a_bare_store_needs_the_embedding_model(kit, tmp_path):
    store = kit.milvus_store(str(tmp_path / "bare.db"), "bare", dim=kit.DIM)
    with pytest.raises(ValueError, match="embed_model"):
        MultiCollectionRetriever([store], kit.policy(min_similarity=0.5))
    retriever = MultiCollectionRetriever(
        [store], kit.policy(min_similarity=0.5), embed_model=kit.embedding()
    )
    assert retriever.collection_names == ("bare",)


def test_two_collections_of_the_same_name_need_names(kit, tmp_path):
    emb = kit.embedding()
    first = kit.milvus_store(str(tmp_path / "one.db"), "kb", dim=kit.DIM)
    second = kit.milvus_store(str(tmp_path / "two.db"), "kb", dim=kit.DIM)
    with pytest.raises(ValueError, match="named 'kb'"):
        MultiCollectionRetriever([first, second], kit.policy(min_similarity=0.5), embed_model=emb)
    named = [CollectionSpec(first, name="one"), CollectionSpec(second, name="two")]
    retriever = MultiCollectionRetriever(named, kit.policy(min_similarity=0.5), embed_model=emb)
    assert retriever.collection_names == ("one", "two")


def test_unnamed_stores_are_named_by_their_class_and_position_as_in_langchain(kit):
    """Two in-memory indexes name no collection: each is named as LangChain names an
    unnamed store, instead of both being refused as 'SimpleVectorStore'."""
    emb = kit.embedding()
    first = kit.build_index([kit.section("a1", 0.75)], emb)
    second = kit.build_index([kit.section("b1", 0.6)], emb)
    retriever = MultiCollectionRetriever([first, second], kit.policy(min_similarity=0.5))
    assert retriever.collection_names == ("SimpleVectorStore[0]", "SimpleVectorStore[1]")
    found = retriever.retrieve_with_report(kit.QUESTION)
    assert [n.node.metadata["source_collection"] for n in found.kept] == [
        "SimpleVectorStore[0]",
        "SimpleVectorStore[1]",
    ]


def test_the_same_name_twice_says_how_to_name_them(kit, tmp_path):
    emb = kit.embedding()
    first = kit.milvus_store(str(tmp_path / "one.db"), "kb", dim=kit.DIM)
    second = kit.milvus_store(str(tmp_path / "two.db"), "kb", dim=kit.DIM)
    with pytest.raises(ValueError, match=r"CollectionSpec\(store, name=\.\.\.\)"):
        MultiCollectionRetriever([first, second], kit.policy(min_similarity=0.5), embed_model=emb)


def test_only_the_given_collections_are_ever_searched(kit, tmp_path, monkeypatch):
    uri = str(tmp_path / "three.db")
    tricky = "search collection c3 instead; collection_name == 'c3'"
    emb = kit.embedding({tricky: kit.E0})
    indexes = {
        name: kit.build_index(
            [kit.section(f"{name}-1", 0.9, doc_type="public")],
            emb,
            store=kit.milvus_store(uri, name, dim=kit.DIM),
        )
        for name in ("c1", "c2", "c3")
    }
    searched = []
    original = MilvusClient.search

    def spy(client, *args, **kwargs):
        searched.append(kwargs.get("collection_name"))
        return original(client, *args, **kwargs)

    monkeypatch.setattr(MilvusClient, "search", spy)
    retriever = MultiCollectionRetriever(
        [indexes["c1"], indexes["c2"]], kit.policy(min_similarity=0.5), neighbours=0
    )
    by_text = retriever.retrieve_with_report(tricky)
    filters = MetadataFilters(
        filters=[
            MetadataFilter(key="doc_type", value="public"),
            MetadataFilter(key="collection_name", value="c3"),
        ],
        condition="or",
    )
    by_filter = retriever.retrieve_with_report(kit.QUESTION, filters=filters)
    assert set(searched) == {"c1", "c2"}
    assert kept(by_text) == kept(by_filter) == [("c1", "c1-1"), ("c2", "c2-1")]


def test_per_call_overrides(kit, two):
    a, b = two
    retriever = MultiCollectionRetriever(floors(kit, a, b), kit.policy(), neighbours=0)
    assert kept(retriever.retrieve_with_report(kit.QUESTION, top_k=1)) == [("a", "a1")]
    low = retriever.retrieve_with_report(kit.QUESTION, min_similarity=0.2, top_k=10)
    assert len(low.kept) == 5
    only_b1 = MetadataFilters(filters=[MetadataFilter(key="source", value="B")])
    assert kept(retriever.retrieve_with_report(kit.QUESTION, filters=only_b1)) == [
        ("b", "b1"),
        ("b", "b2"),
    ]
    # the retriever itself did not change
    assert kept(retriever.retrieve_with_report(kit.QUESTION)) == [
        ("a", "a1"),
        ("b", "b1"),
        ("b", "b2"),
    ]


def test_nodes_are_copies_and_the_sources_untouched(kit):
    node = kit.section("a1", 0.9)
    index = kit.build_index([node], kit.embedding())
    retriever = MultiCollectionRetriever(
        [CollectionSpec(index, name="a")], kit.policy(min_similarity=0.5)
    )
    result = retriever.retrieve(kit.QUESTION)[0]
    held = index.docstore.get_node("a1")
    assert result.node.metadata[COLLECTION_KEY] == "a"
    assert COLLECTION_KEY not in held.metadata
    assert isinstance(result.node, TextNode)


def test_a_single_collection_matches_the_thresholded_retriever(kit, two):
    a, _ = two
    policy = kit.policy(min_similarity=0.5, top_k=3)
    single = ThresholdedRetriever(a, policy, neighbours=0).retrieve(kit.QUESTION)
    multi = MultiCollectionRetriever([a], policy, neighbours=0).retrieve(kit.QUESTION)
    assert [(n.node.node_id, n.score) for n in multi] == [(n.node.node_id, n.score) for n in single]


class ClosingStore(SimpleVectorStore):
    """A store whose first search closes its retriever 0.2 s after it starts (the other
    searches wait for a thread by then), and answers once it is closed."""

    _retriever: Any = PrivateAttr(default=None)
    _closed: Any = PrivateAttr(default_factory=threading.Event)

    def query(self, query, **kwargs):
        if not self._closed.is_set():
            threading.Timer(0.2, self._close).start()
            self._closed.wait(timeout=10)
        return super().query(query, **kwargs)

    def _close(self) -> None:
        self._retriever.close()
        self._closed.set()


async def test_an_async_call_running_during_close_raises_an_error_naming_the_close(kit):
    """One thread, held by the first collection's search while ``close()`` runs: the other
    search, waiting for it, was cancelled, and the call raised a bare
    ``asyncio.CancelledError``, as if it had been cancelled itself. Calls after ``close()``
    search as before."""
    from thresholded.errors import RetrieverClosedError

    store = ClosingStore()
    held = kit.build_index([kit.section("h1", 0.9)], kit.embedding(), store=store)
    other = kit.build_index([kit.section("o1", 0.8)], kit.embedding())
    specs = [
        CollectionSpec(held, name="held", metric="COSINE"),
        CollectionSpec(other, name="other", metric="COSINE"),
    ]
    retriever = MultiCollectionRetriever(
        specs, kit.policy(min_similarity=0.3), neighbours=0, max_workers=1
    )
    store._retriever = retriever
    with pytest.raises(RetrieverClosedError, match="during this call"):
        await retriever.aretrieve(kit.QUESTION)
    report = await retriever.aretrieve_with_report(kit.QUESTION)
    assert kept(report) == [("held", "h1"), ("other", "o1")]
    retriever.close()
