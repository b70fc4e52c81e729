"""Links are data: an id a document links to never breaks the call (Milvus Lite).

``prev_id``/``next_id``/``parent_id`` come from whoever wrote the document. An id that no
row of the collection can have (a line break, or on an integer key ``--5``, ``²`` or a
number beyond 64 bits) names no section: it is not found, as any other missing id, and
every call that keeps the document still answers, with the other sections' neighbours.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import InMemoryStore

from langchain_thresholded import ThresholdedRetriever
from langchain_thresholded.milvus import milvus_from_documents
from thresholded import RetrievalPolicy

pytestmark = pytest.mark.integration

POLICY = RetrievalPolicy(min_similarity=0.5, top_k=10, max_per_source=None, max_chars=None)
QUESTION = [1.0, 0.0, 0.0, 0.0]


class _ByText(Embeddings):
    """``near`` texts embed to the question's vector, the others at right angles to it."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [
            self.embed_query(t) if t.startswith("near") else [0.0, 1.0, 0.0, 0.0] for t in texts
        ]

    def embed_query(self, text: str) -> list[float]:
        return list(QUESTION)


def _attached(retriever: ThresholdedRetriever) -> list[list[str]]:
    reports = [
        retriever.retrieve_with_report("q"),
        asyncio.run(retriever.aretrieve_with_report("q")),
    ]
    return [[d.page_content for d in report.attached] for report in reports]


@pytest.mark.parametrize("link", ["x\ny", "a1\x00"])
def test_a_link_no_expression_can_hold_is_not_found(tmp_path: Path, link: str) -> None:
    docs = [
        Document(id="a0", page_content="near a0", metadata={"next_id": "a1"}),
        Document(id="e0", page_content="near e0", metadata={"next_id": link}),
        Document(id="a1", page_content="far a1", metadata={}),
    ]
    store = milvus_from_documents(docs, _ByText(), uri=str(tmp_path / "l.db"), collection_name="c")
    docstore = InMemoryStore()
    docstore.mset([(d.id, d) for d in docs])
    retriever = ThresholdedRetriever(
        vectorstore=store, policy=POLICY, docstore=docstore, neighbours=1
    )
    assert _attached(retriever) == [["far a1"], ["far a1"]]


@pytest.mark.parametrize("link", ["--5", "²", "99999999999999999999", "-"])
def test_on_an_integer_key_a_link_that_is_no_integer_is_not_found(
    tmp_path: Path, link: str
) -> None:
    store = milvus_from_documents(
        [Document(page_content="near e0", metadata={"source": "e"})],
        _ByText(),
        uri=str(tmp_path / "i.db"),
        collection_name="c",
        auto_id=True,
    )
    (pk,) = store.add_documents([Document(page_content="far e1", metadata={"source": "e"})])
    docstore = InMemoryStore()
    (e0,) = store.similarity_search_by_vector(QUESTION, k=1)
    linked = Document(page_content=e0.page_content, metadata={**e0.metadata, "next_id": link})
    store.client.upsert(store.collection_name, [_row(store, linked, QUESTION)])
    retriever = ThresholdedRetriever(
        vectorstore=store, policy=POLICY, docstore=docstore, neighbours=1, id_key="pk"
    )
    assert _attached(retriever) == [[], []]
    linked.metadata["next_id"] = str(pk)
    store.client.upsert(store.collection_name, [_row(store, linked, QUESTION)])
    assert _attached(retriever) == [["far e1"], ["far e1"]]


def _row(store, doc: Document, vector: list[float]) -> dict[str, object]:
    return {**doc.metadata, store._text_field: doc.page_content, store._vector_field: vector}
