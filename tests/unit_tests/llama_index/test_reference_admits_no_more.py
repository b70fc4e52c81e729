"""The filter model admits no section LlamaIndex's own reference holds back, but where it
says so.

Both adapters judge every section with ``thresholded.filters.matches``. For any flat
``MetadataFilters`` (AND, OR or NOT over conditions) and any stored metadata, a section
``matches`` admits is one LlamaIndex's in-memory evaluation (``build_metadata_filter_fn``,
what its ``SimpleVectorStore`` applies) admits too, or one of the documented differences:

- LlamaIndex raises (an ordering or a text match on a value of another type), where the
  model reads "does not match", so that NOT holds;
- a bool meets a number (the model: a bool is not a number; Python: ``True == 1``);
- ``ALL []`` on a section without the key (all of no values);
- CONTAINS, ANY or ALL on a stored dict (a dict is not a list of values).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)
from llama_index.core.vector_stores.utils import build_metadata_filter_fn

from llama_index_thresholded.filters import to_filter
from thresholded.errors import UnsafeFilterError
from thresholded.filters import matches
from thresholded.filters.model import kind

STRINGS = st.sampled_from(["", "x", "X", "faq,x", "1"])
NUMBERS = st.sampled_from([0, 1, 1.0, 2.5])
SCALARS = STRINGS | NUMBERS | st.booleans()
STORED = st.one_of(
    SCALARS,
    SCALARS,  # most stored values are scalars
    st.lists(SCALARS, max_size=3),
    st.dictionaries(STRINGS, NUMBERS, max_size=2),
)
LIST_OPERATORS = (FilterOperator.IN, FilterOperator.NIN, FilterOperator.ANY, FilterOperator.ALL)


@st.composite
def conditions(draw: st.DrawFn) -> MetadataFilter:
    operator = draw(st.sampled_from(list(FilterOperator)))
    key = draw(st.sampled_from(("a", "a", "b")))
    if operator is FilterOperator.IS_EMPTY:
        value: Any = None
    elif operator in LIST_OPERATORS:
        value = draw(st.lists(STRINGS, max_size=3) | st.lists(NUMBERS, max_size=3))
    else:
        value = draw(STRINGS | NUMBERS)
    return MetadataFilter(key=key, operator=operator, value=value)


filters = st.builds(
    lambda conds, condition: MetadataFilters(filters=conds, condition=condition),
    st.lists(conditions(), min_size=1, max_size=3),
    st.sampled_from(list(FilterCondition)),
)
rows = st.fixed_dictionaries({"a": STORED}, optional={"b": STORED})
"""A row has ``a`` (most conditions name it) and may lack ``b``."""


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(filters, rows)
def test_what_the_model_admits_llama_index_admits_but_where_documented(given_filters, row):
    try:
        model = to_filter(given_filters)
    except UnsafeFilterError:
        return  # refused before any query: nothing is admitted
    if not matches(model, row):
        return
    try:
        theirs = build_metadata_filter_fn(lambda _: row, given_filters)("node")
    except TypeError:
        return  # LlamaIndex cannot compare them; the model reads "does not match"
    assert theirs or _documented(given_filters, row), (given_filters, row)


def _documented(given_filters: MetadataFilters, stored: dict[str, Any]) -> bool:
    """Whether one of the conditions meets a documented difference on this row."""
    return any(_differs(f, stored.get(f.key)) for f in given_filters.filters)


def _differs(condition: MetadataFilter, stored: Any) -> bool:
    values = condition.value if isinstance(condition.value, list) else [condition.value]
    items = stored if isinstance(stored, list) else [stored]
    kinds = {kind(v) for v in [*values, *items] if v is not None}
    if {"bool", "number"} <= kinds:
        return True  # a bool meets a number
    if condition.operator is FilterOperator.ALL and not values and stored is None:
        return True
    lists = (FilterOperator.CONTAINS, FilterOperator.ANY, FilterOperator.ALL)
    return condition.operator in lists and isinstance(stored, dict)
