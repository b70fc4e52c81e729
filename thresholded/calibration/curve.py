"""The trade-off curve: what each threshold costs in answers and buys in emptied questions.

The same curve serves both thresholds. For the floor, an answering passage is lost
when its own score is below the threshold; for the gate, an answerable question is
emptied when its top score is below it. Either way an unrelated question is emptied
when even its best result is below the threshold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from thresholded.calibration.modes import in_force
from thresholded.calibration.rounding import rounded as _r

__all__ = ["CurvePoint", "default_grid", "trade_off"]


@dataclass(frozen=True)
class CurvePoint:
    """At one threshold: answers lost, unrelated questions emptied, candidates dropped."""

    threshold: float
    lost: int
    lost_share: float
    emptied: int
    emptied_share: float
    dropped_share: float
    emptied_by_origin: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = {k: _r(v) for k, v in self.__dict__.items() if k != "emptied_by_origin"}
        data["emptied_by_origin"] = {k: _r(v) for k, v in self.emptied_by_origin.items()}
        return data


def default_grid(start: float = 0.0, stop: float = 0.8, step: float = 0.01) -> tuple[float, ...]:
    """Candidate thresholds ``start..stop`` inclusive, rounded so 0.35 is 0.35."""
    n = round((stop - start) / step)
    return tuple(round(start + i * step, 6) for i in range(n + 1))


def trade_off(
    good: np.ndarray,
    junk: np.ndarray,
    candidates: np.ndarray | None = None,
    grid: Sequence[float] | None = None,
    junk_origins: Sequence[str] | None = None,
) -> tuple[CurvePoint, ...]:
    """What each candidate threshold costs (answers lost) and buys (questions emptied).

    ``good`` are the answering scores (floor) or the answerable top scores (gate):
    one is lost when it is below the threshold; an unrelated question is emptied
    when even its best result is below it. A threshold of 0 cuts nothing: a policy reads
    it as off. ``candidates`` (questions x fetched
    scores) gives the share of fetched sections the floor drops before the reranker;
    ``junk_origins`` (one label per unrelated question) splits the emptied share by
    set, e.g. CLINC vs near-miss.
    """
    grid = default_grid() if grid is None else grid
    cand = np.empty((0, 0)) if candidates is None else candidates
    origins = np.asarray(junk_origins if junk_origins is not None else [], dtype=object)
    sets = sorted(set(origins.tolist())) if origins.size == junk.size else []
    points = []
    for t in grid:
        cut = in_force(t)
        lost = int((good < cut).sum())
        emptied = int((junk < cut).sum())
        points.append(
            CurvePoint(
                threshold=float(t),
                lost=lost,
                lost_share=lost / good.size if good.size else 0.0,
                emptied=emptied,
                emptied_share=emptied / junk.size if junk.size else 0.0,
                dropped_share=float((cand < cut).mean()) if cand.size else 0.0,
                emptied_by_origin={o: float((junk[origins == o] < cut).mean()) for o in sets},
            )
        )
    return tuple(points)
