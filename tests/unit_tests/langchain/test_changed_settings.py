"""A retriever's settings changed after it was built hold from the next call: assigned,
copied with ``model_copy(update=...)``, or a dict changed in place. None is ignored, and
filters, being a security boundary, above all: nothing outside them comes back,
attachments included."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.documents import Document
from langchain_core.stores import InMemoryStore
from langchain_core.structured_query import Comparator, Comparison, Operation, Operator
from pydantic import ValidationError

from langchain_thresholded import MultiCollectionRetriever, ThresholdedRetriever
from thresholded import RetrievalPolicy

Q = "the question"
POLICY = RetrievalPolicy(min_similarity=0.25, top_k=10, max_per_source=None, max_chars=None)
PUBLIC = {"doc_type": "public"}


@pytest.fixture
def mixed(corpus):
    """p1 (0.875) and p2 (0.5) are public, s1 (0.75) is secret; each links to a neighbour in
    the docstore: p1 to the secret x1, s1 to the public y1."""
    c = corpus(
        [
            ("p1", 0.875, {"doc_type": "public", "next_id": "x1"}),
            ("s1", 0.75, {"doc_type": "secret", "next_id": "y1"}),
            ("p2", 0.5, {"doc_type": "public"}),
        ]
    )
    docstore = InMemoryStore()
    docstore.mset(
        [
            ("x1", Document(id="x1", page_content="x1", metadata={"doc_type": "secret"})),
            ("y1", Document(id="y1", page_content="y1", metadata={"doc_type": "public"})),
        ]
    )
    return c, docstore


def retriever_over(mixed, **fields) -> ThresholdedRetriever:
    c, docstore = mixed
    return ThresholdedRetriever(
        vectorstore=c.store, policy=POLICY, docstore=docstore, parent_summaries=False, **fields
    )


def ids(documents: list[Document]) -> list[str | None]:
    return [d.id for d in documents]


def both_ways(retriever) -> list[str | None]:
    """The ids of one call, checked to be those of the async call."""
    found = ids(retriever.invoke(Q))
    assert ids(asyncio.run(retriever.ainvoke(Q))) == found
    return found


def test_filters_assigned_after_construction_hold_for_results_and_attachments(mixed):
    retriever = retriever_over(mixed)
    assert both_ways(retriever) == ["p1", "s1", "p2", "x1", "y1"]
    retriever.filters = PUBLIC
    assert both_ways(retriever) == ["p1", "p2"]


def test_call_filters_assigned_after_construction_hold(mixed):
    retriever = retriever_over(mixed)
    retriever.call_filters = PUBLIC
    assert both_ways(retriever) == ["p1", "p2"]


def test_a_filter_written_into_search_kwargs_in_place_holds(mixed):
    retriever = retriever_over(mixed)
    retriever.invoke(Q)
    retriever.search_kwargs["filter"] = lambda doc: doc.metadata["doc_type"] == "public"
    assert both_ways(retriever) == ["p1", "p2"]  # the store's filter function holds for both


def test_a_filter_dict_changed_in_place_holds(mixed):
    retriever = retriever_over(mixed, filters={"doc_type": "secret"})
    assert both_ways(retriever) == ["s1"]
    retriever.filters["doc_type"] = "public"
    assert both_ways(retriever) == ["p1", "p2"]


def test_a_policy_assigned_after_construction_holds(mixed):
    retriever = retriever_over(mixed, neighbours=0)
    retriever.policy = POLICY.with_overrides(min_similarity=0.8)
    assert both_ways(retriever) == ["p1"]
    assert retriever.as_policy().min_similarity == 0.8


def test_model_copy_with_an_update_holds_and_leaves_the_original(mixed):
    retriever = retriever_over(mixed)
    public = retriever.model_copy(update={"filters": PUBLIC})
    assert both_ways(public) == ["p1", "p2"]
    assert both_ways(retriever) == ["p1", "s1", "p2", "x1", "y1"]
    shallow = retriever.model_copy()
    shallow.search_kwargs["filter"] = lambda doc: doc.metadata["doc_type"] == "public"
    assert both_ways(shallow) == ["p1", "p2"]


def test_a_refused_change_leaves_the_retriever_as_it_was(mixed):
    retriever = retriever_over(mixed, filters=PUBLIC)
    with pytest.raises(ValueError, match="expr is a Milvus boolean expression"):
        retriever.expr = "doc_type == 'secret'"
    with pytest.raises(ValidationError, match="must not contain 'k'"):
        retriever.search_kwargs = {"k": 3}
    with pytest.raises(ValidationError, match="no_such_field"):
        retriever.model_copy(update={"no_such_field": 1})
    assert retriever.expr is None
    assert retriever.search_kwargs == {}
    assert both_ways(retriever) == ["p1", "p2"]


def test_a_value_assigned_is_parsed_as_the_constructor_parses_it(mixed):
    retriever = retriever_over(mixed)
    retriever.metric = "cosine"
    assert retriever.metric.value == "COSINE"
    assert both_ways(retriever) == ["p1", "s1", "p2", "x1", "y1"]


def test_a_collection_changed_after_the_multi_collection_retriever_was_built(mixed):
    member = retriever_over(mixed)
    multi = MultiCollectionRetriever(collections=[member], policy=POLICY)
    member.filters = PUBLIC
    assert both_ways(multi) == ["p1", "p2"]
    multi.collections = [retriever_over(mixed, filters={"doc_type": "secret"})]
    assert both_ways(multi) == ["s1"]


def test_a_structured_filter_changed_in_place_holds(mixed):
    secret = Comparison(comparator=Comparator.EQ, attribute="doc_type", value="secret")
    retriever = retriever_over(mixed, filters=Operation(operator=Operator.AND, arguments=[secret]))
    assert both_ways(retriever) == ["s1"]
    secret.value = "public"
    assert both_ways(retriever) == ["p1", "p2"]
