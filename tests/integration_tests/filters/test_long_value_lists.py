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
from thresholded.filters import Combine, Condition, Dialect, Group, Op, to_milvus

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
