"""AbstainingQueryEngine: no matching section, no LLM call, a configured message."""

from __future__ import annotations

import re
from typing import Any

import pytest
from llama_index.core import get_response_synthesizer
from llama_index.core.base.llms.types import CompletionResponse
from llama_index.core.indices.vector_store.retrievers.retriever import VectorIndexRetriever
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.tools import QueryEngineTool
from pydantic import PrivateAttr

from llama_index_thresholded import (
    DEFAULT_NO_MATCH_MESSAGE,
    NOTHING_MATCHED,
    AbstainingQueryEngine,
    SimilarityThresholdPostprocessor,
    ThresholdedRetriever,
)
from thresholded.policy import RetrievalPolicy


class CountingLLM(MockLLM):
    """MockLLM (it echoes the prompt) that counts its calls."""

    _prompts: list[str] = PrivateAttr(default_factory=list)

    @property
    def calls(self) -> int:
        return len(self._prompts)

    @property
    def prompts(self) -> list[str]:
        return self._prompts

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self._prompts.append(prompt)
        return super().complete(prompt, formatted=formatted, **kwargs)


@pytest.fixture
def retriever(kit):
    nodes = [
        kit.section("refunds", 0.8, text="Refunds are paid within 14 days."),
        kit.section("vat", 0.3, axis=2, text="VAT is charged on every invoice."),
    ]
    index = kit.build_index(nodes, kit.embedding())
    return ThresholdedRetriever(index, kit.policy(min_similarity=0.5), neighbours=0)


def test_nothing_matched_returns_the_message_without_calling_the_llm(kit, retriever):
    llm = CountingLLM()
    engine = AbstainingQueryEngine.from_args(retriever, llm=llm)
    response = engine.query(kit.ORTHOGONAL)
    assert response.response == DEFAULT_NO_MATCH_MESSAGE == "No relevant information found."
    assert response.metadata == {NOTHING_MATCHED: True, "abstained_by": "floor"}
    assert response.source_nodes == []
    assert llm.calls == 0


def test_a_configured_message(kit, retriever):
    llm = CountingLLM()
    message = "I don't know. Write to support@example.com."
    for engine in (
        AbstainingQueryEngine.from_args(retriever, llm=llm, no_match_message=message),
        AbstainingQueryEngine(
            retriever,
            response_synthesizer=get_response_synthesizer(llm=llm),
            no_match_message=message,
        ),
    ):
        response = engine.query(kit.ORTHOGONAL)
        assert response.response == message
        assert response.metadata[NOTHING_MATCHED] is True
    assert llm.calls == 0


def test_something_matched_calls_the_llm_with_the_kept_context(kit, retriever):
    llm = CountingLLM()
    engine = AbstainingQueryEngine.from_args(retriever, llm=llm)
    response = engine.query(kit.QUESTION)
    assert llm.calls >= 1
    assert "Refunds are paid within 14 days." in llm.prompts[0]
    assert "VAT is charged" not in llm.prompts[0]
    assert response.response != DEFAULT_NO_MATCH_MESSAGE
    assert not (response.metadata or {}).get(NOTHING_MATCHED)
    assert [n.node.node_id for n in response.source_nodes] == ["refunds"]


async def test_async_query_abstains_and_answers_like_sync(kit, retriever):
    llm = CountingLLM()
    engine = AbstainingQueryEngine.from_args(retriever, llm=llm)
    nothing = await engine.aquery(kit.ORTHOGONAL)
    assert nothing.response == DEFAULT_NO_MATCH_MESSAGE
    assert nothing.metadata == {NOTHING_MATCHED: True, "abstained_by": "floor"}
    assert llm.calls == 0
    answered = await engine.aquery(kit.QUESTION)
    assert llm.calls >= 1
    assert [n.node.node_id for n in answered.source_nodes] == ["refunds"]


def test_the_check_runs_after_the_node_postprocessors(kit, retriever):
    llm = CountingLLM()
    strict = SimilarityThresholdPostprocessor(policy=RetrievalPolicy(min_similarity=0.95))
    engine = AbstainingQueryEngine.from_args(retriever, llm=llm, node_postprocessors=[strict])
    response = engine.query(kit.QUESTION)  # retrieved at 0.8, removed by the postprocessor
    assert response.metadata == {NOTHING_MATCHED: True, "abstained_by": "postprocessors"}
    assert llm.calls == 0


def test_the_plain_retriever_query_engine_has_no_such_message(kit, retriever):
    """The contrast: RetrieverQueryEngine answers an empty retrieval with "Empty Response"."""
    llm = CountingLLM()
    response = RetrieverQueryEngine.from_args(retriever, llm=llm).query(kit.ORTHOGONAL)
    assert response.response == "Empty Response"
    assert NOTHING_MATCHED not in (response.metadata or {})


def test_streaming_engines_stream_the_message(kit, retriever):
    llm = CountingLLM()
    engine = AbstainingQueryEngine.from_args(retriever, llm=llm, streaming=True)
    response = engine.query(kit.ORTHOGONAL)
    assert "".join(response.response_gen) == DEFAULT_NO_MATCH_MESSAGE
    assert response.metadata == {NOTHING_MATCHED: True, "abstained_by": "floor"}
    assert llm.calls == 0


async def test_async_streaming_engines_stream_the_message(kit, retriever):
    llm = CountingLLM()
    engine = AbstainingQueryEngine.from_args(retriever, llm=llm, streaming=True)
    response = await engine.aquery(kit.ORTHOGONAL)
    assert [token async for token in response.response_gen] == [DEFAULT_NO_MATCH_MESSAGE]
    assert llm.calls == 0


@pytest.mark.parametrize("message", [None, 123, ["I don't know"]])
def test_a_message_that_is_not_a_string_is_refused(kit, retriever, message):
    """``no_match_message=None`` answered ``Response(response=None)``; LangChain's
    ``AbstainingChain`` refuses a ``no_match_message`` that is not a string."""
    llm = CountingLLM()
    synthesizer = get_response_synthesizer(llm=llm)
    refused = re.escape(f"no_match_message must be a str, got {message!r}")
    with pytest.raises(TypeError, match=refused):
        AbstainingQueryEngine.from_args(retriever, llm=llm, no_match_message=message)
    with pytest.raises(TypeError, match="no_match_message must be a str"):
        AbstainingQueryEngine(retriever, response_synthesizer=synthesizer, no_match_message=message)
    engine = AbstainingQueryEngine.from_args(retriever, llm=llm)
    with pytest.raises(TypeError, match="no_match_message must be a str"):
        engine.no_match_message = message


def test_the_constructor_names_a_misspelt_keyword_as_from_args_does(retriever):
    """It was Python's "RetrieverQueryEngine.__init__() got an unexpected keyword argument"."""
    with pytest.raises(TypeError, match=r"AbstainingQueryEngine\(\).*'no_match_message'\?"):
        AbstainingQueryEngine(retriever, no_match_mesage="I don't know.")
    synthesizer = get_response_synthesizer(llm=MockLLM())
    engine = AbstainingQueryEngine(
        retriever, response_synthesizer=synthesizer, no_match_message="I don't know."
    )
    assert engine.no_match_message == "I don't know."


@pytest.mark.parametrize("streaming", [False, True])
async def test_every_answer_says_whether_nothing_matched(kit, retriever, streaming):
    """As the chat engines' responses do: ``metadata["nothing_matched"]`` is False on an
    answer from the LLM, so an application reads the flag without a KeyError."""
    engine = AbstainingQueryEngine.from_args(retriever, llm=CountingLLM(), streaming=streaming)
    for response in (engine.query(kit.QUESTION), await engine.aquery(kit.QUESTION)):
        assert response.metadata[NOTHING_MATCHED] is False
        assert [n.node.node_id for n in response.source_nodes] == ["refunds"]
    assert engine.query(kit.ORTHOGONAL).metadata[NOTHING_MATCHED] is True


def _engines() -> dict[str, Any]:
    return _engines_with(None)


def _engines_with(node_postprocessors: Any) -> dict[str, Any]:
    from llama_index_thresholded import (
        AbstainingCondensePlusContextChatEngine,
        AbstainingContextChatEngine,
    )

    given = {"node_postprocessors": node_postprocessors}
    return {
        "from_args": lambda r: AbstainingQueryEngine.from_args(r, llm=MockLLM(), **given),
        "constructor": lambda r: AbstainingQueryEngine(
            r, response_synthesizer=get_response_synthesizer(llm=MockLLM()), **given
        ),
        "context_chat": lambda r: AbstainingContextChatEngine.from_defaults(
            r, llm=MockLLM(), **given
        ),
        "condense_chat": lambda r: AbstainingCondensePlusContextChatEngine.from_defaults(
            r, llm=MockLLM(), **given
        ),
    }


@pytest.mark.parametrize("build", ["from_args", "constructor", "context_chat", "condense_chat"])
def test_what_is_not_a_retriever_is_refused_when_the_engine_is_built(kit, build):
    """An index (or a store, a query engine) given as the retriever was accepted, and the
    first question failed with "'VectorStoreIndex' object has no attribute 'retrieve'"."""
    index = kit.build_index([kit.section("refunds", 0.8)], kit.embedding())
    wanted = r"retriever must be a LlamaIndex retriever.*got VectorStoreIndex.*ThresholdedRetriever"
    with pytest.raises(TypeError, match=wanted):
        _engines()[build](index)
    with pytest.raises(TypeError, match="got str"):
        _engines()[build]("refunds")


def _keep_all(nodes: list) -> list:
    return nodes


@pytest.mark.parametrize("build", ["from_args", "constructor", "context_chat", "condense_chat"])
def test_what_is_not_a_node_postprocessor_is_refused_when_the_engine_is_built(retriever, build):
    """A function among the node postprocessors, or one postprocessor not in a list, was
    accepted, and the first question failed with "'function' object has no attribute
    'postprocess_nodes'" (or "'...' object is not iterable")."""

    def engine(r: Any, postprocessors: Any) -> Any:
        return _engines_with(postprocessors)[build](r)

    with pytest.raises(TypeError, match=r"node_postprocessors\[0\] is a function.*_keep_all"):
        engine(retriever, [_keep_all])
    strict = SimilarityThresholdPostprocessor(min_similarity=0.5)
    with pytest.raises(
        TypeError, match=r"must be a list.*got SimilarityThresholdPostprocessor: put it in a list"
    ):
        engine(retriever, strict)
    engine(retriever, [strict])  # a list of postprocessors, as LlamaIndex takes them
    engine(retriever, None)


async def test_a_retriever_without_a_report_emptied_by_the_postprocessors_says_so(kit):
    """A plain vector retriever returned its sections and the postprocessors removed them:
    the answer names them, as it does behind this package's retriever."""
    index = kit.build_index([kit.section("refunds", 0.8)], kit.embedding())
    strict = SimilarityThresholdPostprocessor(min_similarity=0.95, score_kind="cosine")
    engine = AbstainingQueryEngine.from_args(
        index.as_retriever(), llm=CountingLLM(), node_postprocessors=[strict]
    )
    expected = {NOTHING_MATCHED: True, "abstained_by": "postprocessors"}
    assert engine.query(kit.QUESTION).metadata == expected
    assert (await engine.aquery(kit.QUESTION)).metadata == expected


def test_a_retriever_without_a_report_that_returned_nothing_says_nothing_of_why(kit):
    index = kit.build_index([kit.section("refunds", 0.8)], kit.embedding())
    engine = AbstainingQueryEngine.from_args(
        VectorIndexRetriever(index, node_ids=["elsewhere"]), llm=CountingLLM()
    )
    assert engine.query(kit.QUESTION).metadata == {NOTHING_MATCHED: True}


def test_an_agent_tool_over_the_engine_answers_the_message(kit, retriever):
    """As the README says: an agent's QueryEngineTool gets the fixed answer and the flag."""
    engine = AbstainingQueryEngine.from_args(retriever, llm=CountingLLM())
    tool = QueryEngineTool.from_defaults(engine, name="kb", description="the knowledge base")
    output = tool.call(kit.ORTHOGONAL)
    assert output.content == DEFAULT_NO_MATCH_MESSAGE
    assert output.raw_output.metadata[NOTHING_MATCHED] is True


@pytest.mark.parametrize("message", ["", "   ", "\n"])
def test_a_blank_message_is_refused(kit, retriever, message):
    """The fixed answer was an empty string: the user saw nothing at all."""
    llm = CountingLLM()
    with pytest.raises(ValueError, match="no_match_message is blank"):
        AbstainingQueryEngine.from_args(retriever, llm=llm, no_match_message=message)
    engine = AbstainingQueryEngine.from_args(retriever, llm=llm)
    with pytest.raises(ValueError, match="no_match_message is blank"):
        engine.no_match_message = message
