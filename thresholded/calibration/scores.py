"""Scores: every question against every allowed passage, one pair per question language.

All scores come from one matrix product of unit vectors (the inner product Milvus
computes with ``metric_type="IP"``, the cosine). For each question a pair keeps its
*top* score (what the answer gate sees), its *answering* score (the best gold
passage: what the floor must keep) and the best ``candidates`` scores (what the
search fetches before the floor applies).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from thresholded.calibration.data import UNDETERMINED, Passage, Question

__all__ = ["PairScores", "allowed_passages", "score_pairs"]

logger = logging.getLogger(__name__)


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
    words: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=int))
    """Each question's length in words (empty when unknown)."""

    @property
    def good(self) -> np.ndarray:
        """Scores of the answering passages."""
        return self.gold[self.answerable]

    @property
    def good_top(self) -> np.ndarray:
        """Top scores of the answerable questions: what the gate must let through."""
        return self.top[self.answerable]

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
            words=self.words[mask] if self.words.size else self.words,
        )


def _pair_order(passages: str) -> Callable[[str], tuple[bool, bool, str]]:
    return lambda lang: (lang != passages, lang != "en", lang)


def allowed_passages(corpus: Sequence[Passage], passages: str) -> list[Passage]:
    """The passages a pair may return: one language, or ``all``."""
    allowed = [p for p in corpus if passages == "all" or p.lang == passages]
    if not allowed:
        langs = sorted({p.lang for p in corpus})
        if langs == [UNDETERMINED]:
            raise ValueError(
                f"no passages in language {passages!r}: the corpus names no language (no "
                "passage has a 'lang'): give the passages their 'lang', or calibrate over "
                "them all (passages all, the default)"
            )
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
                words=np.array([len(questions[i].question.split()) for i in keep], dtype=int),
            )
        )
    return tuple(pairs)
