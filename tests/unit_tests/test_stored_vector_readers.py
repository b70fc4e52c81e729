"""Each adapter reads the stored vectors back by id, in one batch, from the stores it knows:
what the engine checks the norms of under IP and L2 (FAISS and Chroma, where installed)."""

from __future__ import annotations

from typing import Any

import pytest

VECTORS = {"a": [2.5, 0.0, 0.0], "b": [0.0, 0.3, 0.0]}


def assert_read_back(found: dict[str, Any]) -> None:
    assert {i: [round(float(x), 6) for x in v] for i, v in found.items()} == VECTORS


def langchain_backend(store: Any) -> Any:
    from langchain_thresholded.backend import LangChainBackend, LinkKeys
    from thresholded.scores import Metric, ScoreKind

    return LangChainBackend(
        store,
        embeddings=None,
        metric=Metric.IP,
        score_kind=ScoreKind.COSINE,
        search_kwargs={},
        docstore=None,
        link_keys=LinkKeys(),
        id_key=None,
    )


class NoEmbeddings:
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise AssertionError("the vectors are given")

    def embed_query(self, text: str) -> list[float]:
        raise AssertionError("no question here")


def test_langchain_faiss():
    pytest.importorskip("faiss")
    community = pytest.importorskip("langchain_community.vectorstores")
    store = community.FAISS.from_embeddings(
        [(i, v) for i, v in VECTORS.items()], NoEmbeddings(), ids=list(VECTORS)
    )
    assert_read_back(langchain_backend(store).fetch_vectors(["a", "b", "missing"]))


def test_langchain_chroma():
    chroma = pytest.importorskip("langchain_chroma")
    store = chroma.Chroma(collection_name="readers", embedding_function=NoEmbeddings())
    store._collection.add(
        ids=list(VECTORS), embeddings=list(VECTORS.values()), documents=["a", "b"]
    )
    try:
        assert_read_back(langchain_backend(store).fetch_vectors(["a", "b", "missing"]))
    finally:
        store.delete_collection()


def llama_index_backend(store: Any) -> Any:
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.schema import TextNode

    from llama_index_thresholded.backend import index_collection

    nodes = [TextNode(id_=i, text=i, embedding=v) for i, v in VECTORS.items()]
    storage = StorageContext.from_defaults(vector_store=store)
    index = VectorStoreIndex(nodes, storage_context=storage, embed_model=MockEmbedding(embed_dim=3))
    return index_collection(index, None).backend  # the metric is read from the store


def test_llama_index_faiss():
    faiss = pytest.importorskip("faiss")
    module = pytest.importorskip("llama_index.vector_stores.faiss")
    backend = llama_index_backend(module.FaissVectorStore(faiss_index=faiss.IndexFlatIP(3)))
    assert_read_back(backend.fetch_vectors(["a", "b", "missing"]))


def test_llama_index_chroma():
    chromadb = pytest.importorskip("chromadb")
    module = pytest.importorskip("llama_index.vector_stores.chroma")
    client = chromadb.EphemeralClient()
    collection = client.get_or_create_collection("readers-llama")
    try:
        backend = llama_index_backend(module.ChromaVectorStore(chroma_collection=collection))
        assert_read_back(backend.fetch_vectors(["a", "b", "missing"]))
    finally:
        client.delete_collection("readers-llama")


class Given:
    """Embeddings whose document vectors are given, in order."""

    model_name = "given@3"

    def __init__(self, vectors: list[list[float]]) -> None:
        self._vectors = vectors

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._vectors[: len(texts)]

    def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0, 0.0]


def test_langchain_milvus_reads_ids_beyond_ascii(tmp_path):
    """langchain-milvus: the ids went into the query as JSON, which writes "é" as "\\u00e9", a
    text Milvus does not decode: a section whose id is not ASCII had no stored vector, and
    every search that found it under IP failed with NotUnitVectorError."""
    from langchain_core.documents import Document

    from langchain_thresholded import milvus_from_documents

    ids = {"a": "remboursement-é", "b": "snow☃"}
    store = milvus_from_documents(
        [Document(page_content=i) for i in ids],
        Given(list(VECTORS.values())),
        uri=str(tmp_path / "readers.db"),
        collection_name="readers",
        ids=list(ids.values()),
    )
    found = langchain_backend(store).fetch_vectors([*ids.values(), "missing"])
    by_letter = {letter: found[i] for letter, i in ids.items() if i in found}
    assert_read_back(by_letter)
