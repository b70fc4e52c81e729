"""Abstaining chat engines: nothing matched, no answering LLM call, a consistent memory.

``kit.QUESTION`` finds the refund section (cosine 0.8, floor 0.5); ``kit.ORTHOGONAL``
finds nothing. The spy LLM echoes answering prompts (MockLLM) and answers condensing
prompts (they start with ``REWRITE``) with a chosen standalone question; it counts
both kinds apart.
"""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen
from llama_index.core.chat_engine import CondensePlusContextChatEngine, ContextChatEngine
from llama_index.core.chat_engine.types import AgentChatResponse, StreamingAgentChatResponse
from llama_index.core.llms import MockLLM
from llama_index.core.memory import Memory
from pydantic import PrivateAttr

from llama_index_thresholded import (
    DEFAULT_NO_MATCH_MESSAGE,
    NOTHING_MATCHED,
    AbstainingCondensePlusContextChatEngine,
    AbstainingContextChatEngine,
    SimilarityThresholdPostprocessor,
    ThresholdedRetriever,
)
from thresholded.policy import RetrievalPolicy

REFUNDS = "Refunds are paid within 14 days."
NO_MATCH = "I don't know. Write to help@example.com."
CONDENSE = "REWRITE {chat_history} || {question}"


class SpyLLM(MockLLM):
    """Counts answering and condensing calls apart; a condensing call returns ``rewrite_to``."""

    rewrite_to: str = ""
    _answers: list[str] = PrivateAttr(default_factory=list)
    _condensed: list[str] = PrivateAttr(default_factory=list)

    @property
    def answers(self) -> list[str]:
        return self._answers

    @property
    def condensed(self) -> list[str]:
        return self._condensed

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        if prompt.startswith("REWRITE"):
            self._condensed.append(prompt)
            return CompletionResponse(text=self.rewrite_to)
        self._answers.append(prompt)
        return super().complete(prompt, formatted=formatted, **kwargs)

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        self._answers.append(prompt)
        return super().stream_complete(prompt, formatted=formatted, **kwargs)


@pytest.fixture
def retriever(kit):
    nodes = [
        kit.section("refunds", 0.8, text=REFUNDS),
        kit.section("vat", 0.3, axis=2, text="VAT is charged on every invoice."),
    ]
    index = kit.build_index(nodes, kit.embedding())
    return ThresholdedRetriever(index, kit.policy(min_similarity=0.5), neighbours=0)


ENGINES = {
    "context": AbstainingContextChatEngine,
    "condense_plus_context": AbstainingCondensePlusContextChatEngine,
}
MODES = ["chat", "achat", "stream_chat", "astream_chat"]


def engine_of(kind: str, retriever: Any, llm: SpyLLM, **kwargs: Any) -> Any:
    if kind == "condense_plus_context":
        kwargs.setdefault("condense_prompt", CONDENSE)
    return ENGINES[kind].from_defaults(retriever, llm=llm, no_match_message=NO_MATCH, **kwargs)


async def turn(engine: Any, message: str, mode: str) -> tuple[list[str], Any]:
    """One turn: the answer's tokens (one for a finished answer) and the response."""
    if mode == "chat":
        response = engine.chat(message)
        return [response.response], response
    if mode == "achat":
        response = await engine.achat(message)
        return [response.response], response
    if mode == "stream_chat":
        response = engine.stream_chat(message)
        return list(response.response_gen), response
    response = await engine.astream_chat(message)
    return [token async for token in response.async_response_gen()], response


def memory(engine: Any) -> list[tuple[str, str]]:
    """The chat memory as (role, text); a streamed answer is stored stripped."""
    return [(m.role.value, (m.content or "").strip()) for m in engine.chat_history]


RESPONSE_TYPE = {
    "chat": AgentChatResponse,
    "achat": AgentChatResponse,
    "stream_chat": StreamingAgentChatResponse,
    "astream_chat": StreamingAgentChatResponse,
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", sorted(ENGINES))
async def test_off_topic_answers_the_message_without_calling_the_llm(kind, mode, kit, retriever):
    llm = SpyLLM()
    engine = engine_of(kind, retriever, llm)
    tokens, response = await turn(engine, kit.ORTHOGONAL, mode)
    assert tokens == [NO_MATCH]
    assert type(response) is RESPONSE_TYPE[mode]
    assert response.metadata[NOTHING_MATCHED] is True
    assert response.source_nodes == []
    assert llm.answers == [] and llm.condensed == []
    assert memory(engine) == [("user", kit.ORTHOGONAL), ("assistant", NO_MATCH)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", sorted(ENGINES))
async def test_on_topic_calls_the_llm_once_with_the_context(kind, mode, kit, retriever):
    llm = SpyLLM()
    engine = engine_of(kind, retriever, llm)
    tokens, response = await turn(engine, kit.QUESTION, mode)
    assert len(llm.answers) == 1
    assert REFUNDS in llm.answers[0] and "VAT" not in llm.answers[0]
    assert type(response) is RESPONSE_TYPE[mode]
    assert response.metadata[NOTHING_MATCHED] is False
    assert [n.node.node_id for n in response.source_nodes] == ["refunds"]
    answer = "".join(tokens).strip()
    assert REFUNDS in answer  # MockLLM echoes its prompt
    assert memory(engine) == [("user", kit.QUESTION), ("assistant", answer)]


@pytest.mark.parametrize("mode", MODES)
async def test_a_condensing_call_is_counted_apart(mode, kit, retriever):
    """With history, the follow-up is condensed (one LLM call) whatever it then finds."""
    llm = SpyLLM()
    engine = engine_of("condense_plus_context", retriever, llm)
    await turn(engine, kit.QUESTION, mode)  # no history yet: nothing to condense
    assert (len(llm.condensed), len(llm.answers)) == (0, 1)

    llm.rewrite_to = kit.ORTHOGONAL
    tokens, response = await turn(engine, "And the weather there?", mode)
    assert (len(llm.condensed), len(llm.answers)) == (1, 1)
    assert tokens == [NO_MATCH] and response.metadata[NOTHING_MATCHED] is True
    assert memory(engine)[-2:] == [("user", "And the weather there?"), ("assistant", NO_MATCH)]

    llm.rewrite_to = kit.QUESTION
    _, response = await turn(engine, "How long again?", mode)
    assert (len(llm.condensed), len(llm.answers)) == (2, 2)
    assert response.metadata[NOTHING_MATCHED] is False
    assert len(engine.chat_history) == 6


def test_the_history_is_consistent_across_turns(kit, retriever):
    llm = SpyLLM()
    engine = engine_of("context", retriever, llm)
    engine.chat(kit.ORTHOGONAL)
    engine.chat(kit.QUESTION)
    assert len(llm.answers) == 1
    # the answering prompt of the second turn holds the first, fixed, turn
    assert kit.ORTHOGONAL in llm.answers[0] and NO_MATCH in llm.answers[0]
    assert [role for role, _ in memory(engine)] == ["user", "assistant"] * 2


def test_the_default_message_and_the_constructor(kit, retriever):
    llm = SpyLLM()
    engine = AbstainingContextChatEngine.from_defaults(retriever, llm=llm)
    assert engine.chat(kit.ORTHOGONAL).response == DEFAULT_NO_MATCH_MESSAGE
    direct = AbstainingCondensePlusContextChatEngine(
        retriever, llm, Memory.from_defaults(), no_match_message=NO_MATCH
    )
    assert direct.chat(kit.ORTHOGONAL).response == NO_MATCH
    assert llm.answers == []


def test_the_check_runs_after_the_node_postprocessors(kit, retriever):
    llm = SpyLLM()
    strict = SimilarityThresholdPostprocessor(policy=RetrievalPolicy(min_similarity=0.95))
    engine = engine_of("context", retriever, llm, node_postprocessors=[strict])
    response = engine.chat(kit.QUESTION)  # retrieved at 0.8, removed by the postprocessor
    assert response.response == NO_MATCH and response.metadata[NOTHING_MATCHED] is True
    assert llm.answers == []


@pytest.mark.parametrize("plain", [ContextChatEngine, CondensePlusContextChatEngine])
def test_the_plain_engines_answer_empty_response(plain, kit, retriever):
    """The contrast, as ``query_engine``'s docstring says: "Empty Response", no flag."""
    llm = SpyLLM()
    engine = plain.from_defaults(retriever, llm=llm)
    response = engine.chat(kit.ORTHOGONAL)
    assert response.response == "Empty Response"
    assert response.metadata is None
    assert llm.answers == []
    assert memory(engine) == [("user", kit.ORTHOGONAL), ("assistant", "Empty Response")]
