"""Under IP and L2 every candidate's stored vector is unit length, or the call is an error.

The question is the first axis. A document stored with norm 2.5 and a cosine of 0.2
scores 0.5 under inner product and would clear a floor of 0.35; documents scaled by
0.3 turn an L2 cosine of 0.1 into 1 - (1 + 0.09 - 0.06) / 2 = 0.485. Both are refused,
with the document, its norm and the fix: on Milvus Lite (IP and L2 are real), on an
in-memory FAISS index, and on a store that cannot read its vectors back.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_thresholded import (
    CollectionSearchError,
    MultiCollectionRetriever,
    ThresholdedRetriever,
)
from langchain_thresholded.milvus import milvus_from_documents
from thresholded import NotUnitVectorError, RetrievalPolicy

QUERY = "the question"
FLOOR = 0.35
POLICY = RetrievalPolicy(min_similarity=FLOOR, top_k=10, max_per_source=None, max_chars=None)


class HandEmbeddings(Embeddings):
    """The question on the first axis; each document's text (its id) to a chosen vector."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = {QUERY: [1.0, 0.0, 0.0, 0.0], **vectors}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(self.vectors[t]) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return list(self.vectors[text])


def scaled(cosine: float, scale: float) -> list[float]:
    """A vector of norm ``scale`` whose cosine with the question is ``cosine``."""
    return [scale * cosine, scale * math.sqrt(1.0 - cosine * cosine), 0.0, 0.0]


IP_CASE = {"ok": scaled(0.625, 1.0), "long": scaled(0.2, 2.5)}  # 'long' scores 0.5
L2_CASE = {"ok": scaled(0.875, 0.3), "short": scaled(0.1, 0.3)}  # 'short' reads as 0.485
UNIT = {"hi": scaled(0.75, 1.0), "ok": scaled(0.625, 1.0), "low": scaled(0.25, 1.0)}


def documents(vectors: dict[str, list[float]]) -> tuple[list[Document], HandEmbeddings]:
    embeddings = HandEmbeddings(dict(vectors))
    docs = [Document(id=i, page_content=i, metadata={"source": i}) for i in vectors]
    return docs, embeddings


def milvus(tmp_path: Path, metric: str, vectors: dict[str, list[float]]) -> Any:
    docs, embeddings = documents(vectors)
    return milvus_from_documents(
        docs, embeddings, uri=str(tmp_path / "norms.db"), collection_name="norms", metric=metric
    )


def refused(error: pytest.ExceptionInfo[BaseException], doc: str, norm: str) -> None:
    message = str(error.value)
    assert f"section {doc!r}" in message and f"norm {norm}" in message
    assert "Normalise the stored vectors" in message and "COSINE" in message


# Milvus Lite -----------------------------------------------------------------------------------
def test_milvus_ip_a_document_stored_with_norm_2_5_is_refused(tmp_path):
    retriever = ThresholdedRetriever(vectorstore=milvus(tmp_path, "IP", IP_CASE), policy=POLICY)
    with pytest.raises(NotUnitVectorError) as error:
        retriever.invoke(QUERY)
    refused(error, "long", "2.5000")
    assert "'norms'" in str(error.value)  # the collection is named


def test_milvus_l2_documents_scaled_by_0_3_are_refused(tmp_path):
    retriever = ThresholdedRetriever(vectorstore=milvus(tmp_path, "L2", L2_CASE), policy=POLICY)
    with pytest.raises(NotUnitVectorError) as error:
        retriever.invoke(QUERY)
    refused(error, "ok", "0.3000")


@pytest.mark.parametrize(("metric", "case"), [("IP", IP_CASE), ("L2", L2_CASE)])
async def test_milvus_async_refuses_them_too(tmp_path, metric, case):
    retriever = ThresholdedRetriever(vectorstore=milvus(tmp_path, metric, case), policy=POLICY)
    with pytest.raises(NotUnitVectorError):
        await retriever.ainvoke(QUERY)


def test_milvus_multi_collection_refuses_them(tmp_path):
    store = milvus(tmp_path, "IP", IP_CASE)
    multi = MultiCollectionRetriever(collections=[store], policy=POLICY)
    with pytest.raises((NotUnitVectorError, CollectionSearchError)) as error:
        multi.invoke(QUERY)
    assert "'long'" in str(error.value) and "norm 2.5000" in str(error.value)


@pytest.mark.parametrize("metric", ["IP", "L2"])
def test_milvus_unit_vectors_keep_their_true_cosines(tmp_path, metric):
    """L2 is the squared distance, 2 - 2 cos on unit vectors; IP is the cosine itself."""
    store = milvus(tmp_path, metric, UNIT)
    report = ThresholdedRetriever(vectorstore=store, policy=POLICY).retrieve_with_report(QUERY)
    kept = [(d.metadata["pk"], round(d.metadata["similarity"], 6)) for d in report.kept]
    assert kept == [("hi", 0.75), ("ok", 0.625)]
    assert [round(d.similarity, 6) for d in report.dropped] == [0.25]


# FAISS: an in-memory index with a real inner product and L2 -------------------------------------
def faiss_store(strategy: str, vectors: dict[str, list[float]]) -> Any:
    pytest.importorskip("faiss")
    community = pytest.importorskip("langchain_community.vectorstores")
    from langchain_community.vectorstores.utils import DistanceStrategy

    docs, embeddings = documents(vectors)
    return community.FAISS.from_embeddings(
        [(d.page_content, vectors[d.page_content]) for d in docs],
        embeddings,
        metadatas=[d.metadata for d in docs],
        ids=[str(d.id) for d in docs],
        distance_strategy=DistanceStrategy[strategy],
    )


def test_faiss_ip_a_document_stored_with_norm_2_5_is_refused():
    store = faiss_store("MAX_INNER_PRODUCT", IP_CASE)
    with pytest.raises(NotUnitVectorError) as error:
        ThresholdedRetriever(vectorstore=store, policy=POLICY, metric="IP").invoke(QUERY)
    refused(error, "long", "2.5000")


def test_faiss_l2_documents_scaled_by_0_3_are_refused():
    store = faiss_store("EUCLIDEAN_DISTANCE", L2_CASE)
    with pytest.raises(NotUnitVectorError) as error:
        ThresholdedRetriever(vectorstore=store, policy=POLICY, metric="L2").invoke(QUERY)
    refused(error, "ok", "0.3000")


@pytest.mark.parametrize(
    ("strategy", "metric"), [("MAX_INNER_PRODUCT", "IP"), ("EUCLIDEAN_DISTANCE", "L2")]
)
def test_faiss_unit_vectors_keep_their_true_cosines(strategy, metric):
    store = faiss_store(strategy, UNIT)
    docs = ThresholdedRetriever(vectorstore=store, policy=POLICY, metric=metric).invoke(QUERY)
    assert [(d.id, round(d.metadata["similarity"], 6)) for d in docs] == [
        ("hi", 0.75),
        ("ok", 0.625),
    ]


# A store that cannot read its vectors back -------------------------------------------------------
@pytest.mark.parametrize("metric", ["IP", "L2"])
def test_a_store_whose_vectors_cannot_be_read_is_refused_under_ip_and_l2(
    corpus, transform_store, metric
):
    store = transform_store(corpus([("a", 0.875)]).store, lambda cos: cos)
    retriever = ThresholdedRetriever(vectorstore=store, policy=POLICY, metric=metric)
    with pytest.raises(NotUnitVectorError, match="gave back no stored vector for section 'a'"):
        retriever.invoke(QUERY)


# Chroma: its ip space returns 1 - ip (IP_DISTANCE), a cosine on unit vectors only --------------
def chroma_store(tmp_path: Path, space: str, vectors: dict[str, list[float]]) -> Any:
    pytest.importorskip("langchain_chroma")
    import chromadb
    from langchain_chroma import Chroma

    docs, embeddings = documents(vectors)
    return Chroma.from_documents(
        docs,
        embeddings,
        ids=[str(d.id) for d in docs],
        client=chromadb.PersistentClient(path=str(tmp_path / "chroma")),
        collection_name=f"norms_{space}",
        collection_metadata={"hnsw:space": space},
    )


def test_chroma_ip_space_a_document_stored_with_norm_2_5_is_refused(tmp_path):
    store = chroma_store(tmp_path, "ip", IP_CASE)
    with pytest.raises(NotUnitVectorError) as error:
        ThresholdedRetriever(vectorstore=store, policy=POLICY).invoke(QUERY)
    refused(error, "long", "2.5000")


def test_chroma_cosine_space_is_not_checked(tmp_path):
    store = chroma_store(tmp_path, "cosine", IP_CASE)
    docs = ThresholdedRetriever(vectorstore=store, policy=POLICY).invoke(QUERY)
    assert [d.id for d in docs] == ["ok"]
