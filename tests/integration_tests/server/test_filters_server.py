"""Filters on the Milvus 2.3.5 server select what the reference selects (a smaller sample
of the differential test, ``tests/integration_tests/filters/differential.py``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "filters"))

from differential import run

pytestmark = pytest.mark.integration

MAY_BE_REFUSED = {"EQ with a list", "NE with a list", "TEXT_MATCH_INSENSITIVE"}


def test_the_server_and_both_adapters_agree_with_the_reference(milvus_server_uri: str) -> None:
    stats = run(40, uri=milvus_server_uri)
    print(json.dumps({k: stats[k] for k in ("dialect", "cases", "compared", "refused", "inexact")}))
    assert stats["cases"] == 40
    assert stats["mismatches"] == []
    assert set(stats["refused"]) <= MAY_BE_REFUSED, stats["refused"]
    assert stats["compared"] >= 20
