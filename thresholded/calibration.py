"""Calibrate the cosine floor on real questions, per collection, language and model.

A floor is a measurement: where do the passages that answer real questions score,
and where do the best results of unrelated questions score, for one embedding
model over one collection? This module embeds a corpus and questions through a
small ``Embedder`` protocol, scores every question against every allowed passage
with one matrix product, and turns the scores into a per-language-pair table, a
trade-off curve, a suggested threshold in three modes, and a cross-validated
estimate of what the threshold loses on articles it has not seen.

Framework-free: an embedder is anything with ``model_id``, ``embed_documents``
and ``embed_queries`` returning unit vectors; the CLI wraps a LlamaIndex model.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from thresholded.calibration_data import (
    Passage,
    Question,
    SimpleForm,
    is_simple_form,
    load_corpus,
    load_questions,
    load_simple_form,
)
from thresholded.errors import DimensionMismatchError, NotUnitVectorError, ThresholdedError
from thresholded.models import ModelId
from thresholded.profile import PROFILE_VERSION, CalibrationProfile

__all__ = [
    "DEFAULT_MARGIN",
    "DEFAULT_MAX_LOSS",
    "MODES",
    "BatchedEmbedder",
    "CalibrationResult",
    "CrossValidation",
    "CurvePoint",
    "Embedder",
    "Mode",
    "OriginRange",
    "PairCV",
    "PairScores",
    "PairTable",
    "Passage",
    "Question",
    "SimpleCalibrationResult",
    "SimpleForm",
    "SimpleRow",
    "Suggestion",
    "allowed_passages",
    "assign_folds",
    "calibrate",
    "calibrate_simple",
    "clopper_pearson_upper",
    "cross_validate",
    "default_grid",
    "is_simple_form",
    "load_corpus",
    "load_questions",
    "load_simple_form",
    "pair_table",
    "score_pairs",
    "suggest",
    "summarise",
    "trade_off",
]

logger = logging.getLogger(__name__)

Mode = Literal["never-lose", "loss-budget", "separate"]
MODES: tuple[Mode, ...] = ("never-lose", "loss-budget", "separate")
DEFAULT_MARGIN: dict[str, float] = {"never-lose": 0.02, "loss-budget": 0.0, "separate": 0.0}
"""Margin under the floor when none is given: never-lose keeps 0.02 below the lowest answer;
loss-budget's safety is the budget itself, cross-validated."""
DEFAULT_MAX_LOSS = 0.005
UNIT_TOLERANCE = 1e-3


class Embedder(Protocol):
    """What calibration needs from an embedding model: unit vectors, batched."""

    @property
    def model_id(self) -> ModelId | str: ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...


class BatchedEmbedder:
    """Adapts two per-batch functions to ``Embedder``, with a progress bar.

    A framework model (LlamaIndex, LangChain) embeds a list of texts; this class
    cuts the input into batches so a long corpus shows progress instead of hanging.
    """

    def __init__(
        self,
        model_id: ModelId | str,
        embed_documents: Callable[[list[str]], Sequence[Sequence[float]]],
        embed_queries: Callable[[list[str]], Sequence[Sequence[float]]],
        *,
        batch_size: int = 32,
        progress: bool = True,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.model_id = model_id
        self._documents = embed_documents
        self._queries = embed_queries
        self.batch_size = batch_size
        self.progress = progress

    def _run(
        self, fn: Callable[[list[str]], Sequence[Sequence[float]]], texts: Sequence[str], desc: str
    ) -> np.ndarray:
        rows: list[Sequence[float]] = []
        batches = range(0, len(texts), self.batch_size)
        if not self.progress:
            for start in batches:
                rows.extend(fn(list(texts[start : start + self.batch_size])))
            return np.asarray(rows, dtype=np.float64)
        from tqdm import tqdm  # plain tqdm: works in a terminal and a notebook without widgets

        with tqdm(total=len(texts), desc=desc, unit="text") as bar:
            for start in batches:
                batch = list(texts[start : start + self.batch_size])
                rows.extend(fn(batch))
                bar.update(len(batch))
        return np.asarray(rows, dtype=np.float64)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._run(self._documents, texts, "embedding passages")

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._run(self._queries, texts, "embedding questions")


# Scores ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairScores:
    """Per-question scores of one (question language -> passage language) pair.

    ``gold`` is the score of the best allowed gold passage (NaN for unrelated
    questions), ``top`` the best score over all allowed passages, ``candidates``
    the best ``n`` scores (what the search fetches before the floor applies).
    """

    pair: str
    question_lang: str
    passage_lang: str
    qids: tuple[str, ...]
    articles: tuple[str, ...]
    origins: tuple[str, ...]
    answerable: np.ndarray
    top: np.ndarray
    gold: np.ndarray
    gold_rank: np.ndarray
    candidates: np.ndarray
    no_allowed_gold: int = 0

    @property
    def good(self) -> np.ndarray:
        """Scores of the answering passages."""
        return self.gold[self.answerable]

    @property
    def junk(self) -> np.ndarray:
        """Best scores of the unrelated questions."""
        return self.top[~self.answerable]

    @property
    def junk_origins(self) -> tuple[str, ...]:
        """The set of each unrelated question, in the order of ``junk``."""
        return tuple(o for o, ok in zip(self.origins, self.answerable, strict=True) if not ok)

    def subset(self, mask: np.ndarray) -> PairScores:
        """The same pair restricted to some questions (a cross-validation fold)."""
        return PairScores(
            pair=self.pair,
            question_lang=self.question_lang,
            passage_lang=self.passage_lang,
            qids=tuple(q for q, keep in zip(self.qids, mask, strict=True) if keep),
            articles=tuple(a for a, keep in zip(self.articles, mask, strict=True) if keep),
            origins=tuple(o for o, keep in zip(self.origins, mask, strict=True) if keep),
            answerable=self.answerable[mask],
            top=self.top[mask],
            gold=self.gold[mask],
            gold_rank=self.gold_rank[mask],
            candidates=self.candidates[mask],
        )


def _check_unit(vectors: np.ndarray, what: str) -> None:
    norms = np.linalg.norm(vectors, axis=1)
    bad = np.flatnonzero(np.abs(norms - 1.0) > UNIT_TOLERANCE)
    if bad.size:
        raise NotUnitVectorError(
            f"{bad.size} {what} vectors are not unit length (e.g. norm {norms[bad[0]]:.4f}): "
            "an inner product is a cosine only on unit vectors; normalise the embeddings"
        )


def _pair_order(passages: str) -> Callable[[str], tuple[bool, bool, str]]:
    return lambda lang: (lang != passages, lang != "en", lang)


def allowed_passages(corpus: Sequence[Passage], passages: str) -> list[Passage]:
    """The passages a pair may return: one language, or ``all``."""
    allowed = [p for p in corpus if passages == "all" or p.lang == passages]
    if not allowed:
        langs = sorted({p.lang for p in corpus})
        raise ValueError(f"no passages in language {passages!r} (the corpus has {langs} and all)")
    return allowed


def score_pairs(
    question_vectors: np.ndarray,
    passage_vectors: np.ndarray,
    questions: Sequence[Question],
    allowed: Sequence[Passage],
    *,
    passages: str,
    top_k: int = 4,
    candidates: int = 12,
) -> tuple[PairScores, ...]:
    """Score every question against the allowed passages, one pair per question language.

    ``allowed`` are the passages the vectors belong to, in order. With passages
    ``en`` the pairs are en->en and de->en; with ``all`` every gold passage counts.
    """
    if question_vectors.shape[0] != len(questions) or passage_vectors.shape[0] != len(allowed):
        raise ValueError("vectors and texts differ in number")
    scores = question_vectors @ passage_vectors.T  # the one matrix product
    n_cand = min(candidates, len(allowed))
    ranked = -np.sort(-scores, axis=1)[:, :n_cand]
    top = scores.max(axis=1)
    position = {p.pid: i for i, p in enumerate(allowed)}
    pairs: list[PairScores] = []
    for lang in sorted({q.lang for q in questions}, key=_pair_order(passages)):
        rows = [i for i, q in enumerate(questions) if q.lang == lang]
        keep: list[int] = []
        gold: list[float] = []
        rank: list[int] = []
        skipped = 0
        for i in rows:
            q = questions[i]
            if not q.answerable:
                keep.append(i)
                gold.append(math.nan)
                rank.append(0)
                continue
            idx = [position[p] for p in q.gold_pids if p in position]
            if not idx:
                skipped += 1
                continue
            best = float(scores[i, idx].max())
            keep.append(i)
            gold.append(best)
            rank.append(1 + int((scores[i] > best).sum()))
        if skipped:
            logger.warning(
                "%s->%s: %d answerable questions have no gold passage among the allowed "
                "passages and are left out",
                lang,
                passages,
                skipped,
            )
        sel = np.asarray(keep, dtype=int)
        pairs.append(
            PairScores(
                pair=f"{lang}->{passages}",
                question_lang=lang,
                passage_lang=passages,
                qids=tuple(questions[i].qid for i in keep),
                articles=tuple(questions[i].article for i in keep),
                origins=tuple(questions[i].origin for i in keep),
                answerable=np.array([questions[i].answerable for i in keep], dtype=bool),
                top=top[sel],
                gold=np.asarray(gold, dtype=np.float64),
                gold_rank=np.asarray(rank, dtype=int),
                candidates=ranked[sel],
                no_allowed_gold=skipped,
            )
        )
    return tuple(pairs)


# The table ------------------------------------------------------------------------------


@dataclass(frozen=True)
class OriginRange:
    """Best scores of one set of unrelated questions (e.g. CLINC, XQuAD near-miss)."""

    origin: str
    n: int
    min: float
    max: float


@dataclass(frozen=True)
class PairTable:
    """What one pair measured: the answering range, its low percentiles, the unrelated range."""

    pair: str
    n_answerable: int
    answer_min: float | None
    answer_p1: float | None
    answer_p5: float | None
    answer_median: float | None
    answer_max: float | None
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


def _r(value: Any, digits: int = 4) -> Any:
    if isinstance(value, float | np.floating):
        return round(float(value), digits)
    return value


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
        in_top_k=float((ranks <= top_k).mean()) if ranks.size else None,
        top_k=top_k,
        n_unrelated=int(junk.size),
        unrelated_min=_f(junk, np.min),
        unrelated_p95=_f(junk, lambda v: np.percentile(v, 95)),
        unrelated_max=_f(junk, np.max),
        by_origin=by_origin,
        no_allowed_gold=scores.no_allowed_gold,
    )


# The trade-off curve --------------------------------------------------------------------


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

    An answering passage is lost when its score is below the threshold; an
    unrelated question is emptied when even its best result is below it.
    ``candidates`` (questions x fetched scores) gives the share of fetched
    sections the floor drops before the reranker; ``junk_origins`` (one label per
    unrelated question) splits the emptied share by set, e.g. CLINC vs near-miss.
    """
    grid = default_grid() if grid is None else grid
    cand = np.empty((0, 0)) if candidates is None else candidates
    origins = np.asarray(junk_origins if junk_origins is not None else [], dtype=object)
    sets = sorted(set(origins.tolist())) if origins.size == junk.size else []
    points = []
    for t in grid:
        lost = int((good < t).sum())
        emptied = int((junk < t).sum())
        points.append(
            CurvePoint(
                threshold=float(t),
                lost=lost,
                lost_share=lost / good.size if good.size else 0.0,
                emptied=emptied,
                emptied_share=emptied / junk.size if junk.size else 0.0,
                dropped_share=float((cand < t).mean()) if cand.size else 0.0,
                emptied_by_origin={o: float((junk[origins == o] < t).mean()) for o in sets},
            )
        )
    return tuple(points)


# Suggested thresholds -------------------------------------------------------------------


@dataclass(frozen=True)
class Suggestion:
    """A threshold suggested by one mode, per pair and for the whole run (or why none)."""

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


def _floor_to(value: float, resolution: float) -> float:
    """Round down to the grid, so rounding never eats into the margin or the budget."""
    if resolution <= 0:
        return value
    return round(math.floor(value / resolution + 1e-9) * resolution, 6)


def _budget_floor(good: np.ndarray, max_loss: float) -> float:
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
        return _suggest_separate(good, junk, lowest, highest)
    used_margin = DEFAULT_MARGIN[mode] if margin is None else margin
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
        base = float(g.min()) if mode == "never-lose" else _budget_floor(g, max_loss)
        per_pair[pair] = _floor_to(base - used_margin, resolution)
    threshold = max(-1.0, min(v for v in per_pair.values() if v is not None))
    assert lowest is not None
    if mode == "never-lose":
        note = f"leaves a margin of {lowest - threshold:.3f} under the lowest answering passage"
    else:
        lost = sum(int((g < threshold).sum()) for g in answered.values())
        worst = max(float((g < threshold).mean()) for g in answered.values())
        note = (
            f"loses {lost} answering passage(s) on these questions, at most {worst:.2%} of a "
            f"pair (budget {max_loss:.2%} per pair, margin {used_margin:.3f})"
        )
    return Suggestion(mode, threshold, per_pair, lowest, highest, note, used_margin, budget)


def _suggest_separate(
    good: Mapping[str, np.ndarray],
    junk: Mapping[str, np.ndarray],
    lowest: float | None,
    highest: float | None,
) -> Suggestion:
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


# Grouped cross-validation ---------------------------------------------------------------


@dataclass(frozen=True)
class PairCV:
    """Held-out loss of one pair: every answerable question judged by a threshold chosen
    without its article."""

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

    def to_dict(self) -> dict[str, Any]:
        return {k: _r(v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class CrossValidation:
    """A mode's threshold rule, cross-validated with folds grouped by article."""

    mode: Mode
    folds: int
    fold_thresholds: tuple[float | None, ...]
    pairs: dict[str, PairCV]
    confidence: float = 0.95
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "folds": self.folds,
            "confidence": self.confidence,
            "fold_thresholds": [_r(t) for t in self.fold_thresholds],
            "pairs": {k: v.to_dict() for k, v in self.pairs.items()},
            "note": self.note,
        }


def clopper_pearson_upper(lost: int, n: int, confidence: float = 0.95) -> float:
    """One-sided exact binomial upper bound of a loss rate seen as ``lost`` of ``n``."""
    if n <= 0:
        return 1.0
    if lost >= n:
        return 1.0
    alpha = 1.0 - confidence

    def cdf(p: float) -> float:
        if p <= 0.0:
            return 1.0
        if p >= 1.0:
            return 0.0
        log_p, log_q = math.log(p), math.log1p(-p)
        return sum(
            math.exp(
                math.lgamma(n + 1)
                - math.lgamma(k + 1)
                - math.lgamma(n - k + 1)
                + k * log_p
                + (n - k) * log_q
            )
            for k in range(lost + 1)
        )

    lo, hi = lost / n, 1.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if cdf(mid) > alpha:
            lo = mid
        else:
            hi = mid
    return hi


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


def cross_validate(
    pairs: Sequence[PairScores],
    mode: Mode,
    *,
    folds: int = 8,
    margin: float | None = None,
    max_loss: float = DEFAULT_MAX_LOSS,
    resolution: float = 0.01,
    confidence: float = 0.95,
    bootstrap: int = 2000,
    seed: int = 0,
) -> CrossValidation:
    """Estimate a mode's loss on unseen articles: choose on K-1 folds, measure on the last.

    Folds are grouped by article, so no article's questions are both chosen on and
    judged. The loss is pooled over the held-out folds; the upper bounds are an
    exact binomial one (questions as independent) and a bootstrap over articles
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
    lost_mask = {s.pair: np.zeros(len(s.qids), dtype=bool) for s in pairs}
    emptied_mask = {s.pair: np.zeros(len(s.qids), dtype=bool) for s in pairs}
    thresholds: list[float | None] = []
    for f in range(k):
        train = {s.pair: s.subset(fold_idx[s.pair] != f) for s in pairs}
        chosen = suggest(
            mode,
            {p: s.good for p, s in train.items()},
            {p: s.junk for p, s in train.items()},
            margin=margin,
            max_loss=max_loss,
            resolution=resolution,
        ).threshold
        thresholds.append(chosen)
        t = -math.inf if chosen is None else chosen
        for s in pairs:
            held = fold_idx[s.pair] == f
            lost_mask[s.pair] |= held & s.answerable & (s.gold < t)
            emptied_mask[s.pair] |= held & ~s.answerable & (s.top < t)
    rng = np.random.default_rng(seed)
    result: dict[str, PairCV] = {}
    for s in pairs:
        ans = s.answerable
        n, lost = int(ans.sum()), int(lost_mask[s.pair].sum())
        arts = sorted({a for a, ok in zip(s.articles, ans, strict=True) if ok})
        art_arr = np.asarray(s.articles, dtype=object)
        per_n = np.array([int((ans & (art_arr == a)).sum()) for a in arts])
        per_lost = np.array([int((lost_mask[s.pair] & (art_arr == a)).sum()) for a in arts])
        boot = 0.0
        if arts and bootstrap > 0:
            pick = rng.integers(0, len(arts), size=(bootstrap, len(arts)))
            ratio = per_lost[pick].sum(axis=1) / np.maximum(per_n[pick].sum(axis=1), 1)
            boot = float(np.quantile(ratio, confidence))
        worst = int(np.argmax(per_lost / np.maximum(per_n, 1))) if arts else None
        junk_n = int((~ans).sum())
        result[s.pair] = PairCV(
            pair=s.pair,
            n=n,
            lost=lost,
            loss=lost / n if n else 0.0,
            binomial_upper=clopper_pearson_upper(lost, n, confidence),
            bootstrap_upper=boot,
            worst_article=arts[worst] if worst is not None else None,
            worst_article_loss=float(per_lost[worst] / max(per_n[worst], 1))
            if worst is not None
            else 0.0,
            n_unrelated=junk_n,
            emptied_share=float(emptied_mask[s.pair].sum() / junk_n) if junk_n else 0.0,
        )
    note = ""
    if all(t is None for t in thresholds):
        note = "no fold yields a threshold (the ranges overlap): nothing is dropped or lost"
    elif any(t is None for t in thresholds):
        note = "some folds yield no threshold (the ranges overlap): those drop nothing"
    return CrossValidation(mode, k, tuple(thresholds), result, confidence, note)


# The whole run --------------------------------------------------------------------------


def _model_id(embedder: Any, dimension: int) -> ModelId:
    raw = embedder.model_id
    model = ModelId.parse(raw) if isinstance(raw, str) else raw
    if model.dimension is None:
        return ModelId(model.name, dimension)
    if model.dimension != dimension:
        raise DimensionMismatchError(
            f"{model} should give {model.dimension}-dimensional vectors, got {dimension}"
        )
    return model


def _embed(embedder: Embedder, texts: Sequence[str], *, queries: bool) -> np.ndarray:
    fn = embedder.embed_queries if queries else embedder.embed_documents
    vectors = np.asarray(fn(list(texts)), dtype=np.float64)
    what = "question" if queries else "passage"
    if vectors.ndim != 2 or vectors.shape[0] != len(texts):
        raise ValueError(f"the embedder returned {vectors.shape} for {len(texts)} {what}s")
    _check_unit(vectors, what)
    return vectors


@dataclass(frozen=True)
class CalibrationResult:
    """Everything one calibration run measured, and the threshold of its mode."""

    model_id: ModelId
    passages: str
    mode: Mode
    margin: float | None
    max_loss: float
    pairs: tuple[PairScores, ...]
    tables: tuple[PairTable, ...]
    curves: dict[str, tuple[CurvePoint, ...]]
    suggestions: dict[str, Suggestion]
    cross_validation: dict[str, CrossValidation]
    top_k: int = 4
    candidates: int = 12
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def suggestion(self) -> Suggestion:
        return self.suggestions[self.mode]

    @property
    def threshold(self) -> float | None:
        """The run's single threshold, or None when its mode has none (overlap)."""
        return self.suggestion.threshold

    def measurements(self) -> dict[str, Any]:
        """The measured table, suggestions and estimates, for a profile's ``measurements``."""
        return {
            "passages": self.passages,
            "top_k": self.top_k,
            "candidates": self.candidates,
            **self.extra,
            "pairs": {t.pair: t.to_dict() for t in self.tables},
            "suggestions": {m: s.to_dict() for m, s in self.suggestions.items()},
            "cross_validation": {m: cv.to_dict() for m, cv in self.cross_validation.items()},
        }

    def to_profile(
        self,
        *,
        corpus: str | None = None,
        collection: str | None = None,
        queries: Sequence[str] | None = None,
    ) -> CalibrationProfile:
        """A profile of this run's threshold; an error when its mode found none."""
        if self.threshold is None:
            raise ThresholdedError(
                f"mode {self.mode} suggests no threshold: {self.suggestion.note}. "
                "Use --mode never-lose or --mode loss-budget."
            )
        return CalibrationProfile(
            version=PROFILE_VERSION,
            min_similarity=self.threshold,
            embedding_model=str(self.model_id),
            metric="IP",
            collection=collection,
            corpus=corpus,
            mode=self.mode,
            margin=self.suggestion.margin,
            max_loss=self.suggestion.max_loss,
            provenance=self.provenance(),
            measurements={**self.measurements(), "queries": list(queries or [])},
        )

    def provenance(self) -> str:
        """One paragraph saying what the threshold rests on, in the words of KNOWN_FLOORS."""
        s = self.suggestion
        goods = [t for t in self.tables if t.answer_min is not None]
        junks = [t for t in self.tables if t.unrelated_max is not None]
        parts = [
            f"Measured with `thresholded calibrate` ({self.mode}) on "
            f"{sum(t.n_answerable for t in self.tables)} answerable and "
            f"{sum(t.n_unrelated for t in self.tables)} unrelated questions, "
            f"pairs {', '.join(t.pair for t in self.tables)}, IP on unit vectors (cosine)."
        ]
        if goods:
            lo = min(t.answer_min for t in goods if t.answer_min is not None)
            hi = max(t.answer_max for t in goods if t.answer_max is not None)
            parts.append(f"Answering passages scored {lo:.3f}-{hi:.3f}.")
        if junks:
            lo = min(t.unrelated_min for t in junks if t.unrelated_min is not None)
            hi = max(t.unrelated_max for t in junks if t.unrelated_max is not None)
            parts.append(f"The best results of unrelated questions scored {lo:.3f}-{hi:.3f}.")
        if s.threshold is not None:
            parts.append(f"{s.threshold:.2f} {s.note}.")
        return " ".join(parts)

    def to_text(self) -> str:
        from thresholded.calibration_report import format_result

        return format_result(self)

    def plot(self, path: str | Path) -> Path:
        """Write the score distributions and the trade-off curve as a PNG (needs matplotlib)."""
        from thresholded.calibration_report import plot_result

        return plot_result(self, path)


def calibrate(
    embedder: Embedder,
    corpus: Sequence[Passage],
    questions: Sequence[Question],
    *,
    passages: str = "all",
    mode: Mode = "never-lose",
    margin: float | None = None,
    max_loss: float = DEFAULT_MAX_LOSS,
    question_langs: Collection[str] | None = None,
    top_k: int = 4,
    candidates: int = 12,
    folds: int = 8,
    grid: Sequence[float] | None = None,
    resolution: float = 0.01,
    seed: int = 0,
) -> CalibrationResult:
    """Measure where answering passages and unrelated questions score, and suggest a floor.

    ``passages`` restricts what a search may return: ``en``, ``de`` (any language
    code) or ``all``; each question language makes one pair with it. Only the
    allowed passages are embedded; all scores come from one matrix product.
    """
    _check_params(mode, margin, max_loss)
    known = {p.pid for p in corpus}
    for q in questions:
        missing = [p for p in q.gold_pids if p not in known]
        if missing:
            raise ValueError(f"question {q.qid}: gold passages {missing} are not in the corpus")
    if question_langs:
        questions = [q for q in questions if q.lang in set(question_langs)]
    if not questions:
        raise ValueError("no questions left to calibrate on (check --question-lang)")
    seen: set[str] = set()
    for q in questions:
        if q.qid in seen:
            raise ValueError(f"duplicate question id {q.qid!r}")
        seen.add(q.qid)
    allowed = allowed_passages(corpus, passages)
    logger.info("embedding %d passages and %d questions", len(allowed), len(questions))
    pv = _embed(embedder, [p.text for p in allowed], queries=False)
    qv = _embed(embedder, [q.question for q in questions], queries=True)
    if pv.shape[1] != qv.shape[1]:
        raise DimensionMismatchError(
            f"passages have {pv.shape[1]} dimensions, questions {qv.shape[1]}"
        )
    model = _model_id(embedder, pv.shape[1])
    pairs = score_pairs(
        qv, pv, questions, allowed, passages=passages, top_k=top_k, candidates=candidates
    )
    return summarise(
        pairs,
        model_id=model,
        passages=passages,
        mode=mode,
        margin=margin,
        max_loss=max_loss,
        top_k=top_k,
        candidates=candidates,
        folds=folds,
        grid=grid,
        resolution=resolution,
        seed=seed,
        extra={
            "n_passages": len(allowed),
            "question_langs": sorted({q.lang for q in questions}),
        },
    )


def summarise(
    pairs: Sequence[PairScores],
    *,
    model_id: ModelId,
    passages: str,
    mode: Mode = "never-lose",
    margin: float | None = None,
    max_loss: float = DEFAULT_MAX_LOSS,
    top_k: int = 4,
    candidates: int = 12,
    folds: int = 8,
    grid: Sequence[float] | None = None,
    resolution: float = 0.01,
    seed: int = 0,
    extra: dict[str, Any] | None = None,
) -> CalibrationResult:
    """Tables, curves, all three modes' suggestions and their cross-validation, from scores."""
    _check_params(mode, margin, max_loss)
    good = {s.pair: s.good for s in pairs}
    junk = {s.pair: s.junk for s in pairs}
    suggestions: dict[str, Suggestion] = {
        m: suggest(m, good, junk, margin=margin, max_loss=max_loss, resolution=resolution)
        for m in MODES
    }
    cv: dict[str, CrossValidation] = {
        m: cross_validate(
            pairs,
            m,
            folds=folds,
            seed=seed,
            margin=margin,
            max_loss=max_loss,
            resolution=resolution,
        )
        for m in MODES
    }
    return CalibrationResult(
        model_id=model_id,
        passages=passages,
        mode=mode,
        margin=margin,
        max_loss=max_loss,
        pairs=tuple(pairs),
        tables=tuple(pair_table(s, top_k=top_k) for s in pairs),
        curves={
            s.pair: trade_off(s.good, s.junk, s.candidates, grid, s.junk_origins) for s in pairs
        },
        suggestions=suggestions,
        cross_validation=cv,
        top_k=top_k,
        candidates=candidates,
        extra=dict(extra or {}),
    )


def _check_params(mode: str, margin: float | None, max_loss: float) -> None:
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")
    if margin is not None and not 0.0 <= margin < 1.0:
        raise ValueError(f"margin must lie in [0, 1), got {margin}")
    if not 0.0 <= max_loss < 1.0:
        raise ValueError(f"max_loss must lie in [0, 1), got {max_loss}")


# The simple YAML form -------------------------------------------------------------------


@dataclass(frozen=True)
class SimpleRow:
    """One plain question: what it should do, its best score, and the passage scoring it."""

    question: str
    should_match: bool
    top: float
    top_pid: str
    top_title: str | None


@dataclass(frozen=True)
class SimpleCalibrationResult:
    """The simple form's measurement: each question's best score, and a suggestion.

    Without gold the best score of a should-match question stands in for its
    answering passage: a floor under it keeps that question from coming back empty,
    but cannot tell whether the best passage is the right one.
    """

    model_id: ModelId
    passages: str
    mode: Mode
    margin: float | None
    max_loss: float
    rows: tuple[SimpleRow, ...]
    suggestions: dict[str, Suggestion]
    curve: tuple[CurvePoint, ...]

    @property
    def good(self) -> np.ndarray:
        return np.array([r.top for r in self.rows if r.should_match])

    @property
    def junk(self) -> np.ndarray:
        return np.array([r.top for r in self.rows if not r.should_match])

    @property
    def lowest_good(self) -> float:
        return float(self.good.min())

    @property
    def highest_junk(self) -> float | None:
        return float(self.junk.max()) if self.junk.size else None

    @property
    def suggestion(self) -> Suggestion:
        return self.suggestions[self.mode]

    @property
    def threshold(self) -> float | None:
        return self.suggestion.threshold

    def measurements(self) -> dict[str, Any]:
        return {
            "form": "simple",
            "passages": self.passages,
            "lowest_good": _r(self.lowest_good),
            "highest_junk": _r(self.highest_junk),
            "questions": [
                {
                    "question": r.question,
                    "should_match": r.should_match,
                    "top": _r(r.top),
                    "top_pid": r.top_pid,
                }
                for r in self.rows
            ],
            "suggestions": {m: s.to_dict() for m, s in self.suggestions.items()},
        }

    def to_profile(
        self,
        *,
        corpus: str | None = None,
        collection: str | None = None,
        queries: Sequence[str] | None = None,
    ) -> CalibrationProfile:
        """A profile of the simple form's threshold; an error when its mode found none."""
        highest = "n/a" if self.highest_junk is None else f"{self.highest_junk:.3f}"
        if self.threshold is None:
            raise ThresholdedError(
                f"mode {self.mode} suggests no threshold: {self.suggestion.note}. "
                "Use --mode never-lose or --mode loss-budget."
            )
        return CalibrationProfile(
            version=PROFILE_VERSION,
            min_similarity=self.threshold,
            embedding_model=str(self.model_id),
            metric="IP",
            collection=collection,
            corpus=corpus,
            mode=self.mode,
            margin=self.suggestion.margin,
            max_loss=self.suggestion.max_loss,
            provenance=(
                f"Measured with `thresholded calibrate` ({self.mode}) on the simple form: "
                f"{self.good.size} should-match questions (lowest best score "
                f"{self.lowest_good:.3f}) and {self.junk.size} should-not-match questions "
                f"(highest best score {highest}). {self.threshold:.2f} {self.suggestion.note}."
            ),
            measurements={**self.measurements(), "queries": list(queries or [])},
        )

    def to_text(self) -> str:
        from thresholded.calibration_report import format_simple

        return format_simple(self)

    def plot(self, path: str | Path) -> Path:
        """Write the best-score distributions and the trade-off curve as a PNG."""
        from thresholded.calibration_report import plot_result

        return plot_result(self, path)


def calibrate_simple(
    embedder: Embedder,
    corpus: Sequence[Passage],
    form: SimpleForm,
    *,
    passages: str = "all",
    mode: Mode = "never-lose",
    margin: float | None = None,
    max_loss: float = DEFAULT_MAX_LOSS,
    grid: Sequence[float] | None = None,
    resolution: float = 0.01,
) -> SimpleCalibrationResult:
    """Calibrate on two plain lists: each question's best score, and a suggested floor."""
    _check_params(mode, margin, max_loss)
    allowed = allowed_passages(corpus, passages)
    texts = list(form.should_match) + list(form.should_not_match)
    pv = _embed(embedder, [p.text for p in allowed], queries=False)
    qv = _embed(embedder, texts, queries=True)
    model = _model_id(embedder, pv.shape[1])
    scores = qv @ pv.T
    best = scores.argmax(axis=1)
    n_good = len(form.should_match)
    rows = tuple(
        SimpleRow(
            question=text,
            should_match=i < n_good,
            top=float(scores[i, best[i]]),
            top_pid=allowed[best[i]].pid,
            top_title=allowed[best[i]].title,
        )
        for i, text in enumerate(texts)
    )
    good = {"form": np.array([r.top for r in rows if r.should_match])}
    junk = {"form": np.array([r.top for r in rows if not r.should_match])}
    suggestions: dict[str, Suggestion] = {
        m: suggest(m, good, junk, margin=margin, max_loss=max_loss, resolution=resolution)
        for m in MODES
    }
    return SimpleCalibrationResult(
        model_id=model,
        passages=passages,
        mode=mode,
        margin=margin,
        max_loss=max_loss,
        rows=rows,
        suggestions=suggestions,
        curve=trade_off(good["form"], junk["form"], None, grid),
    )
