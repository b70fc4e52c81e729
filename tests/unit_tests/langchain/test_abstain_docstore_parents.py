"""AbstainingChain over a retriever that searches its store under a filter but returns the
parents it reads from its docstore (a ``MultiVectorRetriever``, a ``ParentDocumentRetriever``):
its filter holds for the children it searched, never for the parents, so an internal parent of
a public child reached the answering chain. ``from_retriever`` refuses such a retriever; the
chain refuses it too, when built and, for one a call's config sets, when called."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.runnables import ConfigurableField, RunnableLambda
from langchain_core.stores import InMemoryStore

from langchain_thresholded import AbstainingChain
from thresholded.errors import UnsafeFilterError

QUERY = "the question"
SECRET = "INTERNAL PARENT"
REFUSED = r"MultiVectorRetriever returns documents from its docstore"

multi_vector = pytest.importorskip("langchain_classic.retrievers.multi_vector")
classic = pytest.importorskip("langchain_classic.retrievers")


def public_only(doc: Document) -> bool:
    return doc.metadata.get("doc_type") == "public"


def filtered_parents(corpus: Any, **search_kwargs: Any) -> Any:
    """A public child in the store; its internal parent in the docstore, returned instead."""
    c = corpus([("child", 0.75, {"doc_type": "public", "doc_id": "parent"})])
    parents = InMemoryStore()
    parent = Document(id="parent", page_content=SECRET, metadata={"doc_type": "internal"})
    parents.mset([("parent", parent)])
    kwargs = search_kwargs or {"filter": public_only}
    return multi_vector.MultiVectorRetriever(
        vectorstore=c.store, docstore=parents, search_kwargs=kwargs
    )


def chain(retriever: Any, seen: list[Any]) -> AbstainingChain:
    answer = RunnableLambda(lambda x: seen.append(x) or "answer")
    return AbstainingChain(
        retriever=retriever, answer_chain=answer, answer_type="str", format_docs=None
    )


@pytest.mark.parametrize("wrap", ["plain", "ensemble", "bound", "retry", "configurable"])
def test_a_retriever_returning_docstore_parents_past_its_filter_is_refused(corpus, wrap):
    retriever = filtered_parents(corpus)
    if wrap == "ensemble":
        retriever = classic.EnsembleRetriever(retrievers=[retriever], weights=[1.0])
    elif wrap == "bound":
        retriever = retriever.with_config(tags=["x"])
    elif wrap == "configurable":
        retriever = retriever.configurable_fields(search_kwargs=ConfigurableField(id="sk"))
    elif wrap == "retry":
        retriever = retriever.with_retry()
    with pytest.raises(ValueError, match=REFUSED):
        chain(retriever, [])


@pytest.mark.parametrize("method", ["invoke", "ainvoke", "stream", "astream"])
def test_a_configured_filter_on_such_a_retriever_is_refused_when_called(corpus, method):
    """Its search_kwargs set by the call's config: no parent reaches the answering chain."""
    configurable = filtered_parents(corpus, k=4).configurable_fields(
        search_kwargs=ConfigurableField(id="search_kwargs")
    )
    seen: list[Any] = []
    built = chain(configurable, seen)
    config = {"configurable": {"search_kwargs": {"filter": public_only}}}

    async def collect(stream: Any) -> list[Any]:
        return [chunk async for chunk in stream]

    calls = {
        "invoke": lambda: built.invoke(QUERY, config),
        "ainvoke": lambda: asyncio.run(built.ainvoke(QUERY, config)),
        "stream": lambda: list(built.stream(QUERY, config)),
        "astream": lambda: asyncio.run(collect(built.astream(QUERY, config))),
    }
    with pytest.raises(UnsafeFilterError, match=REFUSED):
        calls[method]()
    assert seen == []


def test_such_a_retriever_without_a_filter_is_taken(corpus):
    """Nothing held back, nothing past: its parents are what the chain answers from."""
    seen: list[Any] = []
    built = chain(filtered_parents(corpus, k=4), seen)
    assert built.invoke(QUERY) == "answer"
    assert [d.page_content for d in seen[0]["context"]] == [SECRET]


@pytest.mark.parametrize("kind", ["compression", "merger"])
def test_such_a_retriever_inside_a_wrapper_is_refused(corpus, kind):
    """A compression retriever or a merger returns its documents: the parent came back."""
    pipeline = pytest.importorskip("langchain_classic.retrievers.document_compressors")
    retriever = filtered_parents(corpus)
    if kind == "compression":
        compressor = pipeline.DocumentCompressorPipeline(transformers=[])
        wrapper = classic.ContextualCompressionRetriever(
            base_retriever=retriever, base_compressor=compressor
        )
    else:
        wrapper = classic.MergerRetriever(retrievers=[retriever])
    with pytest.raises(ValueError, match=REFUSED):
        chain(wrapper, [])


def test_a_retriever_returning_its_memory_stream_past_its_filter_is_refused(corpus):
    """A ``TimeWeightedVectorStoreRetriever`` returns its most recent documents whatever its
    filter says."""
    c = corpus([("public", 0.75, {"doc_type": "public"})])
    recent = classic.TimeWeightedVectorStoreRetriever(
        vectorstore=c.store, search_kwargs={"filter": public_only}
    )
    with pytest.raises(ValueError, match=r"TimeWeightedVectorStoreRetriever returns documents"):
        chain(recent, [])


def test_a_self_query_retriever_whose_filter_its_llm_replaces_is_refused(corpus, self_querying):
    """Its LLM's filter, written from the question, replaces its own."""
    c = corpus([("internal", 0.75, {"doc_type": "internal"})])
    asked = self_querying(c.store, {"doc_type": "internal"}, filter=public_only)
    with pytest.raises(ValueError, match=r"SelfQueryRetriever replaces its search_kwargs"):
        chain(asked, [])
