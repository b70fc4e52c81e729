"""Printable reports and plots of a calibration run.

Text is Markdown, so the measured tables can be pasted into documentation as
they are printed. Plots use matplotlib's Agg canvas directly (no pyplot, no
global backend switch), imported only when a plot is asked for.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from thresholded.files import atomic_write

if TYPE_CHECKING:
    from thresholded.calibration import (
        CalibrationResult,
        CurvePoint,
        SimpleCalibrationResult,
        Suggestion,
    )

__all__ = ["format_result", "format_simple", "plot_result"]

TEXT_STEP = 0.05


def _n(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _suggestion_rows(suggestions: dict[str, Suggestion], chosen: str) -> list[list[str]]:
    rows = []
    for mode, s in suggestions.items():
        label = mode if mode != "loss-budget" else f"loss-budget {_pct(s.max_loss)}"
        if mode == chosen:
            label = f"**{label}** (this run)"
        per_pair = ", ".join(f"{p} {_n(v, 2)}" for p, v in s.per_pair.items())
        rows.append([label, _n(s.threshold, 2), per_pair, s.note])
    return rows


def _curve_rows(
    curves: dict[str, tuple[CurvePoint, ...]], marks: dict[float, str]
) -> tuple[list[str], list[list[str]]]:
    pairs = list(curves)
    split = {pair: len(curves[pair][0].emptied_by_origin) > 1 for pair in pairs}
    header = ["threshold"]
    for pair in pairs:
        header += [f"{pair} lost", "emptied"]
        if split[pair]:
            header.append("emptied " + " / ".join(curves[pair][0].emptied_by_origin))
        header += ["candidates dropped"]
    rows = []
    first = curves[pairs[0]]
    for i, point in enumerate(first):
        t = point.threshold
        on_step = abs(t / TEXT_STEP - round(t / TEXT_STEP)) < 1e-6
        if not on_step and t not in marks:
            continue
        label = f"{t:.2f}" + (f" ({marks[t]})" if t in marks else "")
        row = [label]
        for pair in pairs:
            p = curves[pair][i]
            row += [f"{p.lost} ({_pct(p.lost_share)})", f"{p.emptied} ({_pct(p.emptied_share)})"]
            if split[pair]:
                row.append(" / ".join(_pct(v) for v in p.emptied_by_origin.values()))
            row.append(_pct(p.dropped_share))
        rows.append(row)
    return header, rows


def _marks(suggestions: dict[str, Suggestion]) -> dict[float, str]:
    marks: dict[float, str] = {}
    for mode, s in suggestions.items():
        if s.threshold is not None:
            key = round(s.threshold, 6)
            marks[key] = f"{marks[key]}, {mode}" if key in marks else mode
    return marks


def format_result(result: CalibrationResult) -> str:
    """The whole run as Markdown: table, trade-off, suggestions, cross-validated loss."""
    s = result.suggestion
    n_passages = result.extra.get("n_passages")
    out = [
        f"# Calibration of {result.model_id} over passages: {result.passages}"
        + (f" ({n_passages} passages)" if n_passages else ""),
        "",
    ]
    if s.threshold is not None:
        out.append(f"Suggested threshold ({result.mode}): **{s.threshold:.2f}**: {s.note}.")
    else:
        out.append(f"No threshold in mode {result.mode}: {s.note}.")
    out += ["", "## Answering passages and unrelated questions per pair", ""]
    k = result.top_k
    out += _table(
        [
            "pair",
            "answerable",
            "answering score range",
            "p1",
            "p5",
            "median",
            f"in top {k}",
            "unrelated",
            "unrelated best score range",
            "overlap",
        ],
        (
            [
                t.pair,
                str(t.n_answerable),
                f"{_n(t.answer_min)} – {_n(t.answer_max)}",
                _n(t.answer_p1),
                _n(t.answer_p5),
                _n(t.answer_median),
                _pct(t.in_top_k),
                str(t.n_unrelated),
                f"{_n(t.unrelated_min)} – {_n(t.unrelated_max)}",
                _n(t.overlap),
            ]
            for t in result.tables
        ),
    )
    origin_rows = [
        [t.pair, o.origin, str(o.n), f"{o.min:.3f} – {o.max:.3f}"]
        for t in result.tables
        for o in t.by_origin
    ]
    if origin_rows:
        out += ["", "Unrelated questions by set:", ""]
        out += _table(["pair", "set", "questions", "best score range"], origin_rows)
    skipped = [t for t in result.tables if t.no_allowed_gold]
    for t in skipped:
        out.append(f"\n{t.pair}: {t.no_allowed_gold} answerable questions had no allowed gold.")
    out += [
        "",
        "Overlap is the highest unrelated best score minus the lowest answering score: "
        "positive means no threshold separates them.",
        "",
        f"## Trade-off (every {TEXT_STEP:.2f}; lost = answering passages below the threshold, "
        f"emptied = unrelated questions whose best result is below it, candidates dropped = "
        f"share of the top {result.candidates} results of every question below it)",
        "",
    ]
    header, rows = _curve_rows(result.curves, _marks(result.suggestions))
    out += _table(header, rows)
    out += ["", "## Suggested thresholds", ""]
    out += _table(
        ["mode", "threshold", "per pair", "note"],
        _suggestion_rows(result.suggestions, result.mode),
    )
    cvs = [
        cv
        for cv in result.cross_validation.values()
        if cv.pairs and any(t is not None for t in cv.fold_thresholds)
    ]
    if cvs:
        conf = cvs[0].confidence
        out += [
            "",
            f"## Loss on unseen articles (cross-validation, {cvs[0].folds} folds grouped by "
            "article: each fold's threshold is chosen without its articles)",
            "",
        ]
        rows = []
        for cv in cvs:
            chosen = sorted({t for t in cv.fold_thresholds if t is not None})
            spread = (
                "none"
                if not chosen
                else (
                    f"{chosen[0]:.2f}" if len(chosen) == 1 else f"{chosen[0]:.2f}–{chosen[-1]:.2f}"
                )
            )
            for pc in cv.pairs.values():
                rows.append(
                    [
                        cv.mode,
                        pc.pair,
                        spread,
                        f"{pc.lost} / {pc.n}",
                        f"{pc.loss:.2%}",
                        f"{pc.binomial_upper:.2%}",
                        f"{pc.bootstrap_upper:.2%}",
                        f"{pc.emptied_share:.1%} of {pc.n_unrelated}",
                    ]
                )
        out += _table(
            [
                "mode",
                "pair",
                "fold thresholds",
                "lost",
                "estimated loss",
                f"{conf:.0%} upper (binomial)",
                f"{conf:.0%} upper (article bootstrap)",
                "unrelated emptied",
            ],
            rows,
        )
        out += [
            "",
            "These are estimates on the dev articles, not promises: the binomial bound treats "
            "questions as independent, the bootstrap resamples whole articles.",
        ]
    notes = [f"{cv.mode}: {cv.note}" for cv in result.cross_validation.values() if cv.note]
    if notes:
        out += ["", *(f"- {n}" for n in notes)]
    return "\n".join(out) + "\n"


def format_simple(result: SimpleCalibrationResult) -> str:
    """The simple form as Markdown: each question's best score, the two extremes, a suggestion."""
    out = [
        f"# Calibration of {result.model_id} on the simple form, passages: {result.passages}",
        "",
    ]
    rows = sorted(result.rows, key=lambda r: (not r.should_match, -r.top))
    out += _table(
        ["should", "best score", "best passage", "question"],
        (
            [
                "match" if r.should_match else "not match",
                f"{r.top:.3f}",
                r.top_pid,
                r.question.replace("|", "\\|"),
            ]
            for r in rows
        ),
    )
    hj = result.highest_junk
    out += [
        "",
        f"Lowest should-match best score: {result.lowest_good:.3f}; highest should-not-match "
        f"best score: {_n(hj)}.",
    ]
    sep = result.suggestions["separate"]
    if sep.threshold is not None:
        out.append(f"They separate: suggested threshold {sep.threshold:.3f} ({sep.note}).")
    else:
        out.append(f"No separating threshold: {sep.note}.")
    out += ["", "## Suggested thresholds", ""]
    out += _table(
        ["mode", "threshold", "per pair", "note"],
        _suggestion_rows(result.suggestions, result.mode),
    )
    out += [
        "",
        "Without gold passages a should-match question's best score stands in for its answer: "
        "a floor under it keeps the question from coming back empty, not its right passage.",
    ]
    return "\n".join(out) + "\n"


def plot_result(result: CalibrationResult | SimpleCalibrationResult, path: str | Path) -> Path:
    """Write a PNG: score distributions with the threshold, and the lost/emptied curve."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from thresholded.calibration import CalibrationResult

    path = Path(path)
    threshold = result.threshold
    if isinstance(result, CalibrationResult):
        panels = [
            (
                s.pair,
                s.good,
                {
                    o: s.junk[np.asarray(s.origins, dtype=object)[~s.answerable] == o]
                    for o in sorted(set(np.asarray(s.origins, dtype=object)[~s.answerable]))
                },
                result.curves[s.pair],
                "answering passages",
            )
            for s in result.pairs
        ]
    else:
        panels = [
            (
                "simple form",
                result.good,
                {"should not match": result.junk},
                result.curve,
                "should match (best score)",
            )
        ]
    fig = Figure(figsize=(12, 3.4 * len(panels)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(panels), 2, squeeze=False)
    values = [v for _, g, j, _, _ in panels for v in [g, *j.values()] if v.size]
    lo = min(float(v.min()) for v in values) - 0.02
    hi = max(float(v.max()) for v in values) + 0.02
    bins = np.linspace(lo, hi, 61)
    palette = ("tab:red", "tab:orange", "tab:purple", "tab:brown", "tab:pink", "tab:gray")
    origins = sorted({o for _, _, j, _, _ in panels for o in j})
    colour_of = {o: palette[i % len(palette)] for i, o in enumerate(origins)}
    for row, (title, good, junk, curve, good_label) in enumerate(panels):
        left, right = axes[row]
        left.hist(
            good, bins=bins, alpha=0.6, color="tab:green", label=f"{good_label} ({good.size})"
        )
        for origin, scores in junk.items():
            if scores.size:
                left.hist(
                    scores,
                    bins=bins,
                    histtype="step",
                    linewidth=1.6,
                    color=colour_of[origin],
                    label=f"unrelated best: {origin} ({scores.size})",
                )
        right.plot(
            [p.threshold for p in curve], [p.lost_share for p in curve], label="answers lost"
        )
        right.plot(
            [p.threshold for p in curve],
            [p.emptied_share for p in curve],
            label="unrelated emptied",
        )
        if any(p.dropped_share for p in curve):
            right.plot(
                [p.threshold for p in curve],
                [p.dropped_share for p in curve],
                linestyle=":",
                label="candidates dropped",
            )
        for ax in (left, right):
            if threshold is not None:
                ax.axvline(
                    threshold, color="black", linestyle="--", label=f"threshold {threshold:.2f}"
                )
            ax.legend(fontsize=7)
        left.set_title(f"{title}: cosine scores")
        left.set_xlabel("cosine")
        left.set_ylabel("questions")
        right.set_title(f"{title}: what a threshold costs and buys")
        right.set_xlabel("threshold")
        right.set_ylabel("share")
        right.set_ylim(-0.02, 1.02)
    fig.suptitle(f"{result.model_id}, passages: {result.passages}, mode: {result.mode}")
    atomic_write(path, lambda handle: fig.savefig(handle, format="png", dpi=110))
    return path
