"""Markdown pieces of a report: numbers, tables, suggestion rows and trade-off rows."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from thresholded.calibration.curve import CurvePoint
    from thresholded.calibration.floor import Suggestion

__all__ = ["TEXT_STEP", "curve_rows", "marks", "n", "pct", "suggestion_rows", "table"]

TEXT_STEP = 0.05


def n(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def suggestion_rows(suggestions: dict[str, Suggestion], chosen: str) -> list[list[str]]:
    rows = []
    for mode, s in suggestions.items():
        label = mode if mode != "loss-budget" else f"loss-budget {pct(s.max_loss)}"
        if mode == chosen:
            label = f"**{label}** (this run)"
        per_pair = ", ".join(f"{p} {n(v, 2)}" for p, v in s.per_pair.items())
        rows.append([label, n(s.threshold, 2), per_pair, s.note])
    return rows


def curve_rows(
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
            row += [f"{p.lost} ({pct(p.lost_share)})", f"{p.emptied} ({pct(p.emptied_share)})"]
            if split[pair]:
                row.append(" / ".join(pct(v) for v in p.emptied_by_origin.values()))
            row.append(pct(p.dropped_share))
        rows.append(row)
    return header, rows


def marks(suggestions: dict[str, Suggestion]) -> dict[float, str]:
    marks: dict[float, str] = {}
    for mode, s in suggestions.items():
        if s.threshold is not None:
            key = round(s.threshold, 6)
            marks[key] = f"{marks[key]}, {mode}" if key in marks else mode
    return marks
