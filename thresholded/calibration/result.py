"""One calibration run's result: what it measured, its floor and gate, and its profile."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thresholded.calibration.crossval import CrossValidation
from thresholded.calibration.curve import CurvePoint
from thresholded.calibration.floor import Suggestion
from thresholded.calibration.modes import Mode
from thresholded.calibration.scores import PairScores
from thresholded.calibration.table import PairTable
from thresholded.errors import ThresholdedError
from thresholded.models import ModelId
from thresholded.profile import PROFILE_VERSION, CalibrationProfile

__all__ = ["CalibrationResult", "ProfileWriter"]


class ProfileWriter:
    """Turns a result's floor, gate, provenance and measurements into a version 2 profile.

    A result provides ``threshold``, ``gate``, ``suggestion``, ``gate_suggestion``,
    ``mode``, ``model_id``, ``metric``, ``provenance()`` and ``measurements()``.
    """

    def to_profile(
        self,
        *,
        corpus: str | None = None,
        collection: str | None = None,
        queries: Sequence[str] | None = None,
    ) -> CalibrationProfile:
        """A version 2 profile of the floor and the gate; an error when the mode found no floor."""
        result: Any = self
        if result.threshold is None:
            raise ThresholdedError(
                f"mode {result.mode} suggests no threshold: {result.suggestion.note}. "
                + _what_to_do(result.suggestion)
            )
        gate = result.gate_suggestion
        return CalibrationProfile(
            version=PROFILE_VERSION,
            min_similarity=result.threshold,
            min_top_similarity=result.gate,
            embedding_model=str(result.model_id),
            metric=result.metric,
            collection=collection,
            corpus=corpus,
            mode=result.mode,
            margin=result.suggestion.margin,
            gate_margin=None if gate is None else gate.margin,
            max_loss=result.suggestion.max_loss,
            provenance=result.provenance(),
            measurements={**result.measurements(), "queries": list(queries or [])},
        )


def _what_to_do(suggestion: Suggestion) -> str:
    """The fix when a mode suggests no floor: answerable questions, or another mode."""
    if suggestion.lowest_good is None:
        return (
            "A floor is measured on answerable questions: give questions with their gold "
            "passages (or should_match questions) that the collection holds."
        )
    return "Use --mode never-lose or --mode loss-budget."


@dataclass(frozen=True)
class CalibrationResult(ProfileWriter):
    """Everything one calibration run measured, and the floor and gate of its mode.

    ``curves`` and ``suggestions`` are the floor's, ``gate_curves`` and
    ``gate_suggestions`` the gate's; ``cross_validation`` judges both together.
    """

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
    gate_margin: float | None = None
    gate_curves: dict[str, tuple[CurvePoint, ...]] = field(default_factory=dict)
    gate_suggestions: dict[str, Suggestion] = field(default_factory=dict)
    metric: str = "IP"
    """The index metric the scores are cosines under: IP on unit vectors unless the stored
    vectors of a collection indexed otherwise were read."""

    @property
    def suggestion(self) -> Suggestion:
        return self.suggestions[self.mode]

    @property
    def gate_suggestion(self) -> Suggestion | None:
        return self.gate_suggestions.get(self.mode)

    @property
    def threshold(self) -> float | None:
        """The run's floor, or None when its mode has none (overlap)."""
        return self.suggestion.threshold

    @property
    def gate(self) -> float | None:
        """The run's answer gate, or None when its mode has none."""
        s = self.gate_suggestion
        return None if s is None else s.threshold

    def measurements(self) -> dict[str, Any]:
        """The measured table, suggestions and estimates, for a profile's ``measurements``."""
        return {
            "passages": self.passages,
            "top_k": self.top_k,
            "candidates": self.candidates,
            **self.extra,
            "pairs": {t.pair: t.to_dict() for t in self.tables},
            "suggestions": {m: s.to_dict() for m, s in self.suggestions.items()},
            "gate_suggestions": {m: s.to_dict() for m, s in self.gate_suggestions.items()},
            "cross_validation": {m: cv.to_dict() for m, cv in self.cross_validation.items()},
        }

    def provenance(self) -> str:
        """One paragraph saying what the thresholds rest on, in the words of KNOWN_FLOORS."""
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
            top = min(t.top_min for t in goods if t.top_min is not None)
            parts.append(
                f"Answering passages scored {lo:.3f}-{hi:.3f}; the answerable questions' "
                f"top scores were {top:.3f} or more."
            )
        if junks:
            lo = min(t.unrelated_min for t in junks if t.unrelated_min is not None)
            hi = max(t.unrelated_max for t in junks if t.unrelated_max is not None)
            parts.append(f"The best results of unrelated questions scored {lo:.3f}-{hi:.3f}.")
        if s.threshold is not None:
            parts.append(f"Floor {s.threshold:.2f} {s.note}.")
        g = self.gate_suggestion
        if g is not None and g.threshold is not None:
            parts.append(f"Gate {g.threshold:.2f} {g.note}.")
        return " ".join(parts)

    def to_text(self) -> str:
        from thresholded.calibration.report import format_result

        return format_result(self)

    def plot(self, path: str | Path) -> Path:
        """Write the score distributions and both trade-off curves as a PNG (matplotlib)."""
        from thresholded.calibration.plot import plot_result

        return plot_result(self, path)
