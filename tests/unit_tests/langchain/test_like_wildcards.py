"""LangChain's ``like`` is a substring here (``"internal" in stored``), and ``%`` in its
value is refused: LangChain's own translators write the value into a LIKE pattern
(Milvus, DashVector, MyScale), where ``%`` is a wildcard, so a self-query LLM or an agent
writes ``like "%internal%"``. Read as the characters ``%internal%``, which no section
holds, the condition held for none, and "none of the sections like %internal%" held for
every one: the internal sections came back."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.structured_query import Comparator, Comparison, Operation, Operator

from langchain_thresholded import ThresholdedRetriever
from thresholded import RetrievalPolicy
from thresholded.errors import UnsafeFilterError

Q = "the question"
POLICY = RetrievalPolicy(min_similarity=0.1, top_k=10, max_per_source=None, max_chars=None)


def like(value: str) -> Comparison:
    return Comparison(comparator=Comparator.LIKE, attribute="tags", value=value)


def none_of(*conditions: Any) -> Operation:
    return Operation(operator=Operator.NOT, arguments=list(conditions))


@pytest.fixture
def retriever(corpus: Any) -> ThresholdedRetriever:
    c = corpus([("pub", 0.75, {"tags": "faq,public"}), ("int", 0.875, {"tags": "internal,plan"})])
    return ThresholdedRetriever(vectorstore=c.store, policy=POLICY)


@pytest.mark.parametrize("value", ["%internal%", "internal%", "%"])
def test_a_like_wildcard_is_refused(retriever: ThresholdedRetriever, value: str) -> None:
    with pytest.raises(UnsafeFilterError, match=r"'%'.*wildcard"):
        retriever.invoke(Q, filters=none_of(like(value)))
    with pytest.raises(UnsafeFilterError, match=r"'%'.*wildcard"):
        retriever.invoke(Q, filters=like(value))
    with pytest.raises(UnsafeFilterError, match=r"'%'.*wildcard"):
        ThresholdedRetriever(vectorstore=retriever.vectorstore, filters=none_of(like(value)))


def test_like_is_a_substring(retriever: ThresholdedRetriever) -> None:
    assert [d.id for d in retriever.invoke(Q, filters=none_of(like("internal")))] == ["pub"]
    assert [d.id for d in retriever.invoke(Q, filters=like("internal"))] == ["int"]


@pytest.mark.parametrize("value", ["int_rnal", "_"])
def test_an_underscore_under_not_is_refused(retriever: ThresholdedRetriever, value: str) -> None:
    """LangChain's Milvus translator writes ``like`` into a LIKE pattern, where ``_`` is any one
    character: "none like int_rnal" meant to leave out the internal document, and read as the
    characters ``int_rnal``, which no document holds, it left out none."""
    with pytest.raises(UnsafeFilterError, match=r"'_'.*any one character"):
        retriever.invoke(Q, filters=none_of(like(value)))
    with pytest.raises(UnsafeFilterError, match=r"'_'.*any one character"):
        ThresholdedRetriever(vectorstore=retriever.vectorstore, filters=none_of(like(value)))


def test_an_underscore_where_it_only_narrows_is_the_character(
    retriever: ThresholdedRetriever,
) -> None:
    assert retriever.invoke(Q, filters=like("int_rnal")) == []
    assert retriever.invoke(Q, filters=none_of(none_of(like("int_rnal")))) == []
    literal = {"$not": [{"tags": {"$text_match": "int_rnal"}}]}  # the dict form: the character
    assert {d.id for d in retriever.invoke(Q, filters=literal)} == {"pub", "int"}
