"""Re-scoring: the dense cosine of hybrid and sparse candidates, so the floor still applies.

An RRF, weighted or BM25 score is not a cosine and is never compared with the
floor. With ``hybrid_policy="rescore"`` the adapter fetches each such
candidate's dense vector (stored, or embedded from its text) and this module
computes the cosine between the question and that vector. The candidate keeps
its hybrid score and its place in the hybrid order; only the floor reads the
cosine (:attr:`thresholded.selection.Candidate.cosine`).

Vectors are normalised here, so the cosine is right whether or not the model
or the store normalised them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TypeVar

import numpy as np

from thresholded.errors import DimensionMismatchError
from thresholded.policy import RetrievalPolicy
from thresholded.scores import ScoreKind
from thresholded.selection import Candidate

T = TypeVar("T")

Vector = Sequence[float]


def cosines(query: Vector, vectors: Sequence[Vector]) -> list[float]:
    """The cosine similarity between ``query`` and each vector, in order.

    Both sides are normalised. A zero (or non-finite) vector has no direction:
    its cosine is NaN, which the floor treats as an invalid score. Every vector
    must have the query's dimension.
    """
    q = np.asarray(query, dtype=np.float64)
    if q.ndim != 1 or q.size == 0:
        raise ValueError(f"the query vector must be a non-empty list of numbers, got {query!r}")
    if not vectors:
        return []
    for i, vector in enumerate(vectors):
        if len(vector) != q.size:
            raise DimensionMismatchError(
                f"candidate vector {i} has {len(vector)} dimensions but the query vector has "
                f"{q.size}: they come from different embedding models"
            )
    m = np.asarray(vectors, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        norms = np.linalg.norm(m, axis=1) * np.linalg.norm(q)
        sims = (m @ q) / norms
    sims[~np.isfinite(sims) | (norms == 0)] = np.nan
    return [float(min(1.0, max(-1.0, s))) if np.isfinite(s) else float("nan") for s in sims]


def wants_rescore(policy: RetrievalPolicy, score_kind: ScoreKind | str) -> bool:
    """True when ``policy`` asks for dense cosines for results of this score kind."""
    return policy.hybrid_policy == "rescore" and ScoreKind(score_kind) is not ScoreKind.COSINE


def needs_cosine(candidate: Candidate[T]) -> bool:
    """A section whose score is not a cosine and that has not been re-scored yet."""
    return (
        not candidate.is_attachment
        and candidate.score_kind is not ScoreKind.COSINE
        and candidate.cosine is None
    )


def to_rescore(candidates: Iterable[Candidate[T]]) -> list[Candidate[T]]:
    """The candidates that need a dense cosine, in their incoming order, one per id."""
    seen: set[str] = set()
    wanted = []
    for cand in candidates:
        if needs_cosine(cand) and cand.id not in seen:
            seen.add(cand.id)
            wanted.append(cand)
    return wanted


def with_cosines(
    candidates: Iterable[Candidate[T]], cosine_by_id: Mapping[str, float]
) -> list[Candidate[T]]:
    """The candidates with ``cosine`` set from ``cosine_by_id``; score, kind and order kept."""
    return [
        replace(cand, cosine=cosine_by_id[cand.id])
        if needs_cosine(cand) and cand.id in cosine_by_id
        else cand
        for cand in candidates
    ]


def rescore(
    candidates: Sequence[Candidate[T]],
    query: Vector,
    vectors: Mapping[str, Vector],
) -> list[Candidate[T]]:
    """Set the dense cosine of every candidate that needs one, from its id's vector.

    ``vectors`` maps candidate ids to dense vectors of the query's model. A
    candidate that needs a cosine but has no vector is left without one (the
    floor then passes it through, or raises under ``strict_score_kind``).
    """
    wanted = [c.id for c in to_rescore(candidates) if c.id in vectors]
    sims = cosines(query, [vectors[i] for i in wanted])
    return with_cosines(candidates, dict(zip(wanted, sims, strict=True)))
