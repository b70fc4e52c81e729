"""A neighbour or summary is judged by the copy a search would return: the store's.

The docstore holds a copy of each linked section beside the store's. A section changed in
the store (``doc_type`` now ``internal``) whose docstore copy was left as it was must not
come back as a neighbour of a section the filters keep, when a search under the same
filters would never return it. A store that cannot read its documents by id leaves the
docstore's copy the only one.
"""

from __future__ import annotations

import asyncio
import math
import uuid

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import InMemoryStore

from langchain_thresholded import ThresholdedRetriever
from thresholded import RetrievalPolicy

Q = "the question"
POLICY = RetrievalPolicy(min_similarity=0.5, top_k=10, max_per_source=None, max_chars=None)
SECRET = "The layoff plan."


def two_copies(corpus, *, store_says: str, docstore_says: str):
    """``a`` (kept) links to ``b``, which is ``store_says`` in the store and
    ``docstore_says`` in the docstore."""
    c = corpus(
        [
            ("a", 0.75, {"doc_type": "public", "next_id": "b"}, "alpha"),
            ("b", 0.25, {"doc_type": store_says, "prev_id": "a"}, SECRET),
        ]
    )
    docstore = InMemoryStore()
    stale = {"doc_type": docstore_says, "prev_id": "a"}
    docstore.mset([("b", Document(id="b", page_content=SECRET, metadata=stale))])
    return ThresholdedRetriever(
        vectorstore=c.store, policy=POLICY, docstore=docstore, filters={"doc_type": "public"}
    )


def texts(report) -> list[str]:
    return [d.page_content for d in report.items]


def test_a_neighbour_the_store_holds_outside_the_filters_is_not_attached(corpus):
    retriever = two_copies(corpus, store_says="internal", docstore_says="public")
    report = retriever.retrieve_with_report(Q)
    assert [d.id for d in report.kept] == ["a"]
    assert SECRET not in texts(report)
    assert SECRET not in texts(asyncio.run(retriever.aretrieve_with_report(Q)))


def test_a_neighbour_the_store_holds_inside_the_filters_is_attached_as_stored(corpus):
    retriever = two_copies(corpus, store_says="public", docstore_says="internal")
    report = retriever.retrieve_with_report(Q)
    assert [(d.id, d.metadata["doc_type"]) for d in report.attached] == [("b", "public")]


class _Near(Embeddings):
    """``alpha`` at cosine 0.875 with every question, any other text at 0.25."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [_unit(0.875 if t == "alpha" else 0.25) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return _unit(1.0)


def _unit(cosine: float) -> list[float]:
    return [cosine, math.sqrt(1 - cosine * cosine), 0.0, 0.0]


def test_a_neighbour_a_milvus_collection_holds_outside_the_filters_is_not_attached(tmp_path):
    """langchain-milvus reads no document by id: its rows are read in one query."""
    pytest.importorskip("langchain_milvus")
    from langchain_thresholded.milvus import milvus_from_documents

    documents = [
        Document(id="a", page_content="alpha", metadata={"doc_type": "public", "next_id": "b"}),
        Document(id="b", page_content=SECRET, metadata={"doc_type": "internal", "prev_id": "a"}),
    ]
    store = milvus_from_documents(
        documents, _Near(), uri=str(tmp_path / "kb.db"), collection_name="copies"
    )
    docstore = InMemoryStore()
    stale = {"doc_type": "public", "prev_id": "a"}
    docstore.mset([("b", Document(id="b", page_content=SECRET, metadata=stale))])
    retriever = ThresholdedRetriever(
        vectorstore=store, policy=POLICY, docstore=docstore, filters={"doc_type": "public"}
    )
    report = retriever.retrieve_with_report(Q)
    assert [d.id for d in report.kept] == ["a"]
    assert SECRET not in texts(report)
    assert SECRET not in texts(asyncio.run(retriever.aretrieve_with_report(Q)))
    unfiltered = ThresholdedRetriever(vectorstore=store, policy=POLICY, docstore=docstore)
    attached = unfiltered.retrieve_with_report(Q).attached
    assert [(d.id, d.metadata["doc_type"], d.metadata["pk"]) for d in attached] == [
        ("b", "internal", "b")
    ]


def test_a_summary_a_chroma_collection_holds_without_metadata_is_attached():
    """Chroma keeps no metadata for a document given none, and its ``get_by_ids`` builds such
    a document with ``metadata=None``, which LangChain refuses: the summary is read as a
    search reads it (no metadata), not failing the call."""
    pytest.importorskip("langchain_chroma")
    import chromadb
    from langchain_chroma import Chroma

    store = Chroma(
        f"summary-without-metadata-{uuid.uuid4().hex[:8]}",
        _Near(),
        client=chromadb.EphemeralClient(),
        collection_metadata={"hnsw:space": "cosine"},
    )
    summary = Document(id="p", page_content="The summary.")
    kept = Document(id="a", page_content="alpha", metadata={"parent_id": "p"})
    store.add_documents([kept, summary], ids=["a", "p"])
    docstore = InMemoryStore()
    docstore.mset([("p", summary)])
    retriever = ThresholdedRetriever(vectorstore=store, policy=POLICY, docstore=docstore)
    for report in (
        retriever.retrieve_with_report(Q),
        asyncio.run(retriever.aretrieve_with_report(Q)),
    ):
        assert [d.id for d in report.kept] == ["a"]
        assert [(d.id, d.page_content) for d in report.attached] == [("p", "The summary.")]


def _wrapped(corpus, wrap):
    """``two_copies`` with the store searched through another retriever, ``wrap(store)``."""
    plain = two_copies(corpus, store_says="internal", docstore_says="public")
    return ThresholdedRetriever.from_retriever(
        wrap(plain.vectorstore),
        policy=POLICY.model_copy(update={"hybrid_policy": "rescore"}),
        docstore=plain.docstore,
        filters={"doc_type": "public"},
        embeddings=plain.vectorstore.embeddings,
    )


def _ensemble(store):
    from langchain_classic.retrievers import EnsembleRetriever

    return EnsembleRetriever(retrievers=[store.as_retriever()], weights=[1.0])


def _thresholded(store):
    return ThresholdedRetriever(vectorstore=store, policy=POLICY, filters={"doc_type": "public"})


@pytest.mark.parametrize("wrap", [_ensemble, _thresholded], ids=["ensemble", "thresholded"])
def test_a_neighbour_the_wrapped_retrievers_store_holds_outside_the_filters_is_not_attached(
    corpus, wrap
):
    """A wrapped ensemble's member stores (and a wrapped ``ThresholdedRetriever``'s store)
    read their documents by id too: theirs is the copy judged, not the docstore's."""
    retriever = _wrapped(corpus, wrap)
    report = retriever.retrieve_with_report(Q)
    assert [d.id for d in report.kept] == ["a"]
    assert SECRET not in texts(report)
    assert SECRET not in texts(asyncio.run(retriever.aretrieve_with_report(Q)))


def test_a_member_store_s_copy_outside_its_member_s_filters_does_not_stand_in(corpus):
    """An ensemble of ``ThresholdedRetriever``s, each restricted by its own filters: a store
    whose member would never return a section (it lies outside that member's filters) does
    not give its copy for it. ``b`` is ``public`` in the first member's store, where that
    member (``lang == "en"``) never returns it, and ``internal`` in the second's, the only
    one that returns it: it is not attached to ``a`` under ``doc_type == "public"``."""
    from langchain_classic.retrievers import EnsembleRetriever

    first = corpus(
        [
            ("a", 0.75, {"doc_type": "public", "lang": "en", "next_id": "b"}, "alpha"),
            ("b", 0.25, {"doc_type": "public", "lang": "de", "prev_id": "a"}, SECRET),
        ]
    )
    second = corpus([("b", 0.25, {"doc_type": "internal", "lang": "de", "prev_id": "a"}, SECRET)])
    members = [
        ThresholdedRetriever(vectorstore=first.store, policy=POLICY, filters={"lang": "en"}),
        ThresholdedRetriever(vectorstore=second.store, policy=POLICY, filters={"lang": "de"}),
    ]
    docstore = InMemoryStore()
    stale = {"doc_type": "public", "lang": "de", "prev_id": "a"}
    docstore.mset([("b", Document(id="b", page_content=SECRET, metadata=stale))])
    retriever = ThresholdedRetriever.from_retriever(
        EnsembleRetriever(retrievers=members, weights=[0.5, 0.5]),
        policy=POLICY.model_copy(update={"hybrid_policy": "rescore"}),
        docstore=docstore,
        filters={"doc_type": "public"},
        embeddings=first.embeddings,
    )
    for report in (
        retriever.retrieve_with_report(Q),
        asyncio.run(retriever.aretrieve_with_report(Q)),
    ):
        assert [d.id for d in report.kept] == ["a"]
        assert SECRET not in texts(report)
