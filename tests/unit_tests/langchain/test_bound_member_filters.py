"""Filters bound to a wrapped retriever (``retriever.bind(filters=...)``) hold for the
neighbours and summaries too.

A binding passes its keyword arguments to every search of the retriever it wraps, so
``ThresholdedRetriever(...).bind(filters={"doc_type": "public"})`` returns public documents
only. ``from_retriever`` over it (alone, or as an ensemble's member) held the sections it
attaches from the docstore to the wrapped retriever's own ``filters`` alone: the bound ones
were not read, and the internal neighbour of a public section came back.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.stores import InMemoryStore

from langchain_thresholded import ThresholdedRetriever
from thresholded import RetrievalPolicy

QUERY = "the question"
POLICY = RetrievalPolicy(min_similarity=0.1, top_k=10, max_per_source=None, max_chars=None)
RESCORE = POLICY.model_copy(update={"hybrid_policy": "rescore"})
PUBLIC = {"doc_type": "public"}


def public_and_its_internal_neighbour(corpus: Any) -> tuple[Any, InMemoryStore]:
    c = corpus(
        [
            ("pub", 0.75, {"doc_type": "public", "next_id": "int"}),
            ("int", 0.875, {"doc_type": "internal", "prev_id": "pub"}),
        ]
    )
    docstore = InMemoryStore()
    docstore.mset(list(c.documents.items()))
    return c, docstore


def returned(retriever: Any) -> list[tuple[str, str | None]]:
    return [(d.id, d.metadata.get("attached_role")) for d in retriever.invoke(QUERY)]


def bound(c: Any, how: str) -> Any:
    inner = ThresholdedRetriever(vectorstore=c.store, policy=POLICY)
    if how == "bind":
        return inner.bind(filters=PUBLIC)
    if how == "bind, then retry":
        return inner.bind(filters=PUBLIC).with_retry()
    if how == "filter":
        return inner.bind(filter=PUBLIC)
    assert how == "an outer binding over an inner one"
    return inner.bind(filters={"doc_type": "internal"}).bind(filters=PUBLIC)


HOW = ["bind", "bind, then retry", "filter", "an outer binding over an inner one"]


@pytest.mark.parametrize("how", HOW)
def test_filters_bound_to_a_wrapped_retriever_hold_for_its_attachments(
    corpus: Any, how: str
) -> None:
    c, docstore = public_and_its_internal_neighbour(corpus)
    member = bound(c, how)
    assert [d.id for d in member.invoke(QUERY)] == ["pub"]
    wrapped = ThresholdedRetriever.from_retriever(
        member, policy=RESCORE, embeddings=c.embeddings, docstore=docstore
    )
    assert returned(wrapped) == [("pub", None)]
    assert wrapped.retrieve_with_report(QUERY).outside_filters == 0  # int, held back


def test_filters_bound_to_an_ensemble_member_hold_for_its_attachments(corpus: Any) -> None:
    classic = pytest.importorskip("langchain_classic.retrievers")
    c, docstore = public_and_its_internal_neighbour(corpus)
    ensemble = classic.EnsembleRetriever(retrievers=[bound(c, "bind")], weights=[1.0])
    wrapped = ThresholdedRetriever.from_retriever(
        ensemble, policy=RESCORE, embeddings=c.embeddings, docstore=docstore
    )
    assert returned(wrapped) == [("pub", None)]


def test_a_bound_filter_function_with_a_docstore_is_refused(corpus: Any) -> None:
    """It cannot be read, so the attachments could not be held to it."""
    c, docstore = public_and_its_internal_neighbour(corpus)
    member = ThresholdedRetriever(vectorstore=c.store, policy=POLICY).bind(
        filter=lambda doc: doc.metadata.get("doc_type") == "public"
    )
    with pytest.raises(ValueError, match=r"cannot be read"):
        ThresholdedRetriever.from_retriever(
            member, policy=RESCORE, embeddings=c.embeddings, docstore=docstore
        )
