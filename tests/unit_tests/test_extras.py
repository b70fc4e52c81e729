"""Extras: each names its modules, and a command without its extra says what to install."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from thresholded import extras
from thresholded.cli import main
from thresholded.errors import MissingExtraError

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_every_extra_named_in_code_is_declared() -> None:
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    assert set(extras.EXTRA_MODULES) <= set(declared)


def test_the_core_depends_on_no_framework_and_no_store() -> None:
    core = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    names = " ".join(core)
    for heavy in ("llama-index", "langchain", "pymilvus", "milvus-lite", "torch"):
        assert heavy not in names


def test_a_missing_extra_is_named_with_its_pip_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(extras.EXTRA_MODULES, "demo", ("thresholded_no_such_module",))
    with pytest.raises(MissingExtraError) as info:
        extras.require("demo", "thresholded demo")
    assert "thresholded_no_such_module" in str(info.value)
    assert "pip install 'thresholded-retrieval[demo]'" in str(info.value)


def test_a_missing_parent_package_counts_as_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(extras.EXTRA_MODULES, "minilm", ("no_such_parent.child",))
    assert not extras.is_installed("minilm")


@pytest.mark.parametrize(("command", "extra"), [("demo", "demo"), ("bench", "llama-index-milvus")])
def test_a_command_without_its_extra_exits_with_the_pip_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str, extra: str
) -> None:
    monkeypatch.setitem(extras.EXTRA_MODULES, extra, ("thresholded_no_such_module",))
    args = {
        "demo": ["demo"],
        "bench": [
            "bench",
            "--corpus",
            "c",
            "--queries",
            "q",
            "--model",
            "m",
            "--threshold",
            "0.3",
            "--json",
            "out.json",
        ],
    }[command]
    assert main(args) == 2
    assert f"pip install 'thresholded-retrieval[{extra}]'" in capsys.readouterr().err


def test_calibrate_without_any_framework_names_both(monkeypatch: pytest.MonkeyPatch) -> None:
    from thresholded.embedders import load_embedder

    monkeypatch.setitem(extras.EXTRA_MODULES, "llama-index", ("thresholded_no_such_module",))
    monkeypatch.setitem(extras.EXTRA_MODULES, "langchain", ("thresholded_no_such_module",))
    with pytest.raises(MissingExtraError) as info:
        load_embedder("minilm")
    for extra in ("llama-index", "langchain"):
        assert f"pip install 'thresholded-retrieval[{extra}]'" in str(info.value)
