"""A deep copy of a retriever (``model_copy(deep=True)``, ``copy.deepcopy``) searches as the
retriever does, over copies of its stores. It failed: "cannot pickle '_thread.lock' object",
from what the retriever had built to search (its collection's state), which a copy builds
again from its own fields."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from langchain_thresholded import ThresholdedRetriever
from thresholded import RetrievalPolicy

QUERY = "the question"
POLICY = RetrievalPolicy(min_similarity=0.5, top_k=10, max_per_source=None, max_chars=None)
DEEP_COPIES = {
    "model_copy": lambda retriever: retriever.model_copy(deep=True),
    "copy.deepcopy": copy.deepcopy,
}


def ids(documents: list[Any]) -> list[str]:
    return sorted(d.id for d in documents)


@pytest.mark.parametrize("deep_copy", DEEP_COPIES)
@pytest.mark.parametrize("made_by", ["constructor", "from_retriever"])
def test_a_deep_copy_searches_alike_over_its_own_store(corpus: Any, deep_copy: str, made_by: str):
    c = corpus([("a", 0.75, {}), ("b", 0.875, {}), ("low", 0.25, {})])
    retriever = (
        ThresholdedRetriever(vectorstore=c.store, policy=POLICY)
        if made_by == "constructor"
        else ThresholdedRetriever.from_retriever(c.store.as_retriever(), policy=POLICY)
    )
    assert ids(retriever.invoke(QUERY)) == ["a", "b"]
    copied = DEEP_COPIES[deep_copy](retriever)
    assert ids(copied.invoke(QUERY)) == ["a", "b"]
    assert ids(asyncio.run(copied.ainvoke(QUERY))) == ["a", "b"]
    copied.policy = POLICY.with_overrides(min_similarity=0.8)  # the copy is its own
    assert ids(copied.invoke(QUERY)) == ["b"]
    assert ids(retriever.invoke(QUERY)) == ["a", "b"]
