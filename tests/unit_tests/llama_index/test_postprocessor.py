"""SimilarityThresholdPostprocessor: the same policy for query engines with their own retriever."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
from llama_index.core.postprocessor import PrevNextNodePostprocessor, SimilarityPostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

from llama_index_thresholded import SimilarityThresholdPostprocessor, ThresholdedRetriever
from thresholded.errors import ScoreRangeError, UncalibratedModelError
from thresholded.policy import RetrievalPolicy
from thresholded.provenance import register
from thresholded.selection import DropReason


def scored(node_id, score, *, source="manual", text=None, **metadata):
    meta = {"source": source, **metadata} if source is not None else dict(metadata)
    node = TextNode(id_=node_id, text=text or f"Section {node_id}.", metadata=meta)
    return NodeWithScore(node=register(node), score=score)  # as the retriever returns it


def ids(nodes):
    return [n.node.node_id for n in nodes]


def post(**fields):
    defaults = {"max_per_source": None, "max_chars": None}
    return SimilarityThresholdPostprocessor(policy=RetrievalPolicy(**{**defaults, **fields}))


def reasons(selection):
    return {d.candidate.id: d.reason for d in selection.dropped}


def test_floor_keeps_equal_and_drops_below(kit):
    nodes = [scored("a", 0.9), scored("b", 0.5), scored("c", math.nextafter(0.5, 0.0))]
    processor = post(min_similarity=0.5)
    assert ids(processor.postprocess_nodes(nodes)) == ["a", "b"]
    assert reasons(processor.select(nodes)) == {"c": DropReason.BELOW_THRESHOLD}


def test_same_rules_in_the_same_order_as_the_retriever():
    nodes = [
        scored("a1", 0.95, text="a" * 10, source="A"),
        scored("a-low", 0.4, text="a" * 10, source="A"),
        scored("a2", 0.9, text="a" * 10, source="A"),
        scored("a3", 0.85, text="a" * 500, source="A"),
        scored("b-long", 0.8, text="b" * 95, source="B"),
        scored("c", 0.75, text="c" * 10, source="C"),
        scored("d", 0.7, text="d" * 10, source="D"),
    ]
    processor = SimilarityThresholdPostprocessor(
        policy=RetrievalPolicy(min_similarity=0.5, top_k=3, max_per_source=2, max_chars=100)
    )
    assert ids(processor.postprocess_nodes(nodes)) == ["a1", "a2", "c"]
    assert reasons(processor.select(nodes)) == {
        "a-low": DropReason.BELOW_THRESHOLD,
        "a3": DropReason.SOURCE_CAP,
        "b-long": DropReason.BUDGET,
        "d": DropReason.BEYOND_TOP_K,
    }


def test_source_cap_falls_back_to_the_document():
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo

    nodes = [scored("x1", 0.9, source=None), scored("x2", 0.8, source=None)]
    for n in nodes:
        n.node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="doc-x")
    processor = post(min_similarity=0.5, max_per_source=1)
    assert ids(processor.postprocess_nodes(nodes)) == ["x1"]
    assert reasons(processor.select(nodes)) == {"x2": DropReason.SOURCE_CAP}


def test_a_node_without_a_score_or_a_section_is_dropped_as_unscored():
    # it used to be kept with a warning: nothing vouches for it
    nodes = [scored("a", 0.9), scored("free", None), scored("low", 0.1)]
    processor = post(min_similarity=0.5)
    assert ids(processor.postprocess_nodes(nodes)) == ["a"]
    assert reasons(processor.select(nodes)) == {
        "free": DropReason.UNSCORED,
        "low": DropReason.BELOW_THRESHOLD,
    }


def test_an_attachment_is_kept_exactly_when_its_anchor_is_kept():
    nodes = [
        scored("kept", 0.9),
        scored("dropped", 0.2),
        scored("n-kept", None, attached_role="neighbour", attached_to="kept"),
        scored("n-dropped", None, attached_role="neighbour", attached_to="dropped"),
        scored("p-kept", None, attached_role="parent_summary", attached_to="kept"),
    ]
    processor = post(min_similarity=0.5)
    assert ids(processor.postprocess_nodes(nodes)) == ["kept", "n-kept", "p-kept"]
    assert reasons(processor.select(nodes)) == {
        "dropped": DropReason.BELOW_THRESHOLD,
        "n-dropped": DropReason.ANCHOR_DROPPED,
    }


def test_attachments_with_an_unknown_anchor_are_dropped_as_unscored():
    nodes = [
        scored("kept", 0.9),
        scored("orphan-1", None, attached_role="neighbour", attached_to="elsewhere"),
        scored("orphan-2", None),
    ]
    processor = post(min_similarity=0.5)
    assert ids(processor.postprocess_nodes(nodes)) == ["kept"]
    assert reasons(processor.select(nodes)) == {
        "orphan-1": DropReason.UNSCORED,
        "orphan-2": DropReason.UNSCORED,
    }


def test_rrf_scores_pass_through(caplog):
    nodes = [scored("fused", 0.016, score_kind="rrf"), scored("cos", 0.2)]
    with caplog.at_level(logging.INFO):
        out = post(min_similarity=0.5).postprocess_nodes(nodes)
    assert ids(out) == ["fused"]
    assert sum("not applied" in r.getMessage() for r in caplog.records) == 1


def test_score_kind_field_passes_every_node_through():
    nodes = [scored("a", 0.03), scored("b", 0.01)]
    processor = SimilarityThresholdPostprocessor(
        policy=RetrievalPolicy(min_similarity=0.5), score_kind="rrf"
    )
    assert ids(processor.postprocess_nodes(nodes)) == ["a", "b"]


def test_similarity_metadata_is_judged_not_the_rerank_score():
    nodes = [
        scored("reranked-high", 0.99, similarity=0.2),  # a reranker loved it; the cosine is low
        scored("reranked-low", 0.01, similarity=0.8),
        scored("plain", 0.7),
    ]
    processor = post(min_similarity=0.5)
    out = processor.postprocess_nodes(nodes)
    assert set(ids(out)) == {"reranked-low", "plain"}
    assert reasons(processor.select(nodes)) == {"reranked-high": DropReason.BELOW_THRESHOLD}
    # the node keeps the score it came with: the postprocessor judges, it does not rewrite
    assert next(n for n in out if n.node.node_id == "reranked-low").score == 0.01


def test_after_a_reranker_on_thresholded_retriever_output(kit):
    """A reranker that inverts the scores sits between the retriever and the postprocessor."""
    cosines = {"r1": 0.9, "r2": 0.6, "r3": 0.3}
    nodes = [kit.section(i, c, axis=1 + n) for n, (i, c) in enumerate(cosines.items())]
    index = kit.build_index(nodes, kit.embedding())
    retrieved = ThresholdedRetriever(index, kit.policy(min_similarity=0.0), neighbours=0).retrieve(
        kit.QUESTION
    )
    reranked = [NodeWithScore(node=n.node, score=1.0 - n.score) for n in reversed(retrieved)]
    out = post(min_similarity=0.5).postprocess_nodes(reranked)
    assert set(ids(out)) == {"r1", "r2"}


def test_after_prev_next_it_judges_the_neighbours_it_cannot_vouch_for(kit):
    sections = [kit.section(f"s{i}", c, axis=1 + i) for i, c in enumerate([0.2, 0.9, 0.3])]
    kit.link_chain(sections)
    index = kit.build_index(sections, kit.embedding())
    retrieved = index.as_retriever(similarity_top_k=1).retrieve(kit.QUESTION)
    assert ids(retrieved) == ["s1"]
    widened = PrevNextNodePostprocessor(
        docstore=index.docstore, num_nodes=1, mode="both"
    ).postprocess_nodes(retrieved)
    assert sorted(ids(widened)) == ["s0", "s1", "s2"]

    # LlamaIndex's own filter deletes the neighbours it just fetched ...
    assert ids(SimilarityPostprocessor(similarity_cutoff=0.5).postprocess_nodes(widened)) == ["s1"]
    # ... ours cannot tie these copies to a section: with the model, it computes their cosine
    texts = {s.get_content(metadata_mode=MetadataMode.EMBED): s.embedding for s in sections}
    model = kit.embedding(texts)  # the store's model: the text as the index embedded it
    judged = SimilarityThresholdPostprocessor(min_similarity=0.5, embed_model=model)
    assert ids(judged.postprocess_nodes(widened, query_str=kit.QUESTION)) == ["s1"]
    assert reasons(judged.select(widened, kit.QUESTION)) == {
        "s0": DropReason.BELOW_THRESHOLD,
        "s2": DropReason.BELOW_THRESHOLD,
    }
    # without it, the declared cosine of s1 is judged and the unscored copies are dropped
    declared = SimilarityThresholdPostprocessor(min_similarity=0.5, score_kind="cosine")
    assert ids(declared.postprocess_nodes(widened)) == ["s1"]
    assert set(reasons(declared.select(widened)).values()) == {DropReason.UNSCORED}


def test_declared_cosines_after_a_cross_encoder_are_refused_when_out_of_range():
    # a cross-encoder's logits on nodes of another retriever, declared as cosines by mistake
    query = np.array([1.0, 0.0, 0.0])
    vectors = np.array([[0.6, 0.8, 0.0], [0.0, 0.0, 1.0]])
    cosine = [float(c) for c in vectors @ query]
    foreign = [
        NodeWithScore(node=TextNode(id_="x", text="X"), score=cosine[0]),
        NodeWithScore(node=TextNode(id_="y", text="Y"), score=7.3),
    ]
    processor = SimilarityThresholdPostprocessor(
        policy=RetrievalPolicy(min_similarity=0.5, min_top_similarity=0.7), score_kind="cosine"
    )
    with pytest.raises(ScoreRangeError, match=r"'y' has the cosine 7\.3"):
        processor.postprocess_nodes(foreign, query_str="q")
    # genuine cosines are still compared: x's 0.6 clears the floor, but not the gate
    assert processor.select(foreign[:1], "q").emptied_by == "gate"
    assert cosine[1] == 0.0


def test_min_similarity_none_resolves_from_the_embedding_model():
    processor = SimilarityThresholdPostprocessor(embedding_model="BAAI/bge-m3")
    assert processor.min_similarity == 0.35
    with pytest.raises(UncalibratedModelError):
        SimilarityThresholdPostprocessor(embedding_model="acme/encoder-v1")


def test_class_name_and_serialisation_round_trip():
    policy = RetrievalPolicy(
        min_similarity=0.42,
        top_k=3,
        over_fetch=2,
        max_per_source=1,
        max_chars=900,
        max_attachment_chars=300,
        source_key="url",
    )
    processor = SimilarityThresholdPostprocessor(policy=policy, score_kind="cosine")
    assert SimilarityThresholdPostprocessor.class_name() == "SimilarityThresholdPostprocessor"

    data = processor.to_dict()
    assert data["class_name"] == "SimilarityThresholdPostprocessor"
    assert data["policy"]["min_similarity"] == 0.42
    restored = SimilarityThresholdPostprocessor.from_dict(data)
    assert restored.policy == policy
    assert restored.min_similarity == 0.42
    assert restored.score_kind == processor.score_kind

    via_json = SimilarityThresholdPostprocessor.from_json(processor.to_json())
    assert via_json.policy == policy
    nodes = [scored("a", 0.9, url="u1"), scored("b", 0.8, url="u1"), scored("c", 0.3, url="u2")]
    assert ids(via_json.postprocess_nodes(nodes)) == ids(processor.postprocess_nodes(nodes))
    assert ids(via_json.postprocess_nodes(nodes)) == ["a"]


async def test_async_postprocess_matches_sync():
    nodes = [scored("a", 0.9), scored("b", 0.3), scored("c", None)]
    processor = post(min_similarity=0.5)
    sync = processor.postprocess_nodes(nodes, QueryBundle("q"))
    asynchronous = await processor.apostprocess_nodes(nodes, QueryBundle("q"))
    assert ids(asynchronous) == ids(sync) == ["a"]  # c: unscored


@pytest.mark.parametrize(
    "query",
    [
        pytest.param("", id="empty-str"),
        pytest.param(QueryBundle("   "), id="blank-query_str"),
        pytest.param(QueryBundle("q", custom_embedding_strs=["q", " \t"]), id="blank-custom"),
        pytest.param(QueryBundle("q", custom_embedding_strs=[]), id="no-custom"),
    ],
)
async def test_a_question_with_nothing_to_embed_is_refused_as_the_retriever_refuses_it(kit, query):
    """The bundle's blank texts were embedded into the question's vector, and the nodes
    judged against the vector of nothing."""
    blank = {text: kit.E0 for text in ("", "   ", " \t", "q")}
    processor = SimilarityThresholdPostprocessor(
        min_similarity=0.5, embed_model=kit.embedding(blank)
    )
    foreign = [NodeWithScore(node=TextNode(id_="x", text="q"), score=0.9)]
    with pytest.raises(ValueError, match="empty"):
        processor.select(foreign, query)
    with pytest.raises(ValueError, match="empty"):
        await processor.aselect(foreign, query)
    with pytest.raises(ValueError, match="empty"):
        index = kit.build_index([], kit.embedding(blank))
        ThresholdedRetriever(index, kit.policy(min_similarity=0.5)).retrieve(query)


def test_postprocess_with_report_is_the_compressor_s_compress_with_report():
    """LangChain's compressor returned a ``Report`` of its call (``compress_with_report``);
    the postprocessor had only ``select``, the engine's bare selection of unmarked nodes,
    with no ``nothing_matched`` nor ``explain``: the same concept under two names and types."""
    import asyncio

    from thresholded.report import Report

    nodes = [scored("a", 0.9), scored("b", 0.2)]
    processor = post(min_similarity=0.5)
    for report in (
        processor.postprocess_with_report(nodes, "a question"),
        asyncio.run(processor.apostprocess_with_report(nodes, "a question")),
    ):
        assert isinstance(report, Report)
        assert ids(report.items) == ids(processor.postprocess_nodes(nodes)) == ["a"]
        assert report.items[0].node.metadata["score_kind"] == "cosine"
        assert [(d.id, d.reason) for d in report.dropped] == [("b", DropReason.BELOW_THRESHOLD)]
        assert not report.nothing_matched
        assert "Section a." in report.explain()
    assert post(min_similarity=0.95).postprocess_with_report(nodes).nothing_matched
