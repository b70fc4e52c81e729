"""LangChain on the Milvus 2.3.5 server: created, reopened, in several databases.

Stores are created with ``milvus_from_documents`` and reopened with
``existing_milvus_store``, in this process and in another one. Two collections of the
same name live in two databases of one server: pymilvus 2.6 shares one connection
between them, and each store still reads its own database.
"""

from __future__ import annotations

import asyncio
import math
import threading
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_thresholded import (
    CollectionSpec,
    MultiCollectionRetriever,
    RetrievalPolicy,
    ThresholdedRetriever,
)
from langchain_thresholded.milvus import orm_calls
from thresholded.errors import CollectionNotFoundError, SearchUnavailableError
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


EMBEDDINGS = HandEmbeddings()
"""The one model of every store here: a multi-collection retriever searches them all with one
question vector, which it accepts only from one embeddings object (or one named model)."""


def build(
    uri: str, collection: str, db_name: str = "", sections: str | None = None, **kwargs: Any
) -> Any:
    """A store of ``collection`` holding the sections listed under ``sections`` (its name)."""
    from langchain_thresholded.milvus import milvus_from_documents

    listed = sections or collection
    documents = [
        Document(id=doc_id, page_content=f"text {doc_id}", metadata={"source": listed})
        for doc_id in SECTIONS[listed]
    ]
    return milvus_from_documents(
        documents,
        EMBEDDINGS,
        uri=uri,
        collection_name=collection,
        db_name=db_name or None,
        consistency_level="Strong",
        overwrite=True,
        **kwargs,
    )


def create_databases(uri: str, *names: str) -> None:
    from pymilvus import MilvusClient

    admin = MilvusClient(uri=uri)
    try:
        for name in names:
            if name not in admin.list_databases():
                admin.create_database(name)
    finally:
        admin.close()


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
    # searched with the async client on a server, not in threads
    assert [r.as_collection().backend.threaded for r in retriever.collections] == [False, False]
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


def test_ainvoke_from_successive_event_loops_matches_a_serial_run(stores, in_new_event_loops):
    """One store, three ``asyncio.run`` calls of 16 concurrent queries: each as the serial run."""
    everything = RetrievalPolicy(min_similarity=0.0, max_per_source=None, max_chars=None)
    retriever = ThresholdedRetriever(vectorstore=stores["lc_laws"], policy=everything)
    floors = [0.95, 0.89, 0.5, 0.44, 0.4, 0.0, -1.0, 0.46] * 2

    def answer(docs):
        return [(d.id, d.metadata["similarity"]) for d in docs]

    serial = [answer(retriever.invoke(QUERY, min_similarity=f)) for f in floors]
    assert {len(a) for a in serial} == {0, 1, 2}
    batches = in_new_event_loops(
        lambda: [retriever.ainvoke(QUERY, min_similarity=f) for f in floors]
    )
    assert len(batches) == 3
    for results in batches:
        assert [answer(docs) for docs in results] == serial


def test_collections_of_one_name_in_two_databases_of_one_server(milvus_server_uri):
    pytest.importorskip("langchain_milvus")
    create_databases(milvus_server_uri, "lc_laws_db", "lc_faqs_db")
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


def test_a_second_process_reopens_a_server_collection_and_retrieves_the_same(
    milvus_server_uri, langchain_process
):
    pytest.importorskip("langchain_milvus")
    created = langchain_process.run("create", milvus_server_uri, "lc_reopened")
    reopened = langchain_process.run("reopen", milvus_server_uri, "lc_reopened")
    assert created["How do I get my money back?"][0][0] == "refund-request"
    assert created["What's the weather in Mumbai today?"] == []
    langchain_process.assert_same(created, reopened)


def test_a_second_process_reopens_a_collection_of_a_named_database(
    milvus_server_uri, langchain_process
):
    pytest.importorskip("langchain_milvus")
    create_databases(milvus_server_uri, "lc_process_db")
    created = langchain_process.run("create", milvus_server_uri, "kb", "lc_process_db")
    reopened = langchain_process.run("reopen", milvus_server_uri, "kb", "lc_process_db")
    assert created["I forgot my password"][0][0] == "password-reset"
    langchain_process.assert_same(created, reopened)


def test_reopened_by_database_and_name_each_store_reads_its_own_database(milvus_server_uri):
    pytest.importorskip("langchain_milvus")
    from langchain_thresholded.milvus import existing_milvus_store

    create_databases(milvus_server_uri, "lc_open_laws", "lc_open_faqs")
    build(milvus_server_uri, "kb", db_name="lc_open_laws", sections="lc_laws")
    build(milvus_server_uri, "kb", db_name="lc_open_faqs", sections="lc_faqs")
    build(milvus_server_uri, "only_faqs", db_name="lc_open_faqs", sections="lc_faqs")

    opened = {
        db: existing_milvus_store(
            milvus_server_uri, "kb", embeddings=EMBEDDINGS, db_name=db, timeout=30.0
        )
        for db in ("lc_open_laws", "lc_open_faqs")
    }
    policy = RetrievalPolicy(min_similarity=0.4, top_k=10, max_per_source=None)
    for db, expected in (("lc_open_laws", ["l1", "l2"]), ("lc_open_faqs", ["f1", "f2"])):
        retriever = ThresholdedRetriever(vectorstore=opened[db], policy=policy)
        assert [d.metadata["pk"] for d in retriever.invoke(QUERY)] == expected
        with orm_calls():
            rows = opened[db].col.query(expr='pk != ""', output_fields=["pk"])
        assert sorted(row["pk"] for row in rows) == expected

    with pytest.raises(CollectionNotFoundError, match=r"'only_faqs'.*'lc_open_laws'.*\['kb'\]"):
        existing_milvus_store(
            milvus_server_uri, "only_faqs", embeddings=EMBEDDINGS, db_name="lc_open_laws"
        )


HANG = 300.0
"""How long a frozen query is waited for before the test calls it hung (it takes seconds)."""


def test_a_frozen_server_cannot_hold_a_query_past_its_deadline(disposable_server):
    pytest.importorskip("langchain_milvus")
    store = build(disposable_server.uri, "lc_frozen", sections="lc_laws", timeout=1.5)
    retriever = ThresholdedRetriever(
        vectorstore=store,
        policy=RetrievalPolicy(min_similarity=0.4, max_per_source=None),
        max_retries=1,
        retry_backoff=0.1,
    )
    assert [d.metadata["pk"] for d in retriever.invoke(QUERY)] == ["l1", "l2"]

    outcome: list[BaseException | list[Any]] = []

    def query() -> None:
        try:
            outcome.append(retriever.invoke(QUERY))
        except BaseException as exc:  # the test inspects what was raised
            outcome.append(exc)

    worker = threading.Thread(target=query, daemon=True)
    disposable_server.freeze()
    try:
        worker.start()
        worker.join(HANG)
        hung = worker.is_alive()
    finally:
        disposable_server.thaw()
    assert not hung, "a query on a frozen server never returned: some call had no deadline"
    (raised,) = outcome
    assert isinstance(raised, SearchUnavailableError), raised
    assert raised.attempts == 2
    assert [d.metadata["pk"] for d in retriever.invoke(QUERY)] == ["l1", "l2"]
