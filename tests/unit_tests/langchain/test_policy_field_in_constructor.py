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


def test_policy_none_is_the_default_policy_as_in_llama_index(corpus):
    """``policy=None`` (LlamaIndex's default: the model's calibrated floor, or a profile's)
    was a pydantic "Input should be a valid dictionary or instance of RetrievalPolicy"."""
    from thresholded.errors import UncalibratedModelError

    store = corpus([("a", 0.875)]).store
    for build in (ThresholdedRetriever, MultiCollectionRetriever):
        store_of = (
            {"vectorstore": store} if build is ThresholdedRetriever else {"collections": [store]}
        )
        with pytest.raises(UncalibratedModelError) as omitted:
            build(**store_of)
        with pytest.raises(UncalibratedModelError) as none:
            build(**store_of, policy=None)
        assert str(none.value) == str(omitted.value)
    given = {"min_similarity": 0.5}
    assert ThresholdedRetriever(vectorstore=store, policy=given).as_policy().min_similarity == 0.5
    with pytest.raises(TypeError, match="policy must be a RetrievalPolicy or its dict, got float"):
        ThresholdedRetriever(vectorstore=store, policy=0.5)
