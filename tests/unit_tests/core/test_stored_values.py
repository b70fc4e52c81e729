"""Stored values are compared as the built-in values they stand for, as filter values are.

An in-memory store keeps metadata as it was given: numpy scalars and arrays (rows of a
data frame), ``Decimal`` (a database row). Read as other types than the filter's value,
``tenant != 7`` held for a stored ``np.int64(7)``: the one tenant the filter leaves out
came back, through NE, NIN and every NOT.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from thresholded.filters import Combine, Condition, Group, Op, matches

SEVEN = [np.int64(7), np.int32(7), np.float64(7.0), Decimal(7), Decimal("7.0"), Fraction(7)]


@pytest.mark.parametrize("stored", SEVEN, ids=repr)
def test_a_stored_seven_is_seven(stored) -> None:
    row = {"tenant": stored}
    assert matches(Condition("tenant", Op.EQ, 7), row)
    assert not matches(Condition("tenant", Op.NE, 7), row)
    assert not matches(Condition("tenant", Op.NIN, (7, 8)), row)
    assert not matches(Group(Combine.NOT, (Condition("tenant", Op.IN, (7,)),)), row)
    assert matches(Condition("tenant", Op.GTE, 7), row)


@pytest.mark.parametrize(
    ("tags", "none"), [(np.array(["internal", "hr"]), np.array([])), ({"internal", "hr"}, set())]
)
def test_a_stored_array_or_set_is_a_list(tags, none) -> None:
    row = {"tags": tags, "none": none}
    assert matches(Condition("tags", Op.CONTAINS, "internal"), row)
    assert not matches(Group(Combine.NOT, (Condition("tags", Op.CONTAINS, "internal"),)), row)
    assert matches(Condition("none", Op.IS_EMPTY), row)


def test_numpy_bools_and_strings_are_theirs() -> None:
    row = {"flag": np.bool_(True), "kind": np.str_("internal")}
    assert not matches(Condition("flag", Op.NE, True), row)
    assert not matches(Condition("flag", Op.EQ, 1), row)
    assert not matches(Condition("kind", Op.NE, "internal"), row)


def test_a_number_that_is_not_whole_is_its_nearest_float() -> None:
    assert matches(Condition("x", Op.EQ, 0.5), {"x": Decimal("0.5")})
    assert matches(Condition("x", Op.LT, 0.5), {"x": Decimal("0.25")})
    assert matches(Condition("x", Op.NE, "0.5"), {"x": Decimal("0.5")})
