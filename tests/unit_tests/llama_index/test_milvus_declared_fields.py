"""Filters on a declared field of a LlamaIndex Milvus store's collection are written for
its type, as LangChain's are (Milvus Lite).

``MilvusVectorStore(scalar_field_names=..., scalar_field_types=...)`` declares metadata
keys as fields of the collection (``doc_type`` VARCHAR, ``year`` INT64). The backend wrote
every key as a dynamic field's: ``{"year": 2021.5}``, a ``contains`` on the text field or a
text compared with the integer one failed with pymilvus's raw ``Invalid expr``.
"""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from llama_index_thresholded import ThresholdedRetriever
from llama_index_thresholded.backend import declared_fields
from thresholded.errors import UnsafeFilterError
from thresholded.filters.milvus import ValueKind


@pytest.fixture
def index(kit: Any, tmp_path: Any) -> Any:
    from pymilvus import DataType

    store = kit.milvus_store(
        str(tmp_path / "kb.db"),
        "kb",
        dim=kit.DIM,
        scalar_field_names=["doc_type", "year"],
        scalar_field_types=[DataType.VARCHAR, DataType.INT64],
    )
    section = kit.section("a", 0.9, doc_type="public", year=2021)
    return kit.build_index([section], kit.embedding(), store=store)


def retrieved(index: Any, kit: Any, condition: MetadataFilter) -> list[str]:
    filters = MetadataFilters(filters=[condition])
    policy = kit.policy(min_similarity=0.5)
    retriever = ThresholdedRetriever(
        index, policy, filters=filters, neighbours=0, parent_summaries=False
    )
    return [n.node.node_id for n in retriever.retrieve(kit.QUESTION)]


@pytest.mark.parametrize(
    ("condition", "named"),
    [
        (MetadataFilter(key="year", value=2021.5), r"2021\.5 on 'year', .* whole numbers"),
        (MetadataFilter(key="year", value="2021"), r"'2021' on 'year', .* whole numbers"),
        (MetadataFilter(key="doc_type", value=3), r"3 on 'doc_type', .* texts"),
        (
            MetadataFilter(key="doc_type", value="pub", operator=FilterOperator.CONTAINS),
            r"contains on 'doc_type', a declared scalar field",
        ),
    ],
)
def test_a_filter_milvus_cannot_run_on_a_declared_field_is_refused_by_name(
    index: Any, kit: Any, condition: MetadataFilter, named: str
) -> None:
    with pytest.raises(UnsafeFilterError, match=named):
        retrieved(index, kit, condition)


def test_a_filter_of_the_declared_field_s_type_holds(index: Any, kit: Any) -> None:
    assert retrieved(index, kit, MetadataFilter(key="year", value=2021)) == ["a"]
    assert retrieved(index, kit, MetadataFilter(key="year", value=2020)) == []
    assert retrieved(index, kit, MetadataFilter(key="doc_type", value="public")) == ["a"]


def test_the_declared_fields_are_read_from_the_collection(index: Any) -> None:
    declared = declared_fields(index.vector_store)
    kinds = dict(declared.kinds)
    assert kinds["year"] is ValueKind.WHOLE_NUMBER
    assert kinds["doc_type"] is ValueKind.TEXT
    assert {"year", "doc_type"} <= declared.scalars
    assert not declared.lists
