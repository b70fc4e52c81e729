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


UNEXPOSABLE = {
    "filters": {"tenant": "a"},
    "expr": 'tenant == "a"',
    "search_kwargs": {"filter": {"tenant": "a"}},
    "allowed_filter_keys": ["tenant"],
}
"""A config's value for each filter-bearing field that cannot be exposed: LangChain drops
it as it drops unexposed ``call_filters``, and the search would not be narrowed."""


def _calls(retriever: Any, config: Any) -> dict[str, Any]:
    """Every way a config reaches a retriever: each ends in ``invoke`` or ``ainvoke``."""

    async def gathered(stream: Any) -> list[Any]:
        return [chunk async for chunk in stream]

    return {
        "invoke": lambda: retriever.invoke(Q, config=config),
        "with_config": lambda: retriever.with_config(config).invoke(Q),
        "batch": lambda: retriever.batch([Q], config=[config]),
        "stream": lambda: list(retriever.stream(Q, config=config)),
        "chain": lambda: (RunnableLambda(lambda q: q) | retriever).invoke(Q, config=config),
        "ainvoke": lambda: asyncio.run(retriever.ainvoke(Q, config=config)),
        "abatch": lambda: asyncio.run(retriever.abatch([Q], config=[config])),
        "astream": lambda: asyncio.run(gathered(retriever.astream(Q, config=config))),
    }


@pytest.mark.parametrize("field", sorted(UNEXPOSABLE))
@pytest.mark.parametrize("kind", ["single", "multi"])
def test_a_config_s_filter_bearing_field_that_no_field_reads_is_refused(plain, field, kind):
    retriever = plain if kind == "single" else MultiCollectionRetriever(collections=[plain])
    config = {"configurable": {field: UNEXPOSABLE[field]}}
    for call in _calls(retriever, config).values():
        with pytest.raises(UnsafeFilterError, match=rf"configurable {field}\b.*call_filters="):
            call()


def test_a_config_s_filters_equal_to_the_retriever_s_own_are_accepted(plain):
    """A config that sets a field to what the retriever holds narrows nothing it does not."""
    own = plain.model_copy(update={"filters": {"tenant": "a"}, "allowed_filter_keys": ["tenant"]})
    config = {"configurable": {"filters": {"tenant": "a"}, "allowed_filter_keys": ["tenant"]}}
    assert [d.id for d in own.invoke(Q, config=config)] == ["a1"]
    assert [d.id for d in asyncio.run(own.ainvoke(Q, config=config))] == ["a1"]


def test_a_config_s_empty_allowed_filter_keys_are_no_match_for_none(plain):
    """``allowed_filter_keys=[]`` allows no key, ``None`` any: they are not the same value."""
    with pytest.raises(UnsafeFilterError, match=r"configurable allowed_filter_keys \(\[\]\)"):
        plain.invoke(Q, config={"configurable": {"allowed_filter_keys": []}})
