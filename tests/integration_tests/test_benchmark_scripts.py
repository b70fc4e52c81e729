"""The newest benchmark scripts run, on a few questions, and write what docs/benchmarks.md reads.

Figures are not checked (a benchmark is never a timed test); that the scripts still run
and report what they claim to is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def run(script: str, *args: str, results: Path) -> str:
    env = {**os.environ, "THRESHOLDED_BENCH_RESULTS": str(results), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / f"{script}.py"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_rerank_pipeline_reports_every_pipeline_for_both_groups(tmp_path):
    out = run(
        "rerank_pipeline",
        "--model",
        "minilm",
        "--limit",
        "6",
        "--rerank-every",
        "3",
        results=tmp_path,
    )
    assert "reranker head untrained" in out
    result = json.loads((tmp_path / "rerank_pipeline.json").read_text())["runs"][0]
    pipelines = result["pipelines"]
    assert len(pipelines) == 5
    baseline = pipelines["baseline (top 12)"]["answerable"]
    floor_only = pipelines["floor only (same 12 candidates)"]["answerable"]
    assert baseline["questions"] == 6 and baseline["pairs_reranked"] == 6 * 12
    # the floor never removes the answering passage the baseline hands on
    assert floor_only["gold_present_before_rerank"] == baseline["gold_present_before_rerank"]
    default = pipelines["thresholded (default policy)"]["unrelated"]
    assert default["pairs_reranked"] <= 6 * 4
    # the gate only ever empties a question: it hands on a subset of the floor's pairs
    for group in ("answerable", "unrelated"):
        gated = pipelines["floor + gate (same 12)"][group]
        alone = pipelines["floor only (same 12 candidates)"][group]
        assert gated["pairs_reranked"] <= alone["pairs_reranked"]
        assert gated["emptied"] >= alone["emptied"]
    assert result["min_top_similarity"] == 0.17


def test_end_to_end_hands_the_reranker_what_the_numpy_floor_does(tmp_path):
    out = run(
        "end_to_end",
        "--engine",
        "lite",
        "--vectors",
        "2000",
        "--questions",
        "2",
        results=tmp_path,
    )
    assert "numpy brute force" in out
    engine, floor = json.loads((tmp_path / "end_to_end.json").read_text())["rows"]
    assert engine["vectors"] == 2000 and engine["questions"] == 4
    assert engine["same_nodes_as_floor"] == 4
    assert floor["engine"] == "numpy brute force (floor)"
