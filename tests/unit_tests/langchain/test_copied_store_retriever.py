"""``from_retriever(store.as_retriever(...))`` refuses a search once the wrapped retriever
changed: it copied the retriever's store, search type and ``search_kwargs`` when it was
built, and would not follow a change.

A filter set on the wrapped retriever afterwards (``base.search_kwargs["filter"] = ...``, a
tenant's, per request) narrowed what ``base`` returned, while the ``ThresholdedRetriever``
over it went on searching with the filters it had copied: b, outside the new filter, came
back.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.runnables import ConfigurableField

from langchain_thresholded import MultiCollectionRetriever, ThresholdedRetriever
from thresholded import RetrievalPolicy

QUERY = "the question"
POLICY = RetrievalPolicy(min_similarity=0.1, top_k=10, max_per_source=None, max_chars=None)


def tenant_a(doc: Any) -> bool:
    return doc.metadata.get("tenant") == "a"


def wrapped(corpus: Any, search_type: str = "similarity") -> tuple[Any, Any, Any]:
    c = corpus([("a", 0.75, {"tenant": "a"}), ("b", 0.875, {"tenant": "b"})])
    base = c.store.as_retriever(search_type=search_type)
    retriever = ThresholdedRetriever.from_retriever(base, policy=POLICY)
    assert sorted(d.id for d in retriever.invoke(QUERY)) == ["a", "b"]
    return c, base, retriever


CHANGES = {
    "a filter set in place": lambda base, c: base.search_kwargs.__setitem__("filter", tenant_a),
    "search_kwargs assigned": lambda base, c: setattr(base, "search_kwargs", {"filter": tenant_a}),
    "another search type": lambda base, c: setattr(
        base, "search_type", "similarity_score_threshold"
    ),
    "another store": lambda base, c: setattr(base, "vectorstore", type(c.store)(c.embeddings)),
}


@pytest.mark.parametrize("search_type", ["similarity", "mmr"])
@pytest.mark.parametrize("change", CHANGES)
def test_a_search_after_the_wrapped_retriever_changed_is_refused(
    corpus: Any, change: str, search_type: str
) -> None:
    """An MMR search runs a copy of the wrapped retriever: the change did not reach it."""
    c, base, retriever = wrapped(corpus, search_type)
    CHANGES[change](base, c)
    with pytest.raises(ValueError, match=r"changed after from_retriever"):
        retriever.invoke(QUERY)
    with pytest.raises(ValueError, match=r"changed after from_retriever"):
        asyncio.run(retriever.ainvoke(QUERY))


def test_a_collection_whose_wrapped_retriever_changed_is_refused(corpus: Any) -> None:
    _, base, retriever = wrapped(corpus)
    multi = MultiCollectionRetriever(collections=[retriever], policy=POLICY)
    base.search_kwargs["filter"] = tenant_a
    with pytest.raises(ValueError, match=r"changed after from_retriever"):
        multi.invoke(QUERY)


def test_an_unchanged_wrapped_retriever_is_searched_as_copied(corpus: Any) -> None:
    _, base, retriever = wrapped(corpus)
    base.invoke(QUERY)  # running it changes nothing
    base.search_kwargs["k"] = 1  # replaced by the policy's anyway
    assert [d.id for d in retriever.invoke(QUERY)] == ["b", "a"]
    copy = retriever.model_copy(update={"filters": {"tenant": "a"}})
    assert [d.id for d in copy.invoke(QUERY)] == ["a"]


def test_a_retriever_given_as_vectorstore_says_to_wrap_it(corpus: Any) -> None:
    """``vectorstore=store.as_retriever()`` was a pydantic "Input should be an instance of
    VectorStore", which named no way on; LlamaIndex's retriever names ``from_retriever``."""
    base = corpus([("a", 0.75, {})]).store.as_retriever()
    with pytest.raises(TypeError, match=r"got VectorStoreRetriever.*from_retriever"):
        ThresholdedRetriever(vectorstore=base, policy=POLICY)


@pytest.mark.parametrize("exposed", ["call_filters", "policy"])
def test_a_configured_search_after_the_wrapped_retriever_changed_is_refused(
    corpus: Any, exposed: str
) -> None:
    """LangChain builds each configured retriever anew from its fields: what
    ``from_retriever`` copied was not among them, and b came back under the config."""
    _, base, retriever = wrapped(corpus)
    configurable = retriever.configurable_fields(**{exposed: ConfigurableField(id="x")})
    value = {"tenant": {"$ne": "c"}} if exposed == "call_filters" else POLICY
    config: Any = {"configurable": {"x": value}}
    assert sorted(d.id for d in configurable.invoke(QUERY, config=config)) == ["a", "b"]
    base.search_kwargs["filter"] = tenant_a
    for call in (
        lambda: configurable.invoke(QUERY, config=config),
        lambda: configurable.batch([QUERY, QUERY], config=[config, config]),
        lambda: asyncio.run(configurable.ainvoke(QUERY, config=config)),
    ):
        with pytest.raises(ValueError, match=r"changed after from_retriever"):
            call()


def test_a_configured_copy_holds_the_configured_value(corpus: Any) -> None:
    _, _, retriever = wrapped(corpus)
    configurable = retriever.configurable_fields(call_filters=ConfigurableField(id="x"))
    config: Any = {"configurable": {"x": {"tenant": "a"}}}
    assert [d.id for d in configurable.invoke(QUERY, config=config)] == ["a"]
    assert sorted(d.id for d in configurable.invoke(QUERY)) == ["a", "b"]
    assert retriever.call_filters is None  # the retriever itself is left as it was
