"""An empty collection is told apart from a filter that admits nothing.

A retriever without filters over a collection that holds no section said it abstained
because of its ``filters``, in both adapters, sending whoever reads ``abstained_by`` to
look for a filter that does not exist instead of at the empty index.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.vector_stores import SimpleVectorStore
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

import langchain_thresholded as lc
import llama_index_thresholded as li

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contract_tests"))

from contract_data import POLICY, QUESTION, FixedEmbedding, FixedEmbeddings, llama_index

NO_ROW = {"doc_type": "none"}


def empty_index() -> VectorStoreIndex:
    storage = StorageContext.from_defaults(vector_store=SimpleVectorStore())
    return VectorStoreIndex([], storage_context=storage, embed_model=FixedEmbedding())


def report(framework: str, *, empty: bool, filters: dict | None = None):
    if framework == "langchain":
        store = InMemoryVectorStore(FixedEmbeddings())
        if not empty:
            store.add_texts(["f2 ".ljust(100, ".")], metadatas=[{"source": "faq"}])
        retriever = lc.ThresholdedRetriever(vectorstore=store, policy=POLICY, filters=filters)
        return retriever.retrieve_with_report(QUESTION)
    index = empty_index() if empty else llama_index(SimpleVectorStore())
    where = None
    if filters:
        where = MetadataFilters(
            filters=[MetadataFilter(key=k, value=v) for k, v in filters.items()]
        )
    return li.ThresholdedRetriever(index, policy=POLICY, filters=where).retrieve_with_report(
        QUESTION
    )


@pytest.mark.parametrize("framework", ["llama_index", "langchain"])
def test_an_empty_collection_is_emptied_by_nothing_stored(framework):
    empty = report(framework, empty=True)
    assert empty.nothing_matched and empty.emptied_by == "empty"
    assert "nothing matched (empty)" in empty.explain()


@pytest.mark.parametrize("framework", ["llama_index", "langchain"])
def test_a_filter_that_admits_nothing_is_still_the_filters(framework):
    assert report(framework, empty=False, filters=NO_ROW).emptied_by == "filters"
    assert report(framework, empty=True, filters=NO_ROW).emptied_by == "filters"


def langchain_store(kind: str, tmp_path: Path):
    """A LangChain store of ``kind`` holding one public section."""
    texts, metadatas = ["f2 ".ljust(100, ".")], [{"source": "faq", "doc_type": "public"}]
    if kind == "faiss":
        pytest.importorskip("faiss")
        community = pytest.importorskip("langchain_community.vectorstores")
        return community.FAISS.from_texts(
            texts, FixedEmbeddings(), metadatas=metadatas, distance_strategy="MAX_INNER_PRODUCT"
        )
    pytest.importorskip("langchain_chroma")
    import chromadb
    from langchain_chroma import Chroma

    return Chroma.from_texts(
        texts,
        FixedEmbeddings(),
        metadatas=metadatas,
        client=chromadb.PersistentClient(path=str(tmp_path / "chroma")),
        collection_name="held_back",
        collection_metadata={"hnsw:space": "cosine"},
    )


STORE_RESTRICTIONS = {
    "faiss filter": ("faiss", {"filter": NO_ROW}),
    "chroma filter": ("chroma", {"filter": NO_ROW}),
    "chroma where_document": ("chroma", {"where_document": {"$contains": "no such text"}}),
}


@pytest.mark.parametrize("kind, search_kwargs", STORE_RESTRICTIONS.values(), ids=STORE_RESTRICTIONS)
def test_a_store_restriction_that_admits_nothing_is_not_an_empty_collection(
    tmp_path, kind, search_kwargs
):
    """The store's own filter in ``search_kwargs`` held its one section back: the collection
    is not empty, as ``abstained_by="empty"`` said."""
    store = langchain_store(kind, tmp_path)
    plain = lc.ThresholdedRetriever(vectorstore=store, policy=POLICY)
    assert not plain.retrieve_with_report(QUESTION).nothing_matched
    restricted = lc.ThresholdedRetriever(
        vectorstore=store, policy=POLICY, search_kwargs=search_kwargs
    )
    assert restricted.retrieve_with_report(QUESTION).emptied_by == "filters"


def test_an_ensemble_members_store_restriction_is_not_an_empty_collection(tmp_path):
    """A wrapped ensemble's member searches with its own store filter, which held the one
    section back: the collection is not empty."""
    classic = pytest.importorskip("langchain_classic.retrievers")
    store = langchain_store("chroma", tmp_path)

    def wrapping(search_kwargs: dict) -> lc.ThresholdedRetriever:
        member = store.as_retriever(search_kwargs=search_kwargs)
        ensemble = classic.EnsembleRetriever(retrievers=[member], weights=[1.0])
        return lc.ThresholdedRetriever.from_retriever(
            ensemble, policy=POLICY, embeddings=FixedEmbeddings()
        )

    assert not wrapping({}).retrieve_with_report(QUESTION).nothing_matched
    assert wrapping({"filter": NO_ROW}).retrieve_with_report(QUESTION).emptied_by == "filters"
