"""SimilarityThresholdCompressor: the floor on documents it can vouch for."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler, Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.embeddings import Embeddings
from pydantic import Field

from langchain_thresholded import (
    EVENT_NAME,
    SimilarityThresholdCompressor,
    ThresholdedRetriever,
)
from thresholded import NonCosineScoreError, Report, RetrievalPolicy
from thresholded.provenance import register

from .conftest import QUERY

Q = "the question"


def doc(doc_id: str, **metadata: Any) -> Document:
    """A document as ThresholdedRetriever returns it: its marks are trusted."""
    return register(Document(id=doc_id, page_content=f"text of {doc_id}", metadata=metadata))


def ids(docs: Sequence[Document]) -> list[str | None]:
    return [d.id for d in docs]


def test_floor_on_the_similarity_metadata():
    docs = [doc("a", similarity=0.9), doc("b", similarity=0.5), doc("c", similarity=0.49)]
    out = SimilarityThresholdCompressor(min_similarity=0.5).compress_documents(docs, Q)
    assert ids(out) == ["a", "b"]


def test_keeps_the_order_it_is_given():
    docs = [doc("low", similarity=0.6), doc("high", similarity=0.9), doc("out", similarity=0.1)]
    out = SimilarityThresholdCompressor(min_similarity=0.5).compress_documents(docs, Q)
    assert ids(out) == ["low", "high"]  # a reranker's order survives


def test_returns_the_documents_it_was_given_unchanged():
    docs = [doc("a", similarity=0.9)]
    (out,) = SimilarityThresholdCompressor(min_similarity=0.5).compress_documents(docs, Q)
    assert out is docs[0]
    assert out.metadata == {"similarity": 0.9}


def test_attachment_is_kept_iff_its_anchor_is_kept():
    docs = [
        doc("a", similarity=0.9),
        doc("b", similarity=0.1),
        doc("a-next", attached_to="a", attached_role="neighbour"),
        doc("b-next", attached_to="b", attached_role="neighbour"),
    ]
    compressor = SimilarityThresholdCompressor(min_similarity=0.5)
    report = compressor.compress_with_report(docs)
    assert ids(compressor.compress_documents(docs, Q)) == ["a", "a-next"]
    assert {d.id: d.reason.value for d in report.dropped} == {
        "b": "below_threshold",
        "b-next": "anchor_dropped",
    }


def test_the_report_holds_the_documents_as_given_and_explains_with_their_text():
    docs = [
        doc("a", similarity=0.9),
        doc("b", similarity=0.1),
        doc("a-next", attached_to="a", attached_role="neighbour"),
    ]
    report = SimilarityThresholdCompressor(min_similarity=0.5).compress_with_report(docs)
    assert type(report) is Report
    assert report.items == [docs[0], docs[2]]
    assert report.items[0] is docs[0]  # never copied
    assert report.dropped_for("below_threshold") == [docs[1]]
    lines = report.explain().splitlines()
    assert lines[0] == "query: ''  (floor 0.5)"
    assert [line.split()[0] for line in lines[1:]] == ["kept", "+", "dropped"]
    assert lines[1].endswith("text of a") and lines[3].endswith("text of b")


def test_unscored_documents_tied_to_no_section_are_dropped_as_unscored():
    # they used to be kept with a warning: nothing vouches for them
    docs = [doc("a", similarity=0.9), doc("x"), doc("y"), doc("gone-anchor", attached_to="zz")]
    report = SimilarityThresholdCompressor(min_similarity=0.5).compress_with_report(docs)
    assert ids(report.items) == ["a"]
    assert report.drop_counts() == {"unscored": 3}


def test_non_cosine_kinds_without_a_cosine_pass_the_floor(caplog):
    docs = [
        doc("rrf-no-cosine", score_kind="rrf"),
        doc("bm25-no-cosine", score_kind="bm25"),
        doc("cos", similarity=0.01, score_kind="cosine"),
    ]
    with caplog.at_level(logging.WARNING, logger="thresholded.selection"):
        out = SimilarityThresholdCompressor(min_similarity=0.5).compress_documents(docs, Q)
    assert ids(out) == ["rrf-no-cosine", "bm25-no-cosine"]
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


def test_a_re_scored_hybrid_result_meets_the_floor_with_its_cosine():
    docs = [
        doc("rrf-close", similarity=0.8, score_kind="rrf"),
        doc("rrf-far", similarity=0.1, score_kind="rrf"),
    ]
    report = SimilarityThresholdCompressor(min_similarity=0.5).compress_with_report(docs)
    assert ids(report.kept) == ["rrf-close"]
    assert [(d.id, d.reason.value, d.similarity) for d in report.dropped] == [
        ("rrf-far", "below_threshold", 0.1)
    ]


def test_strict_score_kind():
    docs = [doc("rrf", score_kind="rrf")]
    strict = RetrievalPolicy(min_similarity=0.5, strict_score_kind=True)
    compressor = SimilarityThresholdCompressor(policy=strict)
    with pytest.raises(NonCosineScoreError):
        compressor.compress_documents(docs, Q)


def test_score_kind_for_unmarked_documents(caplog):
    docs = [doc("a")]
    compressor = SimilarityThresholdCompressor(min_similarity=0.5, score_kind="rrf")
    with caplog.at_level(logging.WARNING, logger="thresholded.selection"):
        assert ids(compressor.compress_documents(docs, Q)) == ["a"]
    assert not caplog.records  # a hybrid result, not an unknown one


def test_unreadable_scores_are_invalid():
    docs = [
        doc("a", similarity="high"),
        doc("b", similarity=float("nan")),
        doc("c", similarity=True),
    ]
    report = SimilarityThresholdCompressor(min_similarity=0.5).compress_with_report(docs)
    assert report.kept == ()
    assert report.drop_counts() == {"invalid_score": 3}


def test_floor_zero_keeps_everything_scored():
    docs = [doc("a", similarity=-0.9), doc("b", similarity=float("nan")), doc("c")]
    out = SimilarityThresholdCompressor(min_similarity=0).compress_documents(docs, Q)
    assert ids(out) == ["a", "b"]  # c: no score, tied to no section: unscored


def test_configurable_id_key():
    docs = [
        register(Document(page_content="one", metadata={"similarity": 0.9, "uid": "1"})),
        register(Document(page_content="two", metadata={"similarity": 0.2, "uid": "2"})),
        register(Document(page_content="three", metadata={"attached_to": "1"})),
    ]
    compressor = SimilarityThresholdCompressor(min_similarity=0.5, id_key="uid")
    assert [d.page_content for d in compressor.compress_documents(docs, Q)] == ["one", "three"]


def test_documents_without_ids_are_known_by_their_text():
    docs = [register(Document(page_content="same", metadata={"similarity": 0.9}))] * 2
    out = SimilarityThresholdCompressor(min_similarity=0.5).compress_documents(docs, Q)
    assert len(out) == 1


async def test_async_compress():
    docs = [doc("a", similarity=0.9), doc("b", similarity=0.1)]
    out = await SimilarityThresholdCompressor(min_similarity=0.5).acompress_documents(docs, Q)
    assert ids(out) == ["a"]


def test_min_similarity_is_a_cosine():
    with pytest.raises(ValueError):
        SimilarityThresholdCompressor(min_similarity=2)


# In a chain ------------------------------------------------------------------------------
class RecordingReranker(BaseDocumentCompressor):
    """Records what it receives and reverses it, as a stand-in for a cross-encoder."""

    received: list[list[Document]] = Field(default_factory=list)

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        self.received.append(list(documents))
        return list(reversed(documents))


class EventRecorder(BaseCallbackHandler):
    def __init__(self) -> None:
        self.events: list[tuple[str, Any, UUID]] = []

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kw: Any) -> None:
        self.events.append((name, data, run_id))


def _chain_retriever(corpus, docstore):
    pytest.importorskip("langchain_classic", reason="the chain classes live in langchain-classic")
    from langchain_classic.retrievers import ContextualCompressionRetriever
    from langchain_classic.retrievers.document_compressors import DocumentCompressorPipeline

    c = corpus(
        [
            ("s1", 0.875, {"source": "chain", "prev_id": "s0", "next_id": "s2"}),
            ("s5", 0.625, {"source": "chain", "prev_id": "s4", "next_id": "s6"}),
            ("s8", 0.25, {"source": "chain", "prev_id": "s7"}),
        ]
    )
    retriever = ThresholdedRetriever(
        vectorstore=c.store,
        policy=RetrievalPolicy(min_similarity=0.5, max_per_source=None, max_chars=None),
        docstore=docstore([f"s{i}" for i in range(9)]),
    )
    reranker = RecordingReranker(received=[])
    pipeline = DocumentCompressorPipeline(
        transformers=[SimilarityThresholdCompressor(min_similarity=0.5), reranker]
    )
    chain = ContextualCompressionRetriever(base_compressor=pipeline, base_retriever=retriever)
    return retriever, reranker, chain


def test_chain_reranker_receives_exactly_the_kept_and_attached(corpus, docstore):
    retriever, reranker, chain = _chain_retriever(corpus, docstore)
    report = retriever.retrieve_with_report(Q)
    assert ids(report.kept) == ["s1", "s5"]
    assert ids(report.attached) == ["s0", "s2", "s4", "s6"]

    out = chain.invoke(Q)
    (received,) = reranker.received
    assert received == report.items  # attachments were not dropped by the compressor
    assert ids(out) == list(reversed(ids(report.items)))


async def test_chain_async(corpus, docstore):
    _, reranker, chain = _chain_retriever(corpus, docstore)
    out = await chain.ainvoke(Q)
    assert ids(reranker.received[0]) == ["s1", "s5", "s0", "s2", "s4", "s6"]
    assert len(out) == 6


def test_chain_compressor_reports_through_callbacks(corpus, docstore):
    _, _, chain = _chain_retriever(corpus, docstore)
    recorder = EventRecorder()
    chain.invoke(Q, config={"callbacks": [recorder]})
    stages = [data["stage"] for name, data, _ in recorder.events if name == EVENT_NAME]
    assert stages == ["retriever", "compressor"]
    compressor_data = recorder.events[1][1]
    assert compressor_data["dropped"] == []
    assert len(compressor_data["attached"]) == 4


def test_a_stricter_compressor_drops_attachments_with_their_section(corpus, docstore):
    pytest.importorskip("langchain_classic")
    from langchain_classic.retrievers import ContextualCompressionRetriever

    retriever, _, _ = _chain_retriever(corpus, docstore)
    chain = ContextualCompressionRetriever(
        base_compressor=SimilarityThresholdCompressor(min_similarity=0.75),
        base_retriever=retriever,
    )
    assert ids(chain.invoke(Q)) == ["s1", "s0", "s2"]


class OneVector(Embeddings):
    """Every text on one unit vector; the queries it was asked to embed, recorded."""

    def __init__(self) -> None:
        self.query_calls: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        self.query_calls.append(text)
        return [1.0, 0.0]


@pytest.mark.parametrize("query", ["", "  \n"])
async def test_a_blank_query_is_refused_as_the_retriever_refuses_it(query):
    """The blank query was embedded and the documents judged against the vector of nothing,
    where the retriever and LlamaIndex's postprocessor refuse it."""
    embeddings = OneVector()
    compressor = SimilarityThresholdCompressor(min_similarity=0.5, embeddings=embeddings)
    foreign = [Document(id="x", page_content="text")]
    with pytest.raises(ValueError, match="the question is empty"):
        compressor.compress_documents(foreign, query)
    with pytest.raises(ValueError, match="the question is empty"):
        await compressor.acompress_documents(foreign, query)
    assert embeddings.query_calls == []


def test_behind_a_multi_query_retriever_the_compressor_keeps_one_copy_of_each(corpus):
    """README: ``MultiQueryRetriever`` over the retriever returns a section once per question
    that found it (each copy carries its question's cosine, and ``unique_union`` compares whole
    documents); the compressor with ``embeddings=`` keeps one, judged against the question."""
    from langchain_classic.retrievers import ContextualCompressionRetriever, MultiQueryRetriever
    from langchain_core.language_models import FakeListLLM

    kb = corpus([("a", 0.75, {"source": "a"}), ("b", 0.5, {"source": "b"})])
    kb.embeddings.vectors["first rewording"] = kb.embeddings.vectors[QUERY]
    kb.embeddings.vectors["second rewording"] = kb.embeddings.vectors["a"]
    retriever = ThresholdedRetriever(
        vectorstore=kb.store, policy=RetrievalPolicy(min_similarity=0.25), neighbours=0
    )
    multi = MultiQueryRetriever.from_llm(
        retriever=retriever, llm=FakeListLLM(responses=["first rewording\nsecond rewording"])
    )
    assert sorted(d.id for d in multi.invoke(QUERY)) == ["a", "a", "b", "b"]
    once = ContextualCompressionRetriever(
        base_compressor=SimilarityThresholdCompressor(min_similarity=0.6, embeddings=kb.embeddings),
        base_retriever=multi,
    )
    assert [(d.id, d.metadata["similarity"]) for d in once.invoke(QUERY)] == [("a", 0.75)]
