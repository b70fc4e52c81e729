"""A LangChain filter on a key its Milvus store does not read back is refused (Milvus Lite).

A langchain-milvus store opened with ``enable_dynamic_field=False`` over a collection
whose metadata lives in its dynamic field asks Milvus for the declared fields only: its
documents carried none of the metadata. Where the expression is inexact (Milvus Lite 2.5
runs no NOT over a list test), the store returned every row, and the check of the
documents let every one through ``NOT (tags contains "internal")``: o0, o1, h1 and h3
came back.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from leak_data import POLICY, QUESTION, SameEmbeddings, langchain_documents, langchain_milvus

import langchain_thresholded as lc
from thresholded.errors import UnsafeFilterError

pytestmark = pytest.mark.integration

NOT_INTERNAL = {"$not": [{"tags": {"$contains": "internal"}}]}
PUBLIC_SECTIONS = ["f0", "f1", "h0", "h2"]


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> str:
    pytest.importorskip("langchain_milvus")
    uri = str(Path(tmp_path_factory.mktemp("read_back")) / "langchain.db")
    langchain_milvus(Path(uri), langchain_documents())
    return uri


def opened(uri: str, **kwargs: object) -> object:
    return lc.existing_milvus_store(uri, "leaks", embeddings=SameEmbeddings(), **kwargs)


def test_a_filter_on_metadata_not_read_back_is_refused(collection: str) -> None:
    store = opened(collection, enable_dynamic_field=False)
    with pytest.raises(UnsafeFilterError, match=r"'tags', which .* does not read back"):
        lc.ThresholdedRetriever(vectorstore=store, policy=POLICY, filters=NOT_INTERNAL)
    retriever = lc.ThresholdedRetriever(vectorstore=store, policy=POLICY)
    with pytest.raises(UnsafeFilterError, match=r"enable_dynamic_field=False"):
        retriever.invoke(QUESTION, filters=NOT_INTERNAL)
    multi = lc.MultiCollectionRetriever(collections=[retriever], policy=POLICY)
    with pytest.raises(UnsafeFilterError, match=r"enable_dynamic_field=False"):
        multi.invoke(QUESTION, filters=NOT_INTERNAL)
    assert len(retriever.invoke(QUESTION)) == 8  # unfiltered, it searches as before


def test_a_filter_on_metadata_read_back_holds(collection: str) -> None:
    retriever = lc.ThresholdedRetriever(
        vectorstore=opened(collection), policy=POLICY, filters=NOT_INTERNAL
    )
    assert sorted(d.metadata["pk"] for d in retriever.invoke(QUESTION)) == PUBLIC_SECTIONS


def wrapped(store: object, how: str) -> object:
    """The store searched through a retriever ``from_retriever`` runs, without the filters."""
    from langchain_classic.retrievers import EnsembleRetriever

    if how == "mmr":
        return store.as_retriever(search_type="mmr", search_kwargs={"k": 20})
    member = (
        store.as_retriever(search_kwargs={"k": 20})
        if how == "ensemble"
        else lc.ThresholdedRetriever(vectorstore=store, policy=POLICY)
    )
    return EnsembleRetriever(retrievers=[member], weights=[1.0])


@pytest.mark.parametrize("how", ["mmr", "ensemble", "ensemble of a ThresholdedRetriever"])
def test_a_wrapped_store_that_does_not_read_the_key_back_is_refused(
    collection: str, how: str
) -> None:
    """The wrapped retriever searched without the filters, and its documents carried none of
    the metadata: every row came back through ``NOT (tags contains "internal")``."""
    pytest.importorskip("langchain_classic")
    store = opened(collection, enable_dynamic_field=False)
    with pytest.raises(UnsafeFilterError, match=r"'tags', which .* does not read back"):
        lc.ThresholdedRetriever.from_retriever(
            wrapped(store, how), policy=POLICY, filters=NOT_INTERNAL
        )
    retriever = lc.ThresholdedRetriever.from_retriever(wrapped(store, how), policy=POLICY)
    with pytest.raises(UnsafeFilterError, match=r"enable_dynamic_field=False"):
        retriever.invoke(QUESTION, filters=NOT_INTERNAL)


@pytest.mark.parametrize("how", ["mmr", "ensemble"])
def test_a_wrapped_store_that_reads_the_key_back_holds(collection: str, how: str) -> None:
    pytest.importorskip("langchain_classic")
    retriever = lc.ThresholdedRetriever.from_retriever(
        wrapped(opened(collection), how), policy=POLICY, filters=NOT_INTERNAL
    )
    assert sorted(d.metadata["pk"] for d in retriever.invoke(QUESTION)) == PUBLIC_SECTIONS
