"""Every example notebook runs top to bottom, offline, in a fresh python3 kernel."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.notebook]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NOTEBOOKS = sorted(EXAMPLES.glob("*.ipynb"))

# What a notebook must print, beyond running without an error.
EXPECTED_OUTPUT = {
    "llama_index_quickstart.ipynb": [
        "floor: 0.33",  # the knowledge base's calibrated MiniLM floor
        "refund-policy",  # the refund question's source
        "nothing matched",  # the weather question's report
        "No relevant information found.",  # the abstaining engine's answer
        "I don't know. Our support team is at help@example.com.",  # the chat engine's
    ],
    "langchain_quickstart.ipynb": [
        "refund-policy",  # the refund question's source
        "I don't know. Our support team is at help@example.com.",  # AbstainingChain's answer
    ],
}


def printed(notebook: object) -> str:
    chunks = []
    for cell in notebook.cells:  # type: ignore[attr-defined]
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            chunks.append(output.get("text", ""))
            chunks.append(output.get("data", {}).get("text/plain", ""))
    return "\n".join(chunks)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")

    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the kernel inherits the environment
    client = nbclient.NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(EXAMPLES)}},
    )
    client.execute()  # raises CellExecutionError, naming the cell, when a cell fails

    code_cells = [c for c in notebook.cells if c.cell_type == "code"]
    assert code_cells, f"{path.name} has no code"
    assert all(c.execution_count is not None for c in code_cells)
    text = printed(notebook)
    for expected in EXPECTED_OUTPUT.get(path.name, []):
        assert expected in text, f"{path.name} did not print {expected!r}"
