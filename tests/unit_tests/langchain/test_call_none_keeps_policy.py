"""Per call, None leaves the retriever's value as it is (README): ``max_per_source=None``
does not lift the cap, as it does in a policy; a whole ``policy=`` does."""

from __future__ import annotations

from langchain_thresholded import ThresholdedRetriever
from thresholded import RetrievalPolicy

from .conftest import QUERY


def test_a_call_none_keeps_the_cap_and_a_call_policy_lifts_it(corpus):
    c = corpus([("a", 0.875, {"source": "s"}), ("b", 0.75, {"source": "s"})])
    capped = RetrievalPolicy(min_similarity=0.25, max_per_source=1)
    retriever = ThresholdedRetriever(vectorstore=c.store, policy=capped)
    assert [d.id for d in retriever.invoke(QUERY, max_per_source=None)] == ["a"]
    lifted = capped.model_copy(update={"max_per_source": None})
    assert [d.id for d in retriever.invoke(QUERY, policy=lifted)] == ["a", "b"]
