"""A retriever's filters nested to the limit (32 groups deep), narrowed by a call's filters,
were refused at the call: combined, their AND is a group more than either."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_thresholded import ThresholdedRetriever
from thresholded import RetrievalPolicy
from thresholded.filters.model import MAX_DEPTH

Q = "the question"
POLICY = RetrievalPolicy(min_similarity=0.1, top_k=10, max_per_source=None, max_chars=None)


def test_call_filters_narrowing_filters_nested_to_the_limit_answer(corpus: Any):
    c = corpus([("a1", 0.75, {"tenant": "a"}), ("b1", 0.875, {"tenant": "b"})])
    own: dict = {"$or": [{"tenant": "a"}, {"tenant": "b"}]}
    for i in range(MAX_DEPTH - 1):
        own = {"$and" if i % 2 else "$or": [{"tenant": {"$ne": f"v{i}"}}, own]}
    retriever = ThresholdedRetriever(vectorstore=c.store, policy=POLICY, filters=own)
    narrowed = retriever.model_copy(update={"call_filters": {"tenant": "a"}})
    assert [d.id for d in narrowed.invoke(Q)] == ["a1"]
    assert [d.id for d in asyncio.run(narrowed.ainvoke(Q))] == ["a1"]
