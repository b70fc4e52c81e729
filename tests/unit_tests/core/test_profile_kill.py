"""A calibration killed while it writes its profile leaves the old profile intact."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from thresholded.profile import CalibrationProfile

WRITER = """
import os, sys, time
from pathlib import Path
from thresholded.profile import CalibrationProfile

real_replace = os.replace
def slow_replace(src, dst):
    Path(sys.argv[2]).write_text("writing")  # tell the test the temp file is written
    time.sleep(60)
    real_replace(src, dst)
os.replace = slow_replace
CalibrationProfile(
    version=1, min_similarity=0.9, embedding_model="minilm@384"
).save(sys.argv[1], force=True)
"""


def test_a_killed_write_leaves_the_old_profile(tmp_path: Path) -> None:
    path = tmp_path / "profile.json"
    old = CalibrationProfile(version=1, min_similarity=0.33, embedding_model="minilm@384")
    old.save(path)
    before = path.read_bytes()
    flag = tmp_path / "flag"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(flag)])
    try:
        deadline = time.monotonic() + 60
        while not flag.exists():
            assert proc.poll() is None, "the writer ended before writing"
            assert time.monotonic() < deadline, "the writer never wrote"
            time.sleep(0.05)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert path.read_bytes() == before
    assert CalibrationProfile.load(path).min_similarity == 0.33
