"""``milvus_from_documents`` and ``existing_milvus_store`` on Milvus Lite.

Creating, reopening (in another process too) and adding, each in one call, with
langchain-milvus 0.3.3 on pymilvus 2.6, where langchain-milvus's own constructor
fails on an existing collection (langchain-ai/langchain-milvus#130).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.stores import InMemoryStore

from langchain_thresholded import Metric, RetrievalPolicy, ThresholdedRetriever, store_metric
from thresholded.errors import CollectionNotFoundError
from thresholded.milvus_timeout import TimeoutClient

langchain_milvus = pytest.importorskip("langchain_milvus")

pytestmark = pytest.mark.integration

OPEN_POLICY = RetrievalPolicy(min_similarity=0.0, top_k=10, max_per_source=None, max_chars=None)


def test_a_second_process_reopens_the_collection_and_retrieves_the_same(
    tmp_path: Path, langchain_process: Any
) -> None:
    uri = str(tmp_path / "kb.db")
    created = langchain_process.run("create", uri, "support_kb")
    reopened = langchain_process.run("reopen", uri, "support_kb")
    assert created["How do I get my money back?"][0][0] == "refund-request"
    assert created["I forgot my password"][0][0] == "password-reset"
    assert created["What's the weather in Mumbai today?"] == []
    langchain_process.assert_same(created, reopened)


def documents(support_texts: dict[str, tuple[str, str]]) -> list[Document]:
    return [
        Document(id=doc_id, page_content=text, metadata={"source": source})
        for doc_id, (source, text) in support_texts.items()
    ]


def test_from_documents_creates_an_exact_ip_collection_keyed_by_document_id(
    tmp_path: Path, minilm: Any, support_texts: dict[str, tuple[str, str]]
) -> None:
    from langchain_thresholded.milvus import milvus_from_documents

    uri = str(tmp_path / "kb.db")
    store = milvus_from_documents(
        documents(support_texts), minilm, uri=uri, collection_name="support"
    )
    assert type(store) is langchain_milvus.Milvus
    index = store.client.describe_index("support", "vector")
    assert (index["metric_type"], index["index_type"]) == ("IP", "FLAT")
    assert store_metric(store) is Metric.IP

    question = "How long does a refund take to arrive?"
    report = ThresholdedRetriever(vectorstore=store, policy=OPEN_POLICY).retrieve_with_report(
        question
    )
    assert {d.id for d in report.kept} == set(support_texts)
    q = np.asarray(minilm.embed_query(question))
    for doc in report.kept:
        vector = np.asarray(minilm.embed_documents([support_texts[doc.id][1]])[0])
        assert doc.metadata["similarity"] == pytest.approx(float(q @ vector), abs=1e-5)
        assert doc.metadata["source"] == support_texts[doc.id][0]


def test_reopened_in_the_same_process_it_searches_and_takes_new_documents(
    tmp_path: Path, minilm: Any, support_texts: dict[str, tuple[str, str]]
) -> None:
    from langchain_thresholded.milvus import existing_milvus_store, milvus_from_documents

    uri = str(tmp_path / "kb.db")
    texts = [Document(page_content=text) for _, text in support_texts.values()]
    milvus_from_documents(texts, minilm, uri=uri, collection_name="support", metric="COSINE")

    store = existing_milvus_store(uri, "support", embeddings=minilm)
    assert type(store) is langchain_milvus.Milvus
    assert store_metric(store) is Metric.COSINE  # read from the collection's index
    assert store.auto_id  # Milvus generated the ids: a new document needs none
    (new_id,) = store.add_documents([Document(page_content="Our office cat is called Biscuit.")])
    retriever = ThresholdedRetriever(
        vectorstore=store, policy=OPEN_POLICY.model_copy(update={"min_similarity": 0.5})
    )
    (found,) = retriever.invoke("What is the name of the office cat?")
    assert found.metadata["pk"] == new_id
    assert len(store.similarity_search("refund", k=20)) == len(support_texts) + 1


def test_a_missing_collection_is_an_error_and_nothing_is_created(
    tmp_path: Path, minilm: Any
) -> None:
    from langchain_thresholded.milvus import existing_milvus_store, milvus_from_documents

    uri = str(tmp_path / "kb.db")
    store = milvus_from_documents(
        [Document(page_content="Refunds take 5 days.")], minilm, uri=uri, collection_name="kb"
    )
    with pytest.raises(CollectionNotFoundError, match=r"'kb_typo' does not exist.*\['kb'\]"):
        existing_milvus_store(uri, "kb_typo", embeddings=minilm)
    assert store.client.list_collections() == ["kb"]


def test_a_search_of_a_collection_that_does_not_exist_is_an_error(
    tmp_path: Path, minilm: Any
) -> None:
    """A ``langchain_milvus.Milvus`` opened on a misspelt name holds no collection, and
    langchain-milvus's search returns nothing: every question said nothing matched
    (``abstained_by: "empty"``), as if the collection were empty."""
    from langchain_thresholded.milvus import milvus_from_documents

    uri = str(tmp_path / "kb.db")
    milvus_from_documents(
        [Document(page_content="Refunds take 5 days.")], minilm, uri=uri, collection_name="kb"
    )
    typo = langchain_milvus.Milvus(minilm, collection_name="kb_typo", connection_args={"uri": uri})
    retriever = ThresholdedRetriever(vectorstore=typo, policy=OPEN_POLICY)
    said = r"collection 'kb_typo' does not exist at .*kb\.db; it has: \['kb'\]"
    with pytest.raises(CollectionNotFoundError, match=said):
        retriever.invoke("How long do refunds take?")
    with pytest.raises(CollectionNotFoundError, match=said):
        asyncio.run(retriever.ainvoke("How long do refunds take?"))


@pytest.mark.parametrize("keyword", ["overwrite", "drop_old"])
def test_reopening_refuses_to_drop_the_collection(
    tmp_path: Path, minilm: Any, keyword: str
) -> None:
    from langchain_thresholded.milvus import existing_milvus_store, milvus_from_documents

    uri = str(tmp_path / "kb.db")
    milvus_from_documents(
        [Document(page_content="Refunds take 5 days.")], minilm, uri=uri, collection_name="kb"
    )
    rebuild = r"milvus_from_documents\(\.\.\., overwrite=True\)"
    with pytest.raises(TypeError, match=rf"{keyword}=True.*{rebuild}"):
        existing_milvus_store(uri, "kb", embeddings=minilm, **{keyword: True})
    store = existing_milvus_store(uri, "kb", embeddings=minilm)
    assert store.client.get_collection_stats("kb")["row_count"] == 1


def test_a_milvus_lite_file_may_be_a_path(tmp_path: Path, minilm: Any) -> None:
    """A ``pathlib.Path`` failed with "argument of type 'PosixPath' is not iterable"."""
    from langchain_thresholded.milvus import existing_milvus_store, milvus_from_documents

    path = tmp_path / "kb.db"
    docs = [Document(page_content="Refunds take 5 days.")]
    milvus_from_documents(docs, minilm, uri=path, collection_name="kb")
    store = existing_milvus_store(path, "kb", embeddings=minilm)
    assert store.client.get_collection_stats("kb")["row_count"] == 1
    with pytest.raises(TypeError, match=r"uri must be a str .* or a path, got NoneType"):
        existing_milvus_store(None, "kb", embeddings=minilm)


def test_adding_to_an_existing_collection_keeps_its_index_and_overwrite_rebuilds_it(
    tmp_path: Path, minilm: Any
) -> None:
    from langchain_thresholded.milvus import milvus_from_documents

    uri = str(tmp_path / "kb.db")
    first = [Document(id="a", page_content="Refunds take 5 days.")]
    second = [Document(id="b", page_content="Invoices are emailed monthly.")]
    milvus_from_documents(first, minilm, uri=uri, collection_name="kb", metric="COSINE")

    with pytest.raises(ValueError, match="indexed with COSINE, not IP"):
        milvus_from_documents(second, minilm, uri=uri, collection_name="kb", metric="IP")
    added = milvus_from_documents(second, minilm, uri=uri, collection_name="kb")
    assert store_metric(added) is Metric.COSINE
    assert {d.metadata["pk"] for d in added.similarity_search("money", k=10)} == {"a", "b"}

    rebuilt = milvus_from_documents(
        second, minilm, uri=uri, collection_name="kb", metric="IP", overwrite=True
    )
    assert store_metric(rebuilt) is Metric.IP
    assert [d.metadata["pk"] for d in rebuilt.similarity_search("money", k=10)] == ["b"]


def test_every_call_of_the_store_carries_the_deadline(
    tmp_path: Path, minilm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain_thresholded.milvus import existing_milvus_store, milvus_from_documents

    uri = str(tmp_path / "kb.db")
    milvus_from_documents(
        [Document(id="a", page_content="Refunds take 5 days.")],
        minilm,
        uri=uri,
        collection_name="kb",
        timeout=7.5,
    )
    store = existing_milvus_store(uri, "kb", embeddings=minilm, timeout=7.5)
    assert isinstance(store.client, TimeoutClient)
    assert store.client.timeout == 7.5

    seen: list[Any] = []
    client = store.client.wrapped
    for name in ("search", "insert", "has_collection"):
        original = getattr(client, name)

        def spy(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            seen.append(kwargs.get("timeout"))
            return _original(*args, **kwargs)

        monkeypatch.setattr(client, name, spy)
    store.add_documents([Document(page_content="Invoices are emailed monthly.")], ids=["b"])
    ThresholdedRetriever(vectorstore=store, policy=OPEN_POLICY).invoke("money back")
    assert len(seen) >= 2
    assert set(seen) == {7.5}


def test_the_timeout_is_checked_before_anything_opens(tmp_path: Path, minilm: Any) -> None:
    from langchain_thresholded.milvus import existing_milvus_store

    with pytest.raises(ValueError, match="above 0"):
        existing_milvus_store(str(tmp_path / "kb.db"), "kb", embeddings=minilm, timeout=0)
    assert not (tmp_path / "kb.db").exists()


def test_connection_arguments_are_named_by_the_call_itself(tmp_path: Path, minilm: Any) -> None:
    from langchain_thresholded.milvus import milvus_from_documents

    with pytest.raises(TypeError, match="connection_args"):
        milvus_from_documents(
            [],
            minilm,
            uri=str(tmp_path / "kb.db"),
            collection_name="kb",
            connection_args={"uri": "other.db"},
        )


def test_a_collection_langchain_cannot_read_is_an_error_that_names_its_fields(
    tmp_path: Path, minilm: Any
) -> None:
    from pymilvus import MilvusClient

    from langchain_thresholded.milvus import existing_milvus_store
    from thresholded.milvus_lite import wait_for_milvus_lite

    uri = str(tmp_path / "kb.db")
    wait_for_milvus_lite(uri)
    client = MilvusClient(uri=uri)
    client.create_collection("bare", dimension=384, vector_field_name="embedding")
    client.close()

    with pytest.raises(ValueError, match=r"no dense vector field 'vector'.*\['embedding'\]"):
        existing_milvus_store(uri, "bare", embeddings=minilm)
    with pytest.raises(ValueError, match=r"no text field 'text'.*'embedding'"):
        existing_milvus_store(uri, "bare", embeddings=minilm, vector_field="embedding")


def test_documents_added_again_under_their_ids_replace_their_rows(
    tmp_path: Path, minilm: Any, support_texts: dict[str, tuple[str, str]]
) -> None:
    """Running the same load twice (a rerun of an ingestion script) keeps one row per id.
    Milvus itself inserts a second row under the same primary key, and a search for k
    rows then returned about k / 2 sections: it spent its limit on the copies."""
    from langchain_thresholded.milvus import milvus_from_documents

    uri = str(tmp_path / "kb.db")
    docs = documents(support_texts)
    for _ in range(2):
        store = milvus_from_documents(docs, minilm, uri=uri, collection_name="support")
    changed = Document(id=docs[0].id, page_content="Changed text.", metadata={"source": "x"})
    store = milvus_from_documents([changed], minilm, uri=uri, collection_name="support")
    (count,) = store.client.query("support", filter="", output_fields=["count(*)"])
    assert count["count(*)"] == len(docs)
    assert len(store.similarity_search("How do I get my money back?", k=4)) == 4
    (row,) = store.client.get("support", ids=[str(docs[0].id)], output_fields=["text"])
    assert row["text"] == "Changed text."


def test_one_id_given_twice_in_one_load_is_refused(
    tmp_path: Path, minilm: Any, support_texts: dict[str, tuple[str, str]]
) -> None:
    from langchain_thresholded.milvus import milvus_from_documents

    docs = documents(support_texts)
    with pytest.raises(ValueError, match=rf"the id {docs[0].id!r} is given twice"):
        milvus_from_documents(
            [*docs, docs[0]], minilm, uri=str(tmp_path / "kb.db"), collection_name="support"
        )


def test_documents_with_ids_load_again_into_an_auto_id_collection(
    tmp_path: Path, minilm: Any, support_texts: dict[str, tuple[str, str]]
) -> None:
    """An auto-id collection's primary keys are Milvus's: the documents' own ids are not
    them, so a second load adds its rows (Milvus cannot tell them from the first ones)
    instead of failing with pymilvus's DataNotMatchException ("pk field should be a
    int64")."""
    from langchain_thresholded.milvus import milvus_from_documents

    uri = str(tmp_path / "kb.db")
    docs = documents(support_texts)
    for _ in range(2):
        store = milvus_from_documents(
            docs, minilm, uri=uri, collection_name="support", auto_id=True
        )
    (count,) = store.client.query("support", filter="", output_fields=["count(*)"])
    assert count["count(*)"] >= len(docs)


def test_auto_id_that_contradicts_the_ids_is_refused_before_anything_is_created(
    tmp_path: Path, minilm: Any, support_texts: dict[str, tuple[str, str]]
) -> None:
    """``auto_id=True`` with ``ids=`` dropped the ids (langchain-milvus printed a line), and
    ``auto_id=False`` without any id generated keys all the same."""
    from pymilvus import MilvusClient

    from langchain_thresholded.milvus import milvus_from_documents

    uri = str(tmp_path / "kb.db")
    docs = documents(support_texts)
    ids = [f"my-{doc.id}" for doc in docs]
    with pytest.raises(ValueError, match=r"auto_id=True.*ids="):
        milvus_from_documents(docs, minilm, uri=uri, collection_name="a", auto_id=True, ids=ids)
    unnamed = [Document(page_content=doc.page_content) for doc in docs]
    with pytest.raises(ValueError, match=r"auto_id=False.*ids="):
        milvus_from_documents(unnamed, minilm, uri=uri, collection_name="b", auto_id=False)
    client = MilvusClient(uri=uri)
    assert client.list_collections() == []
    client.close()

    store = milvus_from_documents(
        docs, minilm, uri=uri, collection_name="c", auto_id=False, ids=ids
    )
    rows = store.client.query("c", filter="", output_fields=["pk"], limit=100)
    assert sorted(row["pk"] for row in rows) == sorted(ids)


def test_auto_id_that_contradicts_an_existing_collection_is_refused(
    tmp_path: Path, minilm: Any, support_texts: dict[str, tuple[str, str]]
) -> None:
    from langchain_thresholded.milvus import existing_milvus_store, milvus_from_documents

    uri = str(tmp_path / "kb.db")
    milvus_from_documents(documents(support_texts), minilm, uri=uri, collection_name="kb")
    with pytest.raises(ValueError, match=r"auto_id=True.*'kb'.*auto_id=False"):
        existing_milvus_store(uri, "kb", embeddings=minilm, auto_id=True)
    assert existing_milvus_store(uri, "kb", embeddings=minilm, auto_id=False).auto_id is False


def _lite_2() -> bool:
    from thresholded.milvus_lite import lite_engine_version

    return (lite_engine_version() or "").startswith("2.")


@pytest.mark.skipif(
    not _lite_2(), reason="Milvus Lite 2.x evaluates no filter on such a collection"
)
def test_a_partition_key_on_milvus_lite_2_is_refused_naming_the_field(
    tmp_path: Path, minilm: Any, support_texts: dict[str, tuple[str, str]]
) -> None:
    """Milvus Lite 2.5 created the collection, then failed every search of the retriever
    (its fetch of stored vectors by id, any filter) with "Invalid expr ...: invalid
    parameter", which named neither the partition key nor a way out."""
    from pymilvus import DataType, MilvusClient

    from langchain_thresholded.milvus import existing_milvus_store, milvus_from_documents
    from llama_index_thresholded.milvus import existing_milvus_store as llama_index_store

    uri = str(tmp_path / "kb.db")
    docs = [
        Document(page_content=d.page_content, metadata={**d.metadata, "tenant": "a"})
        for d in documents(support_texts)
    ]
    with pytest.raises(ValueError, match=r"partition key field 'tenant'.*Milvus Lite 2\."):
        milvus_from_documents(
            docs, minilm, uri=uri, collection_name="kb", partition_key_field="tenant"
        )
    client = MilvusClient(uri=uri)
    assert client.list_collections() == []

    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=True)
    schema.add_field("id", DataType.VARCHAR, max_length=64, is_primary=True)
    schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=384)
    schema.add_field("text", DataType.VARCHAR, max_length=1024)
    schema.add_field("tenant", DataType.VARCHAR, max_length=16, is_partition_key=True)
    index = client.prepare_index_params()
    index.add_index("embedding", index_type="FLAT", metric_type="IP")
    client.create_collection("made", schema=schema, index_params=index)
    client.close()
    with pytest.raises(ValueError, match=r"partition key field 'tenant'"):
        llama_index_store(uri, "made")
    with pytest.raises(ValueError, match=r"partition key field 'tenant'"):
        existing_milvus_store(uri, "made", embeddings=minilm, vector_field="embedding")


@pytest.mark.parametrize("restriction", [{"expr": "pk > 0"}, {"search_kwargs": {"expr": "pk > 0"}}])
def test_neighbours_under_an_expr_in_a_collection_of_integer_keys(
    tmp_path: Path, minilm: Any, restriction: dict[str, Any]
) -> None:
    """A collection whose primary key is an INT64 (as Milvus makes one for generated ids):
    the neighbours fetched under a raw expression were looked up by their ids as strings."""
    from pymilvus import DataType, MilvusClient

    from langchain_thresholded.milvus import existing_milvus_store

    uri = str(tmp_path / "kb.db")
    texts = ["Refunds take five days.", "They go to the card used.", "Our cat is Biscuit."]
    vectors = minilm.embed_documents(texts)
    client = MilvusClient(uri)
    schema = client.create_schema(auto_id=False, enable_dynamic_field=True)
    schema.add_field("pk", DataType.INT64, is_primary=True)
    schema.add_field("text", DataType.VARCHAR, max_length=1000)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=len(vectors[0]))
    index = client.prepare_index_params()
    index.add_index("vector", metric_type="IP", index_type="FLAT")
    client.create_collection("support", schema=schema, index_params=index)
    links = [{"next_id": "2"}, {"prev_id": "1"}, {}]
    client.insert(
        "support",
        [
            {"pk": i + 1, "text": t, "vector": v, **link}
            for i, (t, v, link) in enumerate(zip(texts, vectors, links, strict=True))
        ],
    )
    client.close()
    store = existing_milvus_store(uri, "support", embeddings=minilm)
    retriever = ThresholdedRetriever(
        vectorstore=store,
        policy=OPEN_POLICY.model_copy(update={"min_similarity": 0.5, "top_k": 1}),
        docstore=InMemoryStore(),
        neighbours=1,
        **restriction,
    )
    report = retriever.retrieve_with_report("How long does a refund take?")
    assert [d.page_content for d in report.kept] == [texts[0]]
    assert [d.page_content for d in report.attached] == [texts[1]]
