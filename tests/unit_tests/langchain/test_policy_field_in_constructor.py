"""A policy field given to a retriever's constructor says to put it in the policy: the
nearest accepted name (``max_chars`` -> ``max_retries``) would set something else."""

from __future__ import annotations

import pytest

from langchain_thresholded import MultiCollectionRetriever, ThresholdedRetriever


@pytest.mark.parametrize(
    ("given", "field"), [("max_chars", "max_chars"), ("min_similarity", "min_similarity")]
)
def test_a_policy_field_beside_policy_names_the_policy(corpus, given, field):
    store = corpus([("a", 0.875)]).store
    with pytest.raises(TypeError, match=rf"RetrievalPolicy\({field}=\.\.\.\)") as info:
        ThresholdedRetriever(vectorstore=store, **{given: 1})
    assert "did you mean" not in str(info.value)
    with pytest.raises(TypeError, match=rf"RetrievalPolicy\({field}=\.\.\.\)"):
        MultiCollectionRetriever(collections=[store], **{given: 1})


def test_k_names_the_policys_top_k(corpus):
    store = corpus([("a", 0.875)]).store
    with pytest.raises(TypeError, match=r"RetrievalPolicy\(top_k=\.\.\.\)"):
        ThresholdedRetriever(vectorstore=store, k=3)
