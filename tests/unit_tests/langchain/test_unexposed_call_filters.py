"""A config's ``call_filters`` reach a retriever only through ``configurable_fields``.

``AbstainingChain`` says to give a call's filters as ``config={"configurable":
{"call_filters": ...}}``. On a retriever that does not expose the field, LangChain drops
the key without a word: the search was not narrowed, and the other tenant's documents
came back (``invoke``, ``batch``, ``ainvoke``, inside a chain). Such a call is refused now.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.runnables import ConfigurableField, RunnableLambda

from langchain_thresholded import MultiCollectionRetriever, ThresholdedRetriever
from thresholded import RetrievalPolicy
from thresholded.errors import UnsafeFilterError

Q = "the question"
POLICY = RetrievalPolicy(min_similarity=0.1, top_k=10, max_per_source=None, max_chars=None)
TENANT_A = {"configurable": {"call_filters": {"tenant": "a"}}}
UNREAD = r"call_filters.*not exposed.*configurable_fields\(call_filters="


@pytest.fixture
def plain(corpus: Any) -> ThresholdedRetriever:
    c = corpus([("a1", 0.75, {"tenant": "a"}), ("b1", 0.875, {"tenant": "b"})])
    return ThresholdedRetriever(vectorstore=c.store, policy=POLICY)


def test_a_config_s_call_filters_on_a_retriever_that_does_not_expose_them_are_refused(plain):
    chain = RunnableLambda(lambda q: q) | plain
    multi = MultiCollectionRetriever(collections=[plain], policy=POLICY)
    with pytest.raises(UnsafeFilterError, match=UNREAD):
        plain.invoke(Q, config=TENANT_A)
    with pytest.raises(UnsafeFilterError, match=UNREAD):
        plain.with_config(TENANT_A).invoke(Q)
    with pytest.raises(UnsafeFilterError, match=UNREAD):
        plain.batch([Q], config=[TENANT_A])
    with pytest.raises(UnsafeFilterError, match=UNREAD):
        chain.invoke(Q, config=TENANT_A)
    with pytest.raises(UnsafeFilterError, match=UNREAD):
        asyncio.run(plain.ainvoke(Q, config=TENANT_A))
    with pytest.raises(UnsafeFilterError, match=UNREAD):
        multi.invoke(Q, config=TENANT_A)


def test_exposed_call_filters_narrow_the_search(plain):
    exposed = plain.configurable_fields(call_filters=ConfigurableField(id="call_filters"))
    assert [d.id for d in exposed.invoke(Q, config=TENANT_A)] == ["a1"]
    assert [d.id for d in exposed.batch([Q], config=[TENANT_A])[0]] == ["a1"]
    assert [d.id for d in asyncio.run(exposed.ainvoke(Q, config=TENANT_A))] == ["a1"]
    assert [d.id for d in plain.invoke(Q)] == ["b1", "a1"]  # no config: no narrowing asked


def test_a_wrapped_retriever_is_not_held_to_the_config_of_the_one_around_it(plain):
    """``from_retriever`` runs the retrievers it wraps itself, without the call's config:
    its own ``call_filters`` narrow what they return."""
    ensemble_module = pytest.importorskip("langchain_classic.retrievers")
    ensemble = ensemble_module.EnsembleRetriever(retrievers=[plain], weights=[1.0])
    outer = ThresholdedRetriever.from_retriever(ensemble, policy=POLICY)
    exposed = outer.configurable_fields(call_filters=ConfigurableField(id="call_filters"))
    chain = RunnableLambda(lambda q: q) | exposed
    assert [d.id for d in exposed.invoke(Q, config=TENANT_A)] == ["a1"]
    assert [d.id for d in chain.invoke(Q, config=TENANT_A)] == ["a1"]
    assert [d.id for d in asyncio.run(chain.ainvoke(Q, config=TENANT_A))] == ["a1"]
