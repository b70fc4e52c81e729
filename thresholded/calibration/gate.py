"""The gate's suggestion: one cosine under the answerable questions' top scores, per mode.

The gate judges a question by its best candidate and empties it when even that
is below the gate. An answerable question's top score is at least its answering
score, and usually much higher, so the gate can sit well above the floor at the
same loss. Its modes mirror the floor's:

- never-lose: the lowest answerable top score minus ``gate_margin`` (0.02).
- loss-budget: the budget is shared with the floor. An answering passage is lost
  when the floor drops it *or* the gate empties its question; the gate rises as
  far as the budget the floor left allows.
- separate: the midpoint between the lowest answerable top score and the highest
  unrelated one, only where they do not overlap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from thresholded.calibration.floor import Suggestion, suggest
from thresholded.calibration.modes import DEFAULT_MAX_LOSS, Mode, in_force, margin_of
from thresholded.calibration.rounding import floor_to

__all__ = ["budget_gate", "joint_lost", "suggest_gate"]


def joint_lost(good: np.ndarray, top: np.ndarray, floor: float, gate: float) -> np.ndarray:
    """Which answering passages a floor and a gate lose together (one flag per question);
    a floor or gate of 0 is off."""
    return (good < in_force(floor)) | (top < in_force(gate))


def budget_gate(good: np.ndarray, top: np.ndarray, floor: float, max_loss: float) -> float:
    """The highest gate such that floor and gate together lose at most ``max_loss`` of ``good``."""
    allowed = math.floor(max_loss * good.size + 1e-9)
    by_floor = good < in_force(floor)
    spare = allowed - int(by_floor.sum())
    rest = np.sort(top[~by_floor])
    if spare < 0 or not rest.size:
        return float(top.min())
    return float(rest[min(spare, rest.size - 1)])


def suggest_gate(
    mode: Mode,
    top: Mapping[str, np.ndarray],
    junk: Mapping[str, np.ndarray],
    *,
    good: Mapping[str, np.ndarray] | None = None,
    floor: float | None = None,
    margin: float | None = None,
    max_loss: float = DEFAULT_MAX_LOSS,
    resolution: float = 0.01,
) -> Suggestion:
    """The gate of one mode, from answerable top scores and unrelated best scores per pair.

    ``good`` (answering scores) and ``floor`` let loss-budget share its budget with
    the floor; without them the gate spends the whole budget on its own.
    """
    if mode != "loss-budget" or good is None or floor is None:
        return _describe(
            suggest(mode, top, junk, margin=margin, max_loss=max_loss, resolution=resolution)
        )
    used_margin = margin_of(mode, margin)
    per_pair: dict[str, float | None] = {
        pair: floor_to(budget_gate(good[pair], t, floor, max_loss) - used_margin, resolution)
        if t.size
        else None
        for pair, t in top.items()
    }
    chosen = [v for v in per_pair.values() if v is not None]
    lowest = min((float(t.min()) for t in top.values() if t.size), default=None)
    highest = max((float(j.max()) for j in junk.values() if j.size), default=None)
    if not chosen:
        return Suggestion(
            mode, None, per_pair, lowest, highest, "no answerable questions", used_margin, max_loss
        )
    gate = max(-1.0, min(chosen))
    lost = {p: joint_lost(good[p], t, floor, gate) for p, t in top.items() if t.size}
    note = (
        f"with the floor {floor:.2f}, loses {sum(int(m.sum()) for m in lost.values())} "
        f"answering passage(s) on these questions, at most "
        f"{max(float(m.mean()) for m in lost.values()):.2%} of a pair "
        f"(budget {max_loss:.2%} per pair, gate margin {used_margin:.3f})"
    )
    return Suggestion(mode, gate, per_pair, lowest, highest, note, used_margin, max_loss)


def _describe(s: Suggestion) -> Suggestion:
    """The floor's wording, said of top scores."""
    if s.threshold is None or s.lowest_good is None:
        note = s.note.replace("answering score", "answerable top score")
    elif s.mode == "never-lose":
        margin = s.lowest_good - s.threshold
        note = f"leaves a margin of {margin:.3f} under the lowest answerable top score"
    elif s.mode == "loss-budget":
        note = s.note.replace("answering passage(s)", "answerable question(s)")
    else:
        note = s.note.replace("answering score", "answerable top score")
    return Suggestion(
        s.mode, s.threshold, s.per_pair, s.lowest_good, s.highest_junk, note, s.margin, s.max_loss
    )
