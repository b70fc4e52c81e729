"""An "I don't know" step for LCEL chains: nothing matched, no call to the answering LLM."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.callbacks import (
    AsyncCallbackManagerForChainRun,
    CallbackManagerForChainRun,
)
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableConfig, RunnableSerializable
from langchain_core.runnables.base import (
    RunnableBindingBase,
    RunnableLambda,
    RunnableSequence,
    coerce_to_runnable,
)
from langchain_core.runnables.config import patch_config
from langchain_core.runnables.configurable import DynamicRunnable
from langchain_core.runnables.utils import AddableDict
from pydantic import ConfigDict, PrivateAttr, field_validator, model_validator

from langchain_thresholded.ensemble import unbound
from langchain_thresholded.retrievers import no_documents_past_own_filters
from thresholded.abstention import (
    DEFAULT_NO_MATCH_MESSAGE,
    NOTHING_MATCHED,
    check_no_match_message,
    no_match_flags,
)
from thresholded.report import abstained_by_of
from thresholded.strict import StrictArguments


@dataclass(frozen=True)
class _Retrieved:
    """One call's retrieval: its documents, and whether (and what) emptied them."""

    documents: list[Document]
    nothing_matched: bool
    abstained_by: str | None = None
    """See :data:`~thresholded.report.ABSTAINED_BY`; None when the retriever did not say."""


AnswerType = Literal["str", "message"]


def format_documents(documents: Sequence[Document]) -> str:
    """The documents' texts, separated by blank lines: the usual ``format_docs`` of RAG chains."""
    return "\n\n".join(doc.page_content for doc in documents)


class AbstainingChain(StrictArguments, RunnableSerializable[Any, Any]):
    """Retrieve once; answer with ``answer_chain``, or with a fixed answer when nothing matched.

    The chain runs the retriever itself and hands the documents to ``answer_chain``,
    so the retrieval happens once. When the retriever reports that nothing matched
    (``report.nothing_matched`` of a ``ThresholdedRetriever`` or
    ``MultiCollectionRetriever``; an empty result for any other retriever),
    ``answer_chain`` is not called and the output is ``no_match_message``, in the type
    ``answer_chain`` returns: a ``str``, or an ``AIMessage`` whose
    ``response_metadata["nothing_matched"]`` is True and whose
    ``response_metadata["abstained_by"]`` says what emptied the result (``floor``,
    ``gate``, ``filters``, ``policy``: see :data:`~thresholded.report.ABSTAINED_BY`, as
    LlamaIndex's abstaining engines say it) when the retriever reports it. Streamed, it is
    one chunk of the type the chain streams (``str`` or ``AIMessageChunk``).

    A chain that reads ``{"context": retriever | format_docs, "question":
    RunnablePassthrough()} | prompt | llm`` becomes:

    .. code-block:: python

        from langchain_thresholded import AbstainingChain

        chain = AbstainingChain(
            retriever=retriever,  # a ThresholdedRetriever
            answer_chain=prompt | llm,  # gets {"question": ..., "context": format_docs(docs)}
            format_docs=format_docs,  # default: the texts, separated by blank lines
            no_match_message="I don't know. Our support team is at help@example.com.",
        )
        chain.invoke("How do I get my money back?")  # the LLM's AIMessage
        chain.invoke("What's the weather in Mumbai today?")  # AIMessage("I don't know. ...",
        # response_metadata={"nothing_matched": True, "abstained_by": "floor"}); the LLM
        # was not called

    The input is the question, or a dict that holds it under ``question_key`` (its
    other keys, such as ``chat_history``, go on to ``answer_chain``). With
    ``answer_key`` set, the output is a dict like ``create_retrieval_chain``'s:
    the input's keys, ``context`` (the documents), the answer under ``answer_key``,
    and ``nothing_matched`` (and ``abstained_by`` on a no-match answer, as above);
    :meth:`from_combine_docs_chain` builds that.

    For follow-up questions, ``query_chain`` turns the input into the search query, as
    ``create_history_aware_retriever`` does before its retriever: e.g. an LLM that
    rewrites the question with the chat history. It runs before the retrieval, so its
    call is made whatever the retrieval then finds:

    .. code-block:: python

        rewrite = RunnableBranch(
            (lambda x: not x.get("chat_history"), itemgetter("input")),
            contextualize_prompt | llm | StrOutputParser(),
        )
        chain = AbstainingChain.from_combine_docs_chain(
            retriever, create_stuff_documents_chain(llm, qa_prompt), query_chain=rewrite
        )
        chain.invoke({"input": "And for yearly plans?", "chat_history": history})
    """

    retriever: BaseRetriever | DynamicRunnable | RunnableBindingBase
    """Finds the context. A ``ThresholdedRetriever`` or ``MultiCollectionRetriever`` says
    through its report whether anything matched; any other retriever, by returning nothing.
    A configurable retriever (``retriever.configurable_fields(...)``) is configured by each
    call's config, as it would be in an LCEL chain. A bound retriever
    (``retriever.with_config(...)``, ``bind(...)``, ``with_retry()``) is invoked as it is,
    its bound arguments applied, and has matched nothing when it returns nothing."""
    answer_chain: Runnable[Any, Any]
    """Answers from the context, e.g. ``prompt | llm``. It gets the input (a dict, or
    ``{question_key: question}``) with the context under ``context_key``. A function or a
    dict of them is made a runnable, as in an LCEL chain."""
    no_match_message: str = DEFAULT_NO_MATCH_MESSAGE
    """The answer when nothing matched, such as how to reach a human."""
    query_chain: Runnable[Any, str] | None = None
    """Turns the input into the search query, e.g. a question-rewriting chain for a
    conversation (a function is made a runnable). Default: the question itself."""
    question_key: str = "question"
    """Where a dict input holds the question, and where a question given as a ``str`` is
    passed to ``answer_chain``."""
    context_key: str = "context"
    """Where ``answer_chain`` gets the context, and the dict output the documents."""
    format_docs: Callable[[list[Document]], Any] | None = format_documents
    """Turns the documents into the context ``answer_chain`` gets; None passes the list
    (what ``create_stuff_documents_chain`` expects)."""
    answer_key: str | None = None
    """When set, the output is a dict with the input's keys, the documents under
    ``context_key``, the answer under this key and ``nothing_matched`` (and ``abstained_by``
    on a no-match answer whose retriever reports what emptied it)."""
    answer_type: AnswerType | None = None
    """What ``answer_chain`` returns: ``"str"`` or ``"message"`` (an ``AIMessage``). Default:
    read from its ``OutputType``; a chain that does not declare one (e.g. it ends in a
    lambda without a return annotation) must say."""

    model_config = ConfigDict(arbitrary_types_allowed=True, validate_assignment=True)
    """A field set afterwards is checked, and what the chain needs and returns read again,
    as the constructor does."""

    _answer_type: AnswerType = PrivateAttr(default="str")
    _needs: frozenset[str] = PrivateAttr(default=frozenset())
    """The input keys ``answer_chain`` requires (its input schema's), checked on every call."""

    @field_validator("no_match_message")
    @classmethod
    def _says_something(cls, value: str) -> str:
        return check_no_match_message(value)

    @field_validator("retriever", mode="before")
    @classmethod
    def _a_retriever(cls, value: Any) -> Any:
        if isinstance(value, DynamicRunnable) and not isinstance(value.default, BaseRetriever):
            raise ValueError(
                f"a configurable {type(value.default).__name__} is not a retriever: give a "
                "retriever, or one made configurable with configurable_fields(...)"
            )
        inner = unbound(value)[0]  # with_config(...), bind(...), ...
        if isinstance(inner, DynamicRunnable):
            inner = inner.default
        if not isinstance(inner, BaseRetriever):
            raise ValueError(
                "retriever must be a retriever (a BaseRetriever, possibly bound with "
                "with_config(...), bind(...) or with_retry(), or made configurable), got "
                f"{type(value).__name__}"
                + (f" over {type(inner).__name__}" if inner is not value else "")
                + ": give the retriever itself; the chain formats the documents with "
                "format_docs="
            )
        no_documents_past_own_filters(value)
        return value

    @field_validator("answer_chain", "query_chain", mode="before")
    @classmethod
    def _a_runnable(cls, value: Any) -> Any:
        """A function or a dict of them is made a runnable, as it is in an LCEL chain."""
        if value is None or isinstance(value, Runnable):
            return value
        if callable(value) or isinstance(value, dict):
            return coerce_to_runnable(value)
        raise ValueError(
            f"expected a runnable, a function or a dict of them, got {type(value).__name__}"
        )

    @field_validator("format_docs")
    @classmethod
    def _a_plain_function(cls, value: Any) -> Any:
        """An async one would be called without being awaited: the answer chain would get a
        coroutine as its context."""
        if value is not None and (
            inspect.iscoroutinefunction(value)
            or inspect.iscoroutinefunction(type(value).__call__)  # an async __call__
        ):
            raise ValueError(
                f"format_docs is an async function ({getattr(value, '__name__', value)!r}): "
                "the chain calls it without awaiting, so the answer chain would get a "
                "coroutine as its context; give a plain function"
            )
        return value

    @model_validator(mode="after")
    def _resolve_answer_type(self) -> AbstainingChain:
        declared = _declared_output(self.answer_chain)
        kind = self.answer_type or _answer_type_of(declared)
        if kind is None:
            raise ValueError(
                f"cannot tell whether answer_chain returns a str or a message (its OutputType "
                f"is {declared!r}): set answer_type='str' or 'message'"
            )
        self._answer_type = kind
        self._needs = frozenset(self.answer_chain.get_input_jsonschema().get("required", ()))
        return self

    @classmethod
    def from_combine_docs_chain(
        cls,
        retriever: BaseRetriever | DynamicRunnable | RunnableBindingBase,
        combine_docs_chain: Runnable[Any, Any],
        **fields: Any,
    ) -> AbstainingChain:
        """The counterpart of ``create_retrieval_chain(retriever, combine_docs_chain)``.

        The input is a dict with the question under ``"input"``; the output is the input's
        keys, ``"context"`` (the documents), ``"answer"`` and ``"nothing_matched"``. The
        documents reach ``combine_docs_chain`` as a list, as ``create_stuff_documents_chain``
        expects.
        """
        fields = {"question_key": "input", "answer_key": "answer", "format_docs": None, **fields}
        return cls(retriever=retriever, answer_chain=combine_docs_chain, **fields)

    @property
    def InputType(self) -> Any:
        return str | dict[str, Any]

    @property
    def OutputType(self) -> Any:
        return dict[str, Any] if self.answer_key is not None else self.answer_chain.OutputType

    # Runnable ----------------------------------------------------------------------
    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        _no_call_arguments("invoke", kwargs)
        return self._call_with_config(self._invoke, input, config)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        _no_call_arguments("ainvoke", kwargs)
        return await self._acall_with_config(self._ainvoke, input, config)

    def transform(
        self, input: Iterator[Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        _no_call_arguments("stream", kwargs)
        yield from self._transform_stream_with_config(input, self._transform, config)

    def stream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        return self.transform(iter([input]), config, **kwargs)

    async def atransform(
        self, input: AsyncIterator[Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        _no_call_arguments("astream", kwargs)
        async for chunk in self._atransform_stream_with_config(input, self._atransform, config):
            yield chunk

    async def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        async def once() -> AsyncIterator[Any]:
            yield input

        async for chunk in self.atransform(once(), config, **kwargs):
            yield chunk

    # One run -----------------------------------------------------------------------
    def _invoke(
        self, input: Any, run_manager: CallbackManagerForChainRun, config: RunnableConfig
    ) -> Any:
        child = patch_config(config, callbacks=run_manager.get_child())
        retrieved = self._retrieve(input, child)
        if retrieved.nothing_matched:
            return self._no_match(input, retrieved, chunk=False)
        documents = retrieved.documents
        answer = self.answer_chain.invoke(self._answer_input(input, documents), child)
        return self._answered(input, documents, answer)

    async def _ainvoke(
        self, input: Any, run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig
    ) -> Any:
        child = patch_config(config, callbacks=run_manager.get_child())
        retrieved = await self._aretrieve(input, child)
        if retrieved.nothing_matched:
            return self._no_match(input, retrieved, chunk=False)
        documents = retrieved.documents
        answer = await self.answer_chain.ainvoke(self._answer_input(input, documents), child)
        return self._answered(input, documents, answer)

    def _transform(
        self,
        chunks: Iterator[Any],
        run_manager: CallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> Iterator[Any]:
        input = _gathered(chunks)
        child = patch_config(config, callbacks=run_manager.get_child())
        retrieved = self._retrieve(input, child)
        if retrieved.nothing_matched:
            yield self._no_match(input, retrieved, chunk=True)
            return
        documents = retrieved.documents
        if self.answer_key is not None:
            yield AddableDict(self._head(input, documents))
        for chunk in self.answer_chain.stream(self._answer_input(input, documents), child):
            yield self._answer_chunk(chunk)

    async def _atransform(
        self,
        chunks: AsyncIterator[Any],
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> AsyncIterator[Any]:
        input = _gathered([chunk async for chunk in chunks])
        child = patch_config(config, callbacks=run_manager.get_child())
        retrieved = await self._aretrieve(input, child)
        if retrieved.nothing_matched:
            yield self._no_match(input, retrieved, chunk=True)
            return
        documents = retrieved.documents
        if self.answer_key is not None:
            yield AddableDict(self._head(input, documents))
        async for chunk in self.answer_chain.astream(self._answer_input(input, documents), child):
            yield self._answer_chunk(chunk)

    # Steps -------------------------------------------------------------------------
    def _question(self, input: Any) -> Any:
        if not isinstance(input, dict):
            return input
        if self.question_key not in input:
            raise KeyError(
                f"{type(self).__name__} reads the question from the input's "
                f"{self.question_key!r} key; the input has {sorted(input)}: "
                + _question_key_hint(input)
            )
        return input[self.question_key]

    def _query(self, input: Any, config: RunnableConfig) -> str:
        if self.query_chain is None:
            return _text(self._question(input))
        return _rewritten(self.query_chain.invoke(input, config))

    async def _aquery(self, input: Any, config: RunnableConfig) -> str:
        if self.query_chain is None:
            return _text(self._question(input))
        return _rewritten(await self.query_chain.ainvoke(input, config))

    def _check_answer_input(self, input: Any) -> None:
        """Refuse, before the search, an input that leaves out a key ``answer_chain``
        requires: it would fail only on the questions something matched, and a test with
        an off-topic question would pass."""
        gets = [*self._given(input), self.context_key]
        missing = sorted(self._needs - set(gets))
        if not missing:
            return
        if len(missing) == 1 and self.question_key not in self._needs:
            hint = f"set question_key={missing[0]!r}"
        elif len(missing) == 1 and self.context_key not in self._needs:
            hint = f"set context_key={missing[0]!r}"
        else:
            hint = "give them in the input dict"
        raise KeyError(
            f"answer_chain needs {missing}, which it never gets: it gets "
            f"{', '.join(map(repr, gets))} (the question, the documents and the input's "
            f"other keys): {hint}"
        )

    def _retrieve(self, input: Any, config: RunnableConfig) -> _Retrieved:
        query = self._query(input, config)
        self._check_answer_input(input)
        retriever, config = self._configured(config)
        with_report = _reporting(retriever, "retrieve_with_report")
        if with_report is None:
            documents = retriever.invoke(query, config)
            return _Retrieved(documents, not documents)
        return _reported(with_report(query, config))

    async def _aretrieve(self, input: Any, config: RunnableConfig) -> _Retrieved:
        query = await self._aquery(input, config)
        self._check_answer_input(input)
        retriever, config = self._configured(config)
        with_report = _reporting(retriever, "aretrieve_with_report")
        if with_report is None:
            documents = await retriever.ainvoke(query, config)
            return _Retrieved(documents, not documents)
        return _reported(await with_report(query, config))

    def _configured(self, config: RunnableConfig) -> tuple[Runnable[Any, Any], RunnableConfig]:
        """The retriever as this call's config sets it, when it is configurable."""
        no_documents_past_own_filters(self.retriever, config)
        if isinstance(self.retriever, DynamicRunnable):
            return self.retriever.prepare(config)
        return self.retriever, config

    def _head(self, input: Any, documents: list[Document]) -> dict[str, Any]:
        """The dict output without its answer: the input's keys, the documents, the flag."""
        return {**self._given(input), self.context_key: documents, NOTHING_MATCHED: False}

    def _answered(self, input: Any, documents: list[Document], answer: Any) -> Any:
        """The answer, or, with ``answer_key``, the dict output that holds it."""
        if self.answer_key is None:
            return answer
        return {**self._head(input, documents), self.answer_key: answer}

    def _answer_input(self, input: Any, documents: list[Document]) -> dict[str, Any]:
        context = documents if self.format_docs is None else self.format_docs(documents)
        return {**self._given(input), self.context_key: context}

    def _given(self, input: Any) -> dict[str, Any]:
        return dict(input) if isinstance(input, dict) else {self.question_key: input}

    def _answer_chunk(self, chunk: Any) -> Any:
        return chunk if self.answer_key is None else AddableDict({self.answer_key: chunk})

    def _no_match(self, input: Any, retrieved: _Retrieved, *, chunk: bool) -> Any:
        """``no_match_message`` in the output's type, with what emptied the result where the
        retriever said it; as a stream chunk when ``chunk``."""
        flags = no_match_flags(retrieved.abstained_by)
        answer: Any = self.no_match_message
        if self._answer_type == "message":
            answer = (
                AIMessageChunk(content=answer, response_metadata=flags, chunk_position="last")
                if chunk
                else AIMessage(content=answer, response_metadata=flags)
            )
        if self.answer_key is None:
            return answer
        output = {**self._given(input), self.context_key: [], **flags, self.answer_key: answer}
        return AddableDict(output) if chunk else output


def _reported(report: Any) -> _Retrieved:
    """A reporting retriever's result: what emptied it, when nothing matched."""
    emptied = abstained_by_of(report) if report.nothing_matched else None
    return _Retrieved(report.items, report.nothing_matched, emptied)


def _declared_output(chain: Runnable[Any, Any]) -> Any:
    """The chain's ``OutputType``; a function's return annotation resolved where it is
    written as a string (``from __future__ import annotations``)."""
    while isinstance(chain, RunnableSequence):
        chain = chain.last
    if isinstance(chain, RunnableLambda) and isinstance(chain.OutputType, str):
        function = getattr(chain, "func", None) or getattr(chain, "afunc", None)
        try:
            return typing.get_type_hints(function).get("return", chain.OutputType)
        except (NameError, TypeError):  # a name the function's module cannot resolve
            return chain.OutputType
    return chain.OutputType


def _answer_type_of(output_type: Any) -> AnswerType | None:
    """``"str"`` or ``"message"`` for a chain's declared ``OutputType``; None if neither."""
    kinds = {_kind(member) for member in _members(output_type)}
    return kinds.pop() if len(kinds) == 1 and None not in kinds else None


def _members(annotation: Any) -> list[Any]:
    """The types of a (possibly annotated) union, or the type itself."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in _members(arg)]
    return [annotation]


def _kind(member: Any) -> AnswerType | None:
    if member is str:
        return "str"
    if isinstance(member, type) and issubclass(member, BaseMessage):
        return "message"
    return None


def _no_call_arguments(method: str, kwargs: dict[str, Any]) -> None:
    """A call takes its input and config only: what it would narrow (filters, the floor)
    belongs to the retriever, made configurable for per-call values."""
    if kwargs:
        raise TypeError(
            f"AbstainingChain.{method}() takes an input and a config, not "
            f"{', '.join(sorted(kwargs))}: set them on the retriever, or per call through "
            "its configurable fields (retriever.configurable_fields(call_filters="
            "ConfigurableField(id='call_filters')), then config={'configurable': "
            "{'call_filters': ...}})"
        )


def _gathered(chunks: Iterator[Any] | list[Any]) -> Any:
    """One input from its streamed chunks, added up as ``Runnable.transform`` does."""
    final: Any = None
    for position, chunk in enumerate(chunks):
        try:
            final = chunk if position == 0 else final + chunk
        except TypeError:
            final = chunk
    return final


def _text(query: Any) -> str:
    if isinstance(query, str):
        return query
    raise TypeError(
        f"the search query must be a str, got {type(query).__name__}: end query_chain "
        "with StrOutputParser(), or give the question as a str"
    )


def _rewritten(query: Any) -> str:
    """What ``query_chain`` returned, as the search query; documents say it retrieves."""
    if isinstance(query, list) and query and all(isinstance(d, Document) for d in query):
        raise TypeError(
            "query_chain returned documents, not the search query: it retrieves (as "
            "create_history_aware_retriever's chain does), and the chain retrieves itself, "
            "with retriever=. Give query_chain the rewriting part only: "
            "RunnableBranch((lambda x: not x.get('chat_history'), itemgetter('input')), "
            "contextualize_prompt | llm | StrOutputParser())"
        )
    return _text(query)


def _reporting(retriever: Any, name: str) -> Any:
    """The retriever's method ``name`` that returns its report, if it is itself a retriever.
    A configured alternative may be a ``RunnableBinding`` (``retriever.bind(filters=...)``):
    its ``__getattr__`` hands out the bound retriever's method with the binding's config but
    without its arguments, so the bound filters would not apply; it is invoked instead."""
    return getattr(retriever, name, None) if isinstance(retriever, BaseRetriever) else None


def _question_key_hint(input: dict[str, Any]) -> str:
    """The setting that reads the question from another key: the one key given, if one."""
    if len(input) == 1:
        return f"set question_key={next(iter(input))!r}"
    return "set question_key to the key that holds the question"
