"""langchain_thresholded.MultiCollectionRetriever against the Milvus 2.3.5 server.

Two collections of the default database, and two collections of the same name in two
databases of one server: langchain-milvus 0.3.3 on pymilvus 2.6 would share one ORM
connection alias between them, which ``ensure_orm_connection`` splits per database.
"""

from __future__ import annotations

import asyncio
import math

import pytest
from langchain_core.embeddings import Embeddings

from langchain_thresholded import (
    CollectionSpec,
    MultiCollectionRetriever,
    RetrievalPolicy,
    ThresholdedRetriever,
    ensure_orm_connection,
)
from langchain_thresholded.milvus import connection_args, orm_calls
from thresholded.fanout import COLLECTION_KEY

pytestmark = [pytest.mark.server, pytest.mark.integration]

DIM = 8
QUERY = "the question"
SECTIONS = {"lc_laws": {"l1": 0.9, "l2": 0.45}, "lc_faqs": {"f1": 0.8, "f2": 0.5}}


class HandEmbeddings(Embeddings):
    def __init__(self) -> None:
        self.vectors = {QUERY: [1.0] + [0.0] * (DIM - 1)}
        for sections in SECTIONS.values():
            for axis, (doc_id, cos) in enumerate(sections.items(), start=1):
                v = [0.0] * DIM
                v[0], v[axis] = cos, math.sqrt(1.0 - cos * cos)
                self.vectors[f"text {doc_id}"] = v

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.vectors[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.vectors[text]


def build(uri: str, collection: str, db_name: str = "", sections: str | None = None) -> object:
    """A store of ``collection`` holding the sections listed under ``sections`` (its name)."""
    from langchain_milvus import Milvus

    store = Milvus(
        embedding_function=HandEmbeddings(),
        collection_name=collection,
        connection_args=connection_args(uri, **({"db_name": db_name} if db_name else {})),
        index_params={"metric_type": "IP", "index_type": "FLAT", "params": {}},
        consistency_level="Strong",
        drop_old=True,
        auto_id=False,
    )
    ensure_orm_connection(store)
    listed = sections or collection
    ids = list(SECTIONS[listed])
    with orm_calls():  # langchain-milvus reads its index through the ORM
        store.add_texts(
            [f"text {i}" for i in ids], metadatas=[{"source": listed}] * len(ids), ids=ids
        )
    return store


@pytest.fixture(scope="module")
def stores(milvus_server_uri):
    pytest.importorskip("langchain_milvus")
    return {name: build(milvus_server_uri, name) for name in SECTIONS}


def _retriever(stores):
    floors = {"lc_laws": 0.4, "lc_faqs": 0.6}
    return MultiCollectionRetriever(
        collections=[
            ThresholdedRetriever(
                vectorstore=stores[db], policy=RetrievalPolicy(min_similarity=floors[db])
            )
            for db in SECTIONS
        ],
        policy=RetrievalPolicy(top_k=10, max_per_source=None),
    )


def test_two_collections_sync_and_async_client(stores, monkeypatch):
    from langchain_milvus import Milvus

    retriever = _retriever(stores)
    assert [m.threaded for m in retriever._members] == [False, False]  # async client on a server
    report = retriever.retrieve_with_report(QUERY)
    got = [(d.metadata["source"], d.metadata["pk"]) for d in report.kept]
    assert got == [("lc_laws", "l1"), ("lc_faqs", "f1"), ("lc_laws", "l2")]
    assert retriever.collection_names == ("lc_laws", "lc_faqs")
    assert [d.metadata[COLLECTION_KEY] for d in report.kept] == ["lc_laws", "lc_faqs", "lc_laws"]

    awaited = []
    original = Milvus.asimilarity_search_with_score_by_vector

    async def spy(self, *args, **kwargs):
        awaited.append(self.collection_name)
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(Milvus, "asimilarity_search_with_score_by_vector", spy)
    asynchronous = asyncio.run(retriever.aretrieve_with_report(QUERY))
    assert [d.metadata["pk"] for d in asynchronous.kept] == ["l1", "f1", "l2"]
    assert sorted(awaited) == ["lc_faqs", "lc_laws"]


def test_collections_of_one_name_in_two_databases_of_one_server(milvus_server_uri):
    pytest.importorskip("langchain_milvus")
    from pymilvus import MilvusClient

    admin = MilvusClient(uri=milvus_server_uri)
    for db in ("lc_laws_db", "lc_faqs_db"):
        if db not in admin.list_databases():
            admin.create_database(db)
    admin.close()
    laws = build(milvus_server_uri, "kb", db_name="lc_laws_db", sections="lc_laws")
    faqs = build(milvus_server_uri, "kb", db_name="lc_faqs_db", sections="lc_faqs")
    assert laws.alias != faqs.alias

    for store, expected in ((laws, {"l1", "l2"}), (faqs, {"f1", "f2"})):
        found = store.similarity_search_with_score(QUERY, k=10)
        assert {d.metadata["pk"] for d, _ in found} == expected
        # the ORM calls (schema, index, queries) reach this store's own database
        with orm_calls():
            rows = store.col.query(expr='pk != ""', output_fields=["pk"])
        assert {row["pk"] for row in rows} == expected

    retriever = MultiCollectionRetriever(
        collections=[
            CollectionSpec(
                retriever=ThresholdedRetriever(
                    vectorstore=store, policy=RetrievalPolicy(min_similarity=0.4)
                ),
                name=name,
            )
            for name, store in (("laws/kb", laws), ("faqs/kb", faqs))
        ],
        policy=RetrievalPolicy(top_k=10, max_per_source=None),
    )
    report = retriever.retrieve_with_report(QUERY)
    got = [(d.metadata[COLLECTION_KEY], d.metadata["pk"]) for d in report.kept]
    assert got == [("laws/kb", "l1"), ("faqs/kb", "f1"), ("faqs/kb", "f2"), ("laws/kb", "l2")]
    asynchronous = asyncio.run(retriever.aretrieve_with_report(QUERY))
    assert [d.metadata["pk"] for d in asynchronous.kept] == ["l1", "f1", "f2", "l2"]
