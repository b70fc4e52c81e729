"""The answer gate's two pure functions: the best cosine, and whether it clears the gate."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from thresholded import ScoreKind
from thresholded.core import Candidate
from thresholded.gate import best_similarity, gate_is_on, gate_passes


def _cosine(cid: str, score: float | None) -> Candidate[None]:
    return Candidate(item=None, id=cid, score=score)


def test_best_similarity_is_the_highest_cosine() -> None:
    assert best_similarity([_cosine("a", 0.2), _cosine("b", 0.5), _cosine("c", 0.4)]) == 0.5


def test_no_candidates_have_no_best() -> None:
    assert best_similarity([]) is None


def test_hybrid_scores_count_only_with_their_rescored_cosine() -> None:
    hybrid = Candidate(item=None, id="h", score=0.9, score_kind=ScoreKind.RRF)
    rescored = Candidate(item=None, id="r", score=0.8, score_kind=ScoreKind.RRF, cosine=0.3)
    assert best_similarity([hybrid]) is None
    assert best_similarity([hybrid, rescored]) == 0.3
    assert best_similarity([hybrid, rescored, _cosine("c", 0.1)]) == 0.3


def test_attachments_and_invalid_scores_never_count() -> None:
    attachment = Candidate(item=None, id="n", score=0.99, is_attachment=True, attached_to="a")
    assert best_similarity([attachment, _cosine("x", math.nan), _cosine("y", None)]) is None
    assert best_similarity([attachment, _cosine("a", 0.2)]) == 0.2


@pytest.mark.parametrize("gate", [None, 0, 0.0])
def test_an_unset_gate_passes_everything(gate: float | None) -> None:
    assert not gate_is_on(gate)
    assert gate_passes(-1.0, gate)
    assert gate_passes(None, gate)


def test_the_gate_empties_a_question_whose_best_is_below_it() -> None:
    assert gate_is_on(0.17)
    assert not gate_passes(0.169, 0.17)
    assert gate_passes(0.17, 0.17)  # the gate keeps what reaches it, as the floor does
    assert gate_passes(None, 0.17)  # no cosine: hybrid results pass, as with the floor


@given(
    st.lists(st.floats(-1, 1), max_size=20),
    st.one_of(st.none(), st.floats(-1, 1)),
)
def test_gate_passes_iff_some_cosine_reaches_an_active_gate(
    scores: list[float], gate: float | None
) -> None:
    best = best_similarity([_cosine(str(i), s) for i, s in enumerate(scores)])
    reference = not gate or not scores or any(s >= gate for s in scores)
    assert gate_passes(best, gate) is reference
