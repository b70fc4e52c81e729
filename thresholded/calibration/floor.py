"""The floor's suggestion: one cosine under the answering passages, per mode.

A floor judges every candidate on its own, so it must sit under the lowest
*answering* score, the score of the passage that answers the question. One floor
covers every pair of a run: the lowest of the pairs' floors.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from thresholded.calibration.modes import DEFAULT_MAX_LOSS, MODES, Mode, in_force, margin_of
from thresholded.calibration.rounding import floor_to
from thresholded.calibration.rounding import rounded as _r

__all__ = ["Suggestion", "budget_floor", "suggest", "suggest_separate"]


@dataclass(frozen=True)
class Suggestion:
    """A threshold suggested by one mode, per pair and for the whole run (or why none).

    The same record serves the floor and the gate: for the gate ``lowest_good`` is
    the lowest top score of an answerable question.
    """

    mode: Mode
    threshold: float | None
    per_pair: dict[str, float | None]
    lowest_good: float | None = None
    highest_junk: float | None = None
    note: str = ""
    margin: float | None = None
    max_loss: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "threshold": _r(self.threshold),
            "per_pair": {k: _r(v) for k, v in self.per_pair.items()},
            "lowest_good": _r(self.lowest_good),
            "highest_junk": _r(self.highest_junk),
            "margin": _r(self.margin),
            "max_loss": _r(self.max_loss),
            "note": self.note,
        }


def budget_floor(good: np.ndarray, max_loss: float) -> float:
    """The highest score such that fewer than ``max_loss`` of ``good`` lie below it."""
    allowed = math.floor(max_loss * good.size + 1e-9)
    return float(np.sort(good)[min(allowed, good.size - 1)])


def suggest(
    mode: Mode,
    good: Mapping[str, np.ndarray],
    junk: Mapping[str, np.ndarray],
    *,
    margin: float | None = None,
    max_loss: float = DEFAULT_MAX_LOSS,
    resolution: float = 0.01,
) -> Suggestion:
    """The threshold of one mode, from answering scores and unrelated best scores per pair.

    never-lose: lowest answering score minus ``margin`` (default 0.02). loss-budget:
    the highest threshold that loses at most ``max_loss`` of each pair's answering
    passages, minus ``margin`` (default 0: one outlier below may be lost, that is
    what the budget is for). separate: midpoint between the lowest answering and the
    highest unrelated score, only where they do not overlap. One threshold covers
    every pair: the lowest of the pairs' (separate: the midpoint of the joint gap).
    Thresholds are rounded down to ``resolution`` so rounding never eats the margin.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")
    answered = {p: g for p, g in good.items() if g.size}
    lowest = min((float(g.min()) for g in answered.values()), default=None)
    highest = max((float(j.max()) for j in junk.values() if j.size), default=None)
    if mode == "separate":
        return suggest_separate(good, junk, lowest, highest)
    used_margin = margin_of(mode, margin)
    budget = max_loss if mode == "loss-budget" else None
    if not answered:
        return Suggestion(
            mode,
            None,
            dict.fromkeys(good),
            lowest,
            highest,
            "no answerable questions",
            used_margin,
            budget,
        )
    per_pair: dict[str, float | None] = {}
    for pair, g in good.items():
        if not g.size:
            per_pair[pair] = None
            continue
        base = float(g.min()) if mode == "never-lose" else budget_floor(g, max_loss)
        per_pair[pair] = floor_to(base - used_margin, resolution)
    threshold = max(-1.0, min(v for v in per_pair.values() if v is not None))
    assert lowest is not None
    if mode == "never-lose":
        note = f"leaves a margin of {lowest - threshold:.3f} under the lowest answering passage"
    else:
        cut = in_force(threshold)
        lost = sum(int((g < cut).sum()) for g in answered.values())
        worst = max(float((g < cut).mean()) for g in answered.values())
        note = (
            f"loses {lost} answering passage(s) on these questions, at most {worst:.2%} of a "
            f"pair (budget {max_loss:.2%} per pair, margin {used_margin:.3f})"
        )
    return Suggestion(mode, threshold, per_pair, lowest, highest, note, used_margin, budget)


def suggest_separate(
    good: Mapping[str, np.ndarray],
    junk: Mapping[str, np.ndarray],
    lowest: float | None,
    highest: float | None,
) -> Suggestion:
    """The midpoint of the gap between answers and unrelated questions, or why there is none."""
    per_pair: dict[str, float | None] = {}
    for pair, g in good.items():
        j = junk.get(pair, np.empty(0))
        if g.size and j.size and g.min() > j.max():
            per_pair[pair] = round((float(g.min()) + float(j.max())) / 2, 3)
        else:
            per_pair[pair] = None
    if lowest is None or highest is None:
        missing = "answerable" if lowest is None else "unrelated"
        return Suggestion(
            "separate",
            None,
            per_pair,
            lowest,
            highest,
            f"no {missing} questions: nothing to separate",
        )
    if lowest <= highest:
        note = (
            f"the ranges overlap by {highest - lowest:.3f}: the highest unrelated best score "
            f"{highest:.3f} is above the lowest answering score {lowest:.3f}; no threshold "
            "separates them, so the reranker must stay the judge"
        )
        return Suggestion("separate", None, per_pair, lowest, highest, note)
    threshold = round((lowest + highest) / 2, 3)
    note = (
        f"midpoint of the gap {highest:.3f}..{lowest:.3f} between the highest unrelated and "
        f"the lowest answering score (gap {lowest - highest:.3f})"
    )
    return Suggestion("separate", threshold, per_pair, lowest, highest, note)
