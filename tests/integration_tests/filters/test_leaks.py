"""No section outside a call's filters comes back, on any path.

Each path (both adapters, single and multi-collection, sync and async, a base filter
with a per-call filter, ``from_retriever``) retrieves the mixed documents of
``leak_data.py`` with neighbours and parent summaries on, under a public-only filter
and every payload of ``payloads.json``. No internal section may come back, neither
kept nor attached; a key that is not a plain field name is refused before any query.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from leak_data import PAYLOADS, POLICY, PUBLIC, QUESTION
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

import langchain_thresholded as lc
import llama_index_thresholded as li
from thresholded.errors import UnsafeFilterError

pytestmark = pytest.mark.integration

PUBLIC_LI = MetadataFilters(filters=[MetadataFilter(key="doc_type", value="public")])
PUBLIC_LC = {"doc_type": "public"}


# The paths ---------------------------------------------------------------------------------------
def llama(leaky: Any, shape: str, base: MetadataFilters | None) -> Any:
    common = {"neighbours": 1, "parent_levels": 1, "pushdown": False, "filters": base}
    if shape == "single":
        return li.ThresholdedRetriever(leaky.llama_index, POLICY, **common)
    if shape == "from_retriever":
        wrapped = leaky.llama_index.as_retriever(filters=base)
        return li.ThresholdedRetriever.from_retriever(wrapped, POLICY, neighbours=1, pushdown=False)
    spec = li.CollectionSpec(leaky.llama_index, name="kb")
    return li.MultiCollectionRetriever([spec], POLICY, **common)


def langchain(leaky: Any, shape: str, base: dict[str, Any] | None) -> Any:
    store, docstore = leaky.langchain_store, leaky.langchain_docstore
    single = lc.ThresholdedRetriever(
        vectorstore=store, policy=POLICY, docstore=docstore, filters=base
    )
    if shape == "single":
        return single
    if shape == "from_retriever":
        return lc.ThresholdedRetriever.from_retriever(
            single,  # its scores are unknown: re-scored with the store's model
            policy=POLICY.model_copy(update={"hybrid_policy": "rescore"}),
            embeddings=store.embeddings,
            docstore=leaky.langchain_docstore,
            filters=base,
        )
    return lc.MultiCollectionRetriever(
        collections=[lc.CollectionSpec(retriever=single, name="kb")], policy=POLICY
    )


PATHS = [
    (framework, shape, mode)
    for framework in ("llama_index", "langchain")
    for shape in ("single", "multi", "from_retriever")
    for mode in ("sync", "async")
]


_LOOP = asyncio.new_event_loop()
"""One event loop for every async call: a Milvus Lite async client stays on its first loop."""


def returned(retriever: Any, framework: str, mode: str, call: Any) -> list[tuple[str, dict]]:
    """Every section a call returns, kept and attached, with its metadata."""
    kwargs = {"filters": call} if call is not None else {}
    if mode == "sync":
        report = retriever.retrieve_with_report(QUESTION, **kwargs)
    else:
        report = _LOOP.run_until_complete(retriever.aretrieve_with_report(QUESTION, **kwargs))
    if framework == "llama_index":
        return [(n.node.node_id, n.node.metadata) for n in report.items]
    return [(d.id, d.metadata) for d in report.items]


def assert_public(found: list[tuple[str, dict]]) -> None:
    leaked = [i for i, meta in found if meta.get("doc_type") != "public" or i not in PUBLIC]
    assert leaked == [], f"internal sections returned: {leaked}"


def both(framework: str, condition: tuple[str, Any, Any]) -> Any:
    """A per-call filter of one condition, in the framework's form."""
    key, op, value = condition
    if framework == "llama_index":
        return MetadataFilters(filters=[MetadataFilter(key=key, value=value, operator=op)])
    return {key: {_DICT_OPS[op]: value}}


_DICT_OPS = {
    FilterOperator.EQ: "$eq",
    FilterOperator.NE: "$ne",
    FilterOperator.TEXT_MATCH: "$text_match",
    FilterOperator.NIN: "$nin",
}


def payload_conditions() -> list[tuple[str, Any, Any]]:
    conditions: list[tuple[str, Any, Any]] = []
    for value in PAYLOADS["values"]:
        conditions += [
            ("doc_type", FilterOperator.EQ, value),
            ("source", FilterOperator.NE, value),
            ("doc_type", FilterOperator.TEXT_MATCH, value),
            ("doc_type", FilterOperator.NIN, [value]),
        ]
    conditions += [(key, FilterOperator.NE, "public") for key in PAYLOADS["keys"]]
    return conditions


def test_the_catalogue_holds_at_least_forty_payloads() -> None:
    assert len(PAYLOADS["values"]) + len(PAYLOADS["keys"]) >= 40


# The suite ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", PATHS, ids="-".join)
def test_no_internal_section_on_any_path(leaky: Any, path: tuple[str, str, str]) -> None:
    framework, shape, mode = path
    build: Callable[..., Any] = llama if framework == "llama_index" else langchain
    public = PUBLIC_LI if framework == "llama_index" else PUBLIC_LC
    based = build(leaky, shape, public)
    unbased = build(leaky, shape, None)
    baseline = returned(based, framework, mode, None)
    assert_public(baseline)
    assert {"h0", "h2", "f0", "f1"} <= {i for i, _ in baseline}
    refused = 0
    for condition in payload_conditions():
        try:
            call = both(framework, condition)
            assert_public(returned(based, framework, mode, call))  # the retriever's + the call's
        except UnsafeFilterError:
            refused += 1
            continue
        # the call's own public filter, with the payload
        assert_public(returned(unbased, framework, mode, and_public(framework, call)))
    plain = {"doc_type", "source", "restricted_to", "_", "__proto__", "Doc_Type", "DOC_TYPE"}
    assert refused >= len(set(PAYLOADS["keys"]) - plain)


def and_public(framework: str, call: Any) -> Any:
    if framework == "llama_index":
        return MetadataFilters(filters=[PUBLIC_LI, call], condition=FilterCondition.AND)
    return {"$and": [PUBLIC_LC, call]}


# Grouped filters, as an agent writes them from a user's words ------------------------------------
def _c(key: str, op: FilterOperator, value: Any = None) -> MetadataFilter:
    return MetadataFilter(key=key, operator=op, value=value)


def _g(condition: FilterCondition, *filters: Any) -> MetadataFilters:
    return MetadataFilters(filters=list(filters), condition=condition)


OR, NOT, AND = FilterCondition.OR, FilterCondition.NOT, FilterCondition.AND
INTERNAL = _c("doc_type", FilterOperator.EQ, "internal")
GROUPED_LI = [
    _g(OR, INTERNAL, _c("source", FilterOperator.EQ, "ops")),  # the restricted key, widened
    _g(NOT, _c("doc_type", FilterOperator.EQ, "public")),
    _g(OR, _g(NOT, _c("restricted_to", FilterOperator.IS_EMPTY)), INTERNAL),
    _g(OR, _c("tags", FilterOperator.ANY, ["internal", "public"]), INTERNAL),
    _g(AND, _g(OR, INTERNAL, _g(NOT, INTERNAL))),  # always true
    _g(OR, _c("doc_type", FilterOperator.NIN, ["public"]), _c("doc_type", FilterOperator.NE, 1)),
]
GROUPED_LC = [
    {"$or": [{"doc_type": "internal"}, {"source": "ops"}]},
    {"$not": [{"doc_type": "public"}]},
    {"$or": [{"restricted_to": {"$is_empty": False}}, {"doc_type": "internal"}]},
    {"$or": [{"tags": {"$any": ["internal", "public"]}}, {"doc_type": "internal"}]},
    {"$and": [{"$or": [{"doc_type": "internal"}, {"$not": [{"doc_type": "internal"}]}]}]},
    {"$or": [{"doc_type": {"$nin": ["public"]}}, {"doc_type": {"$ne": 1}}]},
]


@pytest.mark.parametrize("path", PATHS, ids="-".join)
def test_grouped_call_filters_only_narrow_on_any_path(
    leaky: Any, path: tuple[str, str, str]
) -> None:
    """OR groups naming the restricted key, NOT of the retriever's own condition, IS_EMPTY
    and list tests in a call's filters narrow the public-only filter, never widen it."""
    framework, shape, mode = path
    build: Callable[..., Any] = llama if framework == "llama_index" else langchain
    public = PUBLIC_LI if framework == "llama_index" else PUBLIC_LC
    based = build(leaky, shape, public)
    found = [
        returned(based, framework, mode, call)
        for call in (GROUPED_LI if framework == "llama_index" else GROUPED_LC)
    ]
    for each in found:
        assert_public(each)
    assert {"h0", "h2", "f0", "f1"} <= {i for i, _ in found[4]}  # the group that always holds
