"""Integers in Milvus filters: compared as themselves, or refused before any query.

Milvus reads an integer literal as a signed 64-bit integer and clamps what lies beyond:
``n != 10**30`` would read as ``n != 2**63 - 1`` and leave out the row holding the largest
64-bit integer, which the reference keeps. ``-2**63`` is out of reach too: the lexer reads
the minus sign apart from 9223372036854775808. Such values are refused; every other
integer selects on Milvus Lite exactly the rows the reference does.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pymilvus import DataType, MilvusClient

from thresholded.errors import UnsafeFilterError
from thresholded.filters import Condition, Op, matches, to_milvus
from thresholded.filters.milvus import Dialect
from thresholded.milvus_expr import INT_LITERAL_LIMIT, literal

LIMIT = 2**63 - 1
BEYOND = [2**63, -(2**63), 2**64, -(2**64), 10**30, -(10**30)]
WITHIN = [LIMIT, -LIMIT, 2**62, -(2**62), 2**53 + 1, 0, -1]
STORED = {"max": LIMIT, "near-max": LIMIT - 1, "min": -LIMIT, "zero": 0, "big": 2**53 + 1}
COMPARISONS = [Op.EQ, Op.NE, Op.GT, Op.GTE, Op.LT, Op.LTE]


def test_the_limit_is_the_largest_64_bit_integer():
    assert INT_LITERAL_LIMIT == LIMIT


@pytest.mark.parametrize("value", WITHIN)
def test_integers_within_64_bits_are_written_as_they_are(value):
    assert literal(value) == str(value)


@pytest.mark.parametrize("value", BEYOND)
def test_integers_beyond_64_bits_are_refused_naming_the_value_and_the_range(value):
    with pytest.raises(UnsafeFilterError, match=rf"filter value {value} is beyond .*2\*\*63 - 1"):
        literal(value)


@given(st.integers())
def test_any_integer_is_written_exactly_or_refused(value):
    try:
        written = literal(value)
    except UnsafeFilterError:
        assert abs(value) > LIMIT
    else:
        assert int(written) == value


@pytest.mark.parametrize("dialect", list(Dialect))
@pytest.mark.parametrize("op", [*COMPARISONS, Op.IN, Op.NIN, Op.CONTAINS])
def test_every_dialect_refuses_them_before_any_query(dialect, op):
    value = (10**30,) if op in (Op.IN, Op.NIN) else 10**30
    with pytest.raises(UnsafeFilterError, match="beyond the integers"):
        to_milvus(Condition("n", op, value), dialect)


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    """The stored integers in an INT64 field ``n`` and in the dynamic (JSON) field ``v``."""
    client = MilvusClient(str(tmp_path_factory.mktemp("ints") / "ints.db"))
    schema = client.create_schema(auto_id=False, enable_dynamic_field=True)
    schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=16)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=2)
    schema.add_field("n", DataType.INT64)
    index = client.prepare_index_params()
    index.add_index("vec", metric_type="IP", index_type="FLAT")
    client.create_collection("ints", schema=schema, index_params=index)
    client.insert("ints", [{"id": i, "vec": [1.0, 0.0], "n": n, "v": n} for i, n in STORED.items()])
    yield client
    client.close()


def on_engine(client: MilvusClient, expr: str | None) -> set[str]:
    rows = client.query("ints", filter=expr or 'id != ""', output_fields=["id"], limit=100)
    return {r["id"] for r in rows}


@pytest.mark.parametrize("field", ["n", "v"])
@pytest.mark.parametrize("op", COMPARISONS)
def test_milvus_lite_agrees_with_the_reference_or_the_filter_is_refused(engine, field, op):
    dialect = Dialect.LITE_2
    for value in [*WITHIN, *BEYOND]:
        condition = Condition(field, op, value)
        try:
            written = to_milvus(condition, dialect)
        except UnsafeFilterError:
            assert abs(value) > LIMIT
            continue
        expected = {i for i, n in STORED.items() if matches(condition, {field: n})}
        assert on_engine(engine, written.expr) == expected, (written.expr, value)
