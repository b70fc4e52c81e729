"""Which results a postprocessor or compressor judges by a cosine it computes itself.

The rule of :mod:`thresholded.trusted_scores`, the same in both adapters: a result whose
marks are this question's is judged by them; any other by its cosine with the question,
computed with the filter's model when it has one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from thresholded.policy_arguments import PolicyInForce
from thresholded.provenance import Asked, Standing, marks_model, standing
from thresholded.trusted_scores import another_question_error, nothing_to_judge_error

__all__ = ["to_judge"]


def to_judge(
    owner: PolicyInForce,
    items: Sequence[Any],
    question: Asked | None,
    *,
    model_argument: str,
    has_model: bool,
    scoreless: bool = True,
) -> list[int]:
    """The positions of the ``items`` whose cosine ``owner`` computes: those whose marks are
    not this question's (the marks that are must be of the floor's model). Without a model,
    none: results retrieved for another question are then an error naming
    ``model_argument``, and so are results none of which can be judged (none is this
    question's, and ``scoreless``: none has a score)."""
    standings = [standing(item, question) for item in items]
    ours = (item for item, s in zip(items, standings, strict=True) if s is Standing.OURS)
    owner._check_marks_model(marks_model(item) for item in ours)
    foreign = [i for i, s in enumerate(standings) if s is not Standing.OURS]
    if not foreign or has_model:
        return foreign
    if Standing.ANOTHER_QUESTION in standings:
        raise another_question_error(type(owner).__name__, model_argument)
    if len(foreign) == len(items) and scoreless:
        raise nothing_to_judge_error(type(owner).__name__, model_argument)
    return []
