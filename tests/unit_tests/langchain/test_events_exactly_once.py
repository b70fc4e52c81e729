"""One retrieval, however it is run, tells its callbacks once: one ``on_retriever_start`` and
``on_retriever_end``, and one ``thresholded_selection`` event with the call's report.

Over every retriever shape (one store, several collections, a wrapped retriever of ours, an
ensemble of ours wrapped): a wrapped or member retriever tells nothing of its own.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableParallel, RunnablePassthrough

from langchain_thresholded import (
    EVENT_NAME,
    AbstainingChain,
    CollectionSpec,
    MultiCollectionRetriever,
    SimilarityThresholdCompressor,
    ThresholdedRetriever,
)
from thresholded import RetrievalPolicy

from .conftest import OTHER_QUERY, QUERY, build_corpus

POLICY = RetrievalPolicy(min_similarity=0.5, top_k=3, max_per_source=None, max_chars=None)
KEPT = ["a", "b", "c"]
ONCE = Counter({"start": 1, "end": 1, EVENT_NAME: 1})
PROMPT = ChatPromptTemplate.from_messages([("system", "{context}"), ("human", "{input}")])


class Told(BaseCallbackHandler):
    def __init__(self) -> None:
        self.counts: Counter = Counter()
        self.data: list[dict[str, Any]] = []

    def on_retriever_start(self, *args: Any, **kwargs: Any) -> None:
        self.counts["start"] += 1

    def on_retriever_end(self, *args: Any, **kwargs: Any) -> None:
        self.counts["end"] += 1

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        self.counts[name] += 1
        self.data.append(data)


class AsyncTold(AsyncCallbackHandler, Told):
    async def on_retriever_start(self, *args: Any, **kwargs: Any) -> None:
        Told.on_retriever_start(self)

    async def on_retriever_end(self, *args: Any, **kwargs: Any) -> None:
        Told.on_retriever_end(self)

    async def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        Told.on_custom_event(self, name, data)


def ensemble_of(*retrievers: Any) -> Any:
    classic = pytest.importorskip("langchain_classic.retrievers")
    return classic.EnsembleRetriever(retrievers=list(retrievers), weights=[0.5] * len(retrievers))


def retriever_of(shape: str) -> Any:
    """A retriever of ``shape`` keeping a, b and c (d is below the floor)."""
    corpus = build_corpus([("a", 0.875), ("b", 0.75), ("c", 0.625), ("d", 0.25)])
    single = ThresholdedRetriever(vectorstore=corpus.store, policy=POLICY)
    if shape == "single":
        return single
    if shape == "multi":
        return MultiCollectionRetriever(
            collections=[CollectionSpec(retriever=single, name="kb")], policy=POLICY
        )
    wrapped = single if shape == "wrapping ours" else ensemble_of(single, single.model_copy())
    return ThresholdedRetriever.from_retriever(
        wrapped,
        policy=POLICY.with_overrides(hybrid_policy="rescore"),
        embeddings=corpus.embeddings,
    )


def retrieval_chain(retriever: Any) -> Any:
    """LangChain's ``create_retrieval_chain`` over ``retriever``, answering with a fake LLM."""
    pytest.importorskip("langchain_classic")
    from langchain_classic.chains import create_retrieval_chain
    from langchain_classic.chains.combine_documents import create_stuff_documents_chain

    llm = FakeListChatModel(responses=["an answer"])
    return create_retrieval_chain(retriever, create_stuff_documents_chain(llm, PROMPT))


def abstaining(retriever: Any) -> AbstainingChain:
    answer = PROMPT | FakeListChatModel(responses=["an answer"])
    return AbstainingChain(retriever=retriever, answer_chain=answer, question_key="input")


def parallel(retriever: Any) -> Any:
    return RunnableParallel(context=retriever, question=RunnablePassthrough())


def tool(retriever: Any) -> Any:
    return retriever.as_tool(name="kb", description="the knowledge base")


Run = tuple[Any, Any, Any]
"""A runnable around the retriever, its input and its config."""

WAYS: dict[str, Callable[[Any, list[Any]], Run]] = {
    "retriever": lambda r, c: (r, QUERY, {"callbacks": c}),
    "with_config": lambda r, c: (r.with_config(callbacks=c), QUERY, None),
    "lcel": lambda r, c: (r | format_docs, QUERY, {"callbacks": c}),
    "parallel": lambda r, c: (parallel(r), QUERY, {"callbacks": c}),
    "as_tool": lambda r, c: (tool(r), QUERY, {"callbacks": c}),
    "create_retrieval_chain": lambda r, c: (retrieval_chain(r), {"input": QUERY}, {"callbacks": c}),
    "AbstainingChain": lambda r, c: (abstaining(r), {"input": QUERY}, {"callbacks": c}),
}


def run_sync(method: str, run: Run) -> None:
    runnable, given, config = run
    if method == "invoke":
        runnable.invoke(given, config)
    else:
        list(runnable.stream(given, config))


async def run_async(method: str, run: Run) -> None:
    runnable, given, config = run
    if method == "ainvoke":
        await runnable.ainvoke(given, config)
    else:
        async for _ in runnable.astream(given, config):
            pass


def format_docs(documents: list[Document]) -> str:
    return "\n\n".join(d.page_content for d in documents)


SHAPES = ["single", "multi", "wrapping ours", "wrapping an ensemble of ours"]


@pytest.mark.parametrize("method", ["invoke", "stream"])
@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("shape", SHAPES)
def test_each_sync_way_tells_once(shape, way, method):
    told = Told()
    run_sync(method, WAYS[way](retriever_of(shape), [told]))
    assert told.counts == ONCE
    assert [k["id"] for k in told.data[0]["kept"]] == KEPT


@pytest.mark.parametrize("handler", [Told, AsyncTold])
@pytest.mark.parametrize("method", ["ainvoke", "astream"])
@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("shape", SHAPES)
def test_each_async_way_tells_once(shape, way, method, handler):
    told = handler()
    asyncio.run(run_async(method, WAYS[way](retriever_of(shape), [told])))
    assert told.counts == ONCE
    assert [k["id"] for k in told.data[0]["kept"]] == KEPT


@pytest.mark.parametrize("shape", SHAPES)
def test_a_report_call_tells_once_the_report_it_returns(shape):
    retriever, told, atold = retriever_of(shape), Told(), AsyncTold()
    reports = [
        retriever.retrieve_with_report(QUERY, {"callbacks": [told]}),
        asyncio.run(retriever.aretrieve_with_report(QUERY, {"callbacks": [atold]})),
    ]
    for heard, report in zip((told, atold), reports, strict=True):
        assert heard.counts == ONCE
        assert heard.data[0] == report.to_event_data()
        assert [k["id"] for k in heard.data[0]["kept"]] == KEPT


@pytest.mark.parametrize("shape", SHAPES)
def test_a_batch_tells_once_per_question_each_its_own_report(shape):
    retriever, told, atold = retriever_of(shape), Told(), AsyncTold()
    retriever.batch([QUERY, OTHER_QUERY], {"callbacks": [told]})
    asyncio.run(retriever.abatch([QUERY, OTHER_QUERY], {"callbacks": [atold]}))
    for heard in (told, atold):
        assert heard.counts == ONCE + ONCE
        kept = sorted([k["id"] for k in data["kept"]] for data in heard.data)
        assert kept == [[], KEPT]


@pytest.mark.parametrize("shape", SHAPES)
def test_astream_events_shows_one_of_each(shape):
    retriever = retriever_of(shape)

    async def events(runnable: Any) -> Counter:
        seen = Counter()
        async for event in runnable.astream_events(QUERY, version="v2"):
            seen[(event["event"], event.get("name"))] += 1
        return seen

    for runnable in (retriever, retriever | format_docs):
        seen = asyncio.run(events(runnable))
        kinds = Counter({key: n for key, n in seen.items() if "retriever" in key[0]})
        assert sum(kinds.values()) == 2 and set(n for n in kinds.values()) == {1}
        assert seen[("on_custom_event", EVENT_NAME)] == 1


def test_a_compressor_in_a_compression_retriever_tells_once_sync_and_async():
    classic = pytest.importorskip("langchain_classic.retrievers")
    corpus = build_corpus([("a", 0.875), ("b", 0.75), ("c", 0.625), ("d", 0.25)])
    compressor = SimilarityThresholdCompressor(min_similarity=0.7, embeddings=corpus.embeddings)
    chain = classic.ContextualCompressionRetriever(
        base_compressor=compressor, base_retriever=corpus.store.as_retriever(search_kwargs={"k": 4})
    )
    told, atold = Told(), AsyncTold()
    chain.invoke(QUERY, {"callbacks": [told]})
    asyncio.run(chain.ainvoke(QUERY, {"callbacks": [atold]}))
    for heard in (told, atold):
        # the compression retriever's run and its base retriever's: neither is ours
        assert heard.counts == Counter({"start": 2, "end": 2, EVENT_NAME: 1})
        (data,) = heard.data
        assert data["stage"] == "compressor"
        assert [k["id"] for k in data["kept"]] == ["a", "b"]
        assert data["drop_counts"] == {"below_threshold": 2}
