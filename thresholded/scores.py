"""What a score means, and how to turn a store's raw score into a cosine.

A cosine floor only means something for a cosine. Hybrid scores (RRF rank sums,
per-query min-max normalised weighted sums), BM25 and MMR scores are not cosines
and are never compared with one.
"""

from __future__ import annotations

import math
from enum import StrEnum

from thresholded.errors import NotUnitVectorError, UnsupportedMetricError


class ScoreKind(StrEnum):
    """The kind of a result's score. Only ``COSINE`` meets the floor."""

    COSINE = "cosine"
    RRF = "rrf"
    WEIGHTED = "weighted"
    BM25 = "bm25"
    MMR = "mmr"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value


class Metric(StrEnum):
    """Vector index metrics whose raw scores can be turned into cosines."""

    IP = "IP"
    COSINE = "COSINE"
    L2 = "L2"

    def __str__(self) -> str:
        return self.value

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
                "(IP only on unit vectors, L2 as squared distance on unit vectors)"
            ) from None


def to_cosine(raw: float, metric: Metric | str) -> float:
    """Turn a raw score of ``metric`` into a cosine similarity.

    IP on unit vectors and COSINE already are cosines. Milvus L2 returns the
    squared distance d, and for unit vectors d = 2 - 2 cos, so cos = 1 - d / 2.
    """
    metric = Metric.parse(metric)
    if metric is Metric.L2:
        # float32 distances can put an identical vector a hair outside [-1, 1]
        return min(1.0, max(-1.0, 1.0 - raw / 2.0))
    return raw


UNIT_NORM_TOLERANCE = 1e-2


def check_unit_norm(vector: list[float] | tuple[float, ...], *, what: str = "query vector") -> None:
    """Refuse a vector that is not unit length: IP on it would not be a cosine."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if not math.isfinite(norm) or abs(norm - 1.0) > UNIT_NORM_TOLERANCE:
        raise NotUnitVectorError(
            f"the {what} has norm {norm:.4f}, not 1: an inner product with it is not a "
            "cosine similarity, so a cosine floor would cut the wrong results. Normalise "
            "the embeddings (most embedding classes have a normalize option) or index with COSINE."
        )


def is_valid_score(score: float | None) -> bool:
    """A score that can be compared at all: present and finite."""
    return score is not None and math.isfinite(score)
