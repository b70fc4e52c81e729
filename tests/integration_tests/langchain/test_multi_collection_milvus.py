"""langchain_thresholded.MultiCollectionRetriever over langchain-milvus stores on Milvus Lite."""

from __future__ import annotations

import asyncio
import logging
import math

import pytest
from langchain_core.embeddings import Embeddings

from langchain_thresholded import (
    CollectionSpec,
    MultiCollectionRetriever,
    RetrievalPolicy,
    ThresholdedRetriever,
)
from thresholded.fanout import COLLECTION_KEY

pytestmark = pytest.mark.integration

DIM = 8
QUERY = "the question"


def vec(cos: float, axis: int) -> list[float]:
    v = [0.0] * DIM
    v[0] = cos
    v[axis] = math.sqrt(1.0 - cos * cos)
    return v


class HandEmbeddings(Embeddings):
    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = {QUERY: [1.0] + [0.0] * (DIM - 1), **vectors}
        self.query_calls = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.vectors[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.query_calls += 1
        return self.vectors[text]


SECTIONS = {
    "laws": {"l1": 0.9, "l2": 0.45},
    "faqs": {"f1": 0.8, "f2": 0.5},
}


def build(uri: str, collection: str, embeddings: HandEmbeddings) -> object:
    from langchain_core.documents import Document

    from langchain_thresholded.milvus import milvus_from_documents

    documents = [
        Document(id=doc_id, page_content=f"text {doc_id}", metadata={"source": collection})
        for doc_id in SECTIONS[collection]
    ]
    return milvus_from_documents(
        documents, embeddings, uri=uri, collection_name=collection, overwrite=True
    )


@pytest.fixture
def embeddings() -> HandEmbeddings:
    vectors = {}
    for sections in SECTIONS.values():
        for axis, (doc_id, cos) in enumerate(sections.items(), start=1):
            vectors[f"text {doc_id}"] = vec(cos, axis)
    return HandEmbeddings(vectors)


@pytest.fixture
def stores(tmp_path, embeddings):
    pytest.importorskip("langchain_milvus")
    uri = str(tmp_path / "multi.db")
    return {name: build(uri, name, embeddings) for name in SECTIONS}


def _retriever(stores, **kwargs):
    floors = {"laws": 0.4, "faqs": 0.6}
    return MultiCollectionRetriever(
        collections=[
            ThresholdedRetriever(
                vectorstore=stores[name], policy=RetrievalPolicy(min_similarity=floors[name])
            )
            for name in SECTIONS
        ],
        policy=RetrievalPolicy(top_k=10, max_per_source=None),
        **kwargs,
    )


def test_two_milvus_lite_collections_each_with_its_floor(stores, embeddings):
    retriever = _retriever(stores)
    assert retriever.collection_names == ("laws", "faqs")
    report = retriever.retrieve_with_report(QUERY)
    got = [(d.metadata[COLLECTION_KEY], d.metadata["pk"]) for d in report.kept]
    # f2 (0.5) clears the laws' floor, not its own collection's (0.6)
    assert got == [("laws", "l1"), ("faqs", "f1"), ("laws", "l2")]
    assert [d.metadata["similarity"] for d in report.kept] == pytest.approx([0.9, 0.8, 0.45])
    assert embeddings.query_calls == 1
    asynchronous = asyncio.run(retriever.aretrieve_with_report(QUERY))
    assert [d.page_content for d in asynchronous.kept] == [d.page_content for d in report.kept]


def test_a_dropped_collection_leaves_partial_results(stores, caplog):
    retriever = _retriever(stores)
    stores["faqs"].client.drop_collection("faqs")
    with caplog.at_level(logging.WARNING, logger="thresholded.engine"):
        report = retriever.retrieve_with_report(QUERY)
    assert [d.metadata["pk"] for d in report.kept] == ["l1", "l2"]
    assert report.status("faqs").status == "failed"
    assert report.status("laws").status == "ok"
    assert len([r for r in caplog.records if r.name == "thresholded.engine"]) == 1


def test_a_spec_names_and_limits_a_collection(stores):
    spec = CollectionSpec(
        retriever=ThresholdedRetriever(
            vectorstore=stores["laws"], policy=RetrievalPolicy(min_similarity=0.4)
        ),
        name="statutes",
        retrieve_k=1,
    )
    report = MultiCollectionRetriever(collections=[spec]).retrieve_with_report(QUERY)
    assert [d.metadata[COLLECTION_KEY] for d in report.kept] == ["statutes"]
    assert report.status("statutes").returned == 1


def test_a_collection_named_by_uri_with_fields_named_otherwise_says_what_to_do(
    tmp_path, embeddings
):
    """It said "pass vector_field=...", which CollectionSpec does not take (TypeError):
    the advice is the way that works, the store opened with ``existing_milvus_store``."""
    pytest.importorskip("langchain_milvus")
    from langchain_core.documents import Document

    from langchain_thresholded import CollectionSpec, existing_milvus_store
    from langchain_thresholded.milvus import milvus_from_documents

    uri = str(tmp_path / "fields.db")
    documents = [Document(id="l1", page_content="text l1", metadata={"source": "laws"})]
    milvus_from_documents(documents, embeddings, uri=uri, collection_name="laws", vector_field="v")
    policy = RetrievalPolicy(min_similarity=0.4)
    with pytest.raises(ValueError, match=r"pass vector_field=\.\.\. to existing_milvus_store") as e:
        MultiCollectionRetriever(
            collections=[CollectionSpec(uri=uri, collection_name="laws")],
            embeddings=embeddings,
            policy=policy,
        )
    assert "CollectionSpec(store=...)" in str(e.value)
    store = existing_milvus_store(uri, "laws", embeddings=embeddings, vector_field="v")
    found = MultiCollectionRetriever(
        collections=[CollectionSpec(store=store)], policy=policy
    ).invoke(QUERY)
    assert [d.id for d in found] == ["l1"]
