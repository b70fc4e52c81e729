"""A multi-collection retriever takes its collections as a list, in both adapters.

One collection given alone was read item by item: LlamaIndex said "'VectorStoreIndex'
object is not iterable", and a ``CollectionSpec`` or a store (pydantic models, which
iterate as their fields) "a collection is ..., got tuple"; LangChain's given one
``ThresholdedRetriever`` failed with 81 validation errors about tuples.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core.vector_stores import SimpleVectorStore

import langchain_thresholded as lc
import llama_index_thresholded as li

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contract_tests"))

from contract_data import POLICY, QUESTION, FixedEmbeddings, llama_index

SAID = r"collections takes a list of collections, got {}: write \[.*\] for one"


def langchain_one(kind: str):
    store = InMemoryVectorStore(FixedEmbeddings())
    store.add_texts(["f2 ".ljust(100, ".")], metadatas=[{"source": "faq"}])
    return {
        "store": store,
        "retriever": lc.ThresholdedRetriever(vectorstore=store, policy=POLICY),
        "spec": lc.CollectionSpec(store),
        "dict": {"faq": store},
        "str": "faq",
    }[kind]


def llama_index_one(kind: str):
    index = llama_index(SimpleVectorStore())
    return {
        "index": index,
        "store": index.vector_store,
        "spec": li.CollectionSpec(index),
        "dict": {"faq": index},
        "str": "faq",
    }[kind]


@pytest.mark.parametrize(
    ("kind", "type_name"),
    [
        ("store", "InMemoryVectorStore"),
        ("retriever", "ThresholdedRetriever"),
        ("spec", "CollectionSpec"),
        ("dict", "dict"),
        ("str", "str"),
    ],
)
def test_langchain_refuses_one_collection_given_alone(kind, type_name):
    with pytest.raises(TypeError, match=SAID.format(type_name)):
        lc.MultiCollectionRetriever(collections=langchain_one(kind), policy=POLICY)


@pytest.mark.parametrize(
    ("kind", "type_name"),
    [
        ("index", "VectorStoreIndex"),
        ("store", "SimpleVectorStore"),
        ("spec", "CollectionSpec"),
        ("dict", "dict"),
        ("str", "str"),
    ],
)
def test_llama_index_refuses_one_collection_given_alone(kind, type_name):
    with pytest.raises(TypeError, match=SAID.format(type_name)):
        li.MultiCollectionRetriever(llama_index_one(kind), policy=POLICY)


def test_a_list_or_a_tuple_of_one_is_taken():
    for collections in ([langchain_one("store")], (langchain_one("store"),)):
        retriever = lc.MultiCollectionRetriever(collections=collections, policy=POLICY)
        assert retriever.invoke(QUESTION)
    for collections in ([llama_index_one("index")], (llama_index_one("index"),)):
        assert li.MultiCollectionRetriever(collections, policy=POLICY).retrieve(QUESTION)


def test_a_generator_or_a_dicts_values_is_taken():
    """A generator of collections, or a dict's ``values()``, was taken before lists were
    required, and was then refused as "collections takes a list of collections, got
    generator"."""
    for collections in (
        (s for s in [langchain_one("store")]),
        {"faq": langchain_one("store")}.values(),
    ):
        retriever = lc.MultiCollectionRetriever(collections=collections, policy=POLICY)
        assert retriever.invoke(QUESTION)
    for collections in (
        (i for i in [llama_index_one("index")]),
        {"faq": llama_index_one("index")}.values(),
    ):
        assert li.MultiCollectionRetriever(collections, policy=POLICY).retrieve(QUESTION)
