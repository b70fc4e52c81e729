"""LlamaIndex's FAISS store refuses any ``MetadataFilters``: filters are held after its
search instead (they used to fail every call with "Metadata filters not implemented for
Faiss yet", unless nested)."""

from __future__ import annotations

import re

import pytest
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

from llama_index_thresholded import MultiCollectionRetriever, ThresholdedRetriever

faiss = pytest.importorskip("faiss")
pytest.importorskip("llama_index.vector_stores.faiss")


def only(key, value):
    return MetadataFilters(filters=[MetadataFilter(key=key, value=value)])


@pytest.fixture
def faiss_index(kit):
    from llama_index.vector_stores.faiss import FaissVectorStore

    linked = [
        kit.section("pub-a", 0.9, axis=1, doc_type="public"),
        kit.section("int-b", 0.95, axis=2, doc_type="internal"),
        kit.section("pub-c", 0.8, axis=3, doc_type="public"),
    ]
    kit.link_chain(linked)
    store = FaissVectorStore(faiss_index=faiss.IndexFlatIP(kit.DIM))
    return kit.build_index(linked, kit.embedding(), store=store)


def ids(report):
    return [n.node.node_id for n in report.items]


def test_the_retriever_s_filters_hold_on_faiss(kit, faiss_index):
    retriever = ThresholdedRetriever(
        faiss_index, kit.policy(min_similarity=0.5), filters=only("doc_type", "public")
    )
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert ids(report) == ["pub-a", "pub-c"]  # int-b neither kept nor attached
    assert "outside_filters" not in report.drop_counts()  # held back: not counted


def test_a_call_s_filters_hold_on_faiss(kit, faiss_index):
    retriever = ThresholdedRetriever(faiss_index, kit.policy(min_similarity=0.5), neighbours=0)
    report = retriever.retrieve_with_report(kit.QUESTION, filters=only("doc_type", "internal"))
    assert ids(report) == ["int-b"]


def test_a_multi_collection_retriever_s_filters_hold_on_faiss(kit, faiss_index):
    retriever = MultiCollectionRetriever(
        [faiss_index], policy=kit.policy(min_similarity=0.5), filters=only("doc_type", "public")
    )
    assert [n.node.node_id for n in retriever.retrieve(kit.QUESTION)] == ["pub-a", "pub-c"]


@pytest.fixture
def faiss_index_with_a_long_internal_vector(kit):
    from llama_index.vector_stores.faiss import FaissVectorStore

    long_internal = [2.0 * x for x in kit.vec(0.9, 2)]  # its IP score: 1.8
    nodes = [
        kit.section("pub-a", 0.5, axis=1, doc_type="public"),
        kit.section("int-b", embedding=long_internal, doc_type="internal"),
    ]
    store = FaissVectorStore(faiss_index=faiss.IndexFlatIP(kit.DIM))
    return kit.build_index(nodes, kit.embedding(), store=store)


def test_a_score_outside_the_filters_neither_fails_the_call_nor_is_named(
    kit, faiss_index_with_a_long_internal_vector
):
    index = faiss_index_with_a_long_internal_vector
    public = only("doc_type", "public")
    single = ThresholdedRetriever(index, kit.policy(min_similarity=0.3), filters=public)
    assert ids(single.retrieve_with_report(kit.QUESTION)) == ["pub-a"]
    multi = MultiCollectionRetriever([index], policy=kit.policy(min_similarity=0.3))
    report = multi.retrieve_with_report(kit.QUESTION, filters=public)
    assert ids(report) == ["pub-a"]
    described = " ".join(s.describe() for s in report.collections)
    assert "1.8" not in re.sub(r"[\d.]+ ms", "", described)  # the score, not the time taken
