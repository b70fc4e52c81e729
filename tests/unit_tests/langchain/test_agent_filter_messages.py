"""The errors for filters an LLM or an agent builds say what was given and what to give.

An empty top-level ``{"$and": []}`` (or ``Operation``) was said to be "inside a filter"; a
whole ``StructuredQuery`` was "got StructuredQuery"; a date as LangChain's query
constructor writes it (``{"date": "2024-01-01", "type": "date"}``) was "a value of type
dict". Each now names the problem and the fix.
"""

from __future__ import annotations

import datetime

import pytest
from langchain_core.structured_query import (
    Comparator,
    Comparison,
    Operation,
    Operator,
    StructuredQuery,
)

from langchain_thresholded.filters import to_filter
from thresholded.errors import UnsafeFilterError
from thresholded.filters import Condition, Op

DATE = {"date": "2024-01-01", "type": "date"}
"""A date as LangChain's query constructor writes it into a comparison's value."""
TOP_LEVEL = r"^(?!.*inside).*empty AND group.*give it conditions.*no filter"


@pytest.mark.parametrize(
    "empty", [{"$and": []}, Operation(operator=Operator.AND, arguments=[])], ids=["dict", "op"]
)
def test_an_empty_top_level_group_is_not_said_to_be_inside_a_filter(empty) -> None:
    with pytest.raises(UnsafeFilterError, match=TOP_LEVEL):
        to_filter(empty)


def test_a_whole_structured_query_is_refused_pointing_to_its_filter() -> None:
    wanted = Comparison(comparator=Comparator.EQ, attribute="doc_type", value="faq")
    query = StructuredQuery(query="refunds", filter=wanted, limit=None)
    with pytest.raises(TypeError, match=r"StructuredQuery.*pass its \.filter"):
        to_filter(query)
    assert to_filter(query.filter) == Condition("doc_type", Op.EQ, "faq")


DATE_FIX = r"a date .*2024-01-01.*as strings \('2024-01-01'.*or numbers"


@pytest.mark.parametrize(
    "filters",
    [
        Comparison(comparator=Comparator.GTE, attribute="published", value=DATE),
        {"published": {"$gte": DATE}},
        {"published": DATE},
        {"published": {"$in": [DATE]}},
    ],
    ids=["comparison", "dict", "dict-equal", "dict-in"],
)
def test_a_query_constructor_date_is_named_as_a_date(filters) -> None:
    with pytest.raises(UnsafeFilterError, match=DATE_FIX):
        to_filter(filters)


@pytest.mark.parametrize(
    "date", [datetime.date(2024, 1, 1), datetime.datetime(2024, 1, 1, 12, 30)], ids=str
)
def test_a_date_object_is_named_as_a_date(date) -> None:
    with pytest.raises(UnsafeFilterError, match=DATE_FIX):
        Condition("published", Op.LT, date)
