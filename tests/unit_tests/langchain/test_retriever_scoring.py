"""Scores are read as true cosines, whatever the store's metric; unknown stores are refused."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_thresholded import Metric, ScoreKind, ThresholdedRetriever, store_metric
from thresholded import (
    ModelMismatchError,
    NonCosineScoreError,
    NotUnitVectorError,
    RetrievalPolicy,
    UnsupportedMetricError,
)

Q = "the question"
POLICY = RetrievalPolicy(min_similarity=0.5, top_k=10, max_per_source=None, max_chars=None)
SPECS = [("a", 0.875), ("b", 0.5), ("c", 0.375), ("d", -0.25)]


def similarities(docs: list[Document]) -> dict[str | None, float]:
    return {d.id: d.metadata["similarity"] for d in docs}


def test_in_memory_store_scores_are_cosines(corpus):
    c = corpus(SPECS)
    assert store_metric(c.store) is Metric.COSINE
    docs = ThresholdedRetriever(vectorstore=c.store, policy=POLICY).invoke(Q)
    assert similarities(docs) == {"a": 0.875, "b": 0.5}


@pytest.mark.parametrize("metric", ["IP", "L2"])
def test_ip_and_l2_refuse_a_query_that_is_not_unit_length(corpus, transform_store, metric):
    c = corpus(SPECS)
    c.embeddings.vectors[Q] = [2.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    store = transform_store(c.store, lambda cos: cos)
    retriever = ThresholdedRetriever(vectorstore=store, policy=POLICY, metric=metric)
    with pytest.raises(NotUnitVectorError):
        retriever.invoke(Q)


def test_cosine_metric_accepts_any_query_length(corpus):
    c = corpus(SPECS)
    c.embeddings.vectors[Q] = [3.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    docs = ThresholdedRetriever(vectorstore=c.store, policy=POLICY).invoke(Q)
    assert similarities(docs) == {"a": 0.875, "b": 0.5}


def test_relevance_scores_are_never_used(corpus, monkeypatch):
    c = corpus(SPECS)

    def forbidden(*args, **kwargs):
        raise AssertionError("similarity_search_with_relevance_scores must not be used")

    monkeypatch.setattr(InMemoryVectorStore, "similarity_search_with_relevance_scores", forbidden)
    monkeypatch.setattr(InMemoryVectorStore, "_select_relevance_score_fn", forbidden)
    assert len(ThresholdedRetriever(vectorstore=c.store, policy=POLICY).invoke(Q)) == 2


def test_unknown_store_without_metric_is_a_clear_error(corpus, transform_store):
    store = transform_store(corpus(SPECS).store, lambda cos: cos)
    with pytest.raises(UnsupportedMetricError) as info:
        ThresholdedRetriever(vectorstore=store, policy=POLICY)
    message = str(info.value)
    assert "ScoreTransformStore" in message
    for option in ("metric=", "'COSINE'", "'IP'", "'L2'", "score_kind=", "hybrid_policy='rescore'"):
        assert option in message


def test_an_unknown_metric_name_is_refused(corpus):
    with pytest.raises(ValueError, match="unknown metric"):
        ThresholdedRetriever(vectorstore=corpus(SPECS).store, policy=POLICY, metric="hamming")


RESCORE = POLICY.model_copy(update={"hybrid_policy": "rescore"})


def test_rescore_computes_true_cosines_for_any_store(corpus, transform_store):
    c = corpus(SPECS)
    store = transform_store(c.store, lambda cos: 123.0)  # meaningless raw scores
    retriever = ThresholdedRetriever(vectorstore=store, policy=RESCORE, score_kind="unknown")
    report = retriever.retrieve_with_report(Q)
    assert [d.id for d in report.kept] == ["a", "b"]  # as score_mode="rescore" kept
    assert similarities(report.kept) == {"a": 0.875, "b": 0.5}
    assert {d.id: d.reason.value for d in report.dropped} == {
        "c": "below_threshold",
        "d": "below_threshold",
    }
    assert report.passed_through == ()  # the floor read every candidate's computed cosine
    assert c.embeddings.query_calls == [Q]  # searched by vector: embedded once
    assert len(c.embeddings.document_calls) == 1  # the candidates, in one batch


async def test_rescore_computes_true_cosines_for_any_store_async(corpus, transform_store):
    c = corpus(SPECS)
    store = transform_store(c.store, lambda cos: 123.0)
    retriever = ThresholdedRetriever(vectorstore=store, policy=RESCORE, score_kind="unknown")
    report = await retriever.aretrieve_with_report(Q)
    assert similarities(report.kept) == {"a": 0.875, "b": 0.5}


def test_unknown_scores_are_searched_by_query_text_where_the_store_has_no_vector_search(
    corpus, transform_store
):
    c = corpus(SPECS)

    class TextOnlyStore(transform_store):  # type: ignore[misc, valid-type]
        similarity_search_with_score_by_vector = None  # type: ignore[assignment]

        def similarity_search_with_score(self, query, k=4, **kwargs):
            pairs = self.inner.similarity_search_with_score(query, k=k, **kwargs)
            return [(doc, self.transform(score)) for doc, score in pairs]

    store = TextOnlyStore(c.store, lambda cos: 123.0)
    retriever = ThresholdedRetriever(vectorstore=store, policy=RESCORE, score_kind="unknown")
    assert similarities(retriever.invoke(Q)) == {"a": 0.875, "b": 0.5}


def test_unknown_scores_without_rescore_are_refused_unless_the_floor_is_off(
    corpus, transform_store
):
    """Unjudged, every result would pass the floor: the floor would silently do nothing."""
    store = transform_store(corpus(SPECS).store, lambda cos: 123.0)
    with pytest.raises(NonCosineScoreError, match=r"kind 'unknown'.*hybrid_policy='rescore'"):
        ThresholdedRetriever(vectorstore=store, policy=POLICY, score_kind="unknown")
    off = POLICY.with_overrides(min_similarity=0.0)
    retriever = ThresholdedRetriever(vectorstore=store, policy=off, score_kind="unknown")
    assert len(retriever.retrieve_with_report(Q).kept) == 4
    with pytest.raises(NonCosineScoreError, match="kind 'unknown'"):
        retriever.invoke(Q, min_similarity=0.5)


def test_rescore_ignores_vector_length(corpus):
    c = corpus(SPECS)
    c.embeddings.vectors["a"] = [x * 3 for x in c.embeddings.vectors["a"]]
    retriever = ThresholdedRetriever(vectorstore=c.store, policy=RESCORE, score_kind="unknown")
    assert similarities(retriever.invoke(Q))["a"] == pytest.approx(0.875, abs=1e-12)


def test_declared_non_cosine_kind_is_never_cut_by_the_floor(corpus, transform_store):
    c = corpus(SPECS)
    store = transform_store(c.store, lambda cos: 0.01)  # e.g. an RRF score
    retriever = ThresholdedRetriever(vectorstore=store, policy=POLICY, score_kind="RRF")
    report = retriever.retrieve_with_report(Q)
    assert len(report.kept) == 4
    assert report.passed_through == (ScoreKind.RRF,)
    for doc in report.kept:
        assert doc.metadata["score_kind"] == "rrf"
        assert "similarity" not in doc.metadata


def test_a_re_scored_hybrid_keeps_its_score_and_order_and_meets_the_floor(corpus, transform_store):
    c = corpus(SPECS)
    store = transform_store(c.store, lambda cos: 1.0 - cos)  # a hybrid score, reversed order
    retriever = ThresholdedRetriever(vectorstore=store, policy=RESCORE, score_kind="rrf")
    report = retriever.retrieve_with_report(Q)
    assert [d.id for d in report.kept] == ["b", "a"]  # the hybrid order stays
    assert similarities(list(report.kept)) == {"a": 0.875, "b": 0.5}
    assert {d.metadata["score_kind"] for d in report.kept} == {"rrf"}
    assert {d.id: d.reason.value for d in report.dropped} == {
        "c": "below_threshold",
        "d": "below_threshold",
    }
    assert len(c.embeddings.document_calls) == 1  # the candidates, in one batch


async def test_a_re_scored_hybrid_async(corpus, transform_store):
    c = corpus(SPECS)
    store = transform_store(c.store, lambda cos: 1.0 - cos)
    retriever = ThresholdedRetriever(vectorstore=store, policy=RESCORE, score_kind="rrf")
    docs = await retriever.ainvoke(Q)
    assert [d.id for d in docs] == ["b", "a"]


def test_strict_score_kind_refuses_non_cosine_scores_under_a_floor(corpus, transform_store):
    from thresholded import NonCosineScoreError

    store = transform_store(corpus(SPECS).store, lambda cos: 0.01)
    retriever = ThresholdedRetriever(
        vectorstore=store,
        policy=POLICY.model_copy(update={"strict_score_kind": True}),
        score_kind="rrf",
    )
    with pytest.raises(NonCosineScoreError):
        retriever.invoke(Q)


def test_explicit_embeddings_replace_the_store_s(corpus, transform_store):
    c = corpus(SPECS)

    class NoEmbeddingsStore(transform_store):  # type: ignore[misc, valid-type]
        @property
        def embeddings(self):
            return None

    store = NoEmbeddingsStore(c.store, lambda cos: cos)
    with pytest.raises(ValueError, match="embeddings="):
        ThresholdedRetriever(vectorstore=store, policy=POLICY, metric="COSINE")
    retriever = ThresholdedRetriever(
        vectorstore=store, policy=POLICY, metric="COSINE", embeddings=c.embeddings
    )
    assert len(retriever.invoke(Q)) == 2


def test_policy_model_must_match_the_embeddings_model(corpus):
    c = corpus(SPECS)
    c.embeddings.model_id = "sentence-transformers/all-MiniLM-L6-v2"  # type: ignore[attr-defined]
    with pytest.raises(ModelMismatchError):  # at construction, as in LlamaIndex
        ThresholdedRetriever(
            vectorstore=c.store,
            policy=POLICY.model_copy(update={"embedding_model": "BAAI/bge-m3"}),
        )
    allowed = ThresholdedRetriever(
        vectorstore=c.store,
        policy=POLICY.model_copy(update={"embedding_model": "BAAI/bge-m3"}),
        allow_model_mismatch=True,
    )
    assert [d.id for d in allowed.invoke(Q)] == ["a", "b"]


def test_default_floor_comes_from_the_embeddings_model(corpus):
    c = corpus([("a", 0.375), ("b", 0.3125)])
    c.embeddings.model_id = "BAAI/bge-m3"  # type: ignore[attr-defined]
    retriever = ThresholdedRetriever(
        vectorstore=c.store, policy=RetrievalPolicy(max_per_source=None, max_chars=None)
    )
    report = retriever.retrieve_with_report(Q)
    assert report.min_similarity == 0.35
    assert [d.id for d in report.kept] == ["a"]
