"""The answer gate as a step of the selection: the best cosine decides whether anything stays."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from thresholded import DropReason, RetrievalPolicy, ScoreKind
from thresholded.core import Candidate, select
from thresholded.fanout import Found, Outcome, merge
from thresholded.selection import Dropped

NO_CAP = {"max_per_source": None, "max_chars": None, "top_k": 10}


def cand(id_: str, score: float | None, kind: ScoreKind = ScoreKind.COSINE, **kw) -> Candidate:
    return Candidate(item=id_, id=id_, score=score, score_kind=kind, **kw)


def test_below_the_gate_nothing_is_kept_and_every_candidate_says_why():
    policy = RetrievalPolicy(min_similarity=0.1, min_top_similarity=0.5, **NO_CAP)
    selection = select([cand("a", 0.45), cand("b", 0.3), cand("c", 0.05)], policy, 0.1)
    assert selection.kept == ()
    assert {d.candidate.id: d.reason for d in selection.dropped} == {
        "a": DropReason.BELOW_GATE,
        "b": DropReason.BELOW_GATE,
        "c": DropReason.BELOW_GATE,
    }
    assert (selection.best_similarity, selection.gate) == (0.45, 0.5)
    assert selection.emptied_by == "gate"


def test_at_the_gate_the_floor_decides_as_before():
    policy = RetrievalPolicy(min_similarity=0.2, min_top_similarity=0.5, **NO_CAP)
    selection = select([cand("a", 0.5), cand("b", 0.3), cand("c", 0.1)], policy, 0.2)
    assert [c.id for c in selection.kept] == ["a", "b"]
    assert selection.drop_counts() == {"below_threshold": 1}


@pytest.mark.parametrize("gate", [None, 0.0])
def test_none_or_zero_turns_the_gate_off(gate):
    policy = RetrievalPolicy(min_similarity=0.0, min_top_similarity=gate, **NO_CAP)
    selection = select([cand("a", 0.01)], policy, 0.0)
    assert [c.id for c in selection.kept] == ["a"]
    assert selection.gate is None


def test_hybrid_scores_are_no_cosines_for_the_gate_unless_re_scored():
    policy = RetrievalPolicy(min_similarity=0.1, min_top_similarity=0.5, **NO_CAP)
    unscored = select([cand("a", 0.03, ScoreKind.RRF)], policy, 0.1)
    assert [c.id for c in unscored.kept] == ["a"]  # passes, as with the floor
    rescored = select([cand("a", 0.03, ScoreKind.RRF, cosine=0.2)], policy, 0.1)
    assert rescored.kept == () and rescored.emptied_by == "gate"


def test_emptied_by_the_floor_or_by_nothing_found():
    policy = RetrievalPolicy(min_similarity=0.5, **NO_CAP)
    assert select([cand("a", 0.2)], policy, 0.5).emptied_by == "floor"
    assert select([], policy, 0.5).emptied_by == "filters"
    assert select([cand("a", 0.9)], policy, 0.5).emptied_by is None


def test_emptied_by_the_filters_when_every_candidate_lay_outside_them():
    policy = RetrievalPolicy(min_similarity=0.5, **NO_CAP)
    nothing_inside = replace(select([], policy, 0.5), outside_filters=1)
    assert nothing_inside.emptied_by == "filters"
    below = select([cand("a", 0.2)], policy, 0.5)
    assert replace(below, outside_filters=1).emptied_by == "floor"


def test_a_selection_counts_the_sections_outside_the_filters_and_never_carries_them():
    policy = RetrievalPolicy(min_similarity=0.5, **NO_CAP)
    outside = (Dropped(cand("internal", 0.95), DropReason.OUTSIDE_FILTERS),)
    with pytest.raises(ValueError, match="never carries a section outside the filters"):
        replace(select([], policy, 0.5), dropped=outside)
    counted = replace(select([cand("a", 0.2)], policy, 0.5), outside_filters=3)
    assert counted.drop_counts() == {"below_threshold": 1, "outside_filters": 3}
    assert counted.dropped_for("outside_filters") == ()


def found(*cands: Candidate, policy: RetrievalPolicy, floor: float) -> Found:
    return Found(len(cands), select(list(cands), policy, floor))


def test_the_global_gate_judges_the_best_of_every_collection():
    # a's best (0.6) is below a's own floor (0.7), but it still counts for the global gate
    own = RetrievalPolicy(min_similarity=0.7, **NO_CAP)
    low = RetrievalPolicy(min_similarity=0.2, **NO_CAP)
    a = found(cand("a1", 0.6, collection="a"), policy=own, floor=0.7)
    b = found(cand("b1", 0.3, collection="b"), policy=low, floor=0.2)
    outcomes = [Outcome("a", "ok", 1.0, 0.7, found=a), Outcome("b", "ok", 1.0, 0.2, found=b)]
    kept = merge(outcomes, RetrievalPolicy(min_top_similarity=0.55, **NO_CAP))
    assert [c.key for c in kept.kept] == [("b", "b1")]
    assert kept.best_similarity == 0.6
    emptied = merge(outcomes, RetrievalPolicy(min_top_similarity=0.65, **NO_CAP))
    assert emptied.kept == () and emptied.emptied_by == "gate"


@given(
    scores=st.lists(st.floats(-1, 1, allow_nan=False), min_size=1, max_size=12),
    gate=st.floats(-1, 1, allow_nan=False).filter(lambda g: g != 0),
)
def test_the_gate_keeps_something_exactly_when_the_best_reaches_it(scores, gate):
    policy = RetrievalPolicy(min_similarity=0.0, min_top_similarity=gate, **NO_CAP)
    selection = select([cand(f"c{i}", s) for i, s in enumerate(scores)], policy, 0.0)
    assert bool(selection.kept) == (max(scores) >= gate)
