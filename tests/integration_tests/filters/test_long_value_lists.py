"""Filters of many parts on Milvus Lite (both adapters).

An agent's filter may list many values (the tenants a user may read, the sources of a
search form). Milvus Lite 2.5 fails an expression nested 50 levels deep ("unsupported
expr proto node"), as a chain of 51 ``or`` is, and IN, NIN and the text part of ANY were
written as such chains, one part per value: every such call failed with that error.
Longer chains are written as trees.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from leak_data import POLICY, QUESTION
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

import langchain_thresholded as lc
import llama_index_thresholded as li
from thresholded.errors import UnsafeFilterError
from thresholded.filters import Combine, Condition, Dialect, Filter, Group, Op, to_milvus
from thresholded.filters.model import MAX_DEPTH

pytestmark = pytest.mark.integration

FILLERS = [f"source-{i}" for i in range(200)]
CASES = [  # (operator, sources, the sections returned)
    ("in", [*FILLERS, "faq"], ["f0", "f1"]),
    ("nin", [*FILLERS, "faq", "ops"], ["h0", "h1", "h2", "h3"]),
    ("any", [*FILLERS, "faq"], ["f0", "f1"]),
]


@pytest.mark.parametrize(("op", "sources", "expected"), CASES, ids=[c[0] for c in CASES])
def test_llama_index_takes_long_lists(
    leaky: Any, op: str, sources: list[str], expected: list[str]
) -> None:
    retriever = li.ThresholdedRetriever(
        leaky.llama_index, POLICY, neighbours=0, parent_summaries=False, pushdown=False
    )
    operator = FilterOperator(op)
    call = MetadataFilters(filters=[MetadataFilter(key="source", operator=operator, value=sources)])
    report = retriever.retrieve_with_report(QUESTION, filters=call)
    assert sorted(n.node.node_id for n in report.items) == expected


@pytest.mark.parametrize(("op", "sources", "expected"), CASES, ids=[c[0] for c in CASES])
def test_langchain_takes_long_lists(
    leaky: Any, op: str, sources: list[str], expected: list[str]
) -> None:
    retriever = lc.ThresholdedRetriever(vectorstore=leaky.langchain_store, policy=POLICY)
    found = retriever.invoke(QUESTION, filters={"source": {f"${op}": sources}})
    assert sorted(d.id for d in found) == expected


def test_langchain_takes_the_longest_list(leaky: Any) -> None:
    retriever = lc.ThresholdedRetriever(vectorstore=leaky.langchain_store, policy=POLICY)
    others = [f"source-{i}" for i in range(16_384)]
    found = retriever.invoke(QUESTION, filters={"source": {"$nin": [*others, "handbook", "ops"]}})
    assert sorted(d.id for d in found) == ["f0", "f1"]


def test_langchain_takes_a_long_or(leaky: Any) -> None:
    retriever = lc.ThresholdedRetriever(
        vectorstore=leaky.langchain_store, policy=POLICY, filters={"doc_type": "public"}
    )
    anyone = {"$or": [{"source": source} for source in [*FILLERS, "faq", "ops"]]}
    assert sorted(d.id for d in retriever.invoke(QUESTION, filters=anyone)) == ["f0", "f1"]


def test_long_chains_are_written_as_trees() -> None:
    listed = Condition("k", Op.IN, tuple(f"v{i}" for i in range(16_384)))
    for dialect in Dialect:
        for f in (listed, Group(Combine.NOT, (listed,))):
            expr = to_milvus(f, dialect).expr
            if expr is not None:  # a complement the dialect does not write
                assert max(len(re.findall(r" (?:and|or) ", c)) for c in _levels(expr)) < 16


def _levels(expr: str) -> list[str]:
    """The text of each parenthesised part of ``expr``, without the parts inside it."""
    texts, open_ = [""], [0]
    for ch in expr:
        if ch == "(":
            texts.append("")
            open_.append(len(texts) - 1)
        elif ch == ")":
            open_.pop()
        else:
            texts[open_[-1]] += ch
    return texts


def nested_with_siblings(levels: int, siblings: int) -> dict[str, Any]:
    """``source == "faq"`` inside ``levels`` groups, alternating AND and OR, the nested group
    first in each, beside ``siblings`` conditions that change nothing (``!=`` a source no
    section has in an AND, ``==`` one in an OR). Milvus reads each group as a chain of
    pairs, the first part the deepest: written in order, it nested ``siblings`` levels per
    group, and Milvus Lite failed the call."""
    f: dict[str, Any] = {"source": "faq"}
    for i in range(levels - 1):
        word, test = ("$or", "$eq") if i % 2 else ("$and", "$ne")
        f = {word: [f, *({"source": {test: f"none-{i}-{j}"}} for j in range(siblings))]}
    return f


def llama_index_nested_with_siblings(levels: int, siblings: int) -> MetadataFilters:
    """:func:`nested_with_siblings` as LlamaIndex's filters."""
    f = MetadataFilters(filters=[MetadataFilter(key="source", value="faq")])
    for i in range(levels - 1):
        condition, operator = ("or", FilterOperator.EQ) if i % 2 else ("and", FilterOperator.NE)
        others = [
            MetadataFilter(key="source", operator=operator, value=f"none-{i}-{j}")
            for j in range(siblings)
        ]
        f = MetadataFilters(filters=[f, *others], condition=condition)
    return f


def test_langchain_takes_groups_nested_to_the_limit_beside_conditions(leaky: Any) -> None:
    retriever = lc.ThresholdedRetriever(vectorstore=leaky.langchain_store, policy=POLICY)
    found = retriever.invoke(QUESTION, filters=nested_with_siblings(MAX_DEPTH, 8))
    assert sorted(d.id for d in found) == ["f0", "f1"]


def test_llama_index_takes_groups_nested_to_the_limit_beside_conditions(leaky: Any) -> None:
    retriever = li.ThresholdedRetriever(
        leaky.llama_index, POLICY, neighbours=0, parent_summaries=False, pushdown=False
    )
    call = llama_index_nested_with_siblings(MAX_DEPTH, 8)
    report = retriever.retrieve_with_report(QUESTION, filters=call)
    assert sorted(n.node.node_id for n in report.items) == ["f0", "f1"]


def test_a_filter_written_deeper_than_milvus_runs_is_refused_by_name() -> None:
    """Groups nested to the limit, each beside conditions of other keys, still nest one level
    per group; an IN of thousands of values in the deepest one adds its logarithm."""
    listed = Condition("k", Op.IN, tuple(f"v{i}" for i in range(16_384)))
    f: Filter = listed
    for i in range(MAX_DEPTH):
        f = Group(Combine.OR if i % 2 else Combine.AND, (f, Condition("j", Op.EQ, i)))
    with pytest.raises(UnsafeFilterError, match="levels deep"):
        to_milvus(f, Dialect.LITE_2)
