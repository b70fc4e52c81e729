"""A retrieval driven by a query or chat engine tells the outside once, as a direct call does.

Per turn or query, sync, async and streaming, answered or not: one RETRIEVE callback
pair, one span of the retriever, one ``RetrievalStartEvent`` and ``RetrievalEndEvent``,
and one ``ThresholdSelectionEvent`` whose data is the retrieval's report.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from llama_index.core import Settings
from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
from llama_index.core.callbacks import CallbackManager, CBEventType, LlamaDebugHandler
from llama_index.core.chat_engine import CondensePlusContextChatEngine, ContextChatEngine
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from pydantic import PrivateAttr

from llama_index_thresholded import (
    AbstainingCondensePlusContextChatEngine,
    AbstainingContextChatEngine,
    AbstainingQueryEngine,
    CollectionSpec,
    MultiCollectionRetriever,
    ThresholdedRetriever,
    ThresholdSelectionEvent,
)

ONCE = {"callback": 1, "span": 1, "RetrievalStartEvent": 1, "RetrievalEndEvent": 1, "selection": 1}
QUERY_ENGINES = {"RetrieverQueryEngine": RetrieverQueryEngine, "Abstaining": AbstainingQueryEngine}
CHAT_ENGINES = {
    "ContextChatEngine": ContextChatEngine,
    "CondensePlusContextChatEngine": CondensePlusContextChatEngine,
    "AbstainingContextChatEngine": AbstainingContextChatEngine,
    "AbstainingCondensePlusContextChatEngine": AbstainingCondensePlusContextChatEngine,
}


class Events(BaseEventHandler):
    _events: list[Any] = PrivateAttr(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "Events"

    def handle(self, event: Any, **kwargs: Any) -> None:
        self._events.append(event)


class Heard:
    """What one engine call told the callback manager, the span handlers and the events."""

    def __init__(self) -> None:
        self.debug = LlamaDebugHandler(print_trace_on_end=False)
        self.spans = SimpleSpanHandler()
        self.events = Events()

    def counts(self) -> dict[str, int]:
        names = Counter(type(e).__name__ for e in self.events._events)
        spans = self.spans.completed_spans + self.spans.dropped_spans
        return {
            "callback": len(self.debug.get_event_pairs(CBEventType.RETRIEVE)),
            "span": len([s for s in spans if s.id_.startswith(("Thresholded", "MultiCollection"))]),
            "RetrievalStartEvent": names["RetrievalStartEvent"],
            "RetrievalEndEvent": names["RetrievalEndEvent"],
            "selection": names["ThresholdSelectionEvent"],
        }

    @property
    def selection(self) -> ThresholdSelectionEvent:
        (event,) = [e for e in self.events._events if isinstance(e, ThresholdSelectionEvent)]
        return event


@pytest.fixture
def heard() -> Any:
    """Handlers on the root dispatcher and on the global callback manager, which the chat
    engines use (their ``from_defaults`` takes none)."""
    root, hearing = get_dispatcher(), Heard()
    root.add_span_handler(hearing.spans)
    root.add_event_handler(hearing.events)
    before = Settings.callback_manager
    Settings.callback_manager = CallbackManager([hearing.debug])
    yield hearing
    Settings.callback_manager = before
    root.span_handlers.remove(hearing.spans)
    root.event_handlers.remove(hearing.events)


@pytest.fixture
def retrievers(kit: Any) -> dict[str, Callable[[], Any]]:
    nodes = [
        kit.section("a1", 0.9, source="A"),
        kit.section("a2", 0.8, axis=2, source="A"),
        kit.section("b1", 0.3, axis=4, source="B"),
    ]
    kit.link_chain(nodes[:2])
    index = kit.build_index(nodes, kit.embedding())
    policy = kit.policy(min_similarity=0.5)
    return {
        "single": lambda: ThresholdedRetriever(index, policy, neighbours=1),
        "multi": lambda: MultiCollectionRetriever(
            [CollectionSpec(index, name="kb")], policy, neighbours=1
        ),
    }


def drained(response: Any) -> Any:
    """``response``, its stream read to the end (a streamed answer is written as it is read)."""
    if isinstance(response, StreamingResponse):
        list(response.response_gen)
    elif isinstance(response, AsyncStreamingResponse):

        async def read() -> None:
            async for _ in response.async_response_gen():
                pass

        asyncio.run(read())
    return response


def query_once(engine: Any, question: str, mode: str) -> Any:
    if mode == "sync":
        return drained(engine.query(question))
    return drained(asyncio.run(engine.aquery(question)))


def chat_once(engine: Any, question: str, method: str) -> Any:
    if method == "chat":
        return engine.chat(question)
    if method == "achat":
        return asyncio.run(engine.achat(question))
    if method == "stream_chat":
        response = engine.stream_chat(question)
        list(response.response_gen)
        return response

    async def streamed() -> Any:
        response = await engine.astream_chat(question)
        async for _ in response.async_response_gen():
            pass
        return response

    return asyncio.run(streamed())


def expected_kept(question: str, kit: Any) -> list[str]:
    return ["a1", "a2"] if question == kit.QUESTION else []


@pytest.mark.parametrize("answered", [True, False], ids=["answered", "nothing_matched"])
@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streaming"])
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("engine", list(QUERY_ENGINES))
@pytest.mark.parametrize("shape", ["single", "multi"])
def test_a_query_engines_retrieval_is_told_once(
    kit, retrievers, heard, shape, engine, mode, streaming, answered
):
    question = kit.QUESTION if answered else kit.ORTHOGONAL
    built = QUERY_ENGINES[engine].from_args(
        retrievers[shape](),
        llm=MockLLM(),
        streaming=streaming,
        callback_manager=Settings.callback_manager,
    )
    query_once(built, question, mode)
    assert heard.counts() == ONCE
    assert [k["id"] for k in heard.selection.kept] == expected_kept(question, kit)
    assert heard.selection.nothing_matched is not answered


@pytest.mark.parametrize("answered", [True, False], ids=["answered", "nothing_matched"])
@pytest.mark.parametrize("method", ["chat", "achat", "stream_chat", "astream_chat"])
@pytest.mark.parametrize("engine", list(CHAT_ENGINES))
@pytest.mark.parametrize("shape", ["single", "multi"])
def test_a_chat_turns_retrieval_is_told_once(
    kit, retrievers, heard, shape, engine, method, answered
):
    question = kit.QUESTION if answered else kit.ORTHOGONAL
    built = CHAT_ENGINES[engine].from_defaults(retrievers[shape](), llm=MockLLM())
    chat_once(built, question, method)
    assert heard.counts() == ONCE
    assert [k["id"] for k in heard.selection.kept] == expected_kept(question, kit)
