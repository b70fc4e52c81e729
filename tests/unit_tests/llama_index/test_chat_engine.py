"""Abstaining chat engines: nothing matched, no answering LLM call, a consistent memory.

``QUESTION`` finds the refund section (cosine 0.8, floor 0.5); ``ORTHOGONAL`` finds
nothing. The spy LLM echoes answering prompts (MockLLM) and answers condensing
prompts (they start with ``REWRITE``) with a chosen standalone question; it counts
both kinds apart.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen
from llama_index.core.chat_engine import CondensePlusContextChatEngine, ContextChatEngine
from llama_index.core.chat_engine.types import AgentChatResponse, StreamingAgentChatResponse
from llama_index.core.llms import MockLLM
from llama_index.core.memory import ChatMemoryBuffer
from pydantic import PrivateAttr

from llama_index_thresholded import (
    ABSTAINED_BY,
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
QUESTION = "question"  # the kit's question, on e0: it finds the refund section
ORTHOGONAL = "orthogonal question"  # on e7: it finds nothing


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
    assert (kit.QUESTION, kit.ORTHOGONAL) == (QUESTION, ORTHOGONAL)
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


def engine_of(kind: str, retriever: Any, llm: SpyLLM, **kwargs: Any) -> Any:
    if kind == "condense_plus_context":
        kwargs.setdefault("condense_prompt", CONDENSE)
    kwargs.setdefault("memory", in_process_memory())
    return ENGINES[kind].from_defaults(retriever, llm=llm, no_match_message=NO_MATCH, **kwargs)


def in_process_memory() -> ChatMemoryBuffer:
    """A chat memory without a database.

    The default ``Memory`` keeps an aiosqlite connection tied to the event loop it first
    ran in; every test here has a loop of its own, and a connection outliving its loop
    fails in its worker thread later, during some other test.
    """
    return ChatMemoryBuffer.from_defaults()


def sync_turn(engine: Any, message: str, mode: str) -> tuple[list[str], Any]:
    """One turn: the answer's tokens (one for a finished answer) and the response."""
    if mode == "chat":
        response = engine.chat(message)
        return [response.response], response
    response = engine.stream_chat(message)
    return list(response.response_gen), response


async def async_turn(engine: Any, message: str, mode: str) -> tuple[list[str], Any]:
    if mode == "achat":
        response = await engine.achat(message)
        return [response.response], response
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


def check_abstained(mode: str, turned: tuple[list[str], Any], llm: SpyLLM, engine: Any) -> None:
    tokens, response = turned
    assert tokens == [NO_MATCH]
    assert type(response) is RESPONSE_TYPE[mode]
    assert response.metadata[NOTHING_MATCHED] is True
    assert response.metadata[ABSTAINED_BY] == "floor"  # as AbstainingQueryEngine says
    assert response.source_nodes == []
    assert llm.answers == [] and llm.condensed == []
    assert memory(engine) == [("user", ORTHOGONAL), ("assistant", NO_MATCH)]


def check_answered(mode: str, turned: tuple[list[str], Any], llm: SpyLLM, engine: Any) -> None:
    tokens, response = turned
    assert len(llm.answers) == 1
    assert REFUNDS in llm.answers[0] and "VAT" not in llm.answers[0]
    assert type(response) is RESPONSE_TYPE[mode]
    assert response.metadata[NOTHING_MATCHED] is False
    assert ABSTAINED_BY not in response.metadata
    assert [n.node.node_id for n in response.source_nodes] == ["refunds"]
    answer = "".join(tokens).strip()
    assert REFUNDS in answer  # MockLLM echoes its prompt
    assert memory(engine) == [("user", QUESTION), ("assistant", answer)]


TURNS = pytest.mark.parametrize(
    ("question", "check"),
    [(ORTHOGONAL, check_abstained), (QUESTION, check_answered)],
    ids=["off_topic_no_llm_call", "on_topic_one_llm_call"],
)


@TURNS
@pytest.mark.parametrize("mode", ["chat", "stream_chat"])
@pytest.mark.parametrize("kind", sorted(ENGINES))
def test_one_turn(kind, mode, question, check, retriever):
    llm = SpyLLM()
    engine = engine_of(kind, retriever, llm)
    check(mode, sync_turn(engine, question, mode), llm, engine)


@TURNS
@pytest.mark.parametrize("mode", ["achat", "astream_chat"])
@pytest.mark.parametrize("kind", sorted(ENGINES))
async def test_one_turn_async(kind, mode, question, check, retriever):
    llm = SpyLLM()
    engine = engine_of(kind, retriever, llm)
    check(mode, await async_turn(engine, question, mode), llm, engine)


CONVERSATION = [
    # (message, the condensed question, condensing calls, answering calls, nothing matched)
    (QUESTION, "", 0, 1, False),  # no history yet: nothing to condense
    ("And the weather there?", ORTHOGONAL, 1, 1, True),
    ("How long again?", QUESTION, 2, 2, False),
]


def check_follow_up(step: tuple, turned: tuple[list[str], Any], llm: SpyLLM, engine: Any) -> None:
    message, _, condensed, answers, nothing_matched = step
    tokens, response = turned
    assert (len(llm.condensed), len(llm.answers)) == (condensed, answers)
    assert response.metadata[NOTHING_MATCHED] is nothing_matched
    assert memory(engine)[-2][1] == message
    assert response.metadata.get(ABSTAINED_BY) == ("floor" if nothing_matched else None)
    if nothing_matched:
        assert tokens == [NO_MATCH] and memory(engine)[-1] == ("assistant", NO_MATCH)


@pytest.mark.parametrize("mode", ["chat", "stream_chat"])
def test_a_condensing_call_is_counted_apart(mode, retriever):
    """With history, the follow-up is condensed (one LLM call) whatever it then finds."""
    llm = SpyLLM()
    engine = engine_of("condense_plus_context", retriever, llm)
    for step in CONVERSATION:
        llm.rewrite_to = step[1]
        check_follow_up(step, sync_turn(engine, step[0], mode), llm, engine)


@pytest.mark.parametrize("mode", ["achat", "astream_chat"])
async def test_a_condensing_call_is_counted_apart_async(mode, retriever):
    llm = SpyLLM()
    engine = engine_of("condense_plus_context", retriever, llm)
    for step in CONVERSATION:
        llm.rewrite_to = step[1]
        check_follow_up(step, await async_turn(engine, step[0], mode), llm, engine)


def test_the_history_is_consistent_across_turns(retriever):
    llm = SpyLLM()
    engine = engine_of("context", retriever, llm)
    engine.chat(ORTHOGONAL)
    engine.chat(QUESTION)
    assert len(llm.answers) == 1
    # the answering prompt of the second turn holds the first, fixed, turn
    assert ORTHOGONAL in llm.answers[0] and NO_MATCH in llm.answers[0]
    assert [role for role, _ in memory(engine)] == ["user", "assistant"] * 2


def test_the_default_message_and_the_constructor(retriever):
    llm = SpyLLM()
    engine = AbstainingContextChatEngine.from_defaults(
        retriever, llm=llm, memory=in_process_memory()
    )
    assert engine.chat(ORTHOGONAL).response == DEFAULT_NO_MATCH_MESSAGE
    direct = AbstainingCondensePlusContextChatEngine(
        retriever, llm, in_process_memory(), no_match_message=NO_MATCH
    )
    assert direct.chat(ORTHOGONAL).response == NO_MATCH
    assert llm.answers == []


def test_the_check_runs_after_the_node_postprocessors(retriever):
    llm = SpyLLM()
    strict = SimilarityThresholdPostprocessor(policy=RetrievalPolicy(min_similarity=0.95))
    engine = engine_of("context", retriever, llm, node_postprocessors=[strict])
    response = engine.chat(QUESTION)  # retrieved at 0.8, removed by the postprocessor
    assert response.response == NO_MATCH and response.metadata[NOTHING_MATCHED] is True
    assert response.metadata[ABSTAINED_BY] == "postprocessors"
    assert llm.answers == []


@pytest.mark.parametrize("plain", [ContextChatEngine, CondensePlusContextChatEngine])
def test_the_plain_engines_answer_empty_response(plain, retriever):
    """The contrast, as ``query_engine``'s docstring says: "Empty Response", no flag."""
    llm = SpyLLM()
    engine = plain.from_defaults(retriever, llm=llm, memory=in_process_memory())
    response = engine.chat(ORTHOGONAL)
    assert response.response == "Empty Response"
    assert response.metadata is None
    assert llm.answers == []
    assert memory(engine) == [("user", ORTHOGONAL), ("assistant", "Empty Response")]


@pytest.mark.parametrize("engine_class", list(ENGINES.values()))
def test_a_message_that_is_not_a_string_is_refused(engine_class, retriever):
    llm = SpyLLM()
    with pytest.raises(TypeError, match="no_match_message must be a str, got None"):
        engine_class.from_defaults(retriever, llm=llm, no_match_message=None)
    with pytest.raises(TypeError, match="no_match_message must be a str, got 123"):
        engine_class.from_defaults(retriever, llm=llm, no_match_message=123)


def test_the_gate_is_named_as_what_abstained(kit):
    """The refund section clears the floor (0.5) but not the answer gate (0.9)."""
    index = kit.build_index([kit.section("refunds", 0.8, text=REFUNDS)], kit.embedding())
    policy = kit.policy(min_similarity=0.5, min_top_similarity=0.9)
    gated = ThresholdedRetriever(index, policy, neighbours=0)
    for kind in ENGINES:
        response = engine_of(kind, gated, SpyLLM()).chat(QUESTION)
        assert response.metadata == {NOTHING_MATCHED: True, ABSTAINED_BY: "gate"}


async def test_concurrent_turns_each_say_what_abstained_for_them(retriever):
    """Two turns at once on one engine, one emptied by the postprocessor and one by the
    floor: each response names its own (nothing of a call is kept on the engine)."""
    strict = SimilarityThresholdPostprocessor(policy=RetrievalPolicy(min_similarity=0.95))
    engine = engine_of("context", retriever, SpyLLM(), node_postprocessors=[strict])
    removed, below = await asyncio.gather(engine.achat(QUESTION), engine.achat(ORTHOGONAL))
    assert removed.metadata[ABSTAINED_BY] == "postprocessors"
    assert below.metadata[ABSTAINED_BY] == "floor"
