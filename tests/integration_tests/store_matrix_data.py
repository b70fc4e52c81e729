"""The store matrix's data, the same in both adapters' matrices: six sections whose cosines
with the on-topic question are chosen, and an off-topic question below the floor."""

from __future__ import annotations

import math

import numpy as np

from thresholded import RetrievalPolicy

DIM = 8
FLOOR = 0.4
ON_TOPIC = "How long does a refund take?"
OFF_TOPIC = "What is the weather in Mumbai?"
COSINES = {"s0": 0.9, "s1": 0.7, "s2": 0.5, "s3": 0.3, "s4": 0.1, "s5": -0.2}
"""Each section's chosen cosine with the on-topic question; section i lies on e0 and e(i+1)."""
POLICY = RetrievalPolicy(min_similarity=FLOOR, top_k=6, max_per_source=None, max_chars=None)


def _unit(v: list[float]) -> list[float]:
    norm = math.sqrt(math.fsum(x * x for x in v))
    return [x / norm for x in v]


def _section_vector(i: int, cos: float) -> list[float]:
    v = [0.0] * DIM
    v[0], v[i + 1] = cos, math.sqrt(1.0 - cos * cos)
    return v


VECTORS = {f"text of {key}": _section_vector(i, c) for i, (key, c) in enumerate(COSINES.items())}
QUESTIONS = {
    ON_TOPIC: [1.0] + [0.0] * (DIM - 1),
    OFF_TOPIC: _unit([0.0, 0.2, 0.1, 0.0, 0.0, 0.0, 0.0, 1.0]),  # e7 is no section's
}


def numpy_cosines(question: str) -> dict[str, float]:
    """The true cosines of every section with ``question``, by numpy."""
    q = np.asarray(QUESTIONS[question], dtype=np.float64)
    out = {}
    for key in COSINES:
        d = np.asarray(VECTORS[f"text of {key}"], dtype=np.float64)
        out[key] = float(d @ q / (np.linalg.norm(d) * np.linalg.norm(q)))
    return out
