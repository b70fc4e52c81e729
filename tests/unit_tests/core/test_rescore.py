"""Re-scoring hybrid and sparse candidates: the floor meets their dense cosine, never their score.

Vectors are hand-made, so every cosine is exact: the query is e0 and a section
``c * e0 + sqrt(1 - c**2) * e1`` has cosine ``c`` with it. Scores are the kind a
hybrid store returns: RRF rank sums around 0.016 to 0.033, min-max weighted sums,
raw BM25.
"""

from __future__ import annotations

import logging
import math

import pytest

from thresholded import (
    DimensionMismatchError,
    DropReason,
    NonCosineScoreError,
    RetrievalPolicy,
    ScoreKind,
)
from thresholded.core import Candidate, select
from thresholded.rescore import (
    cosines,
    needs_cosine,
    rescore,
    to_rescore,
    wants_rescore,
    with_cosines,
)

NON_COSINE = [ScoreKind.RRF, ScoreKind.WEIGHTED, ScoreKind.BM25, ScoreKind.MMR, ScoreKind.UNKNOWN]
E0 = [1.0, 0.0, 0.0]


def vec(c: float) -> list[float]:
    return [c, math.sqrt(1.0 - c * c), 0.0]


def cand(
    id: str,
    score: float | None,
    kind: ScoreKind = ScoreKind.RRF,
    *,
    cosine: float | None = None,
    attachment: bool = False,
) -> Candidate[str]:
    return Candidate(
        item=id,
        id=id,
        score=score,
        score_kind=kind,
        cosine=cosine,
        is_attachment=attachment,
        attached_to="a" if attachment else None,
    )


def policy(**fields: object) -> RetrievalPolicy:
    return RetrievalPolicy(**{"max_per_source": None, "max_chars": None, "top_k": 10, **fields})


def ids(cands: tuple[Candidate[str], ...] | list[Candidate[str]]) -> list[str]:
    return [c.id for c in cands]


# cosines() ----------------------------------------------------------------------------


def test_cosines_of_unit_vectors_are_their_dot_products() -> None:
    got = cosines(E0, [vec(0.6), vec(0.25), vec(-0.5), vec(1.0)])
    assert got == pytest.approx([0.6, 0.25, -0.5, 1.0], abs=1e-12)


def test_cosines_normalise_both_sides() -> None:
    # |[3, 4]| = 5: cosine with e0 is 0.6 whatever the lengths
    got = cosines([2.0, 0.0], [[3.0, 4.0], [0.0, 7.0], [-10.0, 0.0]])
    assert got == pytest.approx([0.6, 0.0, -1.0], abs=1e-12)


def test_a_zero_vector_has_no_cosine() -> None:
    got = cosines(E0, [[0.0, 0.0, 0.0], vec(0.5)])
    assert math.isnan(got[0])
    assert got[1] == pytest.approx(0.5)


def test_a_zero_query_has_no_cosine() -> None:
    assert all(math.isnan(x) for x in cosines([0.0, 0.0, 0.0], [vec(0.5), vec(0.9)]))


def test_non_finite_vectors_have_no_cosine() -> None:
    got = cosines(E0, [[math.nan, 1.0, 0.0], [math.inf, 0.0, 0.0], vec(0.3)])
    assert math.isnan(got[0]) and math.isnan(got[1])
    assert got[2] == pytest.approx(0.3)


def test_cosines_stay_within_minus_one_and_one() -> None:
    # in float64 this vector's cosine with itself rounds to 1.0000000000000002
    v = [0.9034701816518086, 0.09401229776087457, -0.7434992493538084]
    w = [-x for x in v]
    assert cosines(v, [v, w]) == [1.0, -1.0]


def test_cosines_of_nothing_is_empty() -> None:
    assert cosines(E0, []) == []


def test_vectors_of_another_dimension_are_refused() -> None:
    with pytest.raises(DimensionMismatchError, match="2 dimensions"):
        cosines(E0, [vec(0.5), [1.0, 0.0]])


def test_an_empty_query_vector_is_refused() -> None:
    with pytest.raises(ValueError, match="query vector"):
        cosines([], [vec(0.5)])


# Which candidates are re-scored -------------------------------------------------------------


@pytest.mark.parametrize("kind", NON_COSINE)
def test_rescore_policy_wants_cosines_for_every_non_cosine_kind(kind: ScoreKind) -> None:
    assert wants_rescore(policy(hybrid_policy="rescore"), kind)
    assert not wants_rescore(policy(), kind)
    assert not wants_rescore(policy(hybrid_policy="pass"), kind)


def test_cosine_results_are_never_rescored() -> None:
    assert not wants_rescore(policy(hybrid_policy="rescore"), ScoreKind.COSINE)
    assert not wants_rescore(policy(hybrid_policy="rescore"), "cosine")
    assert not needs_cosine(cand("c", 0.9, ScoreKind.COSINE))


def test_attachments_and_already_rescored_candidates_need_no_cosine() -> None:
    assert needs_cosine(cand("r", 0.016))
    assert not needs_cosine(cand("r", 0.016, cosine=0.7))
    assert not needs_cosine(cand("n", None, ScoreKind.UNKNOWN, attachment=True))


def test_to_rescore_keeps_order_and_one_per_id() -> None:
    cands = [
        cand("b", 0.03),
        cand("c", 0.9, ScoreKind.COSINE),
        cand("a", 0.02),
        cand("b", 0.01),
        cand("d", 0.01, cosine=0.4),
    ]
    assert ids(to_rescore(cands)) == ["b", "a"]


def test_with_cosines_sets_the_cosine_and_leaves_score_kind_and_order() -> None:
    cands = [cand("b", 0.032), cand("a", 0.016), cand("c", 0.9, ScoreKind.COSINE)]
    out = with_cosines(cands, {"a": 0.8, "b": 0.1, "c": 0.2})
    assert ids(out) == ["b", "a", "c"]
    assert [c.score for c in out] == [0.032, 0.016, 0.9]
    assert [c.score_kind for c in out] == [ScoreKind.RRF, ScoreKind.RRF, ScoreKind.COSINE]
    assert [c.cosine for c in out] == [0.1, 0.8, None]  # a cosine score is not overwritten


def test_rescore_computes_cosines_from_the_vectors_by_id() -> None:
    cands = [cand("b", 0.032), cand("a", 0.016, ScoreKind.BM25), cand("x", 0.01)]
    out = rescore(cands, E0, {"a": vec(0.8), "b": vec(0.1)})
    assert out[0].cosine == pytest.approx(0.1)
    assert out[1].cosine == pytest.approx(0.8)
    assert out[2].cosine is None  # no vector: left as it was
    assert out[1].score == 0.016 and out[1].score_kind is ScoreKind.BM25


# The floor reads the cosine, the order the score -------------------------------------------------


def test_floor_is_compared_with_the_cosine_of_a_rescored_rrf_result() -> None:
    cands = rescore(
        [cand("kept", 0.016), cand("cut", 0.033)], E0, {"kept": vec(0.6), "cut": vec(0.4)}
    )
    sel = select(cands, policy(), 0.5)
    assert ids(sel.kept) == ["kept"]
    assert ids(sel.dropped_for(DropReason.BELOW_THRESHOLD)) == ["cut"]
    assert sel.kept[0].score == 0.016  # the hybrid score stays the score
    assert sel.passed_through == ()


def test_rescored_survivors_keep_the_hybrid_order_not_the_cosine_order() -> None:
    # hybrid order r1 > r2 > r3; cosine order r3 > r2 > r1
    cands = rescore(
        [cand("r1", 0.0328), cand("r2", 0.0323), cand("r3", 0.0161)],
        E0,
        {"r1": vec(0.55), "r2": vec(0.7), "r3": vec(0.95)},
    )
    sel = select(list(reversed(cands)), policy(), 0.5)
    assert ids(sel.kept) == ["r1", "r2", "r3"]


@pytest.mark.parametrize("kind", NON_COSINE)
def test_floor_boundary_applies_to_the_cosine(kind: ScoreKind) -> None:
    cands = [cand("at", 100.0, kind, cosine=0.5), cand("under", 100.0, kind, cosine=0.4999)]
    sel = select(cands, policy(), 0.5)
    assert ids(sel.kept) == ["at"]
    assert ids(sel.dropped_for(DropReason.BELOW_THRESHOLD)) == ["under"]


def test_a_nan_cosine_is_an_invalid_score_under_an_active_floor() -> None:
    cands = rescore([cand("z", 0.03), cand("ok", 0.02)], E0, {"z": [0.0] * 3, "ok": vec(0.9)})
    sel = select(cands, policy(), 0.5)
    assert ids(sel.kept) == ["ok"]
    assert ids(sel.dropped_for(DropReason.INVALID_SCORE)) == ["z"]


def test_zero_floor_keeps_rescored_results_whatever_their_cosine() -> None:
    cands = [cand("a", 0.03, cosine=-0.9), cand("b", 0.02, cosine=math.nan)]
    assert ids(select(cands, policy(), 0.0).kept) == ["a", "b"]


def test_strict_mode_accepts_rescored_results() -> None:
    cands = [cand("r", 0.016, cosine=0.7), cand("w", 0.3, ScoreKind.WEIGHTED, cosine=0.2)]
    sel = select(cands, policy(strict_score_kind=True), 0.5)
    assert ids(sel.kept) == ["r"]
    assert ids(sel.dropped_for(DropReason.BELOW_THRESHOLD)) == ["w"]


def test_strict_mode_still_raises_for_a_result_left_without_cosine() -> None:
    cands = [cand("r", 0.016, cosine=0.7), cand("b", 7.5, ScoreKind.BM25)]
    with pytest.raises(NonCosineScoreError, match="bm25"):
        select(cands, policy(strict_score_kind=True), 0.5)


def test_a_result_left_without_cosine_passes_through_and_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cands = [cand("r", 0.016, cosine=0.1), cand("b", 0.2, ScoreKind.BM25)]
    with caplog.at_level(logging.INFO, logger="thresholded.selection"):
        sel = select(cands, policy(), 0.5)
    assert ids(sel.kept) == ["b"]
    assert sel.passed_through == (ScoreKind.BM25,)
    assert any("bm25" in r.getMessage() for r in caplog.records)


def test_a_cosine_score_ignores_nothing_and_is_compared_as_before() -> None:
    sel = select(
        [cand("c", 0.49, ScoreKind.COSINE), cand("d", 0.51, ScoreKind.COSINE)], policy(), 0.5
    )
    assert ids(sel.kept) == ["d"]


# The policy field ------------------------------------------------------------------------


def test_hybrid_policy_defaults_to_pass() -> None:
    assert RetrievalPolicy().hybrid_policy == "pass"


def test_a_stored_policy_without_hybrid_policy_loads_with_the_default() -> None:
    stored = {"min_similarity": 0.4, "top_k": 3, "strict_score_kind": True}
    loaded = RetrievalPolicy.from_dict(stored)
    assert loaded.hybrid_policy == "pass"
    assert RetrievalPolicy.from_json('{"top_k": 2}').hybrid_policy == "pass"


def test_hybrid_policy_round_trips_and_overrides() -> None:
    rescoring = RetrievalPolicy(hybrid_policy="rescore")
    assert RetrievalPolicy.from_dict(rescoring.to_dict()).hybrid_policy == "rescore"
    assert RetrievalPolicy().with_overrides(hybrid_policy="rescore").hybrid_policy == "rescore"


@pytest.mark.parametrize("value", ["cut", "RESCORE", "", None, 1])
def test_an_unknown_hybrid_policy_is_an_error_naming_the_field(value: object) -> None:
    with pytest.raises(ValueError, match="hybrid_policy"):
        RetrievalPolicy(hybrid_policy=value)
