"""``thresholded bench`` on a small slice of the benchmark data, through the real pipeline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from thresholded.cli import main

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[2] / "data"


def _slice(tmp_path: Path) -> tuple[Path, Path]:
    corpus = [json.loads(line) for line in (DATA / "xquad-bench/corpus.jsonl").open()]
    questions = [json.loads(line) for line in (DATA / "xquad-bench/queries_dev.jsonl").open()]
    articles = sorted({q["title"] for q in questions if q["gold_group"]})[:2]
    passages = [p for p in corpus if p["title"] in articles or p["title"] < "C"]
    answerable = [q for q in questions if q["title"] in articles and q["lang"] == "en"][:20]
    answerable += [q for q in questions if q["title"] in articles and q["lang"] == "de"][:20]
    unrelated = [json.loads(line) for line in (DATA / "clinc-oos/queries_dev.jsonl").open()][:15]
    corpus_file, queries_file = tmp_path / "corpus.jsonl", tmp_path / "queries.jsonl"
    corpus_file.write_text("".join(json.dumps(p) + "\n" for p in passages))
    queries_file.write_text("".join(json.dumps(q) + "\n" for q in answerable + unrelated))
    return corpus_file, queries_file


@pytest.mark.parametrize("passages", ["en", "all"])
def test_bench_writes_the_figures(tmp_path: Path, passages: str, capsys) -> None:
    corpus, queries = _slice(tmp_path)
    out = tmp_path / "bench.json"
    argv = ["bench", "--corpus", str(corpus), "--queries", str(queries), "--model", "minilm"]
    argv += ["--passages", passages, "--threshold", "0.3", "--json", str(out)]
    assert main(argv) == 0
    result = json.loads(out.read_text())
    assert result["model"] == "sentence-transformers/all-MiniLM-L6-v2@384"
    assert result["threshold"] == 0.3
    expected_pairs = {f"en->{passages}", f"de->{passages}"}
    assert set(result["pairs"]) == expected_pairs
    for counts in result["pairs"].values():
        assert all(isinstance(v, int) for v in counts.values())
        assert counts["gold_lost"] <= counts["gold_in_candidates"] <= counts["answerable"]
        assert counts["unrelated_emptied"] <= counts["unrelated"]
        assert counts["candidates_dropped"] <= counts["candidates"]
        assert counts["context_chars_with"] <= counts["context_chars_without"]
    english = result["pairs"][f"en->{passages}"]
    assert english["unrelated"] == 15 and english["unrelated_emptied"] > 0
    assert english["candidates"] == (english["answerable"] + english["unrelated"]) * 12
    assert "gold lost" in capsys.readouterr().out


def test_bench_with_a_profile_of_another_model_is_refused(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """It was refused after every passage and question was embedded (minutes, on the
    benchmark data): it is refused first."""
    from llama_index_thresholded import bench

    def embedded(*args, **kwargs):
        raise AssertionError("the corpus was embedded before the profile's model was checked")

    monkeypatch.setattr(bench, "embedder_of", embedded)
    corpus, queries = _slice(tmp_path)
    profile = tmp_path / "profile.json"
    profile.write_text(
        json.dumps({"version": 1, "min_similarity": 0.35, "embedding_model": "BAAI/bge-m3@1024"})
    )
    argv = ["bench", "--corpus", str(corpus), "--queries", str(queries), "--model", "minilm"]
    argv += ["--passages", "en", "--profile", str(profile), "--json", str(tmp_path / "o.json")]
    assert main(argv) == 2
    assert "bge-m3" in capsys.readouterr().err
    assert not (tmp_path / "o.json").exists()


def test_bench_counts_what_the_gate_empties(tmp_path: Path) -> None:
    """With the floor off, the gate empties exactly the questions whose top score is below it."""
    from thresholded.calibration import calibrate, load_corpus, load_questions
    from thresholded.embedders import load_embedder

    corpus, queries = _slice(tmp_path)
    out = tmp_path / "bench.json"
    argv = ["bench", "--corpus", str(corpus), "--queries", str(queries), "--model", "minilm"]
    argv += ["--passages", "en", "--threshold", "0", "--gate", "0.3", "--json", str(out)]
    assert main(argv) == 0
    result = json.loads(out.read_text())
    assert result["gate"] == 0.3
    english = result["pairs"]["en->en"]

    measured = calibrate(
        load_embedder("minilm", progress=False),
        load_corpus(corpus),
        load_questions(queries),
        passages="en",
        question_langs=["en"],
    )
    (scores,) = measured.pairs
    assert english["unrelated_emptied"] == int((scores.junk < 0.3).sum()) > 0
    assert english["answerable_emptied"] == int((scores.good_top < 0.3).sum())
    assert english["gold_lost"] == int(
        ((scores.good_top < 0.3) & (scores.gold_rank[scores.answerable] <= 12)).sum()
    )
    assert english["candidates_dropped"] == 0  # the floor is off: every drop is the gate's


def test_bench_context_without_the_thresholds_has_the_gate_off_too(tmp_path: Path) -> None:
    """The context "without" was selected with the gate still on: with the floor off, the
    figures with and without were equal, however many questions the gate emptied."""
    corpus, queries = _slice(tmp_path)
    out = tmp_path / "bench.json"
    argv = ["bench", "--corpus", str(corpus), "--queries", str(queries), "--model", "minilm"]
    argv += ["--passages", "en", "--threshold", "0", "--gate", "0.3", "--json", str(out)]
    assert main(argv) == 0
    english = json.loads(out.read_text())["pairs"]["en->en"]
    assert english["unrelated_emptied"] > 0
    # without the gate, every emptied question keeps sections of real text
    emptied = english["unrelated_emptied"] + english["answerable_emptied"]
    assert english["context_chars_without"] - english["context_chars_with"] > emptied * 4 * 100
