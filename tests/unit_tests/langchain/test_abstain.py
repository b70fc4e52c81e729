"""AbstainingChain: retrieve once; answer, or say "I don't know" without calling the LLM.

The answering model is a fake chat model with a callback handler that counts its runs
and keeps its prompts; ``QUERY`` finds the refund text at cosine 0.75, above the floor
of 0.5, and ``OTHER_QUERY`` (orthogonal to every document) finds nothing.
"""

from __future__ import annotations

import asyncio
from operator import itemgetter
from typing import Any

import pytest
from langchain_classic.chains import create_retrieval_chain
from langchain_classic.chains.combine_documents import create_stuff_documents_chain
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import (
    ConfigurableField,
    RunnableBranch,
    RunnableLambda,
    RunnablePassthrough,
)

from langchain_thresholded import (
    ABSTAINED_BY,
    DEFAULT_NO_MATCH_MESSAGE,
    NOTHING_MATCHED,
    AbstainingChain,
    MultiCollectionRetriever,
    RetrievalPolicy,
    ThresholdedRetriever,
)
from langchain_thresholded.abstain import format_documents

QUERY = "the question"
OTHER_QUERY = "another question"
REFUNDS = "Refunds are paid within 14 days."
ANSWER = "Within 14 days."
NO_MATCH = "I don't know. Write to help@example.com."
POLICY = RetrievalPolicy(min_similarity=0.5, max_per_source=None, max_chars=None)


class Calls(BaseCallbackHandler):
    """Counts the runs of the model it is attached to, and keeps their prompts."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    @property
    def count(self) -> int:
        return len(self.prompts)

    def on_chat_model_start(
        self, serialized: Any, messages: list[list[BaseMessage]], **kwargs: Any
    ) -> None:
        self.prompts.append("\n".join(str(m.content) for m in messages[0]))


def spy_model(calls: Calls, *responses: str) -> FakeListChatModel:
    return FakeListChatModel(responses=list(responses) or [ANSWER], callbacks=[calls])


@pytest.fixture
def refunds(corpus):
    return corpus([("refunds", 0.75, {"source": "refunds"}, REFUNDS)])


@pytest.fixture
def retriever(refunds):
    return ThresholdedRetriever(vectorstore=refunds.store, policy=POLICY)


PROMPT = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")
QA_PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", "Answer from:\n{context}"),
        MessagesPlaceholder("chat_history"),
        ("human", "{input}"),
    ]
)


def build(kind: str, retriever: BaseRetriever, llm: FakeListChatModel) -> AbstainingChain:
    """The three shapes of answering chain: a message, a str, a retrieval chain's dict."""
    if kind == "message":
        return AbstainingChain(
            retriever=retriever, answer_chain=PROMPT | llm, no_match_message=NO_MATCH
        )
    if kind == "str":
        return AbstainingChain(
            retriever=retriever,
            answer_chain=PROMPT | llm | StrOutputParser(),
            no_match_message=NO_MATCH,
        )
    return AbstainingChain.from_combine_docs_chain(
        retriever, create_stuff_documents_chain(llm, QA_PROMPT), no_match_message=NO_MATCH
    )


def ask(kind: str, question: str) -> Any:
    return {"input": question, "chat_history": []} if kind == "retrieval" else question


def answer_of(kind: str, output: Any) -> Any:
    return output["answer"] if kind == "retrieval" else output


KINDS = ["message", "str", "retrieval"]
ANSWER_TYPE = {"message": AIMessage, "str": str, "retrieval": str}
CHUNK_TYPE = {"message": AIMessageChunk, "str": str, "retrieval": str}


def type_of(value: Any) -> type:
    """A value's type; any str is a str (``StrOutputParser`` returns a str subclass)."""
    return str if isinstance(value, str) else type(value)


def text(answer: Any) -> str:
    return answer.content if isinstance(answer, BaseMessage) else answer


def abstained_by(kind: str, output: Any) -> str | None:
    """What the output says emptied the result; None where it says nothing (a str)."""
    if kind == "retrieval":
        return output.get(ABSTAINED_BY)
    if kind == "message":
        return output.response_metadata.get(ABSTAINED_BY)
    return None


def flagged(kind: str, output: Any) -> bool:
    if kind == "retrieval":
        return output[NOTHING_MATCHED]
    if kind == "message":
        return bool(output.response_metadata.get(NOTHING_MATCHED))
    return output == NO_MATCH


# invoke, ainvoke, batch ----------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
async def test_off_topic_returns_the_answer_without_calling_the_llm(kind, retriever):
    calls = Calls()
    chain = build(kind, retriever, spy_model(calls))
    outputs = [
        chain.invoke(ask(kind, OTHER_QUERY)),
        await chain.ainvoke(ask(kind, OTHER_QUERY)),
        *chain.batch([ask(kind, OTHER_QUERY)] * 2),
        *(await chain.abatch([ask(kind, OTHER_QUERY)])),
    ]
    assert calls.count == 0
    for output in outputs:
        answer = answer_of(kind, output)
        assert type_of(answer) is ANSWER_TYPE[kind]
        assert text(answer) == NO_MATCH
        assert flagged(kind, output)
        assert abstained_by(kind, output) == (None if kind == "str" else "floor")
    if kind == "retrieval":
        assert outputs[0] == {
            "input": OTHER_QUERY,
            "chat_history": [],
            "context": [],
            "answer": NO_MATCH,
            NOTHING_MATCHED: True,
            ABSTAINED_BY: "floor",
        }


@pytest.mark.parametrize("kind", KINDS)
async def test_on_topic_calls_the_llm_once_with_the_retrieved_context(kind, retriever, refunds):
    for run in ("invoke", "ainvoke", "batch", "abatch"):
        calls = Calls()
        chain = build(kind, retriever, spy_model(calls))
        refunds.embeddings.query_calls.clear()
        if run == "invoke":
            output = chain.invoke(ask(kind, QUERY))
        elif run == "ainvoke":
            output = await chain.ainvoke(ask(kind, QUERY))
        elif run == "batch":
            [output] = chain.batch([ask(kind, QUERY)])
        else:
            [output] = await chain.abatch([ask(kind, QUERY)])
        assert calls.count == 1, run
        assert REFUNDS in calls.prompts[0]
        assert refunds.embeddings.query_calls == [QUERY], "one retrieval per question"
        answer = answer_of(kind, output)
        assert type_of(answer) is ANSWER_TYPE[kind]
        assert text(answer) == ANSWER
        assert not flagged(kind, output)
        assert abstained_by(kind, output) is None


def test_a_batch_of_both_calls_the_llm_for_the_on_topic_question_only(retriever):
    calls = Calls()
    chain = build("message", retriever, spy_model(calls))
    on, off = chain.batch([QUERY, OTHER_QUERY])
    assert calls.count == 1
    assert on.content == ANSWER and not on.response_metadata.get(NOTHING_MATCHED)
    assert off.content == NO_MATCH and off.response_metadata[NOTHING_MATCHED] is True


# stream, astream -----------------------------------------------------------------------
async def chunks_of(chain: AbstainingChain, question: Any, run: str) -> list[Any]:
    if run == "stream":
        return list(chain.stream(question))
    return [chunk async for chunk in chain.astream(question)]


@pytest.mark.parametrize("run", ["stream", "astream"])
@pytest.mark.parametrize("kind", KINDS)
async def test_the_no_match_message_streams_as_one_chunk(kind, run, retriever):
    calls = Calls()
    chain = build(kind, retriever, spy_model(calls))
    [chunk] = await chunks_of(chain, ask(kind, OTHER_QUERY), run)
    assert calls.count == 0
    answer = answer_of(kind, chunk)
    assert type_of(answer) is CHUNK_TYPE[kind]
    assert text(answer) == NO_MATCH
    assert flagged(kind, chunk)
    assert abstained_by(kind, chunk) == (None if kind == "str" else "floor")


@pytest.mark.parametrize("run", ["stream", "astream"])
@pytest.mark.parametrize("kind", KINDS)
async def test_on_topic_streams_the_llm_tokens(kind, run, retriever):
    calls = Calls()
    chain = build(kind, retriever, spy_model(calls))
    chunks = await chunks_of(chain, ask(kind, QUERY), run)
    assert calls.count == 1
    if kind == "retrieval":
        head, *tokens = chunks
        assert [d.page_content for d in head["context"]] == [REFUNDS]
        assert head[NOTHING_MATCHED] is False
        tokens = [t["answer"] for t in tokens]
    else:
        tokens = chunks
    assert len(tokens) > 1, "the LLM's own stream, not one finished answer"
    assert all(type_of(t) is CHUNK_TYPE[kind] for t in tokens)
    assert "".join(text(t) for t in tokens) == ANSWER


@pytest.mark.parametrize("kind", ["message", "str"])
async def test_the_output_types_are_the_wrapped_chains_own(kind, retriever):
    """What the answering chain alone returns and streams, AbstainingChain returns and streams."""
    chain = build(kind, retriever, spy_model(Calls()))
    alone = chain.answer_chain
    given = {"question": QUERY, "context": REFUNDS}
    own = type_of(alone.invoke(given))
    own_chunks = {type_of(c) for c in alone.stream(given)}
    for question in (QUERY, OTHER_QUERY):
        assert type_of(chain.invoke(question)) is own
        assert type_of(await chain.ainvoke(question)) is own
        assert {type_of(c) for c in chain.stream(question)} == own_chunks
        assert {type_of(c) async for c in chain.astream(question)} == own_chunks


def test_the_dict_output_has_the_keys_of_create_retrieval_chain(retriever):
    combine = create_stuff_documents_chain(spy_model(Calls()), QA_PROMPT)
    question = {"input": QUERY, "chat_history": []}
    theirs = create_retrieval_chain(retriever, combine).invoke(question)
    ours = AbstainingChain.from_combine_docs_chain(retriever, combine).invoke(question)
    assert set(ours) == {*theirs, NOTHING_MATCHED}
    assert ours["context"] == theirs["context"]
    assert type_of(ours["answer"]) is type_of(theirs["answer"])


# Composition ---------------------------------------------------------------------------
def test_in_an_lcel_pipeline(retriever):
    calls = Calls()
    chain = (
        RunnableLambda(str.strip)
        | build("message", retriever, spy_model(calls))
        | StrOutputParser()
    )
    assert chain.invoke(f"  {OTHER_QUERY} ") == NO_MATCH
    assert chain.invoke(QUERY) == ANSWER
    assert calls.count == 1


def test_the_default_answer_and_format(retriever):
    calls = Calls()
    chain = AbstainingChain(retriever=retriever, answer_chain=PROMPT | spy_model(calls))
    assert chain.invoke(OTHER_QUERY).content == DEFAULT_NO_MATCH_MESSAGE
    chain.invoke(QUERY)
    assert f"Context:\n{REFUNDS}\n\nQuestion: {QUERY}" in calls.prompts[0]


def rewriting(llm: FakeListChatModel) -> Any:
    """The question as it is without history; rewritten by ``llm`` with one."""
    rewrite_prompt = ChatPromptTemplate.from_messages(
        [
            MessagesPlaceholder("chat_history"),
            ("human", "Rewrite as a standalone question: {input}"),
        ]
    )
    return RunnableBranch(
        (lambda x: not x.get("chat_history"), itemgetter("input")),
        rewrite_prompt | llm | StrOutputParser(),
    )


HISTORY = [HumanMessage("How do refunds work?"), AIMessage("They are paid within 14 days.")]


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
async def test_a_retriever_given_as_query_chain_is_told_apart(run, retriever):
    """``create_history_aware_retriever`` rewrites and retrieves: given as ``query_chain``,
    it returned documents, and the error said only "must be a str, got list: end
    query_chain with StrOutputParser()", which cannot fix it."""
    from langchain_classic.chains import create_history_aware_retriever

    rewrite_prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("chat_history"), ("human", "{input}")]
    )
    history_aware = create_history_aware_retriever(
        spy_model(Calls(), QUERY), retriever, rewrite_prompt
    )
    chain = AbstainingChain.from_combine_docs_chain(
        retriever,
        create_stuff_documents_chain(spy_model(Calls()), QA_PROMPT),
        query_chain=history_aware,
    )
    question = {"input": "And by card?", "chat_history": HISTORY}
    with pytest.raises(TypeError, match="query_chain returned documents") as info:
        await chain.ainvoke(question) if run == "ainvoke" else chain.invoke(question)
    assert "create_history_aware_retriever" in str(info.value)
    assert "StrOutputParser()" in str(info.value)


@pytest.mark.parametrize("run", ["invoke", "ainvoke", "stream", "astream"])
async def test_a_rewriting_llm_is_counted_apart_from_the_answering_one(run, retriever, refunds):
    for rewritten, answer_calls in ((OTHER_QUERY, 0), (QUERY, 1)):
        rewrites, answers = Calls(), Calls()
        refunds.embeddings.query_calls.clear()
        chain = AbstainingChain.from_combine_docs_chain(
            retriever,
            create_stuff_documents_chain(spy_model(answers), QA_PROMPT),
            query_chain=rewriting(spy_model(rewrites, rewritten)),
            no_match_message=NO_MATCH,
        )
        question = {"input": "And by card?", "chat_history": HISTORY}
        if run == "invoke":
            output = chain.invoke(question)
        elif run == "ainvoke":
            output = await chain.ainvoke(question)
        else:
            output = None
            for chunk in await chunks_of(chain, question, run):
                output = chunk if output is None else output + chunk
        assert rewrites.count == 1
        assert refunds.embeddings.query_calls == [rewritten], "the rewritten question, once"
        assert answers.count == answer_calls
        assert output["answer"] == (NO_MATCH if answer_calls == 0 else ANSWER)
        assert output["chat_history"] == HISTORY  # the answering chain saw the conversation


def test_without_history_nothing_is_rewritten(retriever):
    rewrites, answers = Calls(), Calls()
    chain = AbstainingChain.from_combine_docs_chain(
        retriever,
        create_stuff_documents_chain(spy_model(answers), QA_PROMPT),
        query_chain=rewriting(spy_model(rewrites)),
    )
    assert chain.invoke({"input": OTHER_QUERY, "chat_history": []})["answer"] == (
        DEFAULT_NO_MATCH_MESSAGE
    )
    assert rewrites.count == 0 and answers.count == 0


# Retrievers ----------------------------------------------------------------------------
def test_a_multi_collection_retriever(refunds, corpus):
    other = corpus([("vat", 0.25, {"source": "vat"}, "VAT is charged on every invoice.")])
    retriever = MultiCollectionRetriever(
        collections=[
            ThresholdedRetriever(vectorstore=store, policy=POLICY)
            for store in (refunds.store, other.store)
        ],
        policy=POLICY,
    )
    calls = Calls()
    chain = build("message", retriever, spy_model(calls))
    assert chain.invoke(OTHER_QUERY).response_metadata[NOTHING_MATCHED] is True
    assert chain.invoke(QUERY).content == ANSWER
    assert calls.count == 1
    assert REFUNDS in calls.prompts[0] and "VAT" not in calls.prompts[0]


GATED = RetrievalPolicy(
    min_similarity=0.5, min_top_similarity=0.9, max_per_source=None, max_chars=None
)
"""The refund section (0.75) clears the floor, not the answer gate."""


@pytest.mark.parametrize("kind", ["message", "retrieval"])
async def test_the_gate_is_named_as_what_abstained(kind, refunds):
    """As ``AbstainingQueryEngine`` and the abstaining chat engines say it."""
    gated = ThresholdedRetriever(vectorstore=refunds.store, policy=GATED)
    chain = build(kind, gated, spy_model(Calls()))
    assert abstained_by(kind, chain.invoke(ask(kind, QUERY))) == "gate"
    assert abstained_by(kind, await chain.ainvoke(ask(kind, QUERY))) == "gate"
    [chunk] = list(chain.stream(ask(kind, QUERY)))
    assert abstained_by(kind, chunk) == "gate"


async def test_concurrent_calls_each_say_what_abstained_for_them(refunds):
    """One chain, two calls at once: one emptied by the gate, one by the floor."""
    retriever = ThresholdedRetriever(vectorstore=refunds.store, policy=GATED)
    configurable = retriever.configurable_fields(policy=ConfigurableField(id="policy"))
    chain = build("message", configurable, spy_model(Calls()))
    high = RetrievalPolicy(min_similarity=0.9, max_per_source=None, max_chars=None)
    gate, floor = await asyncio.gather(
        chain.ainvoke(QUERY), chain.ainvoke(QUERY, {"configurable": {"policy": high}})
    )
    assert gate.response_metadata[ABSTAINED_BY] == "gate"
    assert floor.response_metadata[ABSTAINED_BY] == "floor"


def test_any_retriever_abstains_when_it_returns_nothing():
    class Fixed(BaseRetriever):
        documents: list[Document]

        def _get_relevant_documents(self, query: str, **kwargs: Any) -> list[Document]:
            return self.documents if query == QUERY else []

    calls = Calls()
    chain = build("str", Fixed(documents=[Document(REFUNDS)]), spy_model(calls))
    assert chain.invoke(OTHER_QUERY) == NO_MATCH
    assert chain.invoke(QUERY) == ANSWER
    assert calls.count == 1
    message = build("message", Fixed(documents=[]), spy_model(calls)).invoke(QUERY)
    assert ABSTAINED_BY not in message.response_metadata  # it does not say why


def test_a_configurable_retriever_is_configured_by_each_call(retriever):
    configurable = retriever.configurable_fields(
        call_filters=ConfigurableField(id="call_filters"),
        policy=ConfigurableField(id="policy"),
    )
    calls = Calls()
    chain = build("str", configurable, spy_model(calls))
    elsewhere = {"configurable": {"call_filters": {"source": "elsewhere"}}}
    strict = {"configurable": {"policy": POLICY.with_overrides(min_similarity=0.875)}}
    assert chain.invoke(QUERY, config=elsewhere) == NO_MATCH
    assert asyncio.run(chain.ainvoke(QUERY, config=strict)) == NO_MATCH
    assert list(chain.stream(QUERY, config=elsewhere)) == [NO_MATCH]
    assert calls.count == 0
    assert chain.invoke(QUERY) == ANSWER
    assert calls.count == 1 and REFUNDS in calls.prompts[0]


@pytest.mark.parametrize("run", ["invoke", "ainvoke", "stream"])
def test_a_bound_alternative_keeps_its_filters(retriever, run):
    """An alternative chosen by the config may be a binding (``bind(filters=...)``): its
    ``__getattr__`` gives the bound retriever's ``retrieve_with_report`` without the bound
    filters, so the LLM got sections outside them."""
    chosen = retriever.configurable_alternatives(
        ConfigurableField(id="audience"),
        default_key="staff",
        public=retriever.bind(filters={"source": "elsewhere"}),
    )
    calls = Calls()
    chain = build("str", chosen, spy_model(calls))
    public = {"configurable": {"audience": "public"}}
    if run == "invoke":
        answer = chain.invoke(QUERY, config=public)
    elif run == "ainvoke":
        answer = asyncio.run(chain.ainvoke(QUERY, config=public))
    else:
        (answer,) = chain.stream(QUERY, config=public)
    assert answer == NO_MATCH
    assert calls.count == 0
    assert chain.invoke(QUERY) == ANSWER
    assert calls.count == 1 and REFUNDS in calls.prompts[0]


@pytest.mark.parametrize(
    ("bound", "answers"),
    [
        (lambda r: r.with_config(run_name="kb_search"), True),
        (lambda r: r.with_retry(stop_after_attempt=2), True),
        (lambda r: r.bind(filters={"source": "elsewhere"}), False),  # its filters apply
    ],
    ids=["with_config", "with_retry", "bind"],
)
def test_a_bound_retriever_is_taken_and_invoked_with_its_arguments(retriever, bound, answers):
    """A retriever bound as LCEL chains bind one was refused with pydantic's "Input should
    be a valid dictionary or instance of BaseRetriever"."""
    calls = Calls()
    chain = build("str", bound(retriever), spy_model(calls))
    assert chain.invoke(OTHER_QUERY) == NO_MATCH
    assert asyncio.run(chain.ainvoke(QUERY)) == (ANSWER if answers else NO_MATCH)
    assert calls.count == (1 if answers else 0)


def test_a_runnable_that_is_not_a_retriever_is_refused_with_the_fix(retriever):
    with pytest.raises(ValueError, match=r"retriever must be a retriever.*RunnableSequence"):
        build("str", retriever | format_documents, spy_model(Calls()))


def test_a_configurable_runnable_that_is_not_a_retriever_is_refused():
    configurable = spy_model(Calls()).configurable_fields(
        responses=ConfigurableField(id="responses")
    )
    with pytest.raises(ValueError, match="configurable FakeListChatModel is not a retriever"):
        build("str", configurable, spy_model(Calls()))


# Configuration -------------------------------------------------------------------------
def test_an_answer_chain_of_unknown_output_type_must_say(retriever):
    untyped = PROMPT | spy_model(Calls()) | RunnableLambda(lambda m: m.content)
    with pytest.raises(ValueError, match="answer_type"):
        AbstainingChain(retriever=retriever, answer_chain=untyped)
    chain = AbstainingChain(retriever=retriever, answer_chain=untyped, answer_type="str")
    assert chain.invoke(OTHER_QUERY) == DEFAULT_NO_MATCH_MESSAGE


def test_a_dict_input_without_the_question_key_is_named(retriever):
    chain = build("message", retriever, spy_model(Calls()))
    with pytest.raises(KeyError, match="'question'"):
        chain.invoke({"input": QUERY})
    assert chain.invoke({"question": QUERY, "tone": "brief"}).content == ANSWER


def test_a_dict_input_under_one_other_key_says_which_question_key_to_set(retriever):
    """It named the key read and the keys given, not the setting that reads another."""
    chain = build("message", retriever, spy_model(Calls()))
    with pytest.raises(KeyError, match=r"set question_key='input'"):
        chain.invoke({"input": QUERY})
    with pytest.raises(KeyError) as info:
        chain.invoke({"input": QUERY, "tone": "brief"})
    assert "set question_key" in str(info.value)  # which of them is not guessed
    assert "question_key='" not in str(info.value)


def test_the_passthrough_recipe_needs_a_retrieval_of_its_own(retriever, refunds):
    """The contrast: the usual LCEL recipe calls the LLM with an empty context."""
    calls = Calls()
    context = retriever | RunnableLambda(format_documents)
    recipe = {"context": context, "question": RunnablePassthrough()} | PROMPT | spy_model(calls)
    recipe.invoke(OTHER_QUERY)
    assert calls.count == 1
    assert "Context:\n\n\nQuestion" in calls.prompts[0]


def _astreamed(chain: AbstainingChain, **kwargs: Any) -> list[Any]:
    async def chunks() -> list[Any]:
        return [c async for c in chain.astream(QUERY, **kwargs)]

    return asyncio.run(chunks())


CALLS = {
    "invoke": lambda chain, **kw: chain.invoke(QUERY, **kw),
    "ainvoke": lambda chain, **kw: asyncio.run(chain.ainvoke(QUERY, **kw)),
    "stream": lambda chain, **kw: list(chain.stream(QUERY, **kw)),
    "astream": _astreamed,
    "batch": lambda chain, **kw: chain.batch([QUERY], **kw),
    "abatch": lambda chain, **kw: asyncio.run(chain.abatch([QUERY], **kw)),
}


@pytest.mark.parametrize("method", CALLS)
def test_a_call_s_keyword_arguments_are_refused_in_every_method(retriever, method):
    """A chain call takes its input and config; ``filters=`` given to a call would narrow
    nothing, so it is an error that says where filters go (astream failed inside LangChain
    with an UnboundLocalError)."""
    calls = Calls()
    chain = build("str", retriever, spy_model(calls))
    with pytest.raises(TypeError, match=r"not filters: set them on the retriever.*call_filters"):
        CALLS[method](chain, filters={"source": "elsewhere"})
    assert calls.count == 0


def test_a_function_is_taken_as_the_answer_and_query_chain(retriever):
    """As in an LCEL chain, a function is a runnable: its return annotation says the type."""

    def answer(inputs: dict[str, Any]) -> str:
        return f"From: {inputs['context']}"

    def query(inputs: dict[str, Any]) -> str:
        return inputs["topic"]

    chain = AbstainingChain(
        retriever=retriever,
        answer_chain=answer,
        query_chain=query,
        question_key="topic",
        no_match_message=NO_MATCH,
    )
    assert chain.invoke({"topic": QUERY}) == f"From: {REFUNDS}"
    assert chain.invoke({"topic": OTHER_QUERY}) == NO_MATCH


def test_an_answer_chain_that_is_not_runnable_is_named(retriever):
    with pytest.raises(ValueError, match=r"(?s)answer_chain.*expected a runnable.*got str"):
        AbstainingChain(retriever=retriever, answer_chain="prompt | llm")


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_answer_chain_that_needs_what_it_never_gets_fails_on_every_question(
    retriever, asynchronous
):
    """A prompt written for ``create_retrieval_chain`` (``{input}``) under the default
    ``question_key="question"`` answered "I don't know" to an off-topic question, as it
    should, and failed only on a question something matched: tried with the first, the
    mistake shipped. Its missing variable is named on every call, before the search."""
    calls = Calls()
    prompt = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {input}")
    chain = AbstainingChain(retriever=retriever, answer_chain=prompt | spy_model(calls))
    wanted = r"answer_chain needs \['input'\].*gets 'question', 'context'.*question_key='input'"
    with pytest.raises(KeyError, match=wanted):
        if asynchronous:
            asyncio.run(chain.ainvoke(OTHER_QUERY))
        else:
            chain.invoke(OTHER_QUERY)
    assert calls.count == 0
    fixed = AbstainingChain(
        retriever=retriever, answer_chain=prompt | spy_model(calls), question_key="input"
    )
    assert fixed.invoke(QUERY).content == ANSWER


@pytest.mark.parametrize("message", ["", "   ", "\n"])
def test_a_blank_no_match_message_is_refused(retriever, message):
    """The fixed answer was an empty string: the user saw nothing at all."""
    llm = FakeListChatModel(responses=["unused"])
    with pytest.raises(ValueError, match="no_match_message is blank"):
        AbstainingChain(retriever=retriever, answer_chain=PROMPT | llm, no_match_message=message)


async def _async_format(docs: list[Document]) -> str:
    return format_documents(docs)


class _AsyncFormat:
    async def __call__(self, docs: list[Document]) -> str:
        return format_documents(docs)


@pytest.mark.parametrize("format_docs", [_async_format, _AsyncFormat()], ids=["def", "call"])
def test_an_async_format_docs_is_refused(retriever, format_docs):
    """It was called without being awaited, in invoke and ainvoke alike: the answer chain got
    ``<coroutine object ...>`` as its context, and the LLM answered from that."""
    with pytest.raises(ValueError, match="format_docs is an async function"):
        AbstainingChain(
            retriever=retriever, answer_chain=PROMPT | spy_model(Calls()), format_docs=format_docs
        )
    chain = AbstainingChain(retriever=retriever, answer_chain=PROMPT | spy_model(Calls()))
    with pytest.raises(ValueError, match="format_docs is an async function"):
        chain.format_docs = format_docs  # set afterwards: checked as the constructor does


@pytest.mark.parametrize("message", ["", "   ", None])
def test_a_no_match_message_assigned_later_is_checked(retriever, message):
    """The LlamaIndex engines check it whenever it is set; the chain answered ``"   "``."""
    llm = FakeListChatModel(responses=["unused"])
    chain = AbstainingChain(retriever=retriever, answer_chain=PROMPT | llm)
    with pytest.raises(ValueError, match="no_match_message"):
        chain.no_match_message = message
    assert chain.invoke(OTHER_QUERY).content == DEFAULT_NO_MATCH_MESSAGE


def test_an_answer_chain_assigned_later_is_checked_as_the_constructors(retriever):
    """What the new chain needs and returns is read again: the old chain's were used."""
    calls = Calls()
    chain = AbstainingChain(retriever=retriever, answer_chain=PROMPT | spy_model(calls))
    chain.answer_chain = ChatPromptTemplate.from_template("{context} {input}") | spy_model(calls)
    with pytest.raises(KeyError, match=r"answer_chain needs \['input'\]"):
        chain.invoke(OTHER_QUERY)
    assert calls.count == 0
