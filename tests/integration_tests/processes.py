"""Tests that run Python in a process of their own (another engine, a fresh interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def result_of(args: Sequence[str], *, path: Sequence[Path | str], timeout: float) -> Any:
    """Run ``python *args`` with ``path`` first on its ``PYTHONPATH``; what its first line
    starting ``RESULT `` holds (JSON). A run that printed none fails with its stderr."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, path), _pythonpath()])}
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, timeout=timeout
    )
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    assert lines, done.stderr[-3000:]
    return json.loads(lines[0].removeprefix("RESULT "))


def _pythonpath() -> str:
    return os.environ.get("PYTHONPATH", "")
