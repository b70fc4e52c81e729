"""The answer gate: when even the best candidate is weak, keep nothing.

A floor judges each candidate on its own and must sit under the lowest answering
passage. The gate judges a question by its best candidate: an answerable question's
best candidate scores at least as high as its answering passage, and usually much
higher, so the gate can sit well above the floor at the same loss.

Two pure functions, in the order a pipeline calls them:

1. :func:`best_similarity`: the best cosine among the candidates that passed the
   metadata filters (the search's results, before the floor). Only cosines count:
   a hybrid or sparse candidate counts with its re-scored ``cosine`` when it has
   one, and not at all when it has none; attachments and invalid scores never count.
2. :func:`gate_passes`: whether that best cosine clears the gate. An unset gate
   (``None`` or 0) passes everything, and so does a question with no cosine at all
   (hybrid results without re-scoring pass, as they pass the floor).

When the gate does not pass, every candidate is dropped with the reason ``below_gate``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from thresholded.scores import is_valid_score

__all__ = ["best_similarity", "gate_is_on", "gate_passes"]


def gate_is_on(gate: float | None) -> bool:
    """``None`` and 0 turn the gate off; any other cosine turns it on."""
    return gate is not None and gate != 0.0


def best_similarity(candidates: Iterable[Any]) -> float | None:
    """The best cosine among ``candidates``, or None when none of them carries one.

    ``candidates`` are :class:`thresholded.selection.Candidate` objects (anything
    with ``floor_score`` and ``is_attachment``): the results of one search, which
    all passed its filters.
    """
    cosines = [
        cosine
        for c in candidates
        if not c.is_attachment and is_valid_score(cosine := c.floor_score)
    ]
    return max(cosines) if cosines else None


def gate_passes(best_cosine: float | None, gate: float | None) -> bool:
    """True when a question's candidates may be kept at all.

    False only when the gate is on and a best cosine exists and lies below it.
    """
    if not gate_is_on(gate) or best_cosine is None:
        return True
    assert gate is not None
    return best_cosine >= gate
