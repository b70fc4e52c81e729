"""What a score means, and how to turn a store's raw score into a cosine.

A cosine floor only means something for a cosine. Hybrid scores (RRF rank sums,
per-query min-max normalised weighted sums), BM25 and MMR scores are not cosines
and are never compared with one.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import TypeVar

from thresholded.errors import NotUnitVectorError, ScoreRangeError, UnsupportedMetricError

T = TypeVar("T")


class ScoreKind(StrEnum):
    """The kind of a result's score. Only ``COSINE`` meets the floor."""

    COSINE = "cosine"
    RRF = "rrf"
    WEIGHTED = "weighted"
    BM25 = "bm25"
    MMR = "mmr"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self._value_  # the plain string (``value`` is a property, read more slowly)

    @classmethod
    def parse(cls, value: ScoreKind | str) -> ScoreKind:
        """A kind, or its name in any case (``"Cosine"``); an unknown name is a ``ValueError``
        naming the kinds."""
        if isinstance(value, cls):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            kinds = ", ".join(kind.value for kind in cls)
            raise ValueError(f"unknown score_kind {value!r}: one of {kinds}") from None


def declared_kind(declared: ScoreKind | str | None, known: ScoreKind, *, source: str) -> ScoreKind:
    """The kind of ``source``'s scores: ``known`` (what its query mode or kind returns), or
    the one the caller declares. Declaring ``cosine`` for scores known to be of another kind
    is refused: MMR, RRF or sparse scores would be cut by a cosine floor. Any other
    declaration only keeps scores away from the floor, and stands."""
    if declared is None:
        return known
    kind = ScoreKind.parse(declared)
    if kind is ScoreKind.COSINE and known not in (ScoreKind.COSINE, ScoreKind.UNKNOWN):
        raise ValueError(
            f"score_kind='cosine' contradicts the scores of {source}, which are of kind "
            f"{known.value!r} and never cosines: leave score_kind out (to cut them by their "
            "dense cosine, set hybrid_policy='rescore' in the policy)"
        )
    return kind


class Metric(StrEnum):
    """Vector index metrics whose raw scores can be turned into cosines.

    ``COSINE_DISTANCE`` is 1 - cos (Chroma's ``cosine`` space); ``IP_DISTANCE`` is
    1 - ip (Chroma's ``ip`` space); ``L2`` is the squared Euclidean distance (Milvus,
    FAISS, Chroma's ``l2`` space). IP, IP_DISTANCE and L2 are cosines on unit vectors only.
    """

    IP = "IP"
    COSINE = "COSINE"
    L2 = "L2"
    COSINE_DISTANCE = "COSINE_DISTANCE"
    IP_DISTANCE = "IP_DISTANCE"

    def __str__(self) -> str:
        return self.value

    @property
    def needs_unit_vectors(self) -> bool:
        """Whether its scores are cosines only when the vectors are unit length."""
        return self in _NEED_UNIT_VECTORS

    @classmethod
    def parse(cls, value: str | Metric) -> Metric:
        """Read a metric name, case-insensitively; an unknown one is an error."""
        if isinstance(value, Metric):
            return value
        try:
            return cls(str(value).strip().upper())
        except ValueError:
            known = ", ".join(m.value for m in cls)
            raise UnsupportedMetricError(
                f"unknown metric {value!r}: scores can be read as cosines for {known} "
                "(IP and IP_DISTANCE only on unit vectors, L2 as squared distance on unit "
                "vectors, COSINE_DISTANCE as 1 - cosine)"
            ) from None


_NEED_UNIT_VECTORS = frozenset({Metric.IP, Metric.L2, Metric.IP_DISTANCE})

COSINE_RANGE_TOLERANCE = 1e-3
"""How far outside [-1, 1] a converted cosine may fall (float32 rounding) and be clamped."""


_LINEAR: dict[Metric, tuple[float, float]] = {
    Metric.COSINE: (0.0, 1.0),
    Metric.IP: (0.0, 1.0),  # on unit vectors
    Metric.L2: (1.0, -0.5),  # squared distance d = 2 - 2 cos on unit vectors
    Metric.COSINE_DISTANCE: (1.0, -1.0),
    Metric.IP_DISTANCE: (1.0, -1.0),  # on unit vectors
}
"""Each metric's cosine as ``offset + scale * raw`` (exact in floating point)."""


def to_cosine(raw: float, metric: Metric | str, *, store: str = "the store") -> float:
    """Turn a ``raw`` score of ``metric`` into a cosine similarity, within [-1, 1].

    IP on unit vectors and COSINE already are cosines. L2 is the squared distance
    d, and for unit vectors d = 2 - 2 cos, so cos = 1 - d / 2. COSINE_DISTANCE is
    1 - cos, and IP_DISTANCE 1 - ip. A result a hair outside [-1, 1] (float32
    rounding) is clamped; one further out cannot be a cosine: the vectors are not
    unit length or the metric is not the store's, and that is an error naming
    ``store``, the metric and the fix; so is a score that is not a finite number.
    """
    if raw is None or not math.isfinite(raw):
        raise ScoreRangeError(f"{store} returned the {metric} score {raw!r}: not a finite number")
    return to_cosines([raw], metric, store=store)[0]  # type: ignore[return-value]


def to_cosines(
    raws: Sequence[float | None],
    metric: Metric | str,
    *,
    store: str = "the store",
    unchecked: Sequence[bool] | None = None,
) -> list[float | None]:
    """:func:`to_cosine` of every score that can be compared (see :func:`is_valid_score`),
    in one pass; the others (None, NaN, infinities) are left as they are. A score marked in
    ``unchecked`` (a section outside the filters, which no error may name) that cannot be a
    cosine is NaN instead of a :class:`ScoreRangeError`."""
    metric = Metric.parse(metric)
    offset, scale = _LINEAR[metric]
    cosines: list[float | None] = []
    for i, raw in enumerate(raws):
        if raw is None or not math.isfinite(raw):
            cosines.append(raw)
            continue
        cosine = offset + scale * raw
        if not -1.0 <= cosine <= 1.0:
            if unchecked is not None and unchecked[i]:
                cosine = _clamped_or_nan(cosine)
            else:
                cosine = _clamped(raw, cosine, metric, store)
        cosines.append(cosine)
    return cosines


def _clamped_or_nan(cosine: float) -> float:
    """A cosine a hair outside [-1, 1] clamped; one further out NaN (no usable score)."""
    if abs(cosine) > 1.0 + COSINE_RANGE_TOLERANCE:
        return math.nan
    return min(1.0, max(-1.0, cosine))


def _clamped(raw: float, cosine: float, metric: Metric, store: str) -> float:
    if abs(cosine) > 1.0 + COSINE_RANGE_TOLERANCE:
        raise ScoreRangeError(
            f"{store} returned the {metric} score {raw!r}, which reads as the cosine "
            f"{cosine:.4f}, outside [-1, 1]: it is not a cosine similarity. Normalise the "
            "vectors (the documents' and the question's), or index with COSINE, or pass "
            "the metric the store really scores with (metric=...)."
        )
    return min(1.0, max(-1.0, cosine))


UNIT_NORM_TOLERANCE = 1e-2


def check_unit_norm(vector: list[float] | tuple[float, ...], *, what: str = "query vector") -> None:
    """Refuse a vector that is not unit length: IP on it would not be a cosine."""
    norm = math.hypot(*vector)
    if not math.isfinite(norm) or abs(norm - 1.0) > UNIT_NORM_TOLERANCE:
        raise NotUnitVectorError(
            f"the {what} has norm {norm:.4f}, not 1: an inner product with it is not a "
            "cosine similarity, so a cosine floor would cut the wrong results. Normalise "
            "the embeddings (most embedding classes have a normalize option; a FAISS store "
            "normalises them with normalize_L2=True), or index with COSINE where the store "
            "offers it."
        )


def check_has_direction(vector: list[float] | tuple[float, ...], *, what: str) -> None:
    """Refuse a vector of norm 0 or with a value that is not finite: no cosine with it is a
    number, and every section would read as unrelated to it."""
    norm = math.hypot(*vector)
    if norm == 0.0 or not math.isfinite(norm):
        raise NotUnitVectorError(
            f"the {what} has norm {norm}: no cosine can be computed with it, and every "
            "section would read as unrelated. The embedding model returned no usable vector "
            "for this question: check the model, or the vector given with the question."
        )


def is_valid_score(score: float | None) -> bool:
    """A score that can be compared at all: present and finite."""
    return score is not None and math.isfinite(score)


def rrf_fused(
    lists: Sequence[Sequence[T]], weights: Sequence[float], c: float, key: Callable[[T], str]
) -> list[tuple[T, float]]:
    """Weighted reciprocal rank fusion, as LangChain's ``EnsembleRetriever`` fuses its members'
    lists, with the scores: each item scores ``sum(weight / (rank + c))`` over the lists it
    is in (rank from 1; items of one ``key`` are one, the first seen kept), best first."""
    scores: dict[str, float] = defaultdict(float)
    for items, weight in zip(lists, weights, strict=False):
        for rank, item in enumerate(items, start=1):
            scores[key(item)] += weight / (rank + c)
    first: dict[str, T] = {}
    for item in (i for items in lists for i in items):
        first.setdefault(key(item), item)
    ordered = sorted(first.items(), key=lambda entry: scores[entry[0]], reverse=True)
    return [(item, scores[k]) for k, item in ordered]
