"""``search_kwargs["score_threshold"]`` is refused, built or per call: stores read it on
their own scale (InMemory and Milvus ignore it, FAISS cuts raw squared L2 distances with it,
emptying an on-topic result), never as the cosine floor it looks like."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from langchain_thresholded import ThresholdedRetriever
from thresholded import RetrievalPolicy

from .conftest import QUERY

POLICY = RetrievalPolicy(min_similarity=0.25)


def test_score_threshold_in_the_retrievers_search_kwargs_is_refused(corpus):
    c = corpus([("a", 0.875)])
    with pytest.raises(ValidationError, match=r"score_threshold.*min_similarity"):
        ThresholdedRetriever(
            vectorstore=c.store, policy=POLICY, search_kwargs={"score_threshold": 0.5}
        )


def test_score_threshold_inherited_from_a_wrapped_retriever_is_refused(corpus):
    c = corpus([("a", 0.875)])
    wrapped = c.store.as_retriever(search_kwargs={"score_threshold": 0.5})
    with pytest.raises(ValidationError, match="score_threshold"):
        ThresholdedRetriever.from_retriever(wrapped, policy=POLICY)


def test_score_threshold_per_call_is_refused(corpus):
    c = corpus([("a", 0.875)])
    retriever = ThresholdedRetriever(vectorstore=c.store, policy=POLICY)
    with pytest.raises(ValueError, match=r"score_threshold.*min_similarity"):
        retriever.invoke(QUERY, search_kwargs={"score_threshold": 0.5})
    retriever.search_kwargs["score_threshold"] = 0.5  # changed in place: seen at the call
    with pytest.raises(ValueError, match="score_threshold"):
        retriever.invoke(QUERY)
    del retriever.search_kwargs["score_threshold"]
    assert [d.id for d in retriever.invoke(QUERY)] == ["a"]
