"""Which results a similarity filter judges by a cosine it computes: the postprocessor's
and the compressor's rule (see :mod:`thresholded.trusted_scores`)."""

from __future__ import annotations

from collections.abc import Sequence

from thresholded.provenance import Standing
from thresholded.trusted_scores import another_question_error, nothing_to_judge_error


def to_judge(
    standings: Sequence[Standing],
    *,
    has_model: bool,
    any_scored: bool,
    owner: str,
    model_argument: str,
) -> list[int] | None:
    """The positions of the results whose marks are not this question's, when they are to
    be embedded for their cosines; None when nothing is. Without a model, results
    retrieved for another question, or results none of which has a trusted mark or a
    score (``any_scored``), are an error naming ``model_argument``."""
    foreign = [i for i, s in enumerate(standings) if s is not Standing.OURS]
    if not foreign:
        return None
    if has_model:
        return foreign
    if Standing.ANOTHER_QUESTION in standings:
        raise another_question_error(owner, model_argument)
    if len(foreign) == len(standings) and not any_scored:
        raise nothing_to_judge_error(owner, model_argument)
    return None
