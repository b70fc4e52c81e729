"""``thresholded calibrate`` end to end with the packaged MiniLM model, on a small subset.

Three articles' English passages, ten English questions of each and thirty unrelated
questions (CLINC and XQuAD near-miss) are written to temporary files, so the run
takes seconds and checks the real model, the real files and the real profile.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from thresholded import CalibrationProfile, RetrievalPolicy
from thresholded.cli import main
from thresholded.commands import calibrate as calibrate_command

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[2] / "data"
ARTICLES = ("Apollo_program", "Pharmacy", "Warsaw")


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


@pytest.fixture(scope="module")
def subset(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("calibrate")
    corpus = [r for r in _rows(DATA / "xquad-bench" / "corpus.jsonl") if r["source"] in ARTICLES]
    xquad = _rows(DATA / "xquad-bench" / "queries_dev.jsonl")
    answerable = [
        q
        for article in ARTICLES
        for q in [r for r in xquad if r["title"] == article and r["lang"] == "en"][:10]
    ]
    near_miss = [r for r in xquad if r["gold_group"] is None and r["lang"] == "en"][::15][:15]
    clinc = _rows(DATA / "clinc-oos" / "queries_dev.jsonl")[::27][:15]
    return {
        "corpus": _write(root / "corpus.jsonl", corpus),
        "xquad": _write(root / "xquad-bench" / "queries_dev.jsonl", answerable + near_miss),
        "clinc": _write(root / "clinc-oos" / "queries_dev.jsonl", clinc),
        "root": root,
    }


@pytest.fixture(scope="module")
def load_once() -> Any:
    """The real loader, called once for the module: MiniLM takes seconds to load."""
    return functools.cache(calibrate_command.load_embedder)


def test_calibrate_minilm_writes_profile_and_plot(
    subset: dict[str, Path],
    load_once: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(calibrate_command, "load_embedder", load_once)
    out = subset["root"] / "profiles" / "minilm-en.json"
    png = subset["root"] / "minilm-en.png"
    argv = [
        "calibrate",
        "--corpus",
        str(subset["corpus"]),
        "--queries",
        str(subset["xquad"]),
        "--queries",
        str(subset["clinc"]),
        "--model",
        "minilm",
        "--passages",
        "en",
        "--collection",
        "xquad-subset",
        "--out",
        str(out),
        "--plot",
        str(png),
        "--folds",
        "3",
        "--no-progress",
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "under the lowest answering passage" in printed
    assert "| en->en | 30 |" in printed

    profile = CalibrationProfile.load(out)
    assert profile.embedding_model == "sentence-transformers/all-MiniLM-L6-v2@384"
    assert profile.mode == "never-lose" and profile.metric == "IP"
    table = profile.measurements["pairs"]["en->en"]
    assert table["n_answerable"] == 30 and table["n_unrelated"] == 30
    assert set(table["unrelated_by_origin"]) == {"clinc-oos", "xquad-bench"}
    assert profile.min_similarity <= table["answer_min"] - 0.02 + 1e-9
    assert profile.version == 2
    assert profile.min_similarity <= profile.min_top_similarity <= table["top_min"] - 0.02 + 1e-9
    assert profile.measurements["cross_validation"]["never-lose"]["folds"] == 3
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    policy = RetrievalPolicy.from_profile(out, collection="xquad-subset")
    assert policy.min_similarity == profile.min_similarity
    assert policy.min_top_similarity == profile.min_top_similarity

    assert main(argv) == 2  # an existing profile needs --force
    assert "--force" in capsys.readouterr().err


def test_calibrate_minilm_simple_form(
    subset: dict[str, Path],
    load_once: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(calibrate_command, "load_embedder", load_once)
    form = subset["root"] / "form.yaml"
    form.write_text(
        "should_match:\n"
        "  - When did the Apollo program land on the moon?\n"
        "  - What does a pharmacist do?\n"
        "should_not_match:\n"
        "  - Set an alarm for seven tomorrow morning\n"
        "  - What is my credit card balance?\n",
        encoding="utf-8",
    )
    out = subset["root"] / "simple.json"
    argv = [
        "calibrate",
        "--corpus",
        str(subset["corpus"]),
        "--queries",
        str(form),
        "--model",
        "minilm",
        "--passages",
        "en",
        "--out",
        str(out),
        "--no-progress",
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "Lowest should-match best score" in printed
    profile = CalibrationProfile.load(out)
    assert profile.measurements["form"] == "simple"
    assert len(profile.measurements["questions"]) == 4
