"""A bad number (or a blank text) on the command line is argparse's error naming the option,
before the command runs: no model loads, no index is built, and no pydantic error names a
field the user did not write."""

from __future__ import annotations

import re

import pytest

from thresholded import cli

BAD = [
    ("demo", "--top-k", "0", "must be at least 1"),
    ("demo", "--top-k", "two", "must be a whole number"),
    ("demo", "--neighbours", "-1", "must be at least 0"),
    ("demo", "--min-similarity", "1.5", r"cosine similarity in \[-1, 1\]"),
    ("demo", "--min-similarity", "35", r"cosine similarity in \[-1, 1\]"),
    ("demo", "--min-similarity", "nan", r"cosine similarity in \[-1, 1\]"),
    # a blank question was refused only after the knowledge base was indexed, and a blank
    # --doc-type (an unset shell variable) filtered nothing, showing every doc_type
    ("demo", "--question", "", "is blank"),
    ("demo", "--question", "  ", "is blank"),
    ("demo", "--doc-type", "", "is blank"),
    ("bench", "--top-k", "0", "must be at least 1"),
    ("bench", "--over-fetch", "0", "must be at least 1"),
    ("bench", "--max-per-source", "0", "must be at least 1"),
    ("bench", "--threshold", "2", r"cosine similarity in \[-1, 1\]"),
    ("calibrate", "--folds", "1", "must be at least 2"),
    ("calibrate", "--batch-size", "0", "must be at least 1"),
    ("calibrate", "--max-loss", "1", r"must lie in \[0, 1\)"),
]


@pytest.mark.parametrize(("command", "option", "value", "message"), BAD)
def test_a_bad_value_is_refused_naming_the_option(
    monkeypatch, capsys, command, option, value, message
):
    ran = []
    real = cli.build_parser

    def spied() -> object:
        parser = real()
        sub = next(a for a in parser._actions if hasattr(a, "choices") and a.choices)
        sub.choices[command].set_defaults(run=lambda args: ran.append(args) or 0)
        return parser

    monkeypatch.setattr(cli, "build_parser", spied)
    with pytest.raises(SystemExit) as exited:
        cli.main([command, f"{option}={value}"])
    assert exited.value.code == 2
    assert ran == []
    err = capsys.readouterr().err
    assert re.search(rf"argument (-\w/)?{option}:", err), err  # -q/--question: its short form
    assert re.search(message, err), err


BENCH = ["--corpus", "c", "--queries", "q", "--model", "m", "--json", "j"]
CALIBRATE = ["--corpus", "c", "--queries", "q", "--model", "m", "--out", "o"]


@pytest.mark.parametrize(
    ("argv", "field", "expected"),
    [
        (["demo", "--top-k", "3", "--neighbours", "0"], "top_k", 3),
        (["demo", "--min-similarity", "-0.2"], "min_similarity", -0.2),
        (["bench", *BENCH, "--threshold", "0.35", "--max-per-source", "1"], "max_per_source", 1),
        (["bench", *BENCH, "--threshold", "-1", "--gate", "1"], "gate", 1.0),
        (["calibrate", *CALIBRATE, "--folds", "2", "--batch-size", "1"], "folds", 2),
        # any language code, in both commands: bench took en, de and all only
        (["calibrate", *CALIBRATE, "--passages", "fr"], "passages", "fr"),
        (["bench", *BENCH, "--threshold", "0.35", "--passages", "fr"], "passages", "fr"),
    ],
)
def test_a_good_number_reaches_the_command(argv, field, expected):
    args = cli.build_parser().parse_args(argv)
    assert getattr(args, field) == expected


@pytest.mark.parametrize(("flag", "progress"), [([], True), (["--no-progress"], False)])
def test_bench_progress_bars_can_be_turned_off(monkeypatch, capsys, flag, progress):
    """As ``calibrate --no-progress``: a log or CI run of ``bench`` without the bars."""
    bench = pytest.importorskip("llama_index_thresholded.bench")
    calls: list[dict[str, object]] = []
    monkeypatch.setattr(bench, "run_bench", lambda **kwargs: calls.append(kwargs) or {})
    monkeypatch.setattr(bench, "format_bench", lambda result: "figures")
    assert cli.main(["bench", *BENCH, "--threshold", "0.3", *flag]) == 0
    assert [call["progress"] for call in calls] == [progress]
    assert capsys.readouterr().out == "figures\n"


def test_bench_without_progress_loads_its_model_without_the_loading_bar(monkeypatch):
    """As ``calibrate --no-progress``: transformers' "Loading weights" bar was printed by
    ``bench --no-progress`` all the same, and is on again after."""
    bench = pytest.importorskip("llama_index_thresholded.bench")
    bars = pytest.importorskip("transformers.utils.logging")
    seen: list[bool] = []

    class Loaded(Exception):
        pass

    def load(name: str) -> None:
        seen.append(bars.is_progress_bar_enabled())
        raise Loaded

    monkeypatch.setattr(bench, "load_embed_model", load)
    with pytest.raises(Loaded):
        bench.run_bench(corpus="c", queries=[], model="m", threshold=0.3, progress=False)
    assert seen == [False]
    assert bars.is_progress_bar_enabled()
