"""A multi-collection retriever's results carry ``source_collection``; its stored sections do
not, so a filter on it would be judged on nothing: it is refused, naming the key."""

from __future__ import annotations

import pytest

from langchain_thresholded import CollectionSpec, MultiCollectionRetriever, ThresholdedRetriever
from thresholded import RetrievalPolicy, UnsafeFilterError

QUERY = "the question"
POLICY = RetrievalPolicy(min_similarity=0.5, top_k=10, max_per_source=None, max_chars=None)


@pytest.mark.parametrize(
    "filters", [{"source_collection": {"$ne": "staff_kb"}}, {"source_collection": "public_kb"}]
)
def test_a_filter_on_the_collection_label_is_refused(corpus, filters):
    public = corpus([("p", 0.75, {"doc_type": "public"})])
    staff = corpus([("s", 0.75, {"doc_type": "internal"})])
    retriever = MultiCollectionRetriever(
        collections=[
            CollectionSpec(
                retriever=ThresholdedRetriever(vectorstore=public.store, policy=POLICY),
                name="public_kb",
            ),
            CollectionSpec(
                retriever=ThresholdedRetriever(vectorstore=staff.store, policy=POLICY),
                name="staff_kb",
            ),
        ],
        policy=POLICY,
    )
    assert {d.metadata["source_collection"] for d in retriever.invoke(QUERY)} == {
        "public_kb",
        "staff_kb",
    }
    with pytest.raises(UnsafeFilterError, match="'source_collection' is a mark"):
        retriever.invoke(QUERY, filters=filters)
