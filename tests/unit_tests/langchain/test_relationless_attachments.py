"""Attachments asked for on sections without relationships: one INFO line says none were found.

The walk is the core's (``thresholded.attachments``), so is the line, in both adapters.

Neighbours and parent summaries follow the prev_id, next_id and parent_id metadata of
the documents, through the docstore. Sections without any give nothing to attach, which
the retriever says once, at INFO, instead of silently attaching nothing.
"""

from __future__ import annotations

import logging


def langchain_retriever(*, linked: bool):
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.stores import InMemoryStore
    from langchain_core.vectorstores import InMemoryVectorStore

    from langchain_thresholded import RetrievalPolicy, ThresholdedRetriever

    links = {"a": {"next_id": "b"}, "b": {"prev_id": "a"}} if linked else {"a": {}, "b": {}}
    docs = [
        Document(id=i, page_content=f"Section {i}.", metadata={"source": "manual", **links[i]})
        for i in ("a", "b")
    ]
    store = InMemoryVectorStore(embedding=DeterministicFakeEmbedding(size=8))
    store.add_documents(docs, ids=["a", "b"])
    docstore = InMemoryStore()
    docstore.mset([(d.id, d) for d in docs])
    return ThresholdedRetriever(
        vectorstore=store,
        policy=RetrievalPolicy(min_similarity=0),
        docstore=docstore,
        neighbours=1,
        parent_summaries=True,
    )


def test_langchain_says_once_that_no_relationships_were_found(caplog, none_found) -> None:
    retriever = langchain_retriever(linked=False)
    with caplog.at_level(logging.INFO, logger="thresholded"):
        for _ in range(2):
            assert len(retriever.invoke("Section a.")) == 2
    assert len(none_found("thresholded")) == 1


def test_langchain_says_nothing_when_sections_are_linked(caplog, none_found) -> None:
    retriever = langchain_retriever(linked=True)
    with caplog.at_level(logging.INFO, logger="thresholded"):
        retriever.invoke("Section a.")
    assert none_found("thresholded") == []
