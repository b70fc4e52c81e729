"""A Chroma store's own restriction holds for the sections fetched by id.

``search_kwargs={"filter": ...}`` (Chroma's ``where``) or ``{"where_document": ...}`` on a
``Chroma`` store was refused with a docstore, as holding for the search only, while the
LlamaIndex adapter held the same restriction for its neighbours and summaries by asking the
collection. The collection is now asked which of the sections fetched by id lie within it:
one outside (an internal neighbour, a summary kept in the docstore only) is never attached.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import InMemoryStore

from langchain_thresholded import ThresholdedRetriever
from thresholded import RetrievalPolicy

pytestmark = pytest.mark.integration

POLICY = RetrievalPolicy(min_similarity=0.5, top_k=10, max_per_source=None, max_chars=None)
QUESTION = "q"
PUBLIC = {"doc_type": "public"}


class Near(Embeddings):
    """ "alpha" at cosine 0.75 with the question, its internal neighbour at 0.25."""

    def _vector(self, text: str) -> list[float]:
        cos = {"alpha": 0.75, "SECRET": 0.25}.get(text, 1.0)
        return [cos, math.sqrt(1 - cos * cos)]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0]


SECTIONS = [
    Document(
        id="a",
        page_content="alpha",
        metadata={"doc_type": "public", "next_id": "b", "parent_id": "s"},
    ),
    Document(id="b", page_content="SECRET", metadata={"doc_type": "internal", "prev_id": "a"}),
]
SUMMARY = Document(id="s", page_content="summary", metadata={"doc_type": "public"})
"""A parent summary kept in the docstore only: the collection cannot say it lies within."""


@pytest.fixture
def chroma() -> Any:
    chromadb = pytest.importorskip("chromadb")
    langchain_chroma = pytest.importorskip("langchain_chroma")
    store = langchain_chroma.Chroma(
        f"held-{uuid.uuid4().hex[:8]}",
        Near(),
        client=chromadb.EphemeralClient(),
        collection_metadata={"hnsw:space": "cosine"},
    )
    store.add_documents(SECTIONS, ids=[d.id for d in SECTIONS])
    return store


def docstore() -> InMemoryStore:
    store = InMemoryStore()
    store.mset([(d.id, d) for d in [*SECTIONS, SUMMARY]])
    return store


RESTRICTIONS = [
    {"filter": PUBLIC},
    {"where_document": {"$contains": "alpha"}},
    {"filter": PUBLIC, "where_document": {"$contains": "alpha"}},
]


@pytest.mark.parametrize("restriction", RESTRICTIONS, ids=["filter", "where_document", "both"])
async def test_a_neighbour_outside_the_chroma_restriction_is_never_attached(
    chroma, restriction
) -> None:
    """The setup was refused; it now answers, and b (internal, without "alpha") and the
    docstore-only summary are dropped, sync and async."""
    retriever = ThresholdedRetriever(
        vectorstore=chroma,
        policy=POLICY,
        docstore=docstore(),
        neighbours=1,
        parent_summaries=True,
        search_kwargs=restriction,
    )
    for report in (
        retriever.retrieve_with_report(QUESTION),
        await retriever.aretrieve_with_report(QUESTION),
    ):
        assert [d.id for d in report.kept] == ["a"]
        assert [d.id for d in report.attached] == []


async def test_a_neighbour_within_the_chroma_restriction_is_attached(chroma) -> None:
    """Held by id, not dropped wholesale: b within the filter is attached."""
    retriever = ThresholdedRetriever(
        vectorstore=chroma,
        policy=POLICY,
        docstore=docstore(),
        neighbours=1,
        search_kwargs={"filter": {"doc_type": {"$in": ["public", "internal"]}}},
    )
    for report in (
        retriever.retrieve_with_report(QUESTION),
        await retriever.aretrieve_with_report(QUESTION),
    ):
        assert [d.id for d in report.kept] == ["a"]
        assert [d.id for d in report.attached] == ["b"]


def test_from_retriever_holds_a_wrapped_chroma_restriction_for_attachments(chroma) -> None:
    wrapped = chroma.as_retriever(search_kwargs={"where_document": {"$contains": "alpha"}})
    retriever = ThresholdedRetriever.from_retriever(
        wrapped, policy=POLICY, docstore=docstore(), neighbours=1, parent_summaries=True
    )
    report = retriever.retrieve_with_report(QUESTION)
    assert [d.id for d in report.kept] == ["a"]
    assert [d.id for d in report.attached] == []


async def test_a_wrapped_mmr_search_holds_its_chroma_restriction_for_attachments(chroma) -> None:
    wrapped = chroma.as_retriever(
        search_type="mmr", search_kwargs={"where_document": {"$contains": "alpha"}}
    )
    retriever = ThresholdedRetriever.from_retriever(
        wrapped, policy=POLICY, docstore=docstore(), neighbours=1, parent_summaries=True
    )
    for report in (
        retriever.retrieve_with_report(QUESTION),
        await retriever.aretrieve_with_report(QUESTION),
    ):
        assert [d.id for d in report.kept] == ["a"]
        assert [d.id for d in report.attached] == []


def test_a_filter_function_on_chroma_with_a_docstore_is_still_refused(chroma) -> None:
    """Chroma cannot be asked about a function: nothing could hold the neighbours to it."""
    with pytest.raises(ValueError, match=r"not for the neighbours.*give it as filters="):
        ThresholdedRetriever(
            vectorstore=chroma,
            policy=POLICY,
            docstore=docstore(),
            search_kwargs={"filter": lambda meta: meta.get("doc_type") == "public"},
        )


async def test_awaited_the_collection_is_asked_off_the_event_loop(chroma, monkeypatch) -> None:
    """The collection's blocking client is asked which fetched sections lie within the
    restriction in a thread: on the event loop, a remote Chroma or Milvus held it up for a
    round trip."""
    import threading

    from langchain_thresholded import backend

    asked_on: list[int] = []

    def recorded(*args: Any) -> set[str]:
        asked_on.append(threading.get_ident())
        return ids_within(*args)

    ids_within = backend.ids_within
    monkeypatch.setattr(backend, "ids_within", recorded)
    retriever = ThresholdedRetriever(
        vectorstore=chroma,
        policy=POLICY,
        docstore=docstore(),
        neighbours=1,
        search_kwargs={"filter": PUBLIC},
    )
    report = await retriever.aretrieve_with_report(QUESTION)
    assert [d.id for d in report.attached] == []
    assert asked_on and threading.get_ident() not in asked_on
