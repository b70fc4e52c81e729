"""Printable reports of a calibration run: floor and gate, as Markdown.

Text is Markdown, so the measured tables can be pasted into documentation as
they are printed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from thresholded.calibration.markdown import (
    TEXT_STEP,
    curve_rows,
    marks,
    n,
    pct,
    suggestion_rows,
    table,
)

if TYPE_CHECKING:
    from thresholded.calibration.result import CalibrationResult
    from thresholded.calibration.simple import SimpleCalibrationResult

__all__ = ["format_result", "format_simple"]


def _headline(result: CalibrationResult | SimpleCalibrationResult) -> list[str]:
    s, g = result.suggestion, result.gate_suggestion
    out = []
    if s.threshold is not None:
        out.append(f"Suggested floor ({result.mode}): **{s.threshold:.2f}**: {s.note}.")
    else:
        out.append(f"No floor in mode {result.mode}: {s.note}.")
    if g is not None and g.threshold is not None:
        out.append(f"Suggested gate ({result.mode}): **{g.threshold:.2f}**: {g.note}.")
    elif g is not None:
        out.append(f"No gate in mode {result.mode}: {g.note}.")
    return out


def _pair_table(result: CalibrationResult) -> list[str]:
    k = result.top_k
    out = table(
        [
            "pair",
            "answerable",
            "answering score range",
            "p1",
            "p5",
            "median",
            f"in top {k}",
            "lowest top score",
            "top p1",
            "unrelated",
            "unrelated best score range",
            "overlap",
        ],
        (
            [
                t.pair,
                str(t.n_answerable),
                f"{n(t.answer_min)} – {n(t.answer_max)}",
                n(t.answer_p1),
                n(t.answer_p5),
                n(t.answer_median),
                pct(t.in_top_k),
                n(t.top_min),
                n(t.top_p1),
                str(t.n_unrelated),
                f"{n(t.unrelated_min)} – {n(t.unrelated_max)}",
                n(t.overlap),
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
        out += table(["pair", "set", "questions", "best score range"], origin_rows)
    for t in result.tables:
        if t.no_allowed_gold:
            out.append(f"\n{t.pair}: {t.no_allowed_gold} answerable questions had no allowed gold.")
    return [
        *out,
        "",
        "Overlap is the highest unrelated best score minus the lowest answering score: "
        "positive means no floor separates them. The lowest top score is the best result "
        "of the hardest answerable question: the gate must stay under it.",
    ]


def _curves(result: CalibrationResult) -> list[str]:
    out = [
        f"## Trade-off of the floor (every {TEXT_STEP:.2f}; lost = answering passages below "
        f"it, emptied = unrelated questions whose best result is below it, candidates "
        f"dropped = share of the top {result.candidates} results of every question below it)",
        "",
    ]
    out += table(*curve_rows(result.curves, marks(result.suggestions)))
    if result.gate_curves:
        out += [
            "",
            f"## Trade-off of the gate (every {TEXT_STEP:.2f}; lost = answerable questions "
            "whose top score is below it, emptied = unrelated questions whose best result is "
            "below it)",
            "",
        ]
        header, rows = curve_rows(result.gate_curves, marks(result.gate_suggestions))
        drop = [i for i, h in enumerate(header) if h == "candidates dropped"]
        out += table(
            [h for i, h in enumerate(header) if i not in drop],
            ([c for i, c in enumerate(r) if i not in drop] for r in rows),
        )
    return out


def _suggestion_tables(result: CalibrationResult | SimpleCalibrationResult) -> list[str]:
    out = ["## Suggested floors", ""]
    out += table(
        ["mode", "floor", "per pair", "note"], suggestion_rows(result.suggestions, result.mode)
    )
    if result.gate_suggestions:
        out += ["", "## Suggested gates", ""]
        out += table(
            ["mode", "gate", "per pair", "note"],
            suggestion_rows(result.gate_suggestions, result.mode),
        )
    return out


def _span(values: Sequence[float | None]) -> str:
    chosen = sorted({t for t in values if t is not None})
    if not chosen:
        return "none"
    return f"{chosen[0]:.2f}" if len(chosen) == 1 else f"{chosen[0]:.2f}–{chosen[-1]:.2f}"


def _by_origin(floor: dict[str, float], both: dict[str, float]) -> str:
    return ", ".join(f"{o} {floor.get(o, 0.0):.1%} → {v:.1%}" for o, v in both.items())


def _cross_validation(result: CalibrationResult) -> list[str]:
    cvs = [
        cv
        for cv in result.cross_validation.values()
        if cv.pairs and any(t is not None for t in (*cv.fold_thresholds, *cv.fold_gates))
    ]
    if not cvs:
        return []
    conf = cvs[0].confidence
    rows = [
        [
            cv.mode,
            pc.pair,
            _span(cv.fold_thresholds),
            _span(cv.fold_gates),
            f"{pc.lost} / {pc.n}",
            f"{pc.lost_floor}",
            f"{pc.answerable_emptied}",
            f"{pc.loss:.2%}",
            f"{pc.binomial_upper:.2%}",
            f"{pc.bootstrap_upper:.2%}",
            f"{pc.emptied_floor_share:.1%} → {pc.emptied_share:.1%} of {pc.n_unrelated}",
            _by_origin(pc.emptied_floor_by_origin, pc.emptied_by_origin),
        ]
        for cv in cvs
        for pc in cv.pairs.values()
    ]
    out = [
        f"## Loss on unseen articles (cross-validation, {cvs[0].folds} folds grouped by "
        "article: each fold's floor and gate are chosen without its articles)",
        "",
    ]
    out += table(
        [
            "mode",
            "pair",
            "fold floors",
            "fold gates",
            "lost (floor or gate)",
            "to the floor",
            "answerable emptied",
            "estimated loss",
            f"{conf:.0%} upper (binomial)",
            f"{conf:.0%} upper (article bootstrap)",
            "unrelated emptied: floor → floor + gate",
            "by set: floor → floor + gate",
        ],
        rows,
    )
    return [
        *out,
        "",
        "An answering passage is lost when the floor drops it or the gate empties its "
        "question. These are estimates on the dev articles, not promises: the binomial bound "
        "treats questions as independent, the bootstrap resamples whole articles.",
    ]


def format_result(result: CalibrationResult) -> str:
    """The whole run as Markdown: table, trade-offs, suggestions, cross-validated loss."""
    n_passages = result.extra.get("n_passages")
    out = [
        f"# Calibration of {result.model_id} over passages: {result.passages}"
        + (f" ({n_passages} passages)" if n_passages else ""),
        "",
        *_headline(result),
        "",
        "## Answering passages and unrelated questions per pair",
        "",
        *_pair_table(result),
        "",
        *_curves(result),
        "",
        *_suggestion_tables(result),
    ]
    cv = _cross_validation(result)
    if cv:
        out += ["", *cv]
    notes = [f"{cv.mode}: {cv.note}" for cv in result.cross_validation.values() if cv.note]
    if notes:
        out += ["", *(f"- {note}" for note in notes)]
    return "\n".join(out) + "\n"


def format_simple(result: SimpleCalibrationResult) -> str:
    """The simple form as Markdown: each question's scores, the two extremes, floor and gate."""
    out = [
        f"# Calibration of {result.model_id} on the simple form, passages: {result.passages}",
        "",
        *_headline(result),
        "",
    ]
    rows = sorted(result.rows, key=lambda r: (not r.should_match, -r.top))
    out += table(
        ["should", "best score", "best passage", "gold score", "question"],
        (
            [
                "match" if r.should_match else "not match",
                f"{r.top:.3f}",
                r.top_pid,
                "–" if r.gold_score is None else f"{r.gold_score:.3f} ({r.gold})",
                r.question.replace("|", "\\|"),
            ]
            for r in rows
        ),
    )
    hj = result.highest_junk
    out += [
        "",
        f"Lowest should-match best score: {result.lowest_good:.3f}; highest should-not-match "
        f"best score: {n(hj)}.",
    ]
    sep = result.gate_suggestions["separate"]
    if sep.threshold is not None:
        out.append(f"They separate: a gate at {sep.threshold:.3f} ({sep.note}).")
    else:
        out.append(f"No separating gate: {sep.note}.")
    out += ["", *_suggestion_tables(result), ""]
    if result.has_gold:
        out.append(
            "The floor comes from the gold passages named in the form, and from the best "
            "scores of the should-match questions that name none."
        )
    else:
        out.append(
            "Without gold passages a should-match question's best score stands in for its "
            "answer: the floor then equals the gate and keeps every should-match question from "
            "coming back empty, not every passage that answers it. Name the answering section "
            "(`gold:`) to measure a floor."
        )
    return "\n".join(out) + "\n"
