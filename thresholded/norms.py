"""Stored vectors of unit length: under IP, IP_DISTANCE and L2 a score is a cosine only then.

The question's vector is checked before the search (``scores.check_unit_norm``).
The other side of the product is the stored vector: a section stored with norm
2.5 and a cosine of 0.2 scores 0.5 under inner product, and sections scaled by
0.3 turn an L2 cosine of 0.1 into 0.485. So the engine checks, in every call,
the stored vector of every candidate that could be kept, before the floor reads
its score. A vector of another length is an error that names the section, its
norm and the fix; so is a vector the store cannot give back, as its length
cannot be vouched for. Under COSINE and COSINE_DISTANCE the store normalises: nothing
to check.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from thresholded.errors import NotUnitVectorError
from thresholded.scores import UNIT_NORM_TOLERANCE, Metric

Vector = Sequence[float]

FIX = (
    "Normalise the stored vectors (embed with a model or option that normalises, or divide "
    "each vector by its norm, and index again), or index with COSINE."
)


def norms(vectors: Sequence[Vector]) -> list[float]:
    """The Euclidean norm of each vector, in order (``math.hypot``: one C loop a vector,
    without converting the store's lists of floats to arrays)."""
    return [math.hypot(*vector) for vector in vectors]


def is_unit(norm: float) -> bool:
    return math.isfinite(norm) and abs(norm - 1.0) <= UNIT_NORM_TOLERANCE


def check_stored_norms(vectors: Mapping[str, Vector | None], *, store: str, metric: Metric) -> None:
    """Refuse a candidate whose stored vector is missing or not unit length.

    ``vectors`` maps each candidate's id to its stored vector (None: the store gave
    none back). ``store`` names the collection in the message.
    """
    missing = [i for i, v in vectors.items() if v is None]
    if missing:
        raise NotUnitVectorError(
            f"{store} gave back no stored vector for section {missing[0]!r}"
            + (f" and {len(missing) - 1} more" if len(missing) > 1 else "")
            + f": under {metric} a score is a cosine only on unit vectors, and the length of "
            "a vector that cannot be read cannot be checked. Index with COSINE, or use a "
            "store whose vectors can be read back by id."
        )
    ids = list(vectors)
    found = norms([vectors[i] for i in ids])  # type: ignore[misc]  # none is None here
    bad = [(i, n) for i, n in zip(ids, found, strict=True) if not is_unit(n)]
    if not bad:
        return
    section, norm = bad[0]
    more = f" ({len(bad)} of the {len(ids)} candidates checked are not)" if len(bad) > 1 else ""
    raise NotUnitVectorError(
        f"{store}: section {section!r} is stored with norm {norm:.4f}, not 1{more}. Under "
        f"{metric} its score is not a cosine similarity, so a cosine floor would keep or drop "
        f"the wrong sections. {FIX}"
    )
