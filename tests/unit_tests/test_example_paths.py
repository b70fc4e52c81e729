"""The files and folders an example notebook's prose names are where it says."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "examples").glob("*.ipynb"))
# A backticked path relative to the repository: no spaces, calls, assignments or URLs.
_PATH = re.compile(r"`(?P<path>[\w.-]+/[\w./-]*)`")


def named_paths(notebook: Path) -> list[str]:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    prose = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return [m["path"] for m in _PATH.finditer(prose)]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_path_a_notebook_names_exists(notebook: Path) -> None:
    assert [p for p in named_paths(notebook) if not (ROOT / p).exists()] == []
