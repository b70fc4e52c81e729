"""``$is_empty`` takes a bool: any other value was read by its truth, silently.

``{"$is_empty": "false"}`` (a string, as an agent or a JSON form writes it) meant "is
empty", and ``{"$is_empty": None}`` or ``0`` meant "is not empty": the filter applied the
opposite of what its writer meant, with no error.
"""

from __future__ import annotations

import pytest

from langchain_thresholded.filters import to_filter
from thresholded.errors import UnsafeFilterError
from thresholded.filters import Combine, Condition, Group, Op


@pytest.mark.parametrize("value", ["false", "true", "", None, 0, 1, [], ["x"]])
def test_is_empty_with_a_value_that_is_not_a_bool_is_refused(value) -> None:
    with pytest.raises(UnsafeFilterError, match=r"\$is_empty on 'clearance' takes True"):
        to_filter({"clearance": {"$is_empty": value}})


def test_is_empty_with_a_bool() -> None:
    empty = Condition("clearance", Op.IS_EMPTY)
    assert to_filter({"clearance": {"$is_empty": True}}) == empty
    assert to_filter({"clearance": {"$is_empty": False}}) == Group(Combine.NOT, (empty,))
