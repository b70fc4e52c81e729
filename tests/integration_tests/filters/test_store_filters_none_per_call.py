"""A call's ``search_kwargs`` that name a store filter with the value None are refused.

``{"partition_names": None}`` or ``{"where_document": None}`` passed the check for a store
filter per call (only values that are not None were looked at), and the merge of the
call's ``search_kwargs`` over the retriever's then replaced the retriever's partitions or
``where_document`` with no restriction at all: every section of the collection came back.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from leak_data import POLICY, QUESTION, SameEmbeddings, langchain_documents

import langchain_thresholded as lc
from thresholded.milvus_expr import membership

pytestmark = pytest.mark.integration

PUBLIC_SECTIONS = ["f0", "f1", "h0", "h2"]
PARTITIONS = {"public": PUBLIC_SECTIONS}
"""Milvus Lite 2.5 has no partitions: a partition is played by a list of primary keys."""


@pytest.fixture
def partitioned(leaky, monkeypatch) -> None:
    """The leaky store, its client's searches and queries limited to the partitions named."""
    client, pk = leaky.langchain_store.client, leaky.langchain_store._primary_field

    def in_partitions(call: Any) -> Any:
        def limited(*args: Any, **kwargs: Any) -> Any:
            names = kwargs.pop("partition_names", None)
            if names:
                rows = [i for name in names for i in PARTITIONS[name]]
                own = kwargs.get("filter")
                kwargs["filter"] = " and ".join(f"({e})" for e in (own, membership(pk, rows)) if e)
            return call(*args, **kwargs)

        return limited

    monkeypatch.setattr(client, "search", in_partitions(client.search))
    monkeypatch.setattr(client, "query", in_partitions(client.query))


@pytest.fixture
def chroma() -> Any:
    """The leaky sections in a Chroma collection of their own."""
    chromadb = pytest.importorskip("chromadb")
    langchain_chroma = pytest.importorskip("langchain_chroma")
    documents = langchain_documents()
    store = langchain_chroma.Chroma(
        collection_name=f"leaks-{uuid.uuid4().hex}",
        embedding_function=SameEmbeddings(),
        client=chromadb.EphemeralClient(),
    )
    store.add_documents(documents, ids=[d.id for d in documents])
    return store


def ids(documents: list[Any]) -> list[str]:
    return sorted(d.id for d in documents)


async def test_a_calls_partition_names_none_cannot_lift_the_retrievers(leaky, partitioned) -> None:
    """h1, h3, o0 and o1 came back: the call searched every partition."""
    retriever = lc.ThresholdedRetriever(
        vectorstore=leaky.langchain_store,
        policy=POLICY,
        search_kwargs={"partition_names": ["public"]},
    )
    assert ids(retriever.invoke(QUESTION)) == PUBLIC_SECTIONS
    with pytest.raises(TypeError, match=r"search_kwargs hold a store filter \(partition_names\)"):
        retriever.invoke(QUESTION, search_kwargs={"partition_names": None})
    with pytest.raises(TypeError, match=r"search_kwargs hold a store filter \(partition_names\)"):
        await retriever.ainvoke(QUESTION, search_kwargs={"partition_names": None})
    multi = lc.MultiCollectionRetriever(collections=[retriever], policy=POLICY)
    with pytest.raises(TypeError, match=r"search_kwargs hold a store filter \(partition_names\)"):
        multi.invoke(QUESTION, search_kwargs={"partition_names": None})


def test_a_calls_where_document_none_cannot_lift_the_retrievers(chroma) -> None:
    """Every section came back: the call's None replaced the retriever's where_document."""
    retriever = lc.ThresholdedRetriever(
        vectorstore=chroma, policy=POLICY, search_kwargs={"where_document": {"$contains": "f"}}
    )
    assert ids(retriever.invoke(QUESTION)) == ["f0", "f1"]
    with pytest.raises(TypeError, match=r"search_kwargs hold a store filter \(where_document\)"):
        retriever.invoke(QUESTION, search_kwargs={"where_document": None})


@pytest.mark.parametrize("nothing", [None, {}])
def test_from_retriever_given_no_where_document_keeps_the_wrapped_one(chroma, nothing) -> None:
    """As LlamaIndex's ``from_retriever``: a restriction given as None or empty restricts
    nothing, so the wrapped retriever's holds (it was refused as replacing it); one given
    differently is refused."""
    wrapped = chroma.as_retriever(search_kwargs={"where_document": {"$contains": "f"}})
    retriever = lc.ThresholdedRetriever.from_retriever(
        wrapped, policy=POLICY, search_kwargs={"where_document": nothing}
    )
    assert retriever.search_kwargs == {"where_document": {"$contains": "f"}}
    assert ids(retriever.invoke(QUESTION)) == ["f0", "f1"]
    with pytest.raises(
        ValueError, match=r"search_kwargs \['where_document'\].*would replace the other"
    ):
        lc.ThresholdedRetriever.from_retriever(
            wrapped, policy=POLICY, search_kwargs={"where_document": {"$contains": "h"}}
        )
