"""The differential test of filters: Milvus and both adapters against the reference.

Rows of metadata (strings, numbers, lists of either, missing keys) are stored once, in a
Milvus Lite collection and in each adapter's store. Hypothesis then writes filter trees
(every operator, AND/OR/NOT groups, nested) and each tree must select exactly the rows
the reference evaluator selects:

- the core's Milvus expression, run on the engine (when the translation says it is exact;
  otherwise it must select a superset, which the engine's check then narrows);
- a LlamaIndex ``ThresholdedRetriever`` and a LangChain ``ThresholdedRetriever``, given
  the tree in their own filter forms.

A tree the model refuses (a list with EQ/NE) or Milvus cannot run (TEXT_MATCH_INSENSITIVE)
is counted per operator. Run as a script (``python differential.py N``) it prints
``RESULT <json>``: how the tests run it on another Milvus Lite engine.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from leak_data import DIM, VECTOR, SameEmbedding, SameEmbeddings
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

import langchain_thresholded as lc
import llama_index_thresholded as li
from thresholded import RetrievalPolicy
from thresholded.errors import UnsafeFilterError
from thresholded.filters import Combine, Condition, Filter, Group, Op, matches, to_milvus
from thresholded.filters.milvus import dialect_of

KEYS = ("a", "b", "c")
STRINGS = ("x", "y", "xy", "yx", "")
NUMBERS = (0, 1, 2.5, -1, 2**63 - 1, -(2**63 - 1))
"""Stored and compared; the largest 64-bit integers among them."""
BEYOND_64_BITS = (2**63, -(2**63), 2**64, 10**30)
"""Compared only: integers a Milvus expression cannot hold, refused."""
POLICY = RetrievalPolicy(
    min_similarity=0.1, top_k=64, over_fetch=1, max_per_source=None, max_chars=None
)


def make_rows(count: int = 40, seed: int = 13) -> dict[str, dict[str, Any]]:
    """Rows covering every kind of stored value, and rows lacking each key."""
    rng = random.Random(seed)
    kinds = [
        lambda: rng.choice(STRINGS),
        lambda: rng.choice(NUMBERS),
        lambda: rng.sample(STRINGS[:3], rng.randint(0, 2)),
        lambda: rng.sample([1, 2, 3], rng.randint(1, 2)),
    ]
    rows = {}
    for i in range(count):
        row = {key: rng.choice(kinds)() for key in KEYS if rng.random() < 0.75}
        rows[f"r{i:02d}"] = row
    return rows


ROWS = make_rows()


# Filter trees ------------------------------------------------------------------------------
scalars = st.sampled_from(STRINGS) | st.sampled_from(NUMBERS)
lists = st.lists(st.sampled_from(STRINGS), max_size=3) | st.lists(
    st.sampled_from(NUMBERS), max_size=3
)


@st.composite
def conditions(draw: st.DrawFn) -> tuple[str, Op, Any]:
    op = draw(st.sampled_from(list(Op)))
    key = draw(st.sampled_from(KEYS))
    if op is Op.IS_EMPTY:
        return key, op, None
    if op in (Op.IN, Op.NIN, Op.ANY, Op.ALL):
        return key, op, draw(lists)
    if op in (Op.TEXT_MATCH, Op.TEXT_MATCH_INSENSITIVE):
        return key, op, draw(st.sampled_from(STRINGS))
    if op in (Op.EQ, Op.NE) and draw(st.integers(0, 9)) == 0:
        return key, op, draw(lists)  # refused: a list has no single meaning with EQ/NE
    if op in (Op.GT, Op.GTE, Op.LT, Op.LTE, Op.EQ, Op.NE, Op.CONTAINS):
        if draw(st.integers(0, 9)) == 0:
            return key, op, draw(st.sampled_from(BEYOND_64_BITS))  # refused
        return key, op, draw(scalars)
    raise AssertionError(op)


trees = st.recursive(
    conditions(),
    lambda children: st.tuples(
        st.sampled_from(list(Combine)), st.lists(children, min_size=1, max_size=3)
    ),
    max_leaves=6,
)


def build(spec: Any) -> Filter:
    if isinstance(spec[0], Combine):
        return Group(spec[0], tuple(build(child) for child in spec[1]))
    return Condition(*spec)


def operators(spec: Any) -> list[Op]:
    if isinstance(spec[0], Combine):
        return [op for child in spec[1] for op in operators(child)]
    return [spec[1]]


MAY_BE_REFUSED = {
    "EQ with a list",
    "NE with a list",
    "TEXT_MATCH_INSENSITIVE",
    "an integer beyond 64 bits",
}
"""What :func:`refusal` names: the trees an engine's translation may refuse."""


def check(stats: dict[str, Any], cases: int) -> None:
    """A run's figures: no mismatch, only the refusals expected, and most trees compared."""
    assert stats["cases"] == cases
    assert stats["mismatches"] == []
    assert set(stats["refused"]) <= MAY_BE_REFUSED, stats["refused"]
    assert stats["compared"] >= cases // 2  # most trees reach the engine and both adapters
    print(json.dumps({k: stats[k] for k in ("dialect", "cases", "compared", "refused", "inexact")}))


def refusal(spec: Any) -> str | None:
    """What in a tree may be refused: a list with EQ/NE, TEXT_MATCH_INSENSITIVE, or an
    integer beyond 64 bits."""
    if isinstance(spec[0], Combine):
        return next((r for r in map(refusal, spec[1]) if r), None)
    _, op, value = spec
    if op in (Op.EQ, Op.NE) and isinstance(value, list):
        return f"{op.name} with a list"
    if value in BEYOND_64_BITS:
        return "an integer beyond 64 bits"
    return op.name if op is Op.TEXT_MATCH_INSENSITIVE else None


def to_llama(f: Filter) -> MetadataFilters:
    group = f if isinstance(f, Group) else Group(Combine.AND, (f,))
    return MetadataFilters(
        filters=[
            to_llama(c)
            if isinstance(c, Group)
            else MetadataFilter(
                key=c.key,
                operator=FilterOperator(c.op.value),
                value=list(c.value) if isinstance(c.value, tuple) else c.value,
            )
            for c in group.children
        ],
        condition=FilterCondition(group.combine.value),
    )


def to_dict(f: Filter) -> dict[str, Any]:
    if isinstance(f, Group):
        return {f"${f.combine.value}": [to_dict(c) for c in f.children]}
    name = {Op.CONTAINS: "$contains", Op.IS_EMPTY: "$is_empty"}.get(f.op, f"${f.op.name.lower()}")
    value = True if f.op is Op.IS_EMPTY else f.value
    return {f.key: {name: list(value) if isinstance(value, tuple) else value}}


# The stores ----------------------------------------------------------------------------------
class Engines:
    """The rows in each adapter's store: Milvus Lite files, or collections on a server."""

    def __init__(self, llama_uri: str, chain_uri: str, **store_kwargs: Any) -> None:
        from langchain_thresholded.milvus import milvus_from_documents
        from llama_index_thresholded.milvus import milvus_store

        store = milvus_store(llama_uri, "differential", dim=DIM, overwrite=True, **store_kwargs)
        nodes = [
            TextNode(id_=i, text=f"{i} text", metadata=row, embedding=list(VECTOR))
            for i, row in ROWS.items()
        ]
        index = VectorStoreIndex(
            nodes,
            storage_context=StorageContext.from_defaults(vector_store=store),
            embed_model=SameEmbedding(),
        )
        self.client = store.client
        self.dialect = dialect_of(store.client, llama_uri)
        self.llama = li.ThresholdedRetriever(
            index, POLICY, neighbours=0, parent_summaries=False, pushdown=False
        )
        docs = [Document(id=i, page_content=f"{i} text", metadata=row) for i, row in ROWS.items()]
        chain_store = milvus_from_documents(
            docs,
            SameEmbeddings(),
            uri=chain_uri,
            collection_name="differential_lc",
            overwrite=True,
            **store_kwargs,
        )
        self.chain = lc.ThresholdedRetriever(vectorstore=chain_store, policy=POLICY)

    def engine_ids(self, expr: str | None) -> set[str]:
        rows = self.client.query(
            "differential", filter=expr or 'id != ""', output_fields=["id"], limit=100
        )
        return {str(r["id"]) for r in rows}


def run(max_examples: int, folder: Path | None = None, uri: str | None = None) -> dict[str, Any]:
    """Every generated tree on a Milvus server at ``uri``, else on this process's Milvus Lite
    (files in ``folder``); the statistics, and any mismatch."""
    if uri is not None:
        engines = Engines(uri, uri, consistency_level="Strong")
    else:
        folder = folder or Path(tempfile.mkdtemp())
        engines = Engines(str(folder / "llama.db"), str(folder / "langchain.db"))
    stats: dict[str, Any] = {
        "dialect": engines.dialect.value,
        "rows": len(ROWS),
        "cases": 0,
        "compared": 0,
        "inexact": Counter(),
        "refused": Counter(),
        "operators": Counter(),
        "mismatches": [],
    }

    @settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(trees)
    def case(spec: Any) -> None:
        stats["cases"] += 1
        ops = operators(spec)
        stats["operators"].update(op.name for op in ops)
        try:
            tree = build(spec)
            written = to_milvus(tree, engines.dialect)
        except UnsafeFilterError as exc:
            stats["refused"][refusal(spec) or f"unexpected: {exc}"] += 1
            return
        expected = {i for i, row in ROWS.items() if matches(tree, row)}
        on_engine = set() if written.never else engines.engine_ids(written.expr)
        if not written.exact:
            stats["inexact"].update({op.name for op in ops})
        llama = {
            n.node.node_id
            for n in engines.llama.retrieve_with_report("q", filters=to_llama(tree)).kept
        }
        chain = {d.id for d in engines.chain.invoke("q", filters=to_dict(tree))}
        stats["compared"] += 1
        engine_ok = on_engine == expected if written.exact else on_engine >= expected
        if not (engine_ok and llama == expected and chain == expected):
            stats["mismatches"].append(
                {
                    "tree": str(tree),
                    "expr": written.expr,
                    "expected": sorted(expected),
                    "engine": sorted(on_engine),
                    "llama_index": sorted(llama),
                    "langchain": sorted(chain),
                }
            )

    case()
    return {k: dict(v) if isinstance(v, Counter) else v for k, v in stats.items()}


if __name__ == "__main__":
    asyncio.set_event_loop(asyncio.new_event_loop())
    print("RESULT " + json.dumps(run(int(sys.argv[1]) if len(sys.argv) > 1 else 40)))
