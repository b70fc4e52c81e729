"""LlamaIndex ``from_retriever`` on Milvus Lite: a restriction given as None or empty
never removes the wrapped retriever's (both used to let every internal section back)."""

from __future__ import annotations

from typing import Any

import pytest
from leak_data import POLICY, PUBLIC, QUESTION
from llama_index.core.retrievers import VectorIndexRetriever

import llama_index_thresholded as li

pytestmark = pytest.mark.integration

PUBLIC_SECTIONS = sorted(i for i in PUBLIC if "#" not in i)


def assert_public(retriever: Any) -> None:
    found = [(n.node.node_id, n.node.metadata) for n in retriever.retrieve(QUESTION)]
    leaked = [i for i, meta in found if meta.get("doc_type") != "public" or i not in PUBLIC]
    assert found and leaked == [], f"internal sections returned: {leaked}"


@pytest.mark.parametrize("given", [{"node_ids": None}, {"doc_ids": None}])
def test_ids_given_as_none_keep_the_wrapped_node_ids(leaky: Any, given: dict[str, Any]) -> None:
    wrapped = VectorIndexRetriever(leaky.llama_index, node_ids=PUBLIC_SECTIONS)
    assert_public(li.ThresholdedRetriever.from_retriever(wrapped, POLICY, neighbours=0, **given))


@pytest.mark.parametrize("given", [{"string_expr": ""}, {"string_expr": None}, None])
def test_an_empty_string_expr_keeps_the_wrapped_one(leaky: Any, given: Any) -> None:
    wrapped = VectorIndexRetriever(
        leaky.llama_index, vector_store_kwargs={"string_expr": 'doc_type == "public"'}
    )
    assert_public(
        li.ThresholdedRetriever.from_retriever(
            wrapped, POLICY, vector_store_kwargs=given, neighbours=1, parent_summaries=True
        )
    )
