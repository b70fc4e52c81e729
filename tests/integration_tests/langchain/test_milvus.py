"""ThresholdedRetriever on real Milvus Lite through langchain-milvus, with the packaged MiniLM.

Measured with all-MiniLM-L6-v2 over these seven support texts: the best passage
of an answerable question scores 0.73-0.87, the best passage of an unrelated
question 0.01-0.10. A floor of 0.3 leaves a margin of about 0.2 on both sides.
"""

from __future__ import annotations

import numpy as np
import pytest

from langchain_thresholded import Metric, ThresholdedRetriever, store_metric
from langchain_thresholded.milvus import orm_calls
from thresholded import RetrievalPolicy
from thresholded.errors import SearchUnavailableError

pytestmark = pytest.mark.integration

FLOOR = 0.3
POLICY = RetrievalPolicy(
    min_similarity=FLOOR,
    embedding_model="sentence-transformers/all-MiniLM-L6-v2@384",
    top_k=4,
    max_per_source=None,
    max_chars=None,
)
ANSWERABLE = {
    "How long does a refund take to arrive?": "refund-time",
    "How do I turn on two-factor authentication?": "two-factor",
    "How can I download my invoices?": "invoices",
}
UNRELATED = [
    "What's the weather in Mumbai today?",
    "Who won the football world cup in 2010?",
    "Give me a recipe for banana bread.",
]


def true_cosines(minilm, query: str, texts: list[str]) -> list[float]:
    """The cosines computed here, in float64, from the model's own vectors."""
    q = np.asarray(minilm.embed_query(query), dtype=np.float64)
    d = np.asarray(minilm.embed_documents(texts), dtype=np.float64)
    return [float(x) for x in d @ q / (np.linalg.norm(d, axis=1) * np.linalg.norm(q))]


@pytest.mark.parametrize(("question", "best"), ANSWERABLE.items())
def test_an_answerable_question_keeps_its_passage_first(support_store, question, best):
    retriever = ThresholdedRetriever(vectorstore=support_store, policy=POLICY)
    report = retriever.retrieve_with_report(question)
    assert not report.nothing_matched
    assert report.kept[0].id == best
    assert all(d.metadata["similarity"] >= FLOOR for d in report.kept)
    assert all(d.similarity is None or d.similarity < FLOOR for d in report.dropped)


@pytest.mark.parametrize("question", UNRELATED)
def test_an_unrelated_question_returns_nothing(support_store, support_texts, question):
    retriever = ThresholdedRetriever(vectorstore=support_store, policy=POLICY)
    report = retriever.retrieve_with_report(question)
    assert report.nothing_matched
    assert retriever.invoke(question) == []
    assert report.drop_counts() == {"below_threshold": len(support_texts)}


@pytest.mark.parametrize(
    ("metric", "expected"),
    [("IP", Metric.IP), ("COSINE", Metric.COSINE), ("L2", Metric.L2), (None, Metric.L2)],
)
def test_similarity_is_the_true_cosine_for_every_metric(
    support_store, milvus_store, support_texts, minilm, metric, expected
):
    store = support_store if metric == "IP" else milvus_store(metric=metric)
    assert store_metric(store) is expected
    retriever = ThresholdedRetriever(
        vectorstore=store, policy=POLICY.model_copy(update={"min_similarity": 0.0})
    )
    question = "How long does a refund take to arrive?"
    report = retriever.retrieve_with_report(question, k=len(support_texts))
    assert len(report.kept) == len(support_texts)
    expected_cosines = true_cosines(minilm, question, [d.page_content for d in report.kept])
    for doc, cosine in zip(report.kept, expected_cosines, strict=True):
        assert doc.metadata["score_kind"] == "cosine"
        assert doc.metadata["similarity"] == pytest.approx(cosine, abs=1e-5)
    cosines = [d.metadata["similarity"] for d in report.kept]
    assert cosines == sorted(cosines, reverse=True)


def test_milvus_documents_get_their_primary_key_as_id(support_store):
    retriever = ThresholdedRetriever(vectorstore=support_store, policy=POLICY)
    (first, *_) = retriever.invoke("How can I download my invoices?")
    assert first.id == "invoices" == first.metadata["pk"]


def test_filters_narrow_and_a_raw_expr_belongs_to_the_retriever(support_store):
    retriever = ThresholdedRetriever(vectorstore=support_store, policy=POLICY)
    question = "How long does a refund take to arrive?"
    unfiltered = retriever.invoke(question)
    assert {d.metadata["source"] for d in unfiltered} >= {"billing"}
    security_only = retriever.invoke(question, filters={"source": "security"})
    assert all(d.metadata["source"] == "security" for d in security_only)
    with pytest.raises(TypeError, match="filters="):
        retriever.invoke(question, expr='source == "security"')
    with pytest.raises(TypeError, match="filters="):
        retriever.invoke(question, filter='source == "billing"')
    field = ThresholdedRetriever(
        vectorstore=retriever.vectorstore,
        policy=POLICY,
        search_kwargs={"expr": 'source == "data"'},
    )
    assert all(d.metadata["source"] == "data" for d in field.invoke(question, min_similarity=0))
    narrowed = field.invoke(question, min_similarity=0, filters={"source": "billing"})
    assert narrowed == []  # data and billing: nothing is both


def test_a_bad_filter_quoting_connection_refused_is_not_retried(support_store, milvus_searches):
    """A filter Milvus refuses fails once, as itself, whatever words its value holds."""
    from pymilvus.exceptions import MilvusException

    patient = ThresholdedRetriever(  # a raw expression belongs to the retriever, not a call
        vectorstore=support_store,
        policy=POLICY,
        expr='source == ["connection refused"]',
        max_retries=3,
        retry_backoff=0.5,
    )
    with pytest.raises(MilvusException, match="connection refused") as caught:
        patient.invoke("How do I get a refund?")
    assert not isinstance(caught.value, SearchUnavailableError)
    assert len(milvus_searches) == 1


def test_fetching_more_than_one_milvus_search_returns_is_refused_before_any_query(
    support_store, milvus_searches
):
    retriever = ThresholdedRetriever(vectorstore=support_store, policy=POLICY)
    with pytest.raises(ValueError, match="16,384, the most one Milvus search returns"):
        retriever.invoke("How do I get a refund?", k=6000)
    assert milvus_searches == []


def test_ainvoke_from_successive_event_loops_matches_a_serial_run(
    support_store, in_new_event_loops
):
    """Each ``asyncio.run`` closes its loop; the next one's queries still get their answers."""
    retriever = ThresholdedRetriever(vectorstore=support_store, policy=POLICY)
    questions = ([*ANSWERABLE, *UNRELATED] * 3)[:16]
    serial = [[(d.id, d.metadata["similarity"]) for d in retriever.invoke(q)] for q in questions]
    assert any(serial) and not all(serial)
    batches = in_new_event_loops(lambda: [retriever.ainvoke(q) for q in questions])
    assert len(batches) == 3
    for docs in batches:
        assert [[(d.id, d.metadata["similarity"]) for d in ds] for ds in docs] == serial


async def test_ainvoke_on_milvus(support_store, minilm):
    retriever = ThresholdedRetriever(vectorstore=support_store, policy=POLICY)
    question = "How do I turn on two-factor authentication?"
    docs = await retriever.ainvoke(question)
    assert docs[0].id == "two-factor"
    (cosine,) = true_cosines(minilm, question, [docs[0].page_content])
    assert docs[0].metadata["similarity"] == pytest.approx(cosine, abs=1e-5)
    assert await retriever.ainvoke(UNRELATED[0]) == []


def test_per_call_k_and_floor_on_milvus(support_store):
    retriever = ThresholdedRetriever(vectorstore=support_store, policy=POLICY)
    question = "How long does a refund take to arrive?"
    assert len(retriever.invoke(question, k=1)) == 1
    assert len(retriever.invoke(question, k=7, min_similarity=0)) == 7
    assert retriever.invoke(question, min_similarity=0.99) == []


def test_relevance_scores_would_have_passed_unrelated_results(support_store):
    """Why the raw score is converted: Milvus's relevance scores read (s + 1) / 2."""
    store = support_store
    with orm_calls():  # langchain-milvus reads its index through the ORM
        (_, relevance), *_ = store.similarity_search_with_relevance_scores(UNRELATED[0], k=1)
    assert relevance > FLOOR  # a cosine near 0 reads about 0.5
    retriever = ThresholdedRetriever(vectorstore=store, policy=POLICY)
    assert retriever.invoke(UNRELATED[0]) == []


async def test_search_kwargs_ids_restrict_a_milvus_search(support_store):
    """langchain-milvus sends ``ids`` to pymilvus beside the query vector, and every call
    failed with pymilvus's "Either ids or data must be provided, not both"."""
    wanted = ["invoices", "export"]
    retriever = ThresholdedRetriever(
        vectorstore=support_store, policy=POLICY, search_kwargs={"ids": wanted}
    )
    for found in (
        retriever.invoke("How long does a refund take?", min_similarity=0),
        await retriever.ainvoke("How long does a refund take?", min_similarity=0),
    ):
        assert sorted(d.id for d in found) == sorted(wanted)
