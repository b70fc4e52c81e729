"""The LangChain retriever retries a store that is down, as configured, then says so clearly."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_thresholded import ThresholdedRetriever
from thresholded import RetrievalPolicy, SearchUnavailableError

Q = "the question"


class FlakyStore(InMemoryVectorStore):
    """Its searches fail with ``error`` ``failures`` times, then answer."""

    failures: int = 0
    error: Exception = ConnectionError("connection refused")
    attempts: int = 0

    def similarity_search_with_score_by_vector(self, embedding, k=4, **kwargs):
        self.attempts += 1
        if self.attempts <= self.failures:
            raise self.error
        return super().similarity_search_with_score_by_vector(embedding, k=k, **kwargs)


def flaky(corpus, failures: int, error: Exception) -> FlakyStore:
    c = corpus([("near", 0.75), ("far", 0.125)])
    store = FlakyStore(c.embeddings)
    store.store = c.store.store
    store.failures, store.error = failures, error
    return store


def retriever(store, **fields) -> ThresholdedRetriever:
    policy = RetrievalPolicy(min_similarity=0.5, max_per_source=None, max_chars=None)
    return ThresholdedRetriever(vectorstore=store, policy=policy, **fields)


def test_a_store_that_comes_back_is_retried_and_answers(corpus):
    store = flaky(corpus, 2, ConnectionError("connection refused"))
    docs = retriever(store, max_retries=2, retry_backoff=0.01).invoke(Q)
    assert [d.id for d in docs] == ["near"] and store.attempts == 3


def test_a_store_that_stays_down_gives_one_clear_error(corpus):
    store = flaky(corpus, 100, TimeoutError("deadline exceeded"))
    r = retriever(store, max_retries=1, retry_backoff=0.01)
    with pytest.raises(SearchUnavailableError, match=r"FlakyStore did not answer \(2 attempts"):
        r.invoke(Q)
    with pytest.raises(SearchUnavailableError, match="2 attempts"):
        asyncio.run(r.ainvoke(Q))
    assert store.attempts == 4


def test_an_error_retrying_cannot_fix_is_raised_at_once(corpus):
    store = flaky(corpus, 1, ValueError("bad expression"))
    with pytest.raises(ValueError, match="bad expression"):
        retriever(store, max_retries=3, retry_backoff=0.01).invoke(Q)
    assert store.attempts == 1


@pytest.mark.parametrize("bad", [{"max_retries": -1}, {"retry_backoff": float("inf")}])
def test_bad_retry_settings_are_refused(corpus, bad):
    with pytest.raises(ValueError, match=r"max_retries|retry_backoff"):
        retriever(flaky(corpus, 0, ValueError()), **bad)
