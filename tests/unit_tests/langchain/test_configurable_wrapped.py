"""A configurable retriever is never wrapped: it would be run without the call's config.

``RetrieverSource`` invokes the wrapped retriever (or an ensemble's members) with the
question alone, so a member made configurable (``configurable_fields(call_filters=...)``,
a tenant's filter set per request) was searched with its defaults: the config's filter
silently did not apply, and sections outside it came back. An ``EnsembleRetriever`` on its
own passes the config to its members, so wrapping it widened what it returned.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.runnables import ConfigurableField

from langchain_thresholded import RetrieverSource, ThresholdedRetriever
from thresholded import RetrievalPolicy

ensemble_module = pytest.importorskip("langchain_classic.retrievers")
EnsembleRetriever = ensemble_module.EnsembleRetriever

Q = "the question"
POLICY = RetrievalPolicy(min_similarity=0.1, top_k=10, max_per_source=None, max_chars=None)
RESCORE = POLICY.model_copy(update={"hybrid_policy": "rescore"})
TENANT_A = {"configurable": {"tenant_filter": {"tenant": "a"}}}


def tenants(corpus: Any) -> Any:
    c = corpus([("a1", 0.75, {"tenant": "a"}), ("b1", 0.875, {"tenant": "b"})])
    member = ThresholdedRetriever(vectorstore=c.store, policy=POLICY).configurable_fields(
        call_filters=ConfigurableField(id="tenant_filter")
    )
    assert [d.id for d in member.invoke(Q, config=TENANT_A)] == ["a1"]
    return c, member


def test_an_ensemble_with_a_configurable_member_is_refused(corpus: Any) -> None:
    """b1 came back: the member was run without the config."""
    _, member = tenants(corpus)
    ensemble = EnsembleRetriever(retrievers=[member], weights=[1.0])
    assert [d.id for d in ensemble.invoke(Q, config=TENANT_A)] == ["a1"]
    with pytest.raises(ValueError, match=r"member 0 is a configurable.*call's config"):
        ThresholdedRetriever.from_retriever(ensemble, policy=POLICY)


def test_a_configurable_retriever_is_refused(corpus: Any) -> None:
    c, member = tenants(corpus)
    with pytest.raises(ValueError, match=r"it is a configurable.*call's config"):
        ThresholdedRetriever.from_retriever(member, policy=RESCORE, embeddings=c.embeddings)
    with pytest.raises(ValueError, match=r"configurable"):
        RetrieverSource(member.with_config(tags=["t"]))


def test_the_wrapped_ensemble_of_a_plain_retriever_still_works(corpus: Any) -> None:
    c = corpus([("a1", 0.75, {"tenant": "a"}), ("b1", 0.875, {"tenant": "b"})])
    member = ThresholdedRetriever(vectorstore=c.store, policy=POLICY)
    ensemble = EnsembleRetriever(retrievers=[member], weights=[1.0])
    wrapped = ThresholdedRetriever.from_retriever(ensemble, policy=POLICY)
    assert [d.id for d in wrapped.invoke(Q, filters={"tenant": "a"})] == ["a1"]


def test_a_configurable_member_behind_a_retry_or_fallbacks_is_refused(corpus: Any) -> None:
    """``with_retry()`` and ``with_fallbacks()`` hide the configurable retriever from a check
    of its type: b1 came back."""
    c, member = tenants(corpus)
    plain = ThresholdedRetriever(vectorstore=c.store, policy=POLICY)
    for hidden in (member.with_retry(), member.with_fallbacks([plain])):
        ensemble = EnsembleRetriever(retrievers=[hidden], weights=[1.0])
        assert [d.id for d in ensemble.invoke(Q, config=TENANT_A)] == ["a1"]
        with pytest.raises(ValueError, match=r"member 0 is a configurable.*call's config"):
            ThresholdedRetriever.from_retriever(ensemble, policy=POLICY)


def test_a_configurable_member_of_a_nested_ensemble_is_refused(corpus: Any) -> None:
    _, member = tenants(corpus)
    inner = EnsembleRetriever(retrievers=[member], weights=[1.0])
    outer = EnsembleRetriever(retrievers=[inner], weights=[1.0])
    with pytest.raises(ValueError, match=r"member 0 is a configurable.*call's config"):
        ThresholdedRetriever.from_retriever(outer, policy=POLICY)


@pytest.mark.parametrize("change", ["replace", "mutate"])
def test_a_configurable_member_given_after_construction_is_refused(
    corpus: Any, change: str
) -> None:
    """The members are read again at each call: one swapped in later was run without the
    call's config, and b1 came back."""
    c, member = tenants(corpus)
    plain = ThresholdedRetriever(vectorstore=c.store, policy=POLICY)
    ensemble = EnsembleRetriever(retrievers=[plain], weights=[1.0])
    wrapped = ThresholdedRetriever.from_retriever(ensemble, policy=POLICY)
    if change == "replace":
        ensemble.retrievers = [member]
    else:
        ensemble.retrievers[0] = member
    with pytest.raises(ValueError, match=r"member 0 is a configurable.*call's config"):
        wrapped.invoke(Q, config=TENANT_A)
