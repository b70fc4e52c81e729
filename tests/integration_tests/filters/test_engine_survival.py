"""Every refused key, through every public filter path, in a process of its own: the key
raises ``UnsafeFilterError`` before any request, and the same engine keeps answering."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def test_refused_keys_never_reach_the_engine() -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("survive_keys.py"))],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    assert lines, done.stderr[-3000:]
    result = json.loads(lines[0].removeprefix("RESULT "))
    assert len(result["paths"]) == 8
    assert result["keys"] >= 60
    assert result["refused"] == result["tried"] == 8 * result["keys"]
    assert result["searches_after"] == result["tried"]  # the engine answered after each
