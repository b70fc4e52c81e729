"""A LangChain filter on a Milvus store's primary key is refused with a docstore (Milvus Lite).

langchain-milvus puts each row's primary key in the metadata of the documents it returns
(``pk``), so a filter on it held for the search; the neighbours and summaries come from the
docstore, whose documents are the ones given to the store, without that key. Every one of
them passed ``pk != "h1"`` and ``pk not in ["h1"]``: h1, left out of the search, came back
as the neighbour of h0 and h2.
"""

from __future__ import annotations

from typing import Any

import pytest
from leak_data import POLICY, QUESTION

import langchain_thresholded as lc
from thresholded.errors import UnsafeFilterError

pytestmark = pytest.mark.integration

WITHOUT_H1 = [{"pk": {"$ne": "h1"}}, {"pk": {"$nin": ["h1"]}}, {"$not": [{"pk": "h1"}]}]


@pytest.mark.parametrize("filters", WITHOUT_H1)
def test_a_filter_on_the_primary_key_with_a_docstore_is_refused(leaky: Any, filters: Any) -> None:
    store, docstore = leaky.langchain_store, leaky.langchain_docstore
    with pytest.raises(UnsafeFilterError, match=r"'pk'.*primary key.*docstore"):
        lc.ThresholdedRetriever(
            vectorstore=store, policy=POLICY, docstore=docstore, filters=filters
        )
    retriever = lc.ThresholdedRetriever(vectorstore=store, policy=POLICY, docstore=docstore)
    with pytest.raises(UnsafeFilterError, match=r"'pk'.*primary key.*docstore"):
        retriever.invoke(QUESTION, filters=filters)
    multi = lc.MultiCollectionRetriever(collections=[retriever], policy=POLICY)
    with pytest.raises(UnsafeFilterError, match=r"'pk'.*primary key.*docstore"):
        multi.invoke(QUESTION, filters=filters)


def test_a_filter_on_the_primary_key_of_a_wrapped_store_with_a_docstore_is_refused(
    leaky: Any,
) -> None:
    wrapped = leaky.langchain_store.as_retriever(search_type="mmr", search_kwargs={"k": 20})
    retriever = lc.ThresholdedRetriever.from_retriever(
        wrapped, policy=POLICY, docstore=leaky.langchain_docstore
    )
    with pytest.raises(UnsafeFilterError, match=r"'pk'.*primary key.*docstore"):
        retriever.invoke(QUESTION, filters=WITHOUT_H1[0])


@pytest.mark.parametrize("filters", WITHOUT_H1)
def test_a_filter_on_the_primary_key_without_a_docstore_holds(leaky: Any, filters: Any) -> None:
    """The documents the store returns carry it: the filter is checked on them."""
    retriever = lc.ThresholdedRetriever(vectorstore=leaky.langchain_store, policy=POLICY)
    returned = sorted(d.metadata["pk"] for d in retriever.invoke(QUESTION, filters=filters))
    assert returned == ["f0", "f1", "h0", "h2", "h3", "o0", "o1"]
