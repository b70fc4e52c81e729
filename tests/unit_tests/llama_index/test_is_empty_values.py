"""IS_EMPTY takes no value: LlamaIndex ignores it, and so did the filters.

``MetadataFilter(key="clearance", operator="is_empty", value="false")`` (an agent's or a
JSON form's "is not empty"; LlamaIndex refuses a bool) still meant "is empty": the
sections without a clearance came back, the opposite of what its writer meant.
"""

from __future__ import annotations

import pytest
from llama_index.core.vector_stores.types import (
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from llama_index_thresholded import ThresholdedRetriever
from llama_index_thresholded.filters import to_filter
from thresholded.errors import UnsafeFilterError
from thresholded.filters import Condition, Op


def is_empty(value):
    return MetadataFilters(
        filters=[MetadataFilter(key="clearance", operator=FilterOperator.IS_EMPTY, value=value)]
    )


@pytest.mark.parametrize("value", ["false", "no", "", 0, 1, ["x"]])
def test_is_empty_with_a_value_is_refused(kit, value) -> None:
    index = kit.build_index(
        [
            kit.section("open", 0.9, axis=1, text="Open section."),
            kit.section("staff", 0.9, axis=2, clearance="staff", text="Staff section."),
        ],
        kit.embedding(),
    )
    with pytest.raises(UnsafeFilterError, match=r"is_empty on 'clearance' takes no value"):
        ThresholdedRetriever(index, kit.policy(min_similarity=0.0), filters=is_empty(value))
    retriever = ThresholdedRetriever(index, kit.policy(min_similarity=0.0))
    with pytest.raises(UnsafeFilterError, match=r"takes no value"):
        retriever.retrieve_with_report(kit.QUESTION, filters=is_empty(value))


def test_is_empty_without_a_value() -> None:
    (condition,) = to_filter(is_empty(None)).children
    assert condition == Condition("clearance", Op.IS_EMPTY)
