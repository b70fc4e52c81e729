"""Grouped cross-validation: what a mode's floor and gate lose on articles they have not seen.

Whole articles go into folds. For each fold, the mode's rules choose a floor and a
gate on the other folds, and the held-out fold is judged by both together: an
answering passage is lost when the floor drops it or the gate empties its
question; an unrelated question is emptied when either empties it. The floor's
figures alone are kept beside them, so a report shows what the gate adds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from thresholded.calibration.bounds import article_bootstrap_upper, clopper_pearson_upper
from thresholded.calibration.floor import suggest
from thresholded.calibration.gate import joint_lost, suggest_gate
from thresholded.calibration.modes import DEFAULT_MAX_LOSS, Mode, in_force
from thresholded.calibration.rounding import rounded as _r
from thresholded.calibration.scores import PairScores

__all__ = ["CrossValidation", "PairCV", "assign_folds", "cross_validate"]


@dataclass(frozen=True)
class PairCV:
    """Held-out figures of one pair: every question judged by thresholds chosen without
    its article. ``lost`` and ``emptied_share`` are of the floor and the gate together."""

    pair: str
    n: int
    lost: int
    loss: float
    binomial_upper: float
    bootstrap_upper: float
    worst_article: str | None
    worst_article_loss: float
    n_unrelated: int
    emptied_share: float
    lost_floor: int = 0
    emptied_floor_share: float = 0.0
    answerable_emptied: int = 0
    emptied_by_origin: dict[str, float] = field(default_factory=dict)
    emptied_floor_by_origin: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            k: {o: _r(x) for o, x in v.items()} if isinstance(v, dict) else _r(v)
            for k, v in self.__dict__.items()
        }


@dataclass(frozen=True)
class CrossValidation:
    """A mode's threshold rules, cross-validated with folds grouped by article."""

    mode: Mode
    folds: int
    fold_thresholds: tuple[float | None, ...]
    pairs: dict[str, PairCV]
    confidence: float = 0.95
    note: str = ""
    fold_gates: tuple[float | None, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "folds": self.folds,
            "confidence": self.confidence,
            "fold_thresholds": [_r(t) for t in self.fold_thresholds],
            "fold_gates": [_r(t) for t in self.fold_gates],
            "pairs": {k: v.to_dict() for k, v in self.pairs.items()},
            "note": self.note,
        }


def assign_folds(pairs: Sequence[PairScores], folds: int) -> dict[str, int]:
    """Put whole articles into folds, balanced by question count, deterministically.

    Answerable and unrelated groups are balanced separately, so each fold gets a
    share of both. Returns article -> fold.
    """
    sizes: dict[tuple[bool, str], int] = {}
    for scores in pairs:
        for article, answerable in zip(scores.articles, scores.answerable, strict=True):
            key = (bool(answerable), article)
            sizes[key] = sizes.get(key, 0) + 1
    fold_of: dict[str, int] = {}
    for kind in (True, False):
        load = [0] * folds
        groups = sorted(
            ((n, a) for (k, a), n in sizes.items() if k is kind), key=lambda x: (-x[0], x[1])
        )
        for n, article in groups:
            if article in fold_of:
                continue
            target = min(range(folds), key=lambda f: (load[f], f))
            fold_of[article] = target
            load[target] += n
    return fold_of


@dataclass
class _Held:
    """What the held-out folds of one pair showed, question by question."""

    lost: np.ndarray
    lost_floor: np.ndarray
    emptied: np.ndarray
    emptied_floor: np.ndarray

    @classmethod
    def empty(cls, n: int) -> _Held:
        return cls(*(np.zeros(n, dtype=bool) for _ in range(4)))


def _choose(
    train: dict[str, PairScores], mode: Mode, **options: Any
) -> tuple[float | None, float | None]:
    """The floor and the gate a mode's rules pick on the training folds."""
    good = {p: s.good for p, s in train.items()}
    junk = {p: s.junk for p, s in train.items()}
    gate_margin = options.pop("gate_margin", None)
    floor = suggest(mode, good, junk, **options).threshold
    gate = suggest_gate(
        mode,
        {p: s.good_top for p, s in train.items()},
        junk,
        good=good,
        floor=floor,
        margin=gate_margin,
        max_loss=options["max_loss"],
        resolution=options["resolution"],
    ).threshold
    return floor, gate


def _judge(s: PairScores, held: np.ndarray, floor: float | None, gate: float | None, h: _Held):
    f, g = in_force(floor), in_force(gate)
    ans, junk = s.answerable, ~s.answerable
    gold = np.where(ans, s.gold, np.inf)
    h.lost |= held & ans & joint_lost(gold, s.top, f, g)
    h.lost_floor |= held & ans & (gold < f)
    h.emptied |= held & junk & (s.top < max(f, g))
    h.emptied_floor |= held & junk & (s.top < f)


def _share_by_origin(s: PairScores, emptied: np.ndarray) -> dict[str, float]:
    origins = np.asarray(s.origins, dtype=object)
    junk = ~s.answerable
    return {
        str(o): float(emptied[junk & (origins == o)].mean())
        for o in sorted(set(origins[junk].tolist()))
    }


def _pair_cv(s: PairScores, h: _Held, confidence: float, bootstrap: int, rng) -> PairCV:
    ans = s.answerable
    n, lost = int(ans.sum()), int(h.lost.sum())
    arts = sorted({a for a, ok in zip(s.articles, ans, strict=True) if ok})
    art_arr = np.asarray(s.articles, dtype=object)
    per_n = np.array([int((ans & (art_arr == a)).sum()) for a in arts])
    per_lost = np.array([int((h.lost & (art_arr == a)).sum()) for a in arts])
    worst = int(np.argmax(per_lost / np.maximum(per_n, 1))) if arts else None
    junk_n = int((~ans).sum())
    return PairCV(
        pair=s.pair,
        n=n,
        lost=lost,
        loss=lost / n if n else 0.0,
        binomial_upper=clopper_pearson_upper(lost, n, confidence),
        bootstrap_upper=article_bootstrap_upper(
            per_n, per_lost, confidence=confidence, rounds=bootstrap, rng=rng
        ),
        worst_article=arts[worst] if worst is not None else None,
        worst_article_loss=float(per_lost[worst] / max(per_n[worst], 1))
        if worst is not None
        else 0.0,
        n_unrelated=junk_n,
        emptied_share=float(h.emptied.sum() / junk_n) if junk_n else 0.0,
        lost_floor=int(h.lost_floor.sum()),
        emptied_floor_share=float(h.emptied_floor.sum() / junk_n) if junk_n else 0.0,
        answerable_emptied=int((h.lost & ~h.lost_floor).sum()),
        emptied_by_origin=_share_by_origin(s, h.emptied),
        emptied_floor_by_origin=_share_by_origin(s, h.emptied_floor),
    )


def cross_validate(
    pairs: Sequence[PairScores],
    mode: Mode,
    *,
    folds: int = 8,
    margin: float | None = None,
    gate_margin: float | None = None,
    max_loss: float = DEFAULT_MAX_LOSS,
    resolution: float = 0.01,
    confidence: float = 0.95,
    bootstrap: int = 2000,
    seed: int = 0,
) -> CrossValidation:
    """Estimate a mode's loss on unseen articles: choose on K-1 folds, judge the last.

    The loss is pooled over the held-out folds; the upper bounds are an exact
    binomial one (questions as independent) and a bootstrap over articles
    (questions of one article move together). An estimate, not a promise.
    """
    articles = {a for s in pairs for a, ok in zip(s.articles, s.answerable, strict=True) if ok}
    k = min(folds, len(articles))
    if k < 2:
        return CrossValidation(
            mode,
            k,
            (),
            {},
            confidence,
            "cross-validation needs answerable questions of 2+ articles",
        )
    fold_of = assign_folds(pairs, k)
    fold_idx = {s.pair: np.array([fold_of[a] for a in s.articles], dtype=int) for s in pairs}
    held = {s.pair: _Held.empty(len(s.qids)) for s in pairs}
    floors: list[float | None] = []
    gates: list[float | None] = []
    for f in range(k):
        train = {s.pair: s.subset(fold_idx[s.pair] != f) for s in pairs}
        floor, gate = _choose(
            train,
            mode,
            margin=margin,
            gate_margin=gate_margin,
            max_loss=max_loss,
            resolution=resolution,
        )
        floors.append(floor)
        gates.append(gate)
        for s in pairs:
            _judge(s, fold_idx[s.pair] == f, floor, gate, held[s.pair])
    rng = np.random.default_rng(seed)
    result = {s.pair: _pair_cv(s, held[s.pair], confidence, bootstrap, rng) for s in pairs}
    return CrossValidation(
        mode, k, tuple(floors), result, confidence, _note(floors, gates), tuple(gates)
    )


def _note(floors: Sequence[float | None], gates: Sequence[float | None]) -> str:
    chosen = [f is not None or g is not None for f, g in zip(floors, gates, strict=True)]
    if not any(chosen):
        return "no fold yields a threshold (the ranges overlap): nothing is dropped or lost"
    if not all(chosen):
        return "some folds yield no threshold (the ranges overlap): those drop nothing"
    return ""
