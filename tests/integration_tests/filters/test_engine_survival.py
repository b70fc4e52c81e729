"""Every refused key, through every public filter path, in a process of its own: the key
raises ``UnsafeFilterError`` before any request, and the same engine keeps answering."""

from __future__ import annotations

from pathlib import Path

import pytest
from processes import result_of

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def test_refused_keys_never_reach_the_engine() -> None:
    script = str(Path(__file__).with_name("survive_keys.py"))
    result = result_of([script], path=[ROOT], timeout=900)
    assert len(result["paths"]) == 8
    assert result["keys"] >= 60
    assert result["refused"] == result["tried"] == 8 * result["keys"]
    assert result["searches_after"] == result["tried"]  # the engine answered after each
