"""Chat engines that answer a configured message, without calling the LLM, when nothing matched.

``AbstainingContextChatEngine`` and ``AbstainingCondensePlusContextChatEngine`` are
LlamaIndex's ``ContextChatEngine`` and ``CondensePlusContextChatEngine`` with one
change: when no node remains after the retriever and the node postprocessors, the
answer is ``no_match_message`` instead of the LLM's (or the "Empty Response" the
plain engines give). Everything else is theirs: the retrieval runs once, a
follow-up question is still condensed by the LLM first (``CondensePlus...``, with
history), and the turn goes to the chat memory, as the user's message and the
fixed answer, so the conversation stays consistent.

Every response of ``chat``, ``achat``, ``stream_chat`` and ``astream_chat`` carries
``metadata["nothing_matched"]``: True for the fixed answer, False for the LLM's. The
fixed answer also says what emptied the result, in ``metadata["abstained_by"]``, as
``AbstainingQueryEngine`` does (see :data:`~thresholded.report.ABSTAINED_BY`).

.. code-block:: python

    engine = AbstainingContextChatEngine.from_defaults(
        retriever,  # a ThresholdedRetriever
        llm=llm,
        no_match_message="I don't know. Our support team is at help@example.com.",
    )
    response = engine.chat("What's the weather in Mumbai today?")
    response.response  # "I don't know. ...", and the LLM was not called
    response.metadata["nothing_matched"]  # True
    response.metadata["abstained_by"]  # "floor": every section was below it
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.base.response.schema import RESPONSE_TYPE
from llama_index.core.chat_engine import CondensePlusContextChatEngine, ContextChatEngine
from llama_index.core.chat_engine.types import AgentChatResponse, StreamingAgentChatResponse
from llama_index.core.response_synthesizers import BaseSynthesizer
from llama_index.core.schema import NodeWithScore

from llama_index_thresholded.query_engine import (
    NoMatchMessage,
    achecked_retrieval,
    check_retriever,
    checked_retrieval,
    no_match_response,
)
from thresholded.abstention import DEFAULT_NO_MATCH_MESSAGE, NOTHING_MATCHED, check_no_match_message
from thresholded.report import ABSTAINED_BY
from thresholded.strict import check_arguments, named_parameters

ChatResponse = TypeVar("ChatResponse", AgentChatResponse, StreamingAgentChatResponse)


class _NoMatchSynthesizer:
    """An engine's synthesizer that answers ``message`` for an empty node list.

    The chat engines hand it the nodes they retrieved and write whatever it answers
    to their memory; with nodes, the engine's own synthesizer (and its LLM) answers.
    """

    def __init__(self, synthesizer: BaseSynthesizer, message: str, *, streaming: bool) -> None:
        self._synthesizer = synthesizer
        self._message = message
        self._streaming = streaming

    def synthesize(
        self, query: Any, nodes: list[NodeWithScore], *args: Any, **kwargs: Any
    ) -> RESPONSE_TYPE:
        if nodes:
            return self._synthesizer.synthesize(query, nodes, *args, **kwargs)
        return no_match_response(self._message, streaming=self._streaming)

    async def asynthesize(
        self, query: Any, nodes: list[NodeWithScore], *args: Any, **kwargs: Any
    ) -> RESPONSE_TYPE:
        if nodes:
            return await self._synthesizer.asynthesize(query, nodes, *args, **kwargs)
        return no_match_response(self._message, streaming=self._streaming, asynchronous=True)


@dataclass
class _Turn:
    """What one turn's retrieval found: what emptied it, when it was emptied and said why."""

    abstained_by: str | None = None


_TURN: ContextVar[_Turn | None] = ContextVar("abstaining_chat_turn", default=None)
"""The turn running in this context: concurrent turns on one engine each have their own."""


@contextmanager
def _turn() -> Iterator[_Turn]:
    turn = _Turn()
    token = _TURN.set(turn)
    try:
        yield turn
    finally:
        _TURN.reset(token)


def _retrieved(nodes: list[NodeWithScore], why: str | None) -> list[NodeWithScore]:
    """``nodes``; when none is left, the turn is told ``why``, if the retriever said it."""
    turn = _TURN.get()
    if turn is not None and why is not None:
        turn.abstained_by = why
    return nodes


def _flagged(response: ChatResponse, turn: _Turn) -> ChatResponse:
    """``response`` with ``metadata["nothing_matched"]``: True when it had no source node,
    and then ``metadata["abstained_by"]`` when the turn's retrieval said why.

    ``StreamingAgentChatResponse`` has no ``metadata`` field in llama-index-core 0.14;
    it gets one here, so that every chat method's response reads the same.
    """
    metadata = dict(getattr(response, "metadata", None) or {})
    metadata[NOTHING_MATCHED] = not response.source_nodes
    if metadata[NOTHING_MATCHED] and turn.abstained_by is not None:
        metadata[ABSTAINED_BY] = turn.abstained_by
    response.metadata = metadata  # type: ignore[attr-defined]
    return response


class _Abstaining:
    """What the two engines add: the fixed answer, and the flag on every response."""

    def __init__(
        self, *args: Any, no_match_message: str = DEFAULT_NO_MATCH_MESSAGE, **kwargs: Any
    ) -> None:
        check_retriever(f"{type(self).__name__}()", args, kwargs)
        super().__init__(*args, **kwargs)
        self.no_match_message = no_match_message

    no_match_message = NoMatchMessage()

    @classmethod
    def from_defaults(
        cls, *args: Any, no_match_message: str = DEFAULT_NO_MATCH_MESSAGE, **kwargs: Any
    ) -> Any:
        """The engine's own ``from_defaults``, with ``no_match_message``.

        An unknown keyword is a ``TypeError`` (LlamaIndex's ``from_defaults`` ignores it).
        """
        accepted = [*named_parameters(super().from_defaults), "no_match_message"]  # type: ignore[misc]
        check_arguments(f"{cls.__name__}.from_defaults()", kwargs, accepted)
        check_retriever(f"{cls.__name__}.from_defaults()", args, kwargs)
        check_no_match_message(no_match_message)
        engine = super().from_defaults(*args, **kwargs)  # type: ignore[misc]
        engine.no_match_message = no_match_message
        return engine

    def _get_nodes(self, message: str) -> list[NodeWithScore]:
        """The engine's own, checked as the query engine's (see ``checked_retrieval``); a
        retriever with a report says what emptied the result."""
        retriever, postprocessors = self._retriever, self._node_postprocessors  # type: ignore[attr-defined]
        return _retrieved(*checked_retrieval(retriever, postprocessors, message))

    async def _aget_nodes(self, message: str) -> list[NodeWithScore]:
        retriever, postprocessors = self._retriever, self._node_postprocessors  # type: ignore[attr-defined]
        return _retrieved(*await achecked_retrieval(retriever, postprocessors, message))

    def _get_response_synthesizer(
        self, chat_history: list[ChatMessage], streaming: bool = False
    ) -> Any:
        own = super()._get_response_synthesizer  # type: ignore[misc]
        synthesizer = own(chat_history, streaming=streaming)
        return _NoMatchSynthesizer(synthesizer, self.no_match_message, streaming=streaming)

    def chat(self, message: str, *args: Any, **kwargs: Any) -> AgentChatResponse:
        with _turn() as turn:
            return _flagged(super().chat(message, *args, **kwargs), turn)  # type: ignore[misc]

    async def achat(self, message: str, *args: Any, **kwargs: Any) -> AgentChatResponse:
        with _turn() as turn:
            return _flagged(await super().achat(message, *args, **kwargs), turn)  # type: ignore[misc]

    def stream_chat(self, message: str, *args: Any, **kwargs: Any) -> StreamingAgentChatResponse:
        with _turn() as turn:
            return _flagged(super().stream_chat(message, *args, **kwargs), turn)  # type: ignore[misc]

    async def astream_chat(
        self, message: str, *args: Any, **kwargs: Any
    ) -> StreamingAgentChatResponse:
        with _turn() as turn:
            response = await super().astream_chat(message, *args, **kwargs)  # type: ignore[misc]
            return _flagged(response, turn)


class AbstainingContextChatEngine(_Abstaining, ContextChatEngine):
    """A ``ContextChatEngine`` that answers ``no_match_message`` when no node remains.

    Build it like a ``ContextChatEngine`` (``from_defaults(retriever, llm=..., ...)``),
    with ``no_match_message``. A turn whose retrieval (after the node postprocessors)
    left nothing, and that got no ``prev_chunks``, does not call the LLM.
    """


class AbstainingCondensePlusContextChatEngine(_Abstaining, CondensePlusContextChatEngine):
    """A ``CondensePlusContextChatEngine`` that answers ``no_match_message`` when no node remains.

    A follow-up question is condensed with the chat history first, by the LLM, as in
    ``CondensePlusContextChatEngine``; when the condensed question finds nothing, the
    answer does not call the LLM.
    """
