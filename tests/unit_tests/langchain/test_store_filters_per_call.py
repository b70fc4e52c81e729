"""A call's ``search_kwargs`` cannot carry a store filter: it would replace the retriever's.

``filters=`` is how a call narrows; a Chroma ``where_document`` (or any other store
filter) in a call's ``search_kwargs`` would have replaced the retriever's own, or been
left out of the search unnoticed, and never held for the neighbours and summaries.
"""

from __future__ import annotations

import pytest
from langchain_core.stores import InMemoryStore

from langchain_thresholded import MultiCollectionRetriever, ThresholdedRetriever
from thresholded import RetrievalPolicy

QUERY = "the question"
POLICY = RetrievalPolicy(min_similarity=0.5, top_k=10, max_per_source=None, max_chars=None)


@pytest.mark.parametrize(
    "key", ["where", "where_document", "ids", "partition_names", "filter_params", "namespace"]
)
def test_a_store_filter_in_a_calls_search_kwargs_is_refused(corpus, key):
    retriever = ThresholdedRetriever(vectorstore=corpus([("a", 0.75)]).store, policy=POLICY)
    with pytest.raises(TypeError, match=rf"search_kwargs hold a store filter \({key}\).*filters="):
        retriever.invoke(QUERY, search_kwargs={key: {"$contains": "a"}})
    assert [d.id for d in retriever.invoke(QUERY, search_kwargs={"unused": None})] == ["a"]


def test_expression_parameters_with_a_docstore_are_refused(corpus):
    """The sections fetched from the docstore are checked against the expression alone."""
    store = corpus([("a", 0.75)]).store
    with pytest.raises(ValueError, match=r"search_kwargs\['filter_params'\].*placeholders"):
        ThresholdedRetriever(
            vectorstore=store,
            policy=POLICY,
            search_kwargs={"filter_params": {"t": "public"}},
            docstore=InMemoryStore(),
        )


def test_a_namespace_with_a_docstore_is_refused(corpus):
    """The sections fetched from the docstore are checked by id against the expression and
    the partitions: a Milvus namespace would not hold for them."""
    store = corpus([("a", 0.75)]).store
    with pytest.raises(ValueError, match=r"search_kwargs\['namespace'\].*docstore"):
        ThresholdedRetriever(
            vectorstore=store,
            policy=POLICY,
            search_kwargs={"namespace": "tenant_a"},
            docstore=InMemoryStore(),
        )


def test_a_calls_ids_are_refused_in_every_collection(corpus):
    """Each collection's store gets the call's search_kwargs: they would replace its ids."""
    store = corpus([("a", 0.75), ("b", 0.75)]).store
    own = ThresholdedRetriever(vectorstore=store, policy=POLICY, search_kwargs={"ids": ["a"]})
    retriever = MultiCollectionRetriever(collections=[own], policy=POLICY)
    with pytest.raises(TypeError, match=r"search_kwargs hold a store filter \(ids\)"):
        retriever.invoke(QUERY, search_kwargs={"ids": ["a", "b"]})
    assert [d.id for d in retriever.invoke(QUERY)] == ["a"]


def test_the_retrievers_ids_hold_where_the_store_ignores_them(corpus):
    """An InMemoryVectorStore searches every document whatever its ids: b came back."""
    store = corpus([("a", 0.75), ("b", 0.875)]).store
    retriever = ThresholdedRetriever(vectorstore=store, policy=POLICY, search_kwargs={"ids": ["a"]})
    report = retriever.retrieve_with_report(QUERY)
    assert [d.id for d in report.kept] == ["a"]
    assert (report.dropped, report.outside_filters) == ((), 0)  # held back: not counted


@pytest.mark.parametrize("retriever", ["single", "multi"])
def test_allowed_filter_keys_as_one_string_is_refused(corpus, retriever):
    """Not read as the list of its characters: a TypeError, as in LlamaIndex."""
    store = corpus([("a", 0.75)]).store
    with pytest.raises(TypeError, match=r"pass allowed_filter_keys=\['doc_type'\]"):
        if retriever == "single":
            ThresholdedRetriever(vectorstore=store, allowed_filter_keys="doc_type")
        else:
            MultiCollectionRetriever(collections=[store], allowed_filter_keys="doc_type")
