"""ThresholdedRetriever's rules, one at a time and in order, on hand-made cosines."""

from __future__ import annotations

import math

import pytest
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

from llama_index_thresholded import MultiCollectionRetriever, ThresholdedRetriever
from thresholded.errors import UncalibratedModelError
from thresholded.policy import RetrievalPolicy
from thresholded.selection import DropReason


def ids(nodes):
    return [n.node.node_id for n in nodes]


def reasons(report):
    return {d.candidate.id: d.reason for d in report.selection.dropped}


@pytest.fixture
def five(kit):
    """Five sections of five sources at 0.9, 0.7, 0.5 (exact), 0.3 and -0.2."""
    nodes = [
        kit.section("a", 0.9, source="A"),
        kit.section("b", 0.7, axis=2, source="B"),
        kit.section("c", embedding=kit.HALF, source="C"),
        kit.section("d", 0.3, axis=3, source="D"),
        kit.section("e", -0.2, axis=4, source="E"),
    ]
    return kit.build_index(nodes, kit.embedding())


def test_floor_keeps_what_clears_it_and_drops_the_rest_below_threshold(kit, five):
    retriever = ThresholdedRetriever(five, kit.policy(min_similarity=0.6, top_k=5), neighbours=0)
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert ids(report.kept) == ["a", "b"]
    assert [n.score for n in report.kept] == pytest.approx([0.9, 0.7], abs=1e-9)
    assert reasons(report) == {
        "c": DropReason.BELOW_THRESHOLD,
        "d": DropReason.BELOW_THRESHOLD,
        "e": DropReason.BELOW_THRESHOLD,
    }
    assert report.drop_counts() == {"below_threshold": 3}
    assert report.min_similarity == 0.6


def test_a_score_equal_to_the_floor_is_kept(kit, five):
    retriever = ThresholdedRetriever(five, kit.policy(min_similarity=0.5, top_k=5), neighbours=0)
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert ids(report.kept) == ["a", "b", "c"]
    assert report.kept[-1].score == 0.5  # exactly: the dyadic vector
    just_above = retriever.retrieve_with_report(
        kit.QUESTION, min_similarity=math.nextafter(0.5, 1.0)
    )
    assert ids(just_above.kept) == ["a", "b"]
    assert reasons(just_above)["c"] is DropReason.BELOW_THRESHOLD


def test_floor_zero_keeps_everything_including_negative_cosines(kit, five):
    retriever = ThresholdedRetriever(five, kit.policy(min_similarity=0.0, top_k=5), neighbours=0)
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert ids(report.kept) == ["a", "b", "c", "d", "e"]
    assert report.kept[-1].score == pytest.approx(-0.2, abs=1e-9)
    assert report.selection.dropped == ()


def test_top_k_keeps_the_best_and_reports_the_rest_beyond_top_k(kit, five):
    retriever = ThresholdedRetriever(five, kit.policy(min_similarity=0.0, top_k=2), neighbours=0)
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert ids(report.kept) == ["a", "b"]
    # top_k=2 * over_fetch=3 = 6 asked for, 5 exist: all five were candidates
    assert reasons(report) == {c: DropReason.BEYOND_TOP_K for c in "cde"}


def test_per_source_cap_drops_the_third_section_of_a_source(kit):
    nodes = [
        kit.section("a1", 0.9, source="A"),
        kit.section("a2", 0.8, axis=2, source="A"),
        kit.section("a3", 0.7, axis=3, source="A"),
        kit.section("b1", 0.6, axis=4, source="B"),
    ]
    index = kit.build_index(nodes, kit.embedding())
    retriever = ThresholdedRetriever(
        index, kit.policy(min_similarity=0.5, max_per_source=2, top_k=4), neighbours=0
    )
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert ids(report.kept) == ["a1", "a2", "b1"]
    assert reasons(report) == {"a3": DropReason.SOURCE_CAP}


def test_per_source_cap_falls_back_to_the_document_when_source_is_missing(kit):
    nodes = [
        kit.section("x1", 0.9, source=None),
        kit.section("x2", 0.8, axis=2, source=None),
        kit.section("y1", 0.7, axis=3, source=None),
    ]
    for node, doc in zip(nodes, ["doc-x", "doc-x", "doc-y"], strict=True):
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=doc)
    index = kit.build_index(nodes, kit.embedding())
    retriever = ThresholdedRetriever(
        index, kit.policy(min_similarity=0.5, max_per_source=1), neighbours=0
    )
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert ids(report.kept) == ["x1", "y1"]
    assert reasons(report) == {"x2": DropReason.SOURCE_CAP}


def test_budget_skips_what_overflows_and_keeps_looking(kit):
    nodes = [
        kit.section("big", 0.9, text="x" * 60, source="A"),
        kit.section("bigger", 0.8, axis=2, text="y" * 50, source="B"),
        kit.section("small", 0.7, axis=3, text="z" * 40, source="C"),
    ]
    index = kit.build_index(nodes, kit.embedding())
    retriever = ThresholdedRetriever(
        index, kit.policy(min_similarity=0.5, max_chars=100), neighbours=0
    )
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert ids(report.kept) == ["big", "small"]
    assert reasons(report) == {"bigger": DropReason.BUDGET}


def test_rules_apply_in_order_floor_cap_budget_top_k(kit):
    """Each rule sees only what the previous one let through.

    ``a-low`` is below the floor, so it does not use up A's cap; ``a3`` is capped,
    so its long text does not eat the budget; ``b-long`` overflows the budget, so it
    does not take a top_k slot, which goes to ``c`` instead; ``d`` is beyond top_k.
    """
    nodes = [
        kit.section("a1", 0.95, text="a" * 10, source="A"),
        kit.section("a-low", 0.4, axis=2, text="a" * 10, source="A"),
        kit.section("a2", 0.9, axis=3, text="a" * 10, source="A"),
        kit.section("a3", 0.85, axis=4, text="a" * 500, source="A"),
        kit.section("b-long", 0.8, axis=5, text="b" * 95, source="B"),
        kit.section("c", 0.75, axis=6, text="c" * 10, source="C"),
        kit.section("d", 0.7, axis=1, text="d" * 10, source="D"),
    ]
    index = kit.build_index(nodes, kit.embedding())
    strict = RetrievalPolicy(
        min_similarity=0.5, top_k=3, over_fetch=3, max_per_source=2, max_chars=100
    )
    report = ThresholdedRetriever(index, strict, neighbours=0).retrieve_with_report(kit.QUESTION)
    assert ids(report.kept) == ["a1", "a2", "c"]
    assert reasons(report) == {
        "a-low": DropReason.BELOW_THRESHOLD,
        "a3": DropReason.SOURCE_CAP,
        "b-long": DropReason.BUDGET,
        "d": DropReason.BEYOND_TOP_K,
    }
    # the order in which the drops were decided is the order of the rules
    assert [d.reason for d in report.selection.dropped] == [
        DropReason.BELOW_THRESHOLD,
        DropReason.SOURCE_CAP,
        DropReason.BUDGET,
        DropReason.BEYOND_TOP_K,
    ]


def test_over_fetch_asks_the_store_for_top_k_times_over_fetch(kit):
    nodes = [kit.section(f"n{i}", 0.9 - i * 0.05, axis=1 + i % 6) for i in range(10)]
    store = kit.SpyStore()
    index = kit.build_index(nodes, kit.embedding(), store=store)
    retriever = ThresholdedRetriever(
        index,
        kit.policy(min_similarity=0.0, top_k=2, over_fetch=3),
        metric="COSINE",
        neighbours=0,
    )
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert [q.similarity_top_k for q in store.queries] == [6]
    candidates = len(report.selection.kept) + len(report.selection.dropped)
    assert candidates == 6
    assert ids(report.kept) == ["n0", "n1"]
    assert report.drop_counts() == {"beyond_top_k": 4}


def test_min_similarity_none_resolves_the_bge_m3_default(kit, five):
    bge = kit.embedding(model_name="BAAI/bge-m3")
    # the hand-made sections stand in for bge-m3's
    retriever = ThresholdedRetriever(
        five, RetrievalPolicy(), embed_model=bge, allow_model_mismatch=True
    )
    assert retriever.min_similarity == 0.35


def test_min_similarity_none_with_an_unknown_model_fails_at_construction(kit, five):
    unknown = kit.embedding(model_name="acme/encoder-v1")
    with pytest.raises(UncalibratedModelError, match="acme/encoder-v1"):
        ThresholdedRetriever(
            five, RetrievalPolicy(), embed_model=unknown, allow_model_mismatch=True
        )


def test_per_call_overrides_do_not_change_the_retriever(kit):
    nodes = [
        kit.section("a", 0.9, source="A", lang="en"),
        kit.section("b", 0.7, axis=2, source="B", lang="de"),
        kit.section("c", 0.4, axis=3, source="C", lang="en"),
    ]
    index = kit.build_index(nodes, kit.embedding())
    base = kit.policy(min_similarity=0.5, top_k=3)
    retriever = ThresholdedRetriever(index, base, neighbours=0)
    before = ids(retriever.retrieve(kit.QUESTION))
    assert before == ["a", "b"]

    lower = retriever.retrieve_with_report(kit.QUESTION, min_similarity=0.0)
    assert ids(lower.kept) == ["a", "b", "c"]
    assert lower.min_similarity == 0.0
    fewer = retriever.retrieve_with_report(kit.QUESTION, top_k=1)
    assert ids(fewer.kept) == ["a"]
    german = MetadataFilters(filters=[MetadataFilter(key="lang", value="de")])
    filtered = retriever.retrieve_with_report(kit.QUESTION, filters=german)
    assert ids(filtered.kept) == ["b"]
    assert {d.candidate.id for d in filtered.selection.dropped} == set()  # a, c never fetched

    assert retriever.policy == base
    assert retriever.min_similarity == 0.5
    assert ids(retriever.retrieve(kit.QUESTION)) == before


def test_retrieved_nodes_carry_similarity_and_score_kind_metadata(kit, five):
    retriever = ThresholdedRetriever(five, kit.policy(min_similarity=0.6), neighbours=0)
    first = retriever.retrieve(kit.QUESTION)[0]
    assert first.node.metadata["similarity"] == pytest.approx(0.9, abs=1e-9)
    assert first.node.metadata["score_kind"] == "cosine"
    # they describe retrieval, not content: hidden from the LLM and the embedder
    assert "similarity" in first.node.excluded_llm_metadata_keys
    assert "score_kind" in first.node.excluded_embed_metadata_keys


def test_allowed_filter_keys_given_as_a_string_is_refused(kit, five):
    """A string would be read as its characters: "doc_type" allowed the key "d", and refused
    "doc_type" itself."""
    with pytest.raises(TypeError, match=r"allowed_filter_keys=\['doc_type'\]"):
        ThresholdedRetriever(five, kit.policy(), allowed_filter_keys="doc_type")
    with pytest.raises(TypeError, match=r"allowed_filter_keys=\['doc_type'\]"):
        MultiCollectionRetriever([five], policy=kit.policy(), allowed_filter_keys="doc_type")
    listed = ThresholdedRetriever(
        five, kit.policy(min_similarity=0.5), allowed_filter_keys=["source"]
    )
    only_a = MetadataFilters(filters=[MetadataFilter(key="source", value="A")])
    assert ids(listed.retrieve_with_report(kit.QUESTION, filters=only_a).kept) == ["a"]


@pytest.mark.parametrize("name", ["parent_summaries", "pushdown", "allow_model_mismatch"])
@pytest.mark.parametrize("value", ["false", "no", 0, None])
def test_a_switch_that_is_not_a_bool_is_refused(kit, five, name, value):
    """``allow_model_mismatch="false"`` (a setting read from the environment) was truthy: it
    switched the model check off, where the postprocessor's pydantic read it as False."""
    with pytest.raises(TypeError, match=rf"{name} must be True or False, got {value!r}"):
        ThresholdedRetriever(five, kit.policy(min_similarity=0.5), **{name: value})
    with pytest.raises(TypeError, match=rf"{name} must be True or False, got {value!r}"):
        MultiCollectionRetriever([five], policy=kit.policy(min_similarity=0.5), **{name: value})
    with pytest.raises(TypeError, match=r"fail_fast must be True or False, got 'no'"):
        MultiCollectionRetriever([five], policy=kit.policy(min_similarity=0.5), fail_fast="no")


def test_max_workers_below_one_is_refused(kit, five):
    """0 was read as "the default", where the LangChain retriever refuses it."""
    with pytest.raises(ValueError, match="max_workers must be 1 or more, got 0"):
        MultiCollectionRetriever([five], policy=kit.policy(min_similarity=0.5), max_workers=0)


@pytest.mark.parametrize("given", ["store", "retriever", None])
def test_what_is_not_an_index_is_refused_with_what_to_do(kit, five, given):
    """An AttributeError on ``vector_store`` said nothing of what the retriever takes."""
    value = {"store": five.vector_store, "retriever": five.as_retriever(), None: None}[given]
    with pytest.raises(TypeError, match="searches a VectorStoreIndex") as err:
        ThresholdedRetriever(value, kit.policy(min_similarity=0.5))
    assert "ThresholdedRetriever.from_retriever(" in str(err.value)
    assert "VectorStoreIndex.from_vector_store(" in str(err.value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("neighbours", True),
        ("neighbours", "1"),
        ("parent_levels", 1.0),
        ("max_retries", True),
        ("retry_backoff", "0.5"),
        ("retry_backoff", True),
        ("timeout", "2"),
    ],
)
def test_a_setting_of_another_type_is_refused_not_converted(kit, five, name, value):
    """As in the LangChain retriever (``test_runnable.py``), whose pydantic fields raise a
    ``ValidationError``, a ``ValueError``: ``neighbours=True`` and ``timeout="2"`` are not
    read as 1 and 2.0. ``retry_backoff=True`` was read as one second, and
    ``retry_backoff="0.5"`` was refused as "backoff must be ...", a name the retriever
    does not take."""
    with pytest.raises((TypeError, ValueError), match=name):
        ThresholdedRetriever(five, kit.policy(min_similarity=0.5), **{name: value})
    with pytest.raises((TypeError, ValueError), match=name):
        MultiCollectionRetriever([five], policy=kit.policy(min_similarity=0.5), **{name: value})
