"""The table of one pair: where answering passages score, and unrelated questions' best."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from thresholded.calibration.rounding import rounded as _r
from thresholded.calibration.scores import PairScores

__all__ = ["OriginRange", "PairTable", "pair_table"]


@dataclass(frozen=True)
class OriginRange:
    """Best scores of one set of unrelated questions (e.g. CLINC, XQuAD near-miss)."""

    origin: str
    n: int
    min: float
    max: float


@dataclass(frozen=True)
class PairTable:
    """What one pair measured: the answering range, its low percentiles, the unrelated range.

    ``top_min`` and ``top_p1`` are the lowest and 1st-percentile top scores of the
    answerable questions: where the answer gate has to stay below.
    """

    pair: str
    n_answerable: int
    answer_min: float | None
    answer_p1: float | None
    answer_p5: float | None
    answer_median: float | None
    answer_max: float | None
    top_min: float | None
    top_p1: float | None
    in_top_k: float | None
    top_k: int
    n_unrelated: int
    unrelated_min: float | None
    unrelated_p95: float | None
    unrelated_max: float | None
    by_origin: tuple[OriginRange, ...]
    no_allowed_gold: int = 0

    @property
    def overlap(self) -> float | None:
        """Highest unrelated minus lowest answering score; positive means the ranges overlap."""
        if self.answer_min is None or self.unrelated_max is None:
            return None
        return self.unrelated_max - self.answer_min

    def to_dict(self) -> dict[str, Any]:
        data = {k: _r(v) for k, v in self.__dict__.items() if k != "by_origin"}
        data["overlap"] = _r(self.overlap)
        data["unrelated_by_origin"] = {
            o.origin: {"n": o.n, "min": _r(o.min), "max": _r(o.max)} for o in self.by_origin
        }
        return data


def _f(values: np.ndarray, fn: Callable[[np.ndarray], Any]) -> float | None:
    return float(fn(values)) if values.size else None


def pair_table(scores: PairScores, *, top_k: int = 4) -> PairTable:
    """Summarise one pair's scores."""
    good, junk = scores.good, scores.junk
    origins = np.asarray(scores.origins, dtype=object)[~scores.answerable]
    by_origin = tuple(
        OriginRange(str(o), int((origins == o).sum()), float(v.min()), float(v.max()))
        for o in sorted(set(origins.tolist()))
        for v in [junk[origins == o]]
    )
    ranks = scores.gold_rank[scores.answerable]
    return PairTable(
        pair=scores.pair,
        n_answerable=int(good.size),
        answer_min=_f(good, np.min),
        answer_p1=_f(good, lambda v: np.percentile(v, 1)),
        answer_p5=_f(good, lambda v: np.percentile(v, 5)),
        answer_median=_f(good, np.median),
        answer_max=_f(good, np.max),
        top_min=_f(scores.good_top, np.min),
        top_p1=_f(scores.good_top, lambda v: np.percentile(v, 1)),
        in_top_k=float((ranks <= top_k).mean()) if ranks.size else None,
        top_k=top_k,
        n_unrelated=int(junk.size),
        unrelated_min=_f(junk, np.min),
        unrelated_p95=_f(junk, lambda v: np.percentile(v, 95)),
        unrelated_max=_f(junk, np.max),
        by_origin=by_origin,
        no_allowed_gold=scores.no_allowed_gold,
    )
