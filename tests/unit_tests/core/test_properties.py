"""Properties of select() and attach() for any candidates and any valid policy."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from thresholded import AttachedRole, DropReason, Metric, RetrievalPolicy, ScoreKind, to_cosine
from thresholded.core import Candidate, Selection, attach, select
from thresholded.scores import is_valid_score

SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

PRIMARY_IDS = [f"s{i}" for i in range(8)]  # few ids, so duplicates happen
SOURCES = [None, "A", "B", "C"]

# Scores: a grid (ties, the floor itself) plus any cosine, plus invalid ones.
cosines = st.one_of(
    st.sampled_from([-1.0, -0.5, 0.0, 0.25, 0.35, 0.5, 0.75, 1.0]),
    st.floats(min_value=-1.0, max_value=1.0, allow_nan=False),
)
scores = st.one_of(cosines, st.none(), st.just(math.nan))
kinds = st.one_of(
    st.just(ScoreKind.COSINE),  # mostly cosines
    st.just(ScoreKind.COSINE),
    st.sampled_from(list(ScoreKind)),
)


@st.composite
def primaries(draw: st.DrawFn) -> Candidate[int]:
    return Candidate(
        item=draw(st.integers()),
        id=draw(st.sampled_from(PRIMARY_IDS)),
        score=draw(scores),
        score_kind=draw(kinds),
        source=draw(st.sampled_from(SOURCES)),
        chars=draw(st.integers(min_value=0, max_value=300)),
        # a hybrid result re-scored with the dense model carries its cosine beside it
        cosine=draw(st.one_of(st.none(), st.none(), cosines)),
    )


@st.composite
def candidate_lists(draw: st.DrawFn) -> tuple[list[Candidate[int]], list[Candidate[int]]]:
    """Primaries, and attachments with unique ids of their own."""
    prims = draw(st.lists(primaries(), max_size=14))
    n_att = draw(st.integers(min_value=0, max_value=8))
    anchors = st.sampled_from([*PRIMARY_IDS, "unknown", None])
    atts = [
        Candidate(
            item=draw(st.integers()),
            id=f"att{i}",
            score=draw(st.one_of(st.none(), cosines)),
            is_attachment=True,
            attached_to=draw(anchors),
            attached_role=draw(st.sampled_from(list(AttachedRole))),
            chars=draw(st.integers(min_value=0, max_value=200)),
        )
        for i in range(n_att)
    ]
    return prims, atts


floors = st.one_of(
    st.just(0.0),
    st.sampled_from([-0.5, 0.25, 0.35, 0.5, 0.75, 1.0]),
    st.floats(min_value=-1.0, max_value=1.0, allow_nan=False),
)


@st.composite
def policies(draw: st.DrawFn) -> RetrievalPolicy:
    return RetrievalPolicy(
        min_similarity=draw(floors),
        top_k=draw(st.integers(min_value=1, max_value=6)),
        over_fetch=draw(st.integers(min_value=1, max_value=4)),
        max_per_source=draw(st.one_of(st.none(), st.integers(min_value=1, max_value=3))),
        max_chars=draw(st.one_of(st.none(), st.integers(min_value=1, max_value=800))),
        max_attachment_chars=draw(st.one_of(st.none(), st.integers(min_value=1, max_value=400))),
    )


def _accounted(selection: Selection, candidates: Sequence[Candidate]) -> None:
    out = [*selection.kept, *selection.attached, *(d.candidate for d in selection.dropped)]
    assert Counter(map(id, out)) == Counter(map(id, candidates))
    assert all(isinstance(d.reason, DropReason) for d in selection.dropped)


# Properties of select --------------------------------------------------------------------
# Each property is a named check; one @given test runs them all on the same examples,
# so hypothesis generates each example once.


LATER_STEPS = {DropReason.SOURCE_CAP, DropReason.BUDGET, DropReason.BEYOND_TOP_K}


def check_no_kept_cosine_below_the_floor(sel: Selection, floor: float) -> None:
    for c in sel.kept:
        assert not c.is_attachment
        if c.has_cosine and floor != 0.0:
            assert is_valid_score(c.floor_score)
            assert c.floor_score >= floor
        if c.score_kind is ScoreKind.COSINE and c.cosine is None and floor != 0.0:
            assert c.score >= floor
    for d in sel.dropped:
        if d.reason is DropReason.BELOW_THRESHOLD:
            assert d.candidate.has_cosine
            assert d.candidate.floor_score < floor
        if d.reason is DropReason.INVALID_SCORE:
            assert floor != 0.0
            assert d.candidate.has_cosine
            assert not is_valid_score(d.candidate.floor_score)
    if floor == 0.0:
        assert not sel.dropped_for(DropReason.BELOW_THRESHOLD)
        assert not sel.dropped_for(DropReason.INVALID_SCORE)
        assert sel.passed_through == ()
    else:
        # every cosine-less section that met the floor is listed by its kind, even if a
        # later step (cap, budget, top_k) dropped it
        met_floor = [*sel.kept, *(d.candidate for d in sel.dropped if d.reason in LATER_STEPS)]
        kinds = {c.score_kind for c in met_floor if not c.has_cosine}
        assert kinds == set(sel.passed_through)
        assert list(sel.passed_through) == sorted(sel.passed_through, key=lambda k: k.value)


def check_caps_budget_and_top_k(sel: Selection, policy: RetrievalPolicy) -> None:
    assert len(sel.kept) <= policy.top_k
    if policy.max_per_source is not None:
        per_source = Counter(c.source for c in sel.kept if c.source is not None)
        assert all(n <= policy.max_per_source for n in per_source.values())
    if policy.max_chars is not None:
        assert sum(c.chars for c in sel.kept) <= policy.max_chars
    if policy.max_attachment_chars is not None:
        assert sum(a.chars for a in sel.attached) <= policy.max_attachment_chars
    all_ids = [c.id for c in (*sel.kept, *sel.attached)]
    assert len(set(all_ids)) == len(all_ids)


def check_kept_in_score_order(sel: Selection) -> None:
    valid = [is_valid_score(c.score) for c in sel.kept]
    assert valid == sorted(valid, reverse=True)  # usable scores before unusable ones
    usable = [c.score for c in sel.kept if is_valid_score(c.score)]
    assert usable == sorted(usable, reverse=True)


def check_idempotent(sel: Selection, policy: RetrievalPolicy, floor: float) -> None:
    again = select(sel.kept, policy, floor)
    assert [id(c) for c in again.kept] == [id(c) for c in sel.kept]
    assert again.dropped == ()


def check_best_copy_survives(sel: Selection, prims: Sequence[Candidate]) -> None:
    duplicates = sel.dropped_for(DropReason.DUPLICATE)
    not_dup = [c.id for c in prims if all(c is not x for x in duplicates)]
    assert sorted(not_dup) == sorted({c.id for c in prims})  # one copy of each id
    for c in sel.kept:
        rivals = [x.score for x in prims if x.id == c.id and is_valid_score(x.score)]
        if rivals:
            assert c.score == max(rivals)


def check_attachments_follow_their_anchor(
    sel: Selection, policy: RetrievalPolicy, prims: Sequence[Candidate], atts: Sequence[Candidate]
) -> None:
    kept_ids = {c.id for c in sel.kept}
    prim_ids = {c.id for c in prims}
    attached = {id(a) for a in sel.attached}
    reasons = {id(d.candidate): d.reason for d in sel.dropped}
    for a in atts:
        if a.attached_to in kept_ids:
            if policy.max_attachment_chars is None:
                assert id(a) in attached  # never dropped
            else:
                assert id(a) in attached or reasons[id(a)] is DropReason.ATTACHMENT_BUDGET
        elif a.attached_to in prim_ids:
            assert reasons[id(a)] is DropReason.ANCHOR_DROPPED
        else:
            assert reasons[id(a)] is DropReason.UNSCORED  # tied to no candidate: unscored
    originals = {id(a): a.score for a in atts}
    for a in sel.attached:
        assert a.is_attachment
        score = originals[id(a)]
        assert a.score is score or a.score == score  # untouched


@SETTINGS
@given(candidate_lists(), policies())
def test_select_properties(cands, policy) -> None:
    prims, atts = cands
    pool = [*prims, *atts]
    floor = policy.resolve_min_similarity()
    sel = select(pool, policy, floor)

    _accounted(sel, pool)
    assert sel.nothing_matched == (len(sel.kept) == 0)
    assert sel.min_similarity == floor
    check_no_kept_cosine_below_the_floor(sel, floor)
    check_caps_budget_and_top_k(sel, policy)
    check_kept_in_score_order(sel)
    check_idempotent(sel, policy, floor)
    check_best_copy_survives(sel, prims)
    check_attachments_follow_their_anchor(sel, policy, prims, atts)
    # attachments do not change which sections are kept
    without = select(prims, policy, floor)
    assert [id(c) for c in sel.kept] == [id(c) for c in without.kept]
    # with the filter off, nothing is dropped for the floor
    check_no_kept_cosine_below_the_floor(select(pool, policy, 0.0), 0.0)


# Properties of attach --------------------------------------------------------------------


@SETTINGS
@given(candidate_lists(), policies())
def test_attach_properties(cands, policy) -> None:
    prims, atts = cands
    floor = policy.resolve_min_similarity()
    first = select(prims, policy, floor)
    later = attach(first, atts, policy)

    # attach never touches the kept sections
    assert [id(c) for c in later.kept] == [id(c) for c in first.kept]
    assert later.min_similarity == first.min_similarity
    assert later.passed_through == first.passed_through
    # it is the same as selecting everything at once
    at_once = select([*prims, *atts], policy, floor)
    assert [id(a) for a in later.attached] == [id(a) for a in at_once.attached]
    assert Counter((id(d.candidate), d.reason) for d in later.dropped) == Counter(
        (id(d.candidate), d.reason) for d in at_once.dropped
    )
    _accounted(later, [*prims, *atts])
    check_caps_budget_and_top_k(later, policy)
    check_attachments_follow_their_anchor(later, policy, prims, atts)


# Properties of scores and policies -------------------------------------------------------


@SETTINGS
@given(
    st.integers(min_value=2, max_value=64),
    st.integers(min_value=0, max_value=2**32 - 1),
)
def test_l2_and_ip_agree_on_unit_vectors(dim: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=dim)
    b = rng.normal(size=dim)
    a /= np.linalg.norm(a)
    b /= np.linalg.norm(b)
    ip = float(a @ b)
    l2 = float(np.sum((a - b) ** 2))
    assert abs(to_cosine(l2, Metric.L2) - to_cosine(ip, Metric.IP)) < 1e-9


@SETTINGS
@given(policies())
def test_policy_round_trips_and_overrides_validate(policy: RetrievalPolicy) -> None:
    assert RetrievalPolicy.from_json(policy.to_json()) == policy
    assert RetrievalPolicy.from_dict(policy.to_dict()) == policy
    assert policy.fetch_k == policy.top_k * policy.over_fetch
    assert policy.with_overrides(top_k=policy.top_k + 1).top_k == policy.top_k + 1


@SETTINGS
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_any_float_floor_is_valid_exactly_when_a_finite_cosine(value: float) -> None:
    ok = math.isfinite(value) and -1.0 <= value <= 1.0
    try:
        policy = RetrievalPolicy(min_similarity=value)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        assert not ok
        assert "min_similarity" in str(exc)
    else:
        assert ok
        assert policy.min_similarity == value
