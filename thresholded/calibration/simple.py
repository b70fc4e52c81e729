"""The simple YAML form: plain questions that should and should not match, no gold needed.

Without gold, a should-match question's top score is all there is, and the top
score is exactly what the gate judges: the gate comes from the lowest should-match
top score. A floor has to sit under the *answering* passage, which only gold
names; a should-match entry may give it (``gold:`` a section's id or its source).
With gold, the floor comes from the answering scores, and from the top scores of
the should-match questions that name none (a floor above a question's top score
would empty it); without any, the floor falls back to the top scores and equals
the gate at the same margin: it keeps every should-match question from coming
back empty, not every passage that answers it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from thresholded.calibration.curve import CurvePoint, trade_off
from thresholded.calibration.data import Passage, SimpleForm
from thresholded.calibration.embedder import Embedder, embed, model_id_of
from thresholded.calibration.embedder import passage_vectors as passage_vectors_of
from thresholded.calibration.floor import Suggestion, suggest
from thresholded.calibration.gate import suggest_gate
from thresholded.calibration.indexing import IndexAs
from thresholded.calibration.modes import DEFAULT_MAX_LOSS, MODES, Mode, check_params
from thresholded.calibration.result import ProfileWriter
from thresholded.calibration.rounding import rounded as _r
from thresholded.calibration.scores import allowed_passages
from thresholded.models import ModelId

__all__ = ["SimpleCalibrationResult", "SimpleRow", "calibrate_simple", "reachable_form"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SimpleRow:
    """One plain question: what it should do, its best score, the passage scoring it,
    and, when the form names its gold, the score of the best gold passage."""

    question: str
    should_match: bool
    top: float
    top_pid: str
    top_title: str | None
    gold: str | None = None
    gold_score: float | None = None


@dataclass(frozen=True)
class SimpleCalibrationResult(ProfileWriter):
    """The simple form's measurement: each question's best score, and floor and gate."""

    model_id: ModelId
    passages: str
    mode: Mode
    margin: float | None
    max_loss: float
    rows: tuple[SimpleRow, ...]
    suggestions: dict[str, Suggestion]
    curve: tuple[CurvePoint, ...]
    gate_suggestions: dict[str, Suggestion]
    gate_curve: tuple[CurvePoint, ...]
    metric: str = "IP"
    """The index metric the scores are cosines under (see ``CalibrationResult.metric``)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """What was read, for the profile: a collection's name, layout and filter."""

    @property
    def good(self) -> np.ndarray:
        """What the floor is measured on: each should-match question's gold score, or its top
        score where it names no gold (see :func:`_answering_scores`)."""
        return _answering_scores(self.rows)

    @property
    def good_top(self) -> np.ndarray:
        return np.array([r.top for r in self.rows if r.should_match])

    @property
    def junk(self) -> np.ndarray:
        return np.array([r.top for r in self.rows if not r.should_match])

    @property
    def has_gold(self) -> bool:
        return any(r.gold_score is not None for r in self.rows)

    @property
    def lowest_good(self) -> float:
        return float(self.good_top.min())

    @property
    def highest_junk(self) -> float | None:
        return float(self.junk.max()) if self.junk.size else None

    @property
    def suggestion(self) -> Suggestion:
        return self.suggestions[self.mode]

    @property
    def gate_suggestion(self) -> Suggestion:
        return self.gate_suggestions[self.mode]

    @property
    def threshold(self) -> float | None:
        return self.suggestion.threshold

    @property
    def gate(self) -> float | None:
        return self.gate_suggestion.threshold

    def measurements(self) -> dict[str, Any]:
        return {
            "form": "simple",
            "passages": self.passages,
            **self.extra,
            "lowest_good": _r(self.lowest_good),
            "highest_junk": _r(self.highest_junk),
            "floor_from": "gold" if self.has_gold else "top scores",
            "questions": [
                {
                    "question": r.question,
                    "should_match": r.should_match,
                    "top": _r(r.top),
                    "top_pid": r.top_pid,
                    **({"gold": r.gold, "gold_score": _r(r.gold_score)} if r.gold else {}),
                }
                for r in self.rows
            ],
            "suggestions": {m: s.to_dict() for m, s in self.suggestions.items()},
            "gate_suggestions": {m: s.to_dict() for m, s in self.gate_suggestions.items()},
        }

    def provenance(self) -> str:
        """One paragraph saying what the floor and the gate rest on."""
        highest = "n/a" if self.highest_junk is None else f"{self.highest_junk:.3f}"
        with_gold = sum(r.gold_score is not None for r in self.rows)
        without = self.good.size - with_gold
        floor_from = (
            f"gold passages of {with_gold} should-match questions"
            + (f" and the top scores of the {without} without gold" if without else "")
            + f" (lowest {float(self.good.min()):.3f})"
            if self.has_gold
            else "the should-match top scores (no gold given)"
        )
        return (
            f"Measured with `thresholded calibrate` ({self.mode}) on the simple form: "
            f"{self.good_top.size} should-match questions (lowest best score "
            f"{self.lowest_good:.3f}) and {self.junk.size} should-not-match questions "
            f"(highest best score {highest}). Floor from {floor_from}"
            + (
                f": {self.threshold:.2f} {self.suggestion.note}."
                if self.threshold is not None
                else "."
            )
            + (
                f" Gate {self.gate:.2f} {self.gate_suggestion.note}."
                if self.gate is not None
                else ""
            )
        )

    def to_text(self) -> str:
        from thresholded.calibration.report import format_simple

        return format_simple(self)

    def plot(self, path: str | Path) -> Path:
        """Write the best-score distributions and the trade-off curves as a PNG."""
        from thresholded.calibration.plot import plot_result

        return plot_result(self, path)


def _gold_rows(allowed: Sequence[Passage], gold: str) -> list[int]:
    """The allowed passages a gold label names: by id, else by source."""
    return [i for i, p in enumerate(allowed) if gold in (p.pid, p.source)]


def _no_gold(gold: str, question: str, allowed: Sequence[Passage], shown: int = 20) -> str:
    """Why a gold label names nothing: what it may name, and the sources there are."""
    sources = sorted({p.source for p in allowed if p.source})
    listed = ", ".join(repr(s) for s in sources[:shown]) + (", ..." if len(sources) > shown else "")
    return (
        f"gold {gold!r} of {question!r} names no allowed passage: no passage id or source is "
        f"{gold!r}" + (f" (sources: {listed})" if sources else "")
    )


def reachable_form(form: SimpleForm, sections: Sequence[Passage]) -> SimpleForm:
    """The form without the should-match questions whose gold names none of ``sections``
    (a collection's, under its filter): nothing there could answer them, so they are left
    out, with a warning naming them, as JSON Lines questions are (``resolve_gold``)."""
    kept = [i for i, gold in enumerate(form.gold) if gold is None or _gold_rows(sections, gold)]
    left_out = [q for i, q in enumerate(form.should_match) if i not in kept]
    if not left_out:
        return form
    if not kept:
        raise ValueError(
            "no should-match question's gold is a section of the collection (or one under the "
            "filter): calibrate where their answers are, or name other gold"
        )
    logger.warning(
        "%d should-match questions name gold that is no section of the collection (or none "
        "under the filter) and are left out: %s",
        len(left_out),
        ", ".join(repr(q) for q in left_out),
    )
    return SimpleForm(
        tuple(form.should_match[i] for i in kept),
        form.should_not_match,
        tuple(form.gold[i] for i in kept),
    )


def _rows(
    form: SimpleForm, scores: np.ndarray, allowed: Sequence[Passage]
) -> tuple[SimpleRow, ...]:
    """Each question's top score and passage, and its gold score where the form names one."""
    texts = [*form.should_match, *form.should_not_match]
    golds = [*form.gold, *[None] * len(form.should_not_match)]
    best = scores.argmax(axis=1)
    rows = []
    for i, (text, gold) in enumerate(zip(texts, golds, strict=True)):
        gold_score = None
        if gold:
            named = _gold_rows(allowed, gold)
            if not named:
                raise ValueError(_no_gold(gold, text, allowed))
            gold_score = float(scores[i, named].max())
        top = allowed[best[i]]
        rows.append(
            SimpleRow(
                text,
                i < len(form.should_match),
                float(scores[i, best[i]]),
                top.pid,
                top.title,
                gold,
                gold_score,
            )
        )
    return tuple(rows)


def _answering_scores(rows: Sequence[SimpleRow]) -> np.ndarray:
    """What the floor must keep of each should-match question: its gold score, or its top
    score where it names no gold. A question without gold is answered by some section the
    search finds, at best its top one: a floor above its top score empties it."""
    return np.array(
        [r.top if r.gold_score is None else r.gold_score for r in rows if r.should_match]
    )


def _thresholds(
    rows: Sequence[SimpleRow], margin: float | None, gate_margin: float | None, **options: Any
) -> tuple[dict[str, Suggestion], dict[str, Suggestion]]:
    """Every mode's floor (from gold scores, else top scores) and gate (from top scores)."""
    matching = [r for r in rows if r.should_match]
    has_gold = any(r.gold_score is not None for r in matching)
    top = {"form": np.array([r.top for r in matching])}
    good = {"form": _answering_scores(rows)}
    junk = {"form": np.array([r.top for r in rows if not r.should_match])}
    floors = {m: suggest(m, good, junk, margin=margin, **options) for m in MODES}
    gates = {
        m: suggest_gate(
            m,
            top,
            junk,
            good=good if has_gold else None,
            floor=floors[m].threshold,
            margin=gate_margin,
            **options,
        )
        for m in MODES
    }
    return floors, gates


def calibrate_simple(
    embedder: Embedder,
    corpus: Sequence[Passage],
    form: SimpleForm,
    *,
    passages: str = "all",
    mode: Mode = "never-lose",
    margin: float | None = None,
    gate_margin: float | None = None,
    max_loss: float = DEFAULT_MAX_LOSS,
    index_as: IndexAs = "text",
    passage_vectors: np.ndarray | None = None,
    grid: Sequence[float] | None = None,
    resolution: float = 0.01,
) -> SimpleCalibrationResult:
    """Calibrate on two plain lists: each question's best score, a floor and a gate.

    Passages are embedded as ``index_as`` indexes them, unless their stored
    ``passage_vectors`` (one row per corpus passage) are given.
    """
    check_params(mode, margin, max_loss, gate_margin)
    allowed = allowed_passages(corpus, passages)
    pv = passage_vectors_of(embedder, corpus, allowed, passage_vectors, index_as)
    texts = [*form.should_match, *form.should_not_match]
    rows = _rows(form, embed(embedder, texts, queries=True) @ pv.T, allowed)
    floors, gates = _thresholds(rows, margin, gate_margin, max_loss=max_loss, resolution=resolution)
    result = SimpleCalibrationResult(
        model_id_of(embedder, pv.shape[1]),
        passages,
        mode,
        margin,
        max_loss,
        rows,
        floors,
        (),
        gates,
        (),
    )
    return replace(
        result,
        curve=trade_off(result.good, result.junk, None, grid),
        gate_curve=trade_off(result.good_top, result.junk, None, grid),
    )
