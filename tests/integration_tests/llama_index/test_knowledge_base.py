"""The example knowledge base on real Milvus Lite with the packaged MiniLM model."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pytest
from llama_index.core.llms import MockLLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters
from pydantic import PrivateAttr

from llama_index_thresholded import (
    DEFAULT_NO_MATCH_MESSAGE,
    NOTHING_MATCHED,
    AbstainingQueryEngine,
    ThresholdedRetriever,
)
from llama_index_thresholded import demo as demo_module
from llama_index_thresholded.knowledge_base import index_knowledge_base, knowledge_nodes
from llama_index_thresholded.milvus import milvus_store
from thresholded import cli
from thresholded.errors import UncalibratedModelError
from thresholded.knowledge_base import EXAMPLE_KNOWLEDGE_BASE, load_knowledge_base
from thresholded.policy import RetrievalPolicy

pytestmark = pytest.mark.integration

PROFILE = EXAMPLE_KNOWLEDGE_BASE / "threshold.json"
REFUND = "How do I get my money back?"
WEATHER = "What's the weather in Mumbai today?"
AGENT_LIMITS = "How much money may a support agent refund without approval?"


@pytest.fixture(scope="module")
def kb_index(tmp_path_factory: pytest.TempPathFactory, minilm_embed_model: Any) -> Any:
    """The example knowledge base, indexed once for this module."""
    uri = str(tmp_path_factory.mktemp("kb") / "x.db")
    store = milvus_store(uri, "example_support_kb", dim=384)
    return index_knowledge_base(load_knowledge_base(), store, minilm_embed_model)


@pytest.fixture(scope="module")
def retriever(kb_index: Any) -> ThresholdedRetriever:
    return ThresholdedRetriever(kb_index, profile=PROFILE, neighbours=1)


def sources(nodes: list[NodeWithScore]) -> list[str]:
    return [n.node.metadata["source"] for n in nodes]


def candidates(report: Any) -> list[Any]:
    return [*report.selection.kept, *(d.candidate for d in report.selection.dropped)]


def test_the_profile_sets_the_minilm_floor(retriever: ThresholdedRetriever) -> None:
    assert retriever.min_similarity == 0.33
    assert retriever.policy.embedding_model == "sentence-transformers/all-MiniLM-L6-v2@384"


def test_refund_question_keeps_refund_policy_sections_with_sources(
    retriever: ThresholdedRetriever,
) -> None:
    report = retriever.retrieve_with_report(REFUND)
    assert not report.nothing_matched
    assert sources(report.kept)[0] == "refund-policy"
    assert sources(report.kept).count("refund-policy") == 2  # max_per_source
    assert all(n.score is not None and n.score >= 0.33 for n in report.kept)
    scores = [n.score for n in report.kept]
    assert scores == sorted(scores, reverse=True)
    for node in report.kept:
        assert node.node.metadata["section"]
        assert node.node.metadata["doc_type"]
    # attachments: refund-policy's summary and neighbours of kept sections
    roles = {(n.node.metadata["attached_role"], n.node.node_id) for n in report.attached}
    assert ("parent_summary", "refund-policy#summary") in roles
    kept_ids = {n.node.node_id for n in report.kept}
    assert all(n.node.metadata["attached_to"] in kept_ids for n in report.attached)


def test_weather_question_returns_nothing(retriever: ThresholdedRetriever, kb_index: Any) -> None:
    report = retriever.retrieve_with_report(WEATHER)
    assert report.nothing_matched is True
    assert report.items == []
    assert retriever.retrieve(WEATHER) == []
    # Without the range-search pushdown, Milvus returns fetch_k candidates; even the best is
    # below the profile's answer gate, so every one of them is dropped by it on the client.
    unpushed = ThresholdedRetriever(kb_index, profile=PROFILE, pushdown=False)
    report = unpushed.retrieve_with_report(WEATHER)
    assert report.nothing_matched is True
    assert report.drop_counts() == {"below_gate": unpushed.policy.fetch_k}
    assert report.best_similarity < report.gate == 0.33
    assert max(d.candidate.score for d in report.selection.dropped) < 0.33


def test_doc_type_filter_is_applied_in_the_store(retriever: ThresholdedRetriever) -> None:
    unfiltered = retriever.retrieve_with_report(AGENT_LIMITS)
    assert "internal-escalation-runbook" in sources(unfiltered.kept)

    customer_facing = MetadataFilters(
        filters=[MetadataFilter(key="doc_type", value="internal", operator=FilterOperator.NE)]
    )
    filtered = retriever.retrieve_with_report(AGENT_LIMITS, filters=customer_facing)
    # not dropped after the fact: internal sections were never candidates
    doc_types = {c.item.metadata["doc_type"] for c in candidates(filtered)}
    assert doc_types and "internal" not in doc_types
    assert all(n.node.metadata["doc_type"] != "internal" for n in filtered.items)
    # with the floor off, the store still fills fetch_k from the other documents only
    everything = retriever.retrieve_with_report(
        AGENT_LIMITS, filters=customer_facing, min_similarity=0.0
    )
    assert len(candidates(everything)) == retriever.policy.fetch_k
    assert {c.item.metadata["doc_type"] for c in candidates(everything)} == {
        "policy",
        "faq",
        "guide",
    }

    only_policies = MetadataFilters(filters=[MetadataFilter(key="doc_type", value="policy")])
    policies = retriever.retrieve_with_report(REFUND, filters=only_policies)
    assert {c.item.metadata["doc_type"] for c in candidates(policies)} == {"policy"}


def test_similarity_metadata_is_the_true_cosine(
    retriever: ThresholdedRetriever, minilm_embed_model: Any
) -> None:
    sections, _ = knowledge_nodes(load_knowledge_base())
    embedded_text = {n.node_id: n.get_content(metadata_mode=MetadataMode.EMBED) for n in sections}
    for question in (REFUND, "I was charged twice", WEATHER):
        report = retriever.retrieve_with_report(question, min_similarity=0.0)
        q = np.asarray(minilm_embed_model.get_query_embedding(question))
        ids = [c.id for c in candidates(report)]
        assert len(ids) == retriever.policy.fetch_k
        texts = np.asarray(
            minilm_embed_model.get_text_embedding_batch([embedded_text[i] for i in ids])
        )
        cosines = texts @ q / (np.linalg.norm(texts, axis=1) * np.linalg.norm(q))
        truth = dict(zip(ids, cosines, strict=True))
        for node in report.kept:
            assert node.node.metadata["similarity"] == pytest.approx(
                truth[node.node.node_id], abs=1e-5
            )
            assert node.score == pytest.approx(truth[node.node.node_id], abs=1e-5)
        for dropped in report.selection.dropped:
            assert dropped.candidate.score == pytest.approx(truth[dropped.candidate.id], abs=1e-5)


class RecordingReranker(BaseNodePostprocessor):
    """Stands in for a reranker: records what it receives and passes it on."""

    _received: list[list[str]] = PrivateAttr(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "RecordingReranker"

    @property
    def received(self) -> list[list[str]]:
        return self._received

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        self._received.append([n.node.node_id for n in nodes])
        return nodes


class CountingLLM(MockLLM):
    _calls: int = PrivateAttr(default=0)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        self._calls += 1
        return super().complete(prompt, formatted=formatted, **kwargs)


@pytest.mark.parametrize("engine_class", [RetrieverQueryEngine, AbstainingQueryEngine])
def test_the_reranker_receives_exactly_the_kept_and_attached_nodes(
    retriever: ThresholdedRetriever, engine_class: type[RetrieverQueryEngine]
) -> None:
    reranker = RecordingReranker()
    llm = CountingLLM()
    engine = engine_class.from_args(retriever, llm=llm, node_postprocessors=[reranker])
    response = engine.query(REFUND)

    expected = retriever.retrieve_with_report(REFUND)
    assert reranker.received == [[n.node.node_id for n in expected.items]]
    assert len(expected.attached) > 0
    assert [n.node.node_id for n in response.source_nodes] == reranker.received[0]
    assert llm._calls >= 1


def test_abstaining_engine_answers_the_weather_without_the_llm(
    retriever: ThresholdedRetriever,
) -> None:
    reranker = RecordingReranker()
    llm = CountingLLM()
    engine = AbstainingQueryEngine.from_args(retriever, llm=llm, node_postprocessors=[reranker])
    response = engine.query(WEATHER)
    assert str(response) == DEFAULT_NO_MATCH_MESSAGE
    assert response.metadata == {
        NOTHING_MATCHED: True,
        "abstained_by": "gate",  # the best cosine is below the answer gate
    }
    assert reranker.received == [[]]
    assert llm._calls == 0


def test_minilm_without_a_profile_must_be_calibrated(kb_index: Any) -> None:
    with pytest.raises(UncalibratedModelError, match=r"(?i)calibrate"):
        ThresholdedRetriever(kb_index, RetrievalPolicy())


@pytest.fixture
def demo_cli(
    tmp_path: Any,
    minilm_embed_model: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Any:
    """``thresholded demo ARGS`` on a fresh Milvus Lite file: its exit code and output."""
    # the session's model, so that the demo does not load its own copy
    monkeypatch.setattr(demo_module, "load_embed_model", lambda name: minilm_embed_model)

    def run(*args: str) -> tuple[int, str]:
        code = cli.main(["demo", "--uri", str(tmp_path / "demo.db"), *args])
        return code, capsys.readouterr().out

    return run


def test_the_demo_cli(demo_cli: Any) -> None:
    code, out = demo_cli("-q", WEATHER, "-q", REFUND)
    assert code == 0
    assert "floor 0.33" in out
    blocks = {block.splitlines()[0]: block for block in out.split("Q: ")[1:]}
    assert set(blocks) == {WEATHER, REFUND}
    assert "No relevant information found." in blocks[WEATHER]
    # and why: the best section's score under the gate, and how many of the drops are listed
    assert re.search(
        r"found\. \(the best section scored 0\.\d{3}, under the answer gate 0\.33\)", out
    )
    assert re.search(r"dropped: 12 below_gate \(the best 6 shown\)", blocks[WEATHER])
    assert "refund-policy" not in blocks[WEATHER].split("dropped")[0]
    assert "refund-policy" in blocks[REFUND]
    assert "No relevant information found." not in blocks[REFUND]
    assert "refund-policy / How to request a refund" in blocks[REFUND]
    assert "internal" not in blocks[REFUND]  # the demo answers customers


def drop_lines(block: str) -> list[str]:
    return [line for line in block.splitlines() if re.match(r" {4,5}-?\d\.\d{3} ", line)]


def test_the_demo_aligns_its_drops_and_tells_which_came_back_attached(demo_cli: Any) -> None:
    """A negative score pushed its reason one column right; a section dropped by the source
    cap, or below the floor, and then attached as a neighbour read as if it were left out."""
    code, out = demo_cli("-q", WEATHER, "-q", REFUND)
    assert code == 0
    blocks = {b.splitlines()[0]: b for b in out.split("Q: ")[1:]}
    weather = drop_lines(blocks[WEATHER])
    assert len(weather) == 6 and any(" -0." in line for line in weather)
    assert {line.index("below_gate") for line in weather} == {11}
    refund = drop_lines(blocks[REFUND])
    neighbours = {
        line.split(": ", 1)[1]
        for line in blocks[REFUND].splitlines()
        if line.startswith("  + neighbour of ")
    }
    assert neighbours
    for line in refund:
        came_back = line.split(maxsplit=2)[2].removesuffix(" (attached as neighbour)")
        assert line.endswith(" (attached as neighbour)") == (came_back in neighbours), line
    assert any(line.endswith("(attached as neighbour)") for line in refund)


@pytest.mark.parametrize("doc_type", ["faqs", "internal"])
def test_the_demo_refuses_a_doc_type_no_customer_section_has(
    tmp_path: Any, doc_type: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A misspelt --doc-type printed "No relevant information found." for every question,
    as if nothing answered them."""
    argv = ["demo", "--uri", str(tmp_path / "demo.db"), "--doc-type", doc_type, "-q", REFUND]
    assert cli.main(argv) == 2
    assert re.search(rf"doc_type '{doc_type}'.*faq, guide, policy", capsys.readouterr().err)
    assert not (tmp_path / "demo.db").exists()  # refused before anything was indexed


def test_the_demo_refuses_a_profile_of_another_collection(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The error advised passing collection=..., a Python argument the command has none of,
    and came after the knowledge base was indexed."""
    measured = json.loads((EXAMPLE_KNOWLEDGE_BASE / "threshold.json").read_text())
    profile = tmp_path / "other.json"
    profile.write_text(json.dumps({**measured, "collection": "tickets"}))
    argv = ["demo", "--uri", str(tmp_path / "demo.db"), "--profile", str(profile), "-q", REFUND]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "measured for collection 'tickets'" in err and "'example_support_kb'" in err
    assert "leave the profile out" in err and "collection=" not in err
    assert not (tmp_path / "demo.db").exists()  # refused before anything was indexed


def test_the_demo_header_tells_the_floor_and_top_k_of_the_run(demo_cli: Any) -> None:
    """--min-similarity 0.5 --top-k 2 were applied, but the header said floor 0.33, top_k 4."""
    code, out = demo_cli("-q", REFUND, "--min-similarity", "0.5", "--top-k", "2")
    assert code == 0
    header = out.splitlines()[0]
    assert "; floor 0.5, gate 0.33 (" in header and header.endswith("top_k 2")
