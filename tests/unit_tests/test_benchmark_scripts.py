"""Every benchmark script loads: its imports resolve against the package as it is now, so
a name moved in the package cannot leave a script that fails only when someone measures."""

from __future__ import annotations

import ast
import importlib
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


PACKAGES = ("thresholded", "llama_index_thresholded", "langchain_thresholded")


def _package_imports(script: Path) -> list[tuple[str, str]]:
    """Every ``from <package> import name`` of the script, those inside its functions too
    (which loading it does not run)."""
    found = []
    for node in ast.walk(ast.parse(script.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in PACKAGES:
            found += [(node.module, alias.name) for alias in node.names]
    return found


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_a_benchmark_scripts_package_names_exist(script: Path) -> None:
    """A name imported where it is used, in a function, fails only when someone measures."""
    missing = []
    for module, name in _package_imports(script):
        imported = importlib.import_module(module)
        if not hasattr(imported, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{module}.{name}")
    assert not missing, missing
