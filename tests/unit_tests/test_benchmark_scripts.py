"""Every benchmark script loads: its imports resolve against the package as it is now, so
a name moved in the package cannot leave a script that fails only when someone measures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))


def test_there_are_benchmark_scripts() -> None:
    assert len(SCRIPTS) >= 10, SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_a_benchmark_script_imports(script: Path) -> None:
    """The script's module is run, not its ``__main__`` block: nothing is measured."""
    load = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='benchmark')"
    done = subprocess.run(
        [sys.executable, "-c", load, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=BENCHMARKS,
    )
    assert done.returncode == 0, done.stderr[-2000:]
