"""Scores as cosines: metric conversion, the checks that refuse wrong vectors, pass-through."""

from __future__ import annotations

import logging

import pytest
from llama_index.core.schema import QueryBundle

from llama_index_thresholded import ThresholdedRetriever
from thresholded.errors import (
    DimensionMismatchError,
    NotUnitVectorError,
    UnsupportedMetricError,
)
from thresholded.scores import Metric, ScoreKind
from thresholded.selection import DropReason

COSINES = [0.95, 0.6, 0.2, -0.1, -0.7]
ROTATED = "rotated question"  # a unit query that is not e0: cosines no longer trivial


def nodes(kit):
    return [kit.section(f"n{i}", c, axis=1 + i) for i, c in enumerate(COSINES)]


def milvus_index(kit, uri, collection, metric):
    store = kit.milvus_store(uri, collection, dim=kit.DIM, metric=metric)
    rotated = kit.vec(0.6, axis=6)  # 0.6·e0 + 0.8·e6
    return kit.build_index(nodes(kit), kit.embedding({ROTATED: rotated}), store=store)


def test_l2_scores_are_converted_to_the_same_cosines_as_ip(kit, milvus_uri):
    by_metric = {}
    for metric in ("IP", "L2"):
        index = milvus_index(kit, milvus_uri, f"c_{metric.lower()}", metric)
        retriever = ThresholdedRetriever(index, kit.policy(min_similarity=0.0, top_k=5))
        assert retriever.metric is Metric(metric)
        by_metric[metric] = {
            question: {
                n.node.node_id: n.score
                for n in retriever.retrieve_with_report(question, top_k=5).kept
            }
            for question in (kit.QUESTION, ROTATED)
        }
    assert by_metric["IP"][kit.QUESTION] == pytest.approx(
        {f"n{i}": c for i, c in enumerate(COSINES)}, abs=1e-6
    )
    for question in (kit.QUESTION, ROTATED):
        ip, l2 = by_metric["IP"][question], by_metric["L2"][question]
        assert set(ip) == set(l2) == {f"n{i}" for i in range(5)}
        for node_id, score in ip.items():
            assert l2[node_id] == pytest.approx(score, abs=1e-5)
    # the rotated question's cosines are the true ones, not the raw L2 distances
    rotated = kit.vec(0.6, axis=6)
    expected = {f"n{i}": kit.cosine(rotated, n.embedding) for i, n in enumerate(nodes(kit))}
    assert by_metric["L2"][ROTATED] == pytest.approx(expected, abs=1e-5)


def test_l2_floor_is_applied_to_the_converted_cosine(kit, milvus_uri):
    index = milvus_index(kit, milvus_uri, "c_l2", "L2")
    retriever = ThresholdedRetriever(index, kit.policy(min_similarity=0.5, top_k=5))
    report = retriever.retrieve_with_report(kit.QUESTION)
    # raw squared L2 distances of n0/n1 are 0.1 and 0.8: read as scores, both would fail
    assert [n.node.node_id for n in report.kept] == ["n0", "n1"]


def test_a_store_the_scoring_module_does_not_know_needs_a_metric(kit):
    index = kit.build_index(nodes(kit), kit.embedding(), store=kit.SpyStore())
    with pytest.raises(UnsupportedMetricError, match="SpyStore") as err:
        ThresholdedRetriever(index, kit.policy(min_similarity=0.5))
    assert "metric=" in str(err.value)
    given = ThresholdedRetriever(index, kit.policy(min_similarity=0.5), metric="cosine")
    assert given.metric is Metric.COSINE
    assert [n.node.node_id for n in given.retrieve(kit.QUESTION)] == ["n0", "n1"]


def test_a_non_unit_query_vector_with_ip_is_refused(kit, milvus_uri):
    loud = [2.0 * x for x in kit.E0]
    index = kit.build_index(
        nodes(kit),
        kit.embedding({"loud question": loud}),
        store=kit.milvus_store(milvus_uri, "c", dim=kit.DIM),
    )
    retriever = ThresholdedRetriever(index, kit.policy(min_similarity=0.5))
    with pytest.raises(NotUnitVectorError, match=r"norm 2\.0000"):
        retriever.retrieve("loud question")
    with pytest.raises(NotUnitVectorError):
        retriever.retrieve(QueryBundle(query_str="precomputed", embedding=loud))
    # a unit vector is fine on the same retriever
    assert [n.node.node_id for n in retriever.retrieve(kit.QUESTION)] == ["n0", "n1"]


def test_a_non_unit_query_vector_is_fine_where_the_store_ranks_by_cosine(kit):
    loud = [3.0 * x for x in kit.E0]
    index = kit.build_index(nodes(kit), kit.embedding({"loud question": loud}))
    retriever = ThresholdedRetriever(index, kit.policy(min_similarity=0.5), neighbours=0)
    assert retriever.metric is Metric.COSINE
    kept = retriever.retrieve("loud question")
    assert [n.node.node_id for n in kept] == ["n0", "n1"]
    assert kept[0].score == pytest.approx(0.95, abs=1e-9)


def test_a_query_of_another_dimension_names_both_dimensions(kit, milvus_uri):
    index = kit.build_index(
        nodes(kit),
        kit.embedding({"short question": [1.0, 0.0, 0.0, 0.0]}),
        store=kit.milvus_store(milvus_uri, "c", dim=kit.DIM),
    )
    retriever = ThresholdedRetriever(index, kit.policy(min_similarity=0.5))
    with pytest.raises(DimensionMismatchError) as err:
        retriever.retrieve("short question")
    message = str(err.value)
    assert "4 dimensions" in message
    assert "of 8" in message


@pytest.mark.parametrize("filled", ["before", "after"])
async def test_a_question_of_another_dimension_on_a_simple_store_names_both_dimensions(kit, filled):
    """On a SimpleVectorStore it was numpy's "shapes (4,) and (8,) not aligned", from the
    search; the store may be filled after the retriever was built."""
    short = {"short question": [1.0, 0.0, 0.0, 0.0]}
    index = kit.build_index(nodes(kit) if filled == "before" else [], kit.embedding(short))
    retriever = ThresholdedRetriever(index, kit.policy(min_similarity=0.5), metric="COSINE")
    if filled == "after":
        index.insert_nodes(nodes(kit))
    bundle = QueryBundle(kit.QUESTION, embedding=[1.0, 0.0, 0.0, 0.0])
    for question in (bundle, "short question"):
        with pytest.raises(DimensionMismatchError, match=r"has 4 dimensions but .* of 8"):
            retriever.retrieve(question)
        with pytest.raises(DimensionMismatchError, match=r"has 4 dimensions but .* of 8"):
            await retriever.aretrieve(question)
    assert [n.node.node_id for n in retriever.retrieve(kit.QUESTION)] == ["n0", "n1"]


@pytest.mark.parametrize("store", ["simple", "faiss"])
def test_a_query_of_another_dimension_names_both_dimensions_in_memory(kit, store):
    """LlamaIndex's default store (and FAISS) answered a question of another model with
    numpy's "shapes (4,) and (8,) not aligned" (FAISS: a bare AssertionError)."""
    vector_store = None
    if store == "faiss":
        faiss = pytest.importorskip("faiss")
        from llama_index.vector_stores.faiss import FaissVectorStore

        vector_store = FaissVectorStore(faiss_index=faiss.IndexFlatIP(kit.DIM))
    index = kit.build_index(
        nodes(kit),
        kit.embedding({"short question": [1.0, 0.0, 0.0, 0.0]}),
        store=vector_store,
    )
    retriever = ThresholdedRetriever(index, kit.policy(min_similarity=0.5), neighbours=0)
    with pytest.raises(DimensionMismatchError, match=r"4 dimensions.* of 8"):
        retriever.retrieve("short question")


@pytest.mark.parametrize("question", ["", "   ", "\n\t"])
async def test_an_empty_question_is_refused(kit, question):
    index = kit.build_index(nodes(kit), kit.embedding())
    retriever = ThresholdedRetriever(index, kit.policy(min_similarity=0.5))
    with pytest.raises(ValueError, match="empty"):
        retriever.retrieve(question)
    with pytest.raises(ValueError, match="empty"):
        retriever.retrieve_with_report(question)
    with pytest.raises(ValueError, match="empty"):
        await retriever.aretrieve(question)


def test_rrf_scores_pass_the_floor_untouched_with_one_info_line(kit, caplog):
    index = kit.build_index(nodes(kit), kit.embedding())
    retriever = ThresholdedRetriever(
        index, kit.policy(min_similarity=0.9, top_k=5), score_kind="rrf", neighbours=0
    )
    assert retriever.metric is None
    with caplog.at_level(logging.INFO):
        report = retriever.retrieve_with_report(kit.QUESTION)
    # 0.6 and below would fail a 0.9 cosine floor; RRF scores are not cosines
    assert [n.node.node_id for n in report.kept] == ["n0", "n1", "n2", "n3", "n4"]
    assert report.selection.dropped == ()
    assert [c.score_kind for c in report.selection.kept] == [ScoreKind.RRF] * 5
    assert report.selection.passed_through == (ScoreKind.RRF,)
    assert report.kept[0].node.metadata["score_kind"] == "rrf"
    assert "similarity" not in report.kept[0].node.metadata
    lines = [r for r in caplog.records if r.levelno == logging.INFO and "not applied" in r.message]
    assert len(lines) == 1
    assert "rrf" in lines[0].message


def test_hybrid_query_mode_passes_through_the_floor(kit, caplog):
    store = kit.SpyStore()
    index = kit.build_index(nodes(kit), kit.embedding(), store=store)
    # no metric=: hybrid scores are never read as cosines, so none is needed
    retriever = ThresholdedRetriever(
        index,
        kit.policy(min_similarity=0.9, top_k=5),
        vector_store_query_mode="hybrid",
        neighbours=0,
    )
    with caplog.at_level(logging.INFO):
        report = retriever.retrieve_with_report(kit.QUESTION)
    assert store.queries[-1].mode == "hybrid"
    assert [c.score_kind for c in report.selection.kept] == [ScoreKind.RRF] * 5
    assert report.selection.dropped == ()
    assert sum("not applied" in r.message for r in caplog.records) == 1


def test_hybrid_results_still_obey_the_cap_budget_and_top_k(kit):
    index = kit.build_index(nodes(kit), kit.embedding())
    retriever = ThresholdedRetriever(
        index, kit.policy(min_similarity=0.9, top_k=2), score_kind="rrf", neighbours=0
    )
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert [n.node.node_id for n in report.kept] == ["n0", "n1"]
    assert report.drop_counts() == {"beyond_top_k": 3}


@pytest.mark.parametrize("pushdown", [True, False])
def test_on_milvus_a_score_equal_to_the_floor_is_kept(kit, milvus_uri, pushdown):
    sections = [
        kit.section("above", 0.9),
        kit.section("equal", embedding=kit.HALF),  # with e0: exactly 0.5 in float32
        kit.section("below", -0.45, axis=2),
    ]
    # COSINE: a floor is pushed there (under IP it never is: see test_pushdown.py)
    store = kit.milvus_store(milvus_uri, "c", dim=kit.DIM, metric="COSINE")
    index = kit.build_index(sections, kit.embedding(), store=store)
    retriever = ThresholdedRetriever(
        index, kit.policy(min_similarity=0.5), neighbours=0, pushdown=pushdown
    )
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert [n.node.node_id for n in report.kept] == ["above", "equal"]
    assert report.kept[1].score == 0.5
    # the client-side floor decides: with the floor pushed to Milvus, "below" never comes
    # back; without it, it comes back and is dropped with its reason
    expected = {} if pushdown else {"below": DropReason.BELOW_THRESHOLD}
    assert {d.candidate.id: d.reason for d in report.selection.dropped} == expected
    # floor 0 is never pushed down: negative cosines are kept too
    everything = retriever.retrieve_with_report(kit.QUESTION, min_similarity=0.0)
    assert [n.node.node_id for n in everything.kept] == ["above", "equal", "below"]
    assert everything.kept[-1].score == pytest.approx(-0.45, abs=1e-6)


def test_store_uri_is_known_for_milvus_store_only(milvus_uri):
    from llama_index.core.vector_stores import SimpleVectorStore
    from llama_index.vector_stores.milvus import MilvusVectorStore

    from llama_index_thresholded.milvus import milvus_store
    from llama_index_thresholded.scoring import store_uri

    assert store_uri(milvus_store(milvus_uri, "kb", dim=4)) == milvus_uri
    assert store_uri(MilvusVectorStore(uri=milvus_uri, collection_name="plain", dim=4)) is None
    assert store_uri(SimpleVectorStore()) is None


@pytest.mark.parametrize("indexed", ["L2", "COSINE"])
def test_a_milvus_store_that_searches_with_another_metric_than_its_index_is_refused(
    kit, milvus_uri, indexed
):
    """A collection reopened with ``MilvusVectorStore(uri, name)`` (its ``similarity_metric``
    defaults to IP): Milvus Lite answers with the index's scores, so an L2 distance of 0 (the
    question itself) read as IP is a cosine of 0, below every floor, and the exact match
    would be dropped. ``milvus_store(..., metric="IP")`` refuses it before any retriever."""
    from llama_index.vector_stores.milvus import MilvusVectorStore

    milvus_index(kit, milvus_uri, "c", indexed)
    with pytest.raises(ValueError, match=rf"'c' is indexed with {indexed}, not metric='IP'"):
        kit.milvus_store(milvus_uri, "c", dim=kit.DIM, metric="IP")
    store = MilvusVectorStore(uri=milvus_uri, collection_name="c", dim=kit.DIM)
    index = kit.build_index([], kit.embedding(), store=store)
    with pytest.raises(UnsupportedMetricError) as err:
        ThresholdedRetriever(index, kit.policy(min_similarity=0.5))
    message = str(err.value)
    assert "similarity_metric='IP'" in message and f"indexed with {indexed}" in message
    assert f"similarity_metric={indexed!r}" in message and "existing_milvus_store" in message
    agreeing = kit.milvus_store(milvus_uri, "c", dim=kit.DIM, metric=indexed)
    retriever = ThresholdedRetriever(
        kit.build_index([], kit.embedding(), store=agreeing), kit.policy(min_similarity=0.5)
    )
    assert retriever.metric is Metric(indexed)
    assert [n.node.node_id for n in retriever.retrieve(kit.QUESTION)] == ["n0", "n1"]


def test_the_dimension_is_the_collections_not_the_one_a_reopening_store_declares(kit, milvus_uri):
    """``MilvusVectorStore(uri, name, dim=4)`` over an existing 8-dimensional collection: the
    collection's vectors are the truth, so its own questions are answered, and a question of
    another dimension names 8, not the 4 the store was given. ``milvus_store`` refuses it."""
    from llama_index.vector_stores.milvus import MilvusVectorStore

    milvus_index(kit, milvus_uri, "c", "IP")
    with pytest.raises(ValueError, match=r"'c' holds vectors of 8 dimensions, not dim=4"):
        kit.milvus_store(milvus_uri, "c", dim=4)
    reopened = MilvusVectorStore(uri=milvus_uri, collection_name="c", dim=4)
    embedding = kit.embedding({"short question": [1.0, 0.0, 0.0, 0.0]})
    index = kit.build_index([], embedding, store=reopened)
    retriever = ThresholdedRetriever(index, kit.policy(min_similarity=0.5))
    assert [n.node.node_id for n in retriever.retrieve(kit.QUESTION)] == ["n0", "n1"]
    with pytest.raises(DimensionMismatchError, match=r"4 dimensions.* of 8"):
        retriever.retrieve("short question")
