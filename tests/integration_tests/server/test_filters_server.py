"""Filters on the Milvus 2.3.5 server select what the reference selects (a smaller sample
of the differential test, ``tests/integration_tests/filters/differential.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "filters"))

from differential import check, run

pytestmark = pytest.mark.integration


def test_the_server_and_both_adapters_agree_with_the_reference(milvus_server_uri: str) -> None:
    check(run(40, uri=milvus_server_uri), 40)


def test_the_server_reads_a_negative_number_as_an_argument(milvus_server_uri: str) -> None:
    """``json_contains(k, -1)`` is a syntax error on Milvus Lite 3; the writer sends
    ``(-1)``, which every engine reads."""
    from pymilvus import DataType, MilvusClient

    from thresholded.filters import Condition, Op, client_dialect, to_milvus

    client = MilvusClient(uri=milvus_server_uri)
    schema = client.create_schema(auto_id=False, enable_dynamic_field=True)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    index = client.prepare_index_params()
    index.add_index("v", metric_type="IP", index_type="FLAT")
    client.create_collection("negative_argument", schema=schema, index_params=index)
    try:
        client.insert(
            "negative_argument",
            [{"id": 1, "v": [1, 0], "k": [-1, 2]}, {"id": 2, "v": [0, 1], "k": [3]}],
        )
        client.load_collection("negative_argument")
        written = to_milvus(Condition("k", Op.CONTAINS, -1), client_dialect(client))
        rows = client.query(
            "negative_argument",
            filter=written.expr,
            output_fields=["id"],
            consistency_level="Strong",
        )
        assert [row["id"] for row in rows] == [1]
    finally:
        client.drop_collection("negative_argument")
