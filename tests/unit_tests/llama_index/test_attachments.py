"""Neighbours and parent summaries: attached after selection, for kept sections only.

The scenario: one document of 11 sections linked prev/next, four of which clear a
0.5 floor (0.9, 0.85, 0.8 and 0.7). LlamaIndex's own PrevNextNodePostprocessor
followed by SimilarityPostprocessor(0.5) loses the best of them; ours keeps all four.
"""

from __future__ import annotations

import copy

import pytest
from llama_index.core.postprocessor import PrevNextNodePostprocessor, SimilarityPostprocessor
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

from llama_index_thresholded import ThresholdedRetriever
from thresholded.selection import DropReason

SCORES = {
    "s0": 0.1,
    "s1": 0.2,
    "s2": 0.3,
    "s3": 0.4,
    "s4": 0.9,
    "s5": 0.85,
    "s6": 0.8,
    "s7": 0.45,
    "s8": 0.7,
    "s9": 0.35,
    "s10": 0.05,
}
ABOVE = ["s4", "s5", "s6", "s8"]  # in score order
SUMMARY = "manual#summary"


def ids(nodes):
    return [n.node.node_id for n in nodes]


def chain_nodes(kit):
    sections = [kit.section(i, c, axis=1 + n % 6) for n, (i, c) in enumerate(SCORES.items())]
    summary = TextNode(id_=SUMMARY, text="The manual: how the product works.")
    kit.link_chain(sections, summary)
    return sections, summary


@pytest.fixture
def chain(kit):
    """The chain on a SimpleVectorStore: sections and the summary in the docstore."""
    sections, summary = chain_nodes(kit)
    return kit.build_index(sections, kit.embedding(), docstore_nodes=[summary])


@pytest.fixture(params=["simple", "milvus"])
def any_chain(request, kit, tmp_path):
    """The chain on SimpleVectorStore (docstore) and on Milvus Lite (IP, stores text)."""
    sections, summary = chain_nodes(kit)
    store = None
    if request.param == "milvus":
        store = kit.milvus_store(str(tmp_path / "x.db"), "chain", dim=kit.DIM)
    return kit.build_index(sections, kit.embedding(), store=store, docstore_nodes=[summary])


def floor_policy(kit, **fields):
    return kit.policy(**{"min_similarity": 0.5, "top_k": 4, **fields})


def test_llama_index_prev_next_then_similarity_loses_the_best_sections(kit, chain):
    """The contrast: what LlamaIndex 0.14 really does with this pipeline."""
    retrieved = chain.as_retriever(similarity_top_k=4).retrieve(kit.QUESTION)
    assert ids(retrieved) == ABOVE

    prev_next = PrevNextNodePostprocessor(docstore=chain.docstore, num_nodes=1, mode="both")
    widened = prev_next.postprocess_nodes(retrieved)
    scores = {n.node.node_id: n.score for n in widened}
    # The neighbours fetched for s5 and s6 overwrite s4 and s5 with unscored copies.
    assert scores["s4"] is None
    assert scores["s5"] is None
    assert scores["s6"] == pytest.approx(0.8)
    assert scores["s8"] == pytest.approx(0.7)

    filtered = SimilarityPostprocessor(similarity_cutoff=0.5).postprocess_nodes(widened)
    # The two best sections (0.9 and 0.85) are deleted, and every neighbour with them.
    assert ids(filtered) == ["s6", "s8"]

    # Over-fetched, it is worse: every section above the floor is lost.
    everything = chain.as_retriever(similarity_top_k=11).retrieve(kit.QUESTION)
    assert (
        SimilarityPostprocessor(similarity_cutoff=0.5).postprocess_nodes(
            prev_next.postprocess_nodes(everything)
        )
        == []
    )


def test_thresholded_retriever_keeps_all_four_and_attaches_their_neighbours(kit, any_chain):
    # pushdown=False: Milvus' range search would not return the candidates below the
    # floor, and this test reads their drop reasons.
    retriever = ThresholdedRetriever(
        any_chain, floor_policy(kit), neighbours=1, parent_summaries=False, pushdown=False
    )
    report = retriever.retrieve_with_report(kit.QUESTION)

    assert ids(report.kept) == ABOVE
    assert [n.score for n in report.kept] == pytest.approx([0.9, 0.85, 0.8, 0.7], abs=1e-6)
    for node in report.kept:
        assert "attached_role" not in node.node.metadata
        assert node.node.metadata["similarity"] == pytest.approx(node.score)

    attached = {n.node.node_id: n for n in report.attached}
    assert {
        i: (n.node.metadata["attached_role"], n.node.metadata["attached_to"])
        for i, n in attached.items()
    } == {
        "s3": ("neighbour", "s4"),
        "s7": ("neighbour", "s6"),
        "s9": ("neighbour", "s8"),
    }
    assert all(n.score is None for n in report.attached)
    assert "similarity" not in attached["s3"].node.metadata

    # no duplicates, and a kept section is never replaced by its unscored copy
    every = ids(report.items)
    assert len(every) == len(set(every)) == 7
    assert report.items[:4] == list(report.kept)
    # the neighbours of dropped candidates (s0, s1, s2's and s10's) are not attached
    assert not {"s0", "s1", "s2", "s10"} & set(every)
    # below-floor candidates are dropped (on Milvus the engine may already drop them)
    assert {d.reason for d in report.selection.dropped} <= {DropReason.BELOW_THRESHOLD}


def test_retrieve_returns_kept_then_attached(kit, chain):
    retriever = ThresholdedRetriever(chain, floor_policy(kit), neighbours=1, parent_levels=1)
    nodes = retriever.retrieve(kit.QUESTION)
    assert ids(nodes) == [*ABOVE, SUMMARY, "s3", "s7", "s9"]  # per section: parent, prev, next
    assert [n.score is None for n in nodes] == [False] * 4 + [True] * 4


def test_a_neighbour_of_a_dropped_candidate_is_not_attached(kit, chain):
    # Only s4 is kept (top_k=1): s5 is dropped beyond top_k, so s6 (s5's neighbour,
    # and itself dropped) must not come back as an attachment.
    retriever = ThresholdedRetriever(
        chain, floor_policy(kit, top_k=1), neighbours=1, parent_summaries=False
    )
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert ids(report.kept) == ["s4"]
    assert ids(report.attached) == ["s3", "s5"]
    assert {n.node.metadata["attached_to"] for n in report.attached} == {"s4"}


def test_wider_window_walks_further_along_the_chain(kit, chain):
    retriever = ThresholdedRetriever(
        chain, floor_policy(kit, top_k=1), neighbours=2, parent_summaries=False
    )
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert sorted(ids(report.attached)) == ["s2", "s3", "s5", "s6"]


def test_parent_summary_is_attached_once_with_its_role(kit, any_chain):
    retriever = ThresholdedRetriever(
        any_chain, floor_policy(kit), neighbours=0, parent_summaries=True, parent_levels=1
    )
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert ids(report.kept) == ABOVE
    assert ids(report.attached) == [SUMMARY]
    meta = report.attached[0].node.metadata
    assert meta["attached_role"] == "parent_summary"
    assert meta["attached_to"] == "s4"
    assert report.attached[0].score is None


def test_parent_levels_walk_up_the_hierarchy(kit):
    sections = [kit.section("p1", 0.9), kit.section("p2", 0.2, axis=2)]
    chapter = TextNode(id_="chapter", text="Chapter summary.")
    book = TextNode(id_="book", text="Book summary.")
    kit.link_chain(sections, chapter)
    chapter.relationships[NodeRelationship.PARENT] = RelatedNodeInfo(node_id="book")
    index = kit.build_index(sections, kit.embedding(), docstore_nodes=[chapter, book])

    def attached(levels):
        retriever = ThresholdedRetriever(
            index, floor_policy(kit), neighbours=0, parent_levels=levels
        )
        return [
            (n.node.node_id, n.node.metadata["attached_role"], n.node.metadata["attached_to"])
            for n in retriever.retrieve_with_report(kit.QUESTION).attached
        ]

    assert attached(1) == [("chapter", "parent_summary", "p1")]
    assert attached(2) == [
        ("chapter", "parent_summary", "p1"),
        ("book", "parent_summary", "p1"),
    ]
    none = ThresholdedRetriever(index, floor_policy(kit), neighbours=0, parent_summaries=False)
    assert none.retrieve_with_report(kit.QUESTION).attached == ()


def test_the_store_and_docstore_nodes_are_not_mutated(kit):
    sections, summary = chain_nodes(kit)
    store = kit.SpyStore()
    index = kit.build_index(sections, kit.embedding(), store=store, docstore_nodes=[summary])
    held = dict(store.held)
    before = {
        i: (copy.deepcopy(n.metadata), list(n.excluded_llm_metadata_keys), n.embedding)
        for i, n in held.items()
    }
    summary_before = copy.deepcopy(index.docstore.get_node(SUMMARY).metadata)

    retriever = ThresholdedRetriever(index, floor_policy(kit), metric="COSINE", neighbours=1)
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert ids(report.kept) == ABOVE

    # The store handed out its own objects; the results are copies of them.
    for node in report.items:
        assert node.node is not held.get(node.node.node_id)
    after = {
        i: (n.metadata, list(n.excluded_llm_metadata_keys), n.embedding) for i, n in held.items()
    }
    assert after == before
    assert index.docstore.get_node(SUMMARY).metadata == summary_before
    assert "similarity" not in held["s4"].metadata
    assert "attached_to" not in held["s3"].metadata


def test_an_orthogonal_question_returns_nothing(kit, any_chain):
    # pushdown=False: the drops below the floor are read, so Milvus must return them.
    retriever = ThresholdedRetriever(any_chain, floor_policy(kit), neighbours=1, pushdown=False)
    report = retriever.retrieve_with_report(kit.ORTHOGONAL)
    assert report.items == []
    assert report.nothing_matched is True
    assert report.attached == ()
    assert retriever.retrieve(kit.ORTHOGONAL) == []
    # every candidate scored 0.0 and was dropped below the floor; on Milvus, the floor
    # is also sent to the engine, so none of them comes back at all
    unpushed = ThresholdedRetriever(any_chain, floor_policy(kit), neighbours=1, pushdown=False)
    report = unpushed.retrieve_with_report(kit.ORTHOGONAL)
    assert report.nothing_matched is True
    assert report.drop_counts() == {"below_threshold": len(SCORES)}
    assert [d.candidate.score for d in report.selection.dropped] == pytest.approx(
        [0.0] * len(SCORES), abs=1e-6
    )


def test_attachments_do_not_use_the_section_budget_but_their_own(kit, chain):
    # every section text is "Section sN." (12-13 chars); a 60-char budget fits all four
    # kept sections, and the neighbours do not count against it
    tight = floor_policy(kit, max_chars=60)
    report = ThresholdedRetriever(
        chain, tight, neighbours=1, parent_summaries=False
    ).retrieve_with_report(kit.QUESTION)
    assert ids(report.kept) == ABOVE
    assert sorted(ids(report.attached)) == ["s3", "s7", "s9"]

    # their own budget: 25 chars is room for two neighbours, in the order of their sections
    capped = floor_policy(kit, max_attachment_chars=25)
    report = ThresholdedRetriever(
        chain, capped, neighbours=1, parent_summaries=False
    ).retrieve_with_report(kit.QUESTION)
    assert ids(report.kept) == ABOVE
    assert ids(report.attached) == ["s3", "s7"]
    assert report.selection.dropped_for(DropReason.ATTACHMENT_BUDGET)[0].id == "s9"
