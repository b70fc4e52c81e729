"""An in-memory store's numpy and ``Decimal`` metadata meet the filters as their values.

``InMemoryVectorStore`` keeps metadata as given: a tenant stored as ``np.int64(7)`` (a
data frame's row) passed ``{"tenant": {"$ne": 7}}`` and came back.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest

from langchain_thresholded import ThresholdedRetriever
from thresholded import RetrievalPolicy

POLICY = RetrievalPolicy(min_similarity=0.5, top_k=10, max_per_source=None, max_chars=None)


@pytest.mark.parametrize(
    "filters",
    [
        {"tenant": {"$ne": 7}},
        {"tenant": {"$nin": [7]}},
        {"$not": [{"tenant": 7}]},
        {"$not": [{"tags": {"$contains": "t7"}}]},
        {"budget": {"$ne": 7}},
    ],
)
def test_the_excluded_tenant_stays_out(corpus, filters) -> None:
    seven = {"tenant": np.int64(7), "tags": np.array(["t7"]), "budget": Decimal(7)}
    eight = {"tenant": 8, "tags": ["t8"], "budget": 8}
    store = corpus([("t7", 0.75, seven), ("t8", 0.75, eight)]).store
    retriever = ThresholdedRetriever(vectorstore=store, policy=POLICY, filters=filters)
    assert [d.id for d in retriever.invoke("the question")] == ["t8"]
