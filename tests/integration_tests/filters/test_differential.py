"""Filters on Milvus Lite and through both adapters select exactly what the reference does.

See ``differential.py``. The venv's Milvus Lite 2.5 runs a few hundred generated trees in
this process; Milvus Lite 3.x, installed apart by ``make``, runs a smaller sample in a
process of its own. Only a list with EQ/NE, TEXT_MATCH_INSENSITIVE and an integer beyond
64 bits may be refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from differential import check, run

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
LITE3 = Path(os.environ.get("THRESHOLDED_MILVUS_LITE_3") or ROOT / ".bench" / "milvus-lite-3.2.2")


def test_milvus_lite_2_and_both_adapters_agree_with_the_reference(tmp_path: Path) -> None:
    stats = run(300, tmp_path)
    assert stats["dialect"] == "milvus-lite-2"
    check(stats, 300)


@pytest.mark.skipif(not (LITE3 / "milvus_lite").is_dir(), reason=f"no milvus-lite 3.x in {LITE3}")
def test_milvus_lite_3_and_both_adapters_agree_with_the_reference() -> None:
    path = os.pathsep.join([str(LITE3), str(ROOT), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("differential.py")), "80"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
        timeout=900,
    )
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    assert lines, done.stderr[-3000:]
    stats = json.loads(lines[0].removeprefix("RESULT "))
    assert stats["dialect"] == "milvus-modern"
    check(stats, 80)
