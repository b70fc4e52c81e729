"""select() and attach(): the floor, the source cap, the budget, top_k, attachments.

Scores come from hand-made unit vectors, so every cosine is exact: the query is
e0 and section i is ``c_i * e0 + sqrt(1 - c_i**2) * e_(i+1)``, whose dot product
with the query is exactly ``c_i``.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
import pytest

from thresholded import AttachedRole, DropReason, NonCosineScoreError, RetrievalPolicy, ScoreKind
from thresholded.core import Candidate, Selection, attach, select
from thresholded.errors import ScoreRangeError
from thresholded.scores import check_unit_norm

DIM = 32
LOGGER = "thresholded.selection"


# Helpers ---------------------------------------------------------------------------------


def basis(i: int, dim: int = DIM) -> np.ndarray:
    v = np.zeros(dim)
    v[i] = 1.0
    return v


def section_vectors(cosines: Sequence[float], dim: int = DIM) -> np.ndarray:
    """Unit vectors whose cosine with ``basis(0)`` is exactly ``cosines[i]``."""
    assert len(cosines) + 2 <= dim
    rows = []
    for i, c in enumerate(cosines):
        v = c * basis(0, dim) + math.sqrt(1.0 - c * c) * basis(i + 1, dim)
        rows.append(v)
    return np.array(rows)


def scores_of(query: np.ndarray, sections: np.ndarray) -> list[float]:
    check_unit_norm(query.tolist())
    for row in sections:
        check_unit_norm(row.tolist(), what="section vector")
    return [float(x) for x in sections @ query]


def cand(
    id: str,
    score: float | None,
    *,
    source: str | None = None,
    chars: int = 0,
    kind: ScoreKind = ScoreKind.COSINE,
) -> Candidate[str]:
    return Candidate(
        item=f"text of {id}", id=id, score=score, score_kind=kind, source=source, chars=chars
    )


def att(
    id: str,
    anchor: str | None,
    *,
    chars: int = 0,
    role: AttachedRole = AttachedRole.NEIGHBOUR,
    score: float | None = None,
) -> Candidate[str]:
    return Candidate(
        item=f"text of {id}",
        id=id,
        score=score,
        is_attachment=True,
        attached_to=anchor,
        attached_role=role,
        chars=chars,
    )


def scored(ids_scores: Iterable[tuple[str, float]], **kwargs) -> list[Candidate[str]]:
    return [cand(i, s, **kwargs) for i, s in ids_scores]


def ids(cands: Iterable[Candidate]) -> list[str]:
    return [c.id for c in cands]


def reasons(selection: Selection) -> dict[str, DropReason]:
    return {d.candidate.id: d.reason for d in selection.dropped}


def assert_accounts_for(selection: Selection, candidates: Sequence[Candidate]) -> None:
    """Every candidate is kept, attached or dropped: exactly once, by identity."""
    out = [*selection.kept, *selection.attached, *(d.candidate for d in selection.dropped)]
    assert Counter(map(id, out)) == Counter(map(id, candidates))
    assert all(isinstance(d.reason, DropReason) for d in selection.dropped)


OPEN = RetrievalPolicy(min_similarity=0, max_per_source=None, max_chars=None, top_k=100)
"""A policy that limits nothing, to test one step at a time."""


def only(**fields) -> RetrievalPolicy:
    return OPEN.model_copy(update=fields)


# The helpers' own arithmetic -------------------------------------------------------------


def test_hand_made_vectors_give_exact_cosines() -> None:
    cosines = [0.9, 0.5, 0.35, 0.0, -0.4, 1.0, -1.0]
    sections = section_vectors(cosines)
    assert scores_of(basis(0), sections) == cosines
    assert scores_of(basis(DIM - 1), sections) == [0.0] * len(cosines)


# The floor -------------------------------------------------------------------------------


def test_floor_drops_below_and_keeps_equal() -> None:
    scores = scores_of(basis(0), section_vectors([0.9, 0.5, 0.49, 0.2, -0.3]))
    cands = scored(zip(["a", "b", "c", "d", "e"], scores, strict=True))
    sel = select(cands, only(), 0.5)
    assert ids(sel.kept) == ["a", "b"]
    assert reasons(sel) == {
        "c": DropReason.BELOW_THRESHOLD,
        "d": DropReason.BELOW_THRESHOLD,
        "e": DropReason.BELOW_THRESHOLD,
    }
    assert sel.min_similarity == 0.5
    assert sel.threshold_active
    assert not sel.nothing_matched
    assert_accounts_for(sel, cands)


def test_zero_floor_keeps_everything_even_negative_cosines() -> None:
    scores = scores_of(basis(0), section_vectors([0.9, 0.0, -0.3, -1.0]))
    cands = scored(zip("abcd", scores, strict=True))
    sel = select(cands, only(), 0.0)
    assert ids(sel.kept) == ["a", "b", "c", "d"]
    assert sel.dropped == ()
    assert not sel.threshold_active


def test_negative_floor_is_a_floor() -> None:
    cands = scored([("a", 0.1), ("b", -0.1), ("c", -0.3)])
    sel = select(cands, only(), -0.2)
    assert ids(sel.kept) == ["a", "b"]
    assert reasons(sel) == {"c": DropReason.BELOW_THRESHOLD}
    assert sel.threshold_active


def test_floor_of_one_keeps_only_identical() -> None:
    scores = scores_of(basis(0), section_vectors([1.0, 0.999]))
    sel = select(scored(zip("ab", scores, strict=True)), only(), 1.0)
    assert ids(sel.kept) == ["a"]


def test_kept_are_in_score_order_whatever_the_input_order() -> None:
    cands = scored([("low", 0.6), ("top", 0.95), ("mid", 0.8), ("neg", -0.2), ("hi", 0.9)])
    sel = select(cands, only(), 0.0)
    assert ids(sel.kept) == ["top", "hi", "mid", "low", "neg"]


def test_ties_keep_the_incoming_order() -> None:
    cands = scored([("x", 0.7), ("y", 0.7), ("z", 0.7)])
    assert ids(select(cands, only(), 0.5).kept) == ["x", "y", "z"]
    assert ids(select(list(reversed(cands)), only(), 0.5).kept) == ["z", "y", "x"]


def test_empty_candidates() -> None:
    sel = select([], RetrievalPolicy(min_similarity=0.35), 0.35)
    assert sel.kept == ()
    assert sel.attached == ()
    assert sel.dropped == ()
    assert sel.nothing_matched
    assert sel.drop_counts() == {}


def test_select_accepts_any_iterable() -> None:
    sel = select((c for c in scored([("a", 0.9), ("b", 0.1)])), only(), 0.5)
    assert ids(sel.kept) == ["a"]


def test_everything_below_the_floor_means_nothing_matched() -> None:
    cands = scored([("a", 0.3), ("b", 0.2)])
    sel = select(cands, RetrievalPolicy(min_similarity=0.35), 0.35)
    assert sel.nothing_matched
    assert sel.dropped_for(DropReason.BELOW_THRESHOLD) == tuple(cands)


# Invalid scores --------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [None, math.nan, math.inf, -math.inf])
def test_missing_or_nan_cosine_is_dropped_under_an_active_floor(bad: float | None) -> None:
    cands = [cand("good", 0.8), cand("bad", bad)]
    sel = select(cands, only(), 0.5)
    assert ids(sel.kept) == ["good"]
    assert reasons(sel) == {"bad": DropReason.INVALID_SCORE}


@pytest.mark.parametrize("bad", [None, math.nan])
def test_missing_or_nan_cosine_is_kept_last_with_zero_floor(bad: float | None) -> None:
    cands = [cand("bad", bad), cand("neg", -0.5), cand("good", 0.8)]
    sel = select(cands, only(), 0.0)
    assert ids(sel.kept) == ["good", "neg", "bad"]
    assert sel.dropped == ()


def test_invalid_scores_go_beyond_top_k_first_with_zero_floor() -> None:
    cands = [cand("none", None), cand("a", 0.1), cand("b", 0.2)]
    sel = select(cands, only(top_k=2), 0.0)
    assert ids(sel.kept) == ["b", "a"]
    assert reasons(sel) == {"none": DropReason.BEYOND_TOP_K}


@pytest.mark.parametrize("floor", [0.0, 0.5])
@pytest.mark.parametrize("logit", [7.3, -4.0, 1.5])
def test_a_cosine_outside_minus_one_one_is_an_error_not_a_comparison(
    floor: float, logit: float
) -> None:
    query = basis(0)
    real = scores_of(query, section_vectors([0.8, 0.6]))
    np.testing.assert_allclose(real, [0.8, 0.6])
    cands = [cand("a", real[0]), cand("b", real[1]), cand("reranked", logit)]
    with pytest.raises(ScoreRangeError, match=r"'reranked' has the cosine .* outside \[-1, 1\]"):
        select(cands, only(min_top_similarity=0.7), floor)
    # the same number as a score of another kind is not a cosine, and passes the floor
    other = select([*cands[:2], cand("reranked", logit, kind=ScoreKind.UNKNOWN)], only(), floor)
    assert "reranked" in ids(other.kept)
    assert other.best_similarity == pytest.approx(0.8)


def test_float_rounding_just_above_one_is_still_a_cosine() -> None:
    sel = select([cand("a", 1.0 + 1e-4)], only(), 0.5)
    assert ids(sel.kept) == ["a"]


# Non-cosine scores -----------------------------------------------------------------------


NON_COSINE = [ScoreKind.RRF, ScoreKind.WEIGHTED, ScoreKind.BM25, ScoreKind.MMR, ScoreKind.UNKNOWN]


@pytest.mark.parametrize("kind", NON_COSINE)
def test_non_cosine_scores_pass_through_the_floor(
    kind: ScoreKind, caplog: pytest.LogCaptureFixture
) -> None:
    # an RRF score of 0.016 is not a weak match: it must not be compared with 0.5
    cands = [cand("a", 0.016, kind=kind), cand("b", 0.01, kind=kind), cand("c", 0.3)]
    with caplog.at_level(logging.INFO, logger=LOGGER):
        sel = select(cands, only(), 0.5)
    assert ids(sel.kept) == ["a", "b"]
    assert reasons(sel) == {"c": DropReason.BELOW_THRESHOLD}
    assert sel.passed_through == (kind,)
    infos = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.INFO]
    assert len(infos) == 1
    assert kind.value in infos[0].getMessage()


def test_several_non_cosine_kinds_are_listed_once_with_one_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cands = [
        cand("r1", 0.03, kind=ScoreKind.RRF),
        cand("b1", 12.5, kind=ScoreKind.BM25),
        cand("r2", 0.02, kind=ScoreKind.RRF),
        cand("w1", 0.0, kind=ScoreKind.WEIGHTED),
        cand("u1", None, kind=ScoreKind.UNKNOWN),
    ]
    with caplog.at_level(logging.INFO, logger=LOGGER):
        sel = select(cands, only(), 0.9)
    assert set(ids(sel.kept)) == {"r1", "b1", "r2", "w1", "u1"}
    assert sel.passed_through == (
        ScoreKind.BM25,
        ScoreKind.RRF,
        ScoreKind.UNKNOWN,
        ScoreKind.WEIGHTED,
    )
    infos = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.INFO]
    assert len(infos) == 1


def test_cosine_only_lists_nothing_passed_through(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER):
        sel = select(scored([("a", 0.9), ("b", 0.1)]), only(), 0.5)
    assert sel.passed_through == ()
    assert not [r for r in caplog.records if r.levelno == logging.INFO and r.name == LOGGER]


@pytest.mark.parametrize("kind", NON_COSINE)
def test_strict_score_kind_raises(kind: ScoreKind) -> None:
    policy = only(strict_score_kind=True)
    with pytest.raises(NonCosineScoreError) as info:
        select([cand("a", 0.9), cand("r", 0.03, kind=kind)], policy, 0.5)
    assert kind.value in str(info.value)
    assert "0.5" in str(info.value)


def test_strict_score_kind_accepts_cosines() -> None:
    sel = select(scored([("a", 0.9), ("b", 0.1)]), only(strict_score_kind=True), 0.5)
    assert ids(sel.kept) == ["a"]


def test_strict_score_kind_with_zero_floor_has_no_floor_to_meet() -> None:
    sel = select([cand("r", 0.03, kind=ScoreKind.RRF)], only(strict_score_kind=True), 0.0)
    assert ids(sel.kept) == ["r"]
    assert sel.passed_through == ()


def test_non_cosine_still_meets_cap_budget_and_top_k() -> None:
    cands = [
        cand("r1", 0.05, kind=ScoreKind.RRF, source="s", chars=10),
        cand("r2", 0.04, kind=ScoreKind.RRF, source="s", chars=10),
        cand("r3", 0.03, kind=ScoreKind.RRF, source="t", chars=1000),
        cand("r4", 0.02, kind=ScoreKind.RRF, source="u", chars=10),
        cand("r5", 0.01, kind=ScoreKind.RRF, source="v", chars=10),
    ]
    sel = select(cands, only(max_per_source=1, max_chars=100, top_k=2), 0.5)
    assert ids(sel.kept) == ["r1", "r4"]
    assert reasons(sel) == {
        "r2": DropReason.SOURCE_CAP,
        "r3": DropReason.BUDGET,
        "r5": DropReason.BEYOND_TOP_K,
    }


# The per-source cap ----------------------------------------------------------------------


def test_source_cap() -> None:
    cands = [
        cand("a1", 0.9, source="A"),
        cand("a2", 0.85, source="A"),
        cand("b1", 0.8, source="B"),
        cand("a3", 0.75, source="A"),
        cand("n1", 0.7),
        cand("n2", 0.65),
        cand("n3", 0.6),
    ]
    sel = select(cands, only(max_per_source=2), 0.5)
    assert ids(sel.kept) == ["a1", "a2", "b1", "n1", "n2", "n3"]  # no source: no cap
    assert reasons(sel) == {"a3": DropReason.SOURCE_CAP}


def test_source_cap_keeps_the_best_of_each_source() -> None:
    cands = [cand("a-low", 0.6, source="A"), cand("a-high", 0.9, source="A")]
    sel = select(cands, only(max_per_source=1), 0.5)
    assert ids(sel.kept) == ["a-high"]
    assert reasons(sel) == {"a-low": DropReason.SOURCE_CAP}


def test_no_source_cap() -> None:
    cands = [cand(f"a{i}", 0.9 - i / 100, source="A") for i in range(6)]
    sel = select(cands, only(max_per_source=None), 0.5)
    assert len(sel.kept) == 6


def test_default_policy_caps_two_per_source() -> None:
    cands = [cand(f"a{i}", 0.9 - i / 100, source="A") for i in range(4)]
    sel = select(cands, RetrievalPolicy(min_similarity=0.35), 0.35)
    assert ids(sel.kept) == ["a0", "a1"]
    assert [d.reason for d in sel.dropped] == [DropReason.SOURCE_CAP] * 2


def test_floor_comes_before_the_cap() -> None:
    # a below-floor section is dropped for the floor, not for its source's cap
    cands = [cand("a1", 0.9, source="A"), cand("a2", 0.8, source="A"), cand("a3", 0.2, source="A")]
    sel = select(cands, only(max_per_source=2), 0.5)
    assert reasons(sel) == {"a3": DropReason.BELOW_THRESHOLD}


# The character budget --------------------------------------------------------------------


def test_budget_skips_what_overflows_and_keeps_what_still_fits() -> None:
    cands = [
        cand("big", 0.9, chars=3000),
        cand("huge", 0.85, chars=2000),  # 5000 > 4000: skipped
        cand("small", 0.8, chars=500),  # 3500: fits
        cand("medium", 0.75, chars=600),  # 4100: skipped
        cand("exact", 0.7, chars=500),  # 4000: exactly the budget, fits
        cand("one-more", 0.65, chars=1),  # 4001: skipped
        cand("empty", 0.6, chars=0),  # 4000: fits
    ]
    sel = select(cands, only(max_chars=4000), 0.5)
    assert ids(sel.kept) == ["big", "small", "exact", "empty"]
    assert sum(c.chars for c in sel.kept) == 4000
    assert reasons(sel) == {
        "huge": DropReason.BUDGET,
        "medium": DropReason.BUDGET,
        "one-more": DropReason.BUDGET,
    }


def test_a_single_section_larger_than_the_budget_is_dropped() -> None:
    sel = select([cand("a", 0.9, chars=5000)], only(max_chars=4000), 0.5)
    assert sel.nothing_matched
    assert reasons(sel) == {"a": DropReason.BUDGET}


@pytest.fixture
def none_told_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    """No section has been named yet in this process (other tests name theirs)."""
    from thresholded import selection

    monkeypatch.setattr(selection, "_TOLD_TOO_LONG", selection.Remembered())


@pytest.mark.usefixtures("none_told_yet")
def test_a_section_larger_than_the_budget_is_named_once_with_the_fix(caplog) -> None:
    """No question can keep a section longer than the whole budget: it was dropped in
    silence. LlamaIndex's default chunks (1,024 tokens) run past the default 4,000
    characters, so the best section gave way to weaker ones, or the engine said "I don't
    know" (abstained_by "policy") for a question the collection answers."""
    caplog.set_level(logging.WARNING, logger=LOGGER)
    policy = only(max_chars=4000)
    for _ in range(2):
        sel = select(
            [cand("too-long", 0.9, chars=5000), cand("short", 0.5, chars=3000)], policy, 0.4
        )
        assert ids(sel.kept) == ["short"]
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING]  # said once
    message = record.getMessage()
    for part in ("'too-long'", "5,000 characters", "max_chars=4,000", "max_chars=None"):
        assert part in message


class SlowlyHashed(str):
    """An id whose hash takes a while: two threads both looking it up at once."""

    __slots__ = ()

    def __hash__(self) -> int:
        time.sleep(0.01)
        return str.__hash__(self)


def too_long_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.usefixtures("none_told_yet")
def test_a_section_larger_than_the_budget_is_named_once_across_threads(caplog) -> None:
    """Four threads selecting the same section at once each named it: the sections named
    were checked and then noted, unlocked, so all four saw it unnamed."""
    caplog.set_level(logging.WARNING, logger=LOGGER)
    too_long = cand(SlowlyHashed("too-long"), 0.9, chars=5000)
    barrier = threading.Barrier(4)

    def select_it() -> None:
        barrier.wait()
        select([too_long], only(max_chars=4000), 0.4)

    threads = [threading.Thread(target=select_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(too_long_warnings(caplog)) == 1


@pytest.mark.usefixtures("none_told_yet")
def test_sections_are_named_past_a_thousand(caplog) -> None:
    """After 1,000 sections named, no further section ever was, for the life of the
    process: the memory of those named is bounded by forgetting the least recent instead."""
    caplog.set_level(logging.WARNING, logger=LOGGER)
    many = [cand(f"long-{i}", 0.9, chars=5000) for i in range(1001)]
    for section in [*many, many[-1]]:
        select([section], only(max_chars=4000), 0.4)
    warned = too_long_warnings(caplog)
    assert len(warned) == 1001 and "'long-1000'" in warned[-1]


def test_the_least_recently_named_section_is_forgotten_first(monkeypatch, caplog) -> None:
    from thresholded import selection

    monkeypatch.setattr(selection, "_TOLD_TOO_LONG", selection.Remembered(most=2))
    caplog.set_level(logging.WARNING, logger=LOGGER)
    for name in ["a", "b", "a", "c", "a", "b"]:  # "b" forgotten at "c"; "a" seen since
        select([cand(name, 0.9, chars=5000)], only(max_chars=4000), 0.4)
    assert [m.split()[1] for m in too_long_warnings(caplog)] == ["'a'", "'b'", "'c'", "'b'"]


@pytest.mark.usefixtures("none_told_yet")
def test_a_section_that_fits_the_budget_alone_is_not_named(caplog) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    sel = select(
        [cand("first", 0.9, chars=3000), cand("second", 0.8, chars=2000)],
        only(max_chars=4000),
        0.4,
    )
    assert reasons(sel) == {"second": DropReason.BUDGET}
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.usefixtures("none_told_yet")
def test_an_attachment_larger_than_its_budget_is_named(caplog) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    sel = select(
        [cand("s", 0.9, chars=10), att("summary-of-s", "s", chars=900)],
        only(max_attachment_chars=500),
        0.4,
    )
    assert reasons(sel) == {"summary-of-s": DropReason.ATTACHMENT_BUDGET}
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "'summary-of-s'" in record.getMessage()
    assert "max_attachment_chars=500" in record.getMessage()


def test_no_budget() -> None:
    cands = [cand(f"s{i}", 0.9, chars=10_000) for i in range(3)]
    assert len(select(cands, only(max_chars=None), 0.5).kept) == 3


def test_cap_comes_before_the_budget() -> None:
    # If the budget came first, a3 would take 1000 chars and b would not fit.
    cands = [
        cand("a1", 0.9, source="A", chars=100),
        cand("a2", 0.8, source="A", chars=100),
        cand("a3", 0.7, source="A", chars=1000),
        cand("b", 0.6, source="B", chars=1000),
    ]
    sel = select(cands, only(max_per_source=2, max_chars=1500), 0.5)
    assert ids(sel.kept) == ["a1", "a2", "b"]
    assert reasons(sel) == {"a3": DropReason.SOURCE_CAP}


def test_a_section_dropped_for_the_budget_leaves_its_sources_place() -> None:
    """The cap counts the sections a source contributes: one too long for the budget
    contributes nothing, so the source's next section, which fits, is kept. It was dropped
    for the cap, and the source gave nothing."""
    cands = [
        cand("a-long", 0.9, source="A", chars=5000),
        cand("a-short", 0.8, source="A", chars=100),
        cand("b", 0.7, source="B", chars=100),
    ]
    sel = select(cands, only(max_per_source=1, max_chars=4000), 0.5)
    assert ids(sel.kept) == ["a-short", "b"]
    assert reasons(sel) == {"a-long": DropReason.BUDGET}


def test_a_section_over_the_remaining_budget_leaves_its_sources_place() -> None:
    cands = [
        cand("a1", 0.9, source="A", chars=3000),
        cand("b1", 0.85, source="B", chars=2000),  # over the 1000 left
        cand("b2", 0.8, source="B", chars=500),
    ]
    sel = select(cands, only(max_per_source=1, max_chars=4000), 0.5)
    assert ids(sel.kept) == ["a1", "b2"]
    assert reasons(sel) == {"b1": DropReason.BUDGET}


def test_floor_comes_before_the_budget() -> None:
    # a below-floor section must not use up the budget
    cands = [cand("a", 0.9, chars=100), cand("low", 0.2, chars=10), cand("b", 0.8, chars=100)]
    sel = select(cands, only(max_chars=200), 0.5)
    assert ids(sel.kept) == ["a", "b"]
    assert reasons(sel) == {"low": DropReason.BELOW_THRESHOLD}


# top_k -----------------------------------------------------------------------------------


def test_top_k() -> None:
    cands = scored([(f"s{i}", 0.99 - i / 20) for i in range(8)])
    sel = select(cands, only(top_k=3), 0.5)
    assert ids(sel.kept) == ["s0", "s1", "s2"]
    assert sel.dropped_for(DropReason.BEYOND_TOP_K) == tuple(cands[3:])


def test_budget_comes_before_top_k() -> None:
    # a section skipped for the budget does not take a top_k place
    cands = [
        cand("a", 0.9, chars=3000),
        cand("b", 0.8, chars=2000),
        cand("c", 0.7, chars=500),
        cand("d", 0.6, chars=100),
    ]
    sel = select(cands, only(top_k=2, max_chars=4000), 0.5)
    assert ids(sel.kept) == ["a", "c"]
    assert reasons(sel) == {"b": DropReason.BUDGET, "d": DropReason.BEYOND_TOP_K}


def test_cap_comes_before_top_k() -> None:
    cands = [cand("a1", 0.9, source="A"), cand("a2", 0.8, source="A"), cand("b", 0.7, source="B")]
    sel = select(cands, only(top_k=2, max_per_source=1), 0.5)
    assert ids(sel.kept) == ["a1", "b"]
    assert reasons(sel) == {"a2": DropReason.SOURCE_CAP}


def test_all_steps_together_with_the_default_policy() -> None:
    policy = RetrievalPolicy(min_similarity=0.35)  # top_k 4, 2 per source, 4000 chars
    cands = [
        cand("a1", 0.91, source="A", chars=1000),
        cand("a2", 0.90, source="A", chars=1000),
        cand("a3", 0.89, source="A", chars=100),  # cap
        cand("b1", 0.80, source="B", chars=2500),  # budget
        cand("c1", 0.70, source="C", chars=900),
        cand("d1", 0.60, source="D", chars=100),
        cand("e1", 0.50, source="E", chars=10),  # beyond top_k
        cand("f1", 0.34, source="F", chars=10),  # below floor
        cand("g1", None, source="G", chars=10),  # invalid
    ]
    sel = select(cands, policy, policy.resolve_min_similarity())
    assert ids(sel.kept) == ["a1", "a2", "c1", "d1"]
    assert reasons(sel) == {
        "f1": DropReason.BELOW_THRESHOLD,
        "g1": DropReason.INVALID_SCORE,
        "a3": DropReason.SOURCE_CAP,
        "b1": DropReason.BUDGET,
        "e1": DropReason.BEYOND_TOP_K,
    }
    assert sel.drop_counts() == {
        "below_threshold": 1,
        "invalid_score": 1,
        "source_cap": 1,
        "budget": 1,
        "beyond_top_k": 1,
    }
    assert_accounts_for(sel, cands)


# Duplicates ------------------------------------------------------------------------------


@pytest.mark.parametrize("order", ["best-first", "best-last"])
def test_duplicate_ids_keep_the_best_scored_copy(order: str) -> None:
    best = cand("x", 0.9, chars=1)
    worse = cand("x", 0.6, chars=2)
    cands = (
        [best, cand("y", 0.7), worse] if order == "best-first" else [worse, cand("y", 0.7), best]
    )
    sel = select(cands, only(), 0.5)
    assert ids(sel.kept) == ["x", "y"]
    assert sel.kept[0] is best
    assert len(sel.dropped) == 1
    assert sel.dropped[0].candidate is worse
    assert sel.dropped[0].reason is DropReason.DUPLICATE
    assert_accounts_for(sel, cands)


def test_duplicate_with_a_missing_score_loses_to_a_scored_copy() -> None:
    nan_copy = cand("x", math.nan)
    scored_copy = cand("x", 0.2)
    sel = select([nan_copy, scored_copy], only(), 0.0)
    assert sel.kept == (scored_copy,)
    assert sel.dropped[0].candidate is nan_copy
    assert sel.dropped[0].reason is DropReason.DUPLICATE


def test_three_copies_keep_one() -> None:
    cands = [cand("x", 0.6), cand("x", 0.8), cand("x", 0.7)]
    sel = select(cands, only(), 0.5)
    assert [c.score for c in sel.kept] == [0.8]
    assert [d.reason for d in sel.dropped] == [DropReason.DUPLICATE] * 2


def test_duplicate_does_not_use_up_the_source_cap() -> None:
    cands = [cand("x", 0.9, source="A"), cand("x", 0.85, source="A"), cand("y", 0.8, source="A")]
    sel = select(cands, only(max_per_source=2), 0.5)
    assert ids(sel.kept) == ["x", "y"]


# Attachments inside select ---------------------------------------------------------------


def test_attachment_follows_its_anchor() -> None:
    cands = [
        cand("a", 0.9),
        cand("b", 0.2),
        att("a-next", "a"),
        att("a-summary", "a", role=AttachedRole.PARENT_SUMMARY),
        att("b-next", "b"),
    ]
    sel = select(cands, only(), 0.5)
    assert ids(sel.kept) == ["a"]
    assert ids(sel.attached) == ["a-next", "a-summary"]
    assert reasons(sel) == {"b": DropReason.BELOW_THRESHOLD, "b-next": DropReason.ANCHOR_DROPPED}
    assert_accounts_for(sel, cands)


@pytest.mark.parametrize(
    ("policy", "dropped_anchor_reason"),
    [
        (only(max_per_source=1), DropReason.SOURCE_CAP),
        (only(max_chars=100), DropReason.BUDGET),
        (only(top_k=1), DropReason.BEYOND_TOP_K),
    ],
)
def test_attachment_of_an_anchor_dropped_for_any_reason_is_dropped(
    policy: RetrievalPolicy, dropped_anchor_reason: DropReason
) -> None:
    cands = [
        cand("a", 0.9, source="S", chars=100),
        cand("b", 0.8, source="S", chars=100),
        att("b-next", "b"),
    ]
    sel = select(cands, policy, 0.5)
    assert ids(sel.kept) == ["a"]
    assert reasons(sel) == {"b": dropped_anchor_reason, "b-next": DropReason.ANCHOR_DROPPED}
    assert sel.attached == ()


def test_attachments_are_never_compared_with_the_floor() -> None:
    low = att("n", "a", score=0.01)
    sel = select([cand("a", 0.9), low, att("m", "a", score=None)], only(), 0.9)
    assert ids(sel.attached) == ["n", "m"]
    assert sel.attached[0] is low
    assert sel.attached[0].score == 0.01
    assert sel.dropped == ()


def test_attachments_do_not_count_against_top_k_or_max_chars() -> None:
    cands = [
        cand("a", 0.9, chars=1000),
        att("a-prev", "a", chars=3000),
        att("a-next", "a", chars=3000),
        att("a-parent", "a", chars=9000, role=AttachedRole.PARENT_SUMMARY),
    ]
    sel = select(cands, only(top_k=1, max_chars=1000), 0.5)
    assert ids(sel.kept) == ["a"]
    assert ids(sel.attached) == ["a-prev", "a-next", "a-parent"]
    assert sel.dropped == ()


def test_attachments_do_not_push_sections_out_of_top_k() -> None:
    cands = [att(f"n{i}", "a") for i in range(10)] + [cand("a", 0.9), cand("b", 0.8)]
    sel = select(cands, only(top_k=2), 0.5)
    assert ids(sel.kept) == ["a", "b"]
    assert len(sel.attached) == 10


def test_attachment_budget() -> None:
    cands = [
        cand("a", 0.9),
        cand("b", 0.8),
        att("a1", "a", chars=60),
        att("a2", "a", chars=50),  # 110 > 100: skipped
        att("b1", "b", chars=40),  # 100: fits
        att("b2", "b", chars=0),  # fits
    ]
    sel = select(cands, only(max_attachment_chars=100), 0.5)
    assert ids(sel.kept) == ["a", "b"]
    assert ids(sel.attached) == ["a1", "b1", "b2"]
    assert reasons(sel) == {"a2": DropReason.ATTACHMENT_BUDGET}


def test_attachments_follow_the_order_of_their_sections() -> None:
    cands = [
        att("b-n", "b"),
        att("orphan", "nowhere"),
        att("a-n", "a"),
        cand("b", 0.7),
        cand("a", 0.9),
        att("a-p", "a", role=AttachedRole.PARENT_SUMMARY),
    ]
    sel = select(cands, only(), 0.5)
    assert ids(sel.kept) == ["a", "b"]
    assert ids(sel.attached) == ["a-n", "a-p", "b-n"]
    assert reasons(sel) == {"orphan": DropReason.UNSCORED}


@pytest.mark.parametrize("anchor", ["unknown-id", None])
def test_an_unscored_result_tied_to_no_candidate_is_dropped_as_unscored(
    anchor: str | None,
) -> None:
    # it used to be kept with a warning: nothing vouches for it
    cands = [cand("a", 0.9), att("o1", anchor), att("o2", anchor)]
    sel = select(cands, only(), 0.5)
    assert sel.attached == ()
    assert reasons(sel) == {"o1": DropReason.UNSCORED, "o2": DropReason.UNSCORED}


def test_no_warning_without_orphans(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        select([cand("a", 0.9), att("n", "a"), cand("b", 0.1), att("m", "b")], only(), 0.5)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_attachment_duplicating_a_kept_section_is_dropped_as_duplicate() -> None:
    section_b = cand("b", 0.8)
    neighbour_b = att("b", "a")  # a's neighbour is b, which is kept in its own right
    sel = select([cand("a", 0.9), section_b, neighbour_b], only(), 0.5)
    assert ids(sel.kept) == ["a", "b"]
    assert sel.kept[1] is section_b
    assert sel.attached == ()
    assert sel.dropped[0].candidate is neighbour_b
    assert sel.dropped[0].reason is DropReason.DUPLICATE


def test_two_attachments_with_the_same_id_are_kept_once() -> None:
    first = att("n", "a")
    second = att("n", "b")
    sel = select([cand("a", 0.9), cand("b", 0.8), first, second], only(), 0.5)
    assert sel.attached == (first,)
    assert reasons(sel) == {"n": DropReason.DUPLICATE}


def test_attachments_alone_match_nothing() -> None:
    sel = select([att("n", "a")], only(), 0.5)
    assert sel.nothing_matched
    assert sel.attached == ()
    assert reasons(sel) == {"n": DropReason.UNSCORED}


def test_attachment_of_a_duplicate_anchor_follows_the_kept_copy() -> None:
    cands = [cand("a", 0.4), cand("a", 0.9), att("a-n", "a")]
    sel = select(cands, only(), 0.5)
    assert ids(sel.attached) == ["a-n"]
    assert [c.score for c in sel.kept] == [0.9]


# attach() after a selection --------------------------------------------------------------


def test_attach_adds_attachments_of_kept_sections() -> None:
    sel = select([cand("a", 0.9), cand("b", 0.8)], only(), 0.5)
    after = attach(sel, [att("b-n", "b"), att("a-n", "a")], only())
    assert after.kept == sel.kept
    assert ids(after.attached) == ["a-n", "b-n"]
    assert after.dropped == ()
    assert after.min_similarity == sel.min_similarity


def test_attach_drops_attachments_of_dropped_sections() -> None:
    # regression: attach() used to keep these as orphans, so a neighbour of a
    # below-threshold section reached the prompt
    sel = select([cand("a", 0.9), cand("b", 0.2)], only(), 0.5)
    after = attach(sel, [att("a-n", "a"), att("b-n", "b")], only())
    assert ids(after.kept) == ["a"]
    assert ids(after.attached) == ["a-n"]
    assert reasons(after) == {"b": DropReason.BELOW_THRESHOLD, "b-n": DropReason.ANCHOR_DROPPED}


def test_attach_drops_orphans_as_unscored() -> None:
    sel = select([cand("a", 0.9)], only(), 0.5)
    after = attach(sel, [att("o1", "elsewhere"), att("o2", None)], only())
    assert after.attached == ()
    assert reasons(after) == {"o1": DropReason.UNSCORED, "o2": DropReason.UNSCORED}


def test_attach_never_duplicates_a_kept_section_or_an_attachment() -> None:
    sel = select([cand("a", 0.9), cand("b", 0.8), att("a-n", "a")], only(), 0.5)
    after = attach(sel, [att("b", "a"), att("a-n", "b"), att("b-n", "b")], only())
    assert ids(after.kept) == ["a", "b"]
    assert ids(after.attached) == ["a-n", "b-n"]
    assert after.attached[0] is sel.attached[0]
    assert sorted(d.reason for d in after.dropped) == [DropReason.DUPLICATE] * 2


def test_attach_respects_the_attachment_budget_with_earlier_attachments() -> None:
    policy = only(max_attachment_chars=100)
    sel = select([cand("a", 0.9), att("a-n", "a", chars=70)], policy, 0.5)
    after = attach(sel, [att("a-p", "a", chars=40), att("a-q", "a", chars=30)], policy)
    assert ids(after.attached) == ["a-n", "a-q"]
    assert reasons(after) == {"a-p": DropReason.ATTACHMENT_BUDGET}


def test_attach_with_nothing_changes_nothing() -> None:
    sel = select([cand("a", 0.9), cand("b", 0.1), att("a-n", "a")], only(), 0.5)
    after = attach(sel, [], only())
    assert after.kept == sel.kept
    assert after.attached == sel.attached
    assert after.dropped == sel.dropped


def test_attach_to_an_empty_selection() -> None:
    sel = select([cand("b", 0.1)], only(), 0.5)
    after = attach(sel, [att("b-n", "b")], only())
    assert after.nothing_matched
    assert after.attached == ()
    assert reasons(after)["b-n"] is DropReason.ANCHOR_DROPPED


def test_attach_agrees_with_select_of_everything_at_once() -> None:
    policy = only(max_per_source=1, max_attachment_chars=120, top_k=3)
    primaries = [
        cand("a", 0.9, source="A"),
        cand("a2", 0.85, source="A"),
        cand("b", 0.8, source="B"),
        cand("c", 0.3, source="C"),
        cand("d", 0.7, source="D"),
        cand("e", 0.6, source="E"),
    ]
    attachments = [
        att("a-n", "a", chars=50),
        att("a2-n", "a2", chars=10),
        att("c-n", "c", chars=10),
        att("e-n", "e", chars=10),
        att("b-n", "b", chars=50),
        att("d-n", "d", chars=50),
        att("o", "zzz", chars=5),
        att("b", "a", chars=5),
    ]
    at_once = select([*primaries, *attachments], policy, 0.5)
    later = attach(select(primaries, policy, 0.5), attachments, policy)
    assert later.kept == at_once.kept
    assert later.attached == at_once.attached
    assert Counter(later.dropped) == Counter(at_once.dropped)
    assert_accounts_for(later, [*primaries, *attachments])


# Selection helpers -----------------------------------------------------------------------


def test_drop_counts_and_dropped_for() -> None:
    cands = [cand("a", 0.9), cand("b", 0.1), cand("c", 0.2), cand("a", 0.8)]
    sel = select(cands, only(), 0.5)
    assert sel.drop_counts() == {"below_threshold": 2, "duplicate": 1}
    assert ids(sel.dropped_for(DropReason.BELOW_THRESHOLD)) == ["c", "b"]
    assert sel.dropped_for(DropReason.BUDGET) == ()


def test_selection_items_are_the_framework_objects() -> None:
    sel = select([cand("a", 0.9)], only(), 0.5)
    assert sel.kept[0].item == "text of a"


def test_drop_reason_values() -> None:
    assert {r.value for r in DropReason} == {
        "below_gate",
        "below_threshold",
        "source_cap",
        "budget",
        "beyond_top_k",
        "invalid_score",
        "duplicate",
        "anchor_dropped",
        "attachment_budget",
        "outside_filters",
        "unscored",
    }
    assert str(DropReason.BUDGET) == "budget"
    assert str(AttachedRole.PARENT_SUMMARY) == "parent_summary"


# The real bug: eleven sections, four answer ---------------------------------------------

ELEVEN = [0.1, 0.3, 0.9, 0.2, 0.85, 0.45, 0.8, 0.05, 0.7, 0.4, 0.15]
"""Cosines of sections sec-0 .. sec-10 in document order: four clear 0.5."""


def _eleven_sections(query: np.ndarray) -> list[Candidate[str]]:
    sections = section_vectors(ELEVEN)
    scores = scores_of(query, sections)
    return [
        cand(f"sec-{i}", score, source="handbook.pdf", chars=800) for i, score in enumerate(scores)
    ]


def _neighbours(kept: Sequence[Candidate[str]]) -> list[Candidate[str]]:
    out = []
    for section in kept:
        i = int(section.id.split("-")[1])
        for j in (i - 1, i + 1):
            if 0 <= j < len(ELEVEN):
                out.append(att(f"sec-{j}", section.id, chars=800))
    return out


REAL_POLICY = RetrievalPolicy(min_similarity=0.5, max_per_source=None)


def test_eleven_sections_keep_the_four_above_the_floor() -> None:
    cands = _eleven_sections(basis(0))
    assert sorted((c.score for c in cands), reverse=True)[:5] == [0.9, 0.85, 0.8, 0.7, 0.45]
    sel = select(cands, REAL_POLICY, REAL_POLICY.resolve_min_similarity())
    assert [c.score for c in sel.kept] == [0.9, 0.85, 0.8, 0.7]
    assert ids(sel.kept) == ["sec-2", "sec-4", "sec-6", "sec-8"]
    assert sel.drop_counts() == {"below_threshold": 7}
    assert_accounts_for(sel, cands)


def test_neighbours_attached_after_selection_do_not_replace_the_best() -> None:
    cands = _eleven_sections(basis(0))
    sel = select(cands, REAL_POLICY, 0.5)
    neighbours = _neighbours(sel.kept)
    after = attach(sel, neighbours, REAL_POLICY)
    # the four best sections are still there, first, in score order, untouched
    assert after.kept == sel.kept
    assert [c.score for c in after.kept] == [0.9, 0.85, 0.8, 0.7]
    # neighbours come after, in their sections' order, each once; none of them is
    # one of the kept sections, and they do not count against top_k or max_chars
    assert ids(after.attached) == ["sec-1", "sec-3", "sec-5", "sec-7", "sec-9"]
    assert all(a.is_attachment and a.score is None for a in after.attached)
    assert sum(c.chars for c in after.kept) + sum(a.chars for a in after.attached) > 4000
    new_drops = after.dropped[len(sel.dropped) :]
    assert [d.reason for d in new_drops] == [DropReason.DUPLICATE] * 3
    assert_accounts_for(after, [*cands, *neighbours])


def test_neighbours_fetched_with_the_candidates_do_not_replace_the_best() -> None:
    cands = _eleven_sections(basis(0))
    # neighbours of every section, including neighbours that are themselves top sections
    neighbours = [
        att(f"sec-{j}", f"sec-{i}", chars=800)
        for i in range(len(ELEVEN))
        for j in (i - 1, i + 1)
        if 0 <= j < len(ELEVEN)
    ]
    pool = [*neighbours, *cands]
    sel = select(pool, REAL_POLICY, 0.5)
    assert ids(sel.kept) == ["sec-2", "sec-4", "sec-6", "sec-8"]
    assert [c.score for c in sel.kept] == [0.9, 0.85, 0.8, 0.7]
    assert all(not c.is_attachment for c in sel.kept)
    assert ids(sel.attached) == ["sec-1", "sec-3", "sec-5", "sec-7", "sec-9"]
    assert all(a.attached_to in {"sec-2", "sec-4", "sec-6", "sec-8"} for a in sel.attached)
    assert_accounts_for(sel, pool)


def test_neighbours_do_not_change_the_result_with_the_default_top_k() -> None:
    cands = _eleven_sections(basis(0))
    policy = REAL_POLICY.with_overrides(top_k=2)
    sel = select(cands, policy, 0.5)
    after = attach(sel, _neighbours(cands), policy)  # neighbours of every section
    assert ids(after.kept) == ["sec-2", "sec-4"]
    assert {a.attached_to for a in after.attached} <= {"sec-2", "sec-4"}
    assert after.dropped_for(DropReason.ANCHOR_DROPPED)


def test_orthogonal_question_returns_nothing() -> None:
    cands = _eleven_sections(basis(DIM - 1))
    assert [c.score for c in cands] == [0.0] * 11
    sel = select(cands, REAL_POLICY, 0.5)
    assert sel.nothing_matched
    assert sel.kept == ()
    assert sel.drop_counts() == {"below_threshold": 11}
    after = attach(sel, [att("sec-1", "sec-2")], REAL_POLICY)
    assert after.nothing_matched
    assert after.attached == ()


def test_orthogonal_question_with_the_filter_off_returns_top_k() -> None:
    cands = _eleven_sections(basis(DIM - 1))
    sel = select(cands, REAL_POLICY, 0.0)
    assert ids(sel.kept) == ["sec-0", "sec-1", "sec-2", "sec-3"]
    # 4 x 800 chars kept, sec-4 still fits the 4000 budget (beyond top_k), the rest do not
    assert sel.drop_counts() == {"budget": 6, "beyond_top_k": 1}
    assert sel.dropped_for(DropReason.BEYOND_TOP_K)[0].id == "sec-4"


# Re-scored candidates: a hybrid score with the dense cosine beside it ------------------


def rescored(id: str, score: float, cosine: float | None, kind=ScoreKind.RRF) -> Candidate[str]:
    return Candidate(item=id, id=id, score=score, score_kind=kind, cosine=cosine)


def test_floor_meets_the_rescored_cosine_not_the_hybrid_score() -> None:
    cosines = scores_of(basis(0), section_vectors([0.8, 0.2, 0.5]))
    cands = [
        rescored("near", 0.01, cosines[0]),  # tiny RRF score, high cosine: kept
        rescored("far", 0.05, cosines[1]),  # best RRF score, low cosine: dropped
        rescored("edge", 0.02, cosines[2]),  # cosine equal to the floor: kept
    ]
    sel = select(cands, only(), 0.5)
    assert ids(sel.kept) == ["edge", "near"]  # still in hybrid score order
    assert reasons(sel) == {"far": DropReason.BELOW_THRESHOLD}
    assert sel.passed_through == ()


def test_floor_score_and_has_cosine() -> None:
    assert cand("c", 0.7).floor_score == 0.7
    assert cand("c", 0.7).has_cosine
    assert cand("r", 0.03, kind=ScoreKind.RRF).floor_score is None
    assert not cand("r", 0.03, kind=ScoreKind.RRF).has_cosine
    assert rescored("r", 0.03, 0.6).floor_score == 0.6
    assert rescored("r", 0.03, 0.6).has_cosine


def test_rescored_candidates_do_not_trip_strict_score_kind() -> None:
    sel = select([rescored("r", 0.03, 0.9)], only(strict_score_kind=True), 0.5)
    assert ids(sel.kept) == ["r"]


def test_rescored_nan_cosine_is_an_invalid_score() -> None:
    sel = select([rescored("r", 0.03, math.nan)], only(), 0.5)
    assert reasons(sel) == {"r": DropReason.INVALID_SCORE}


def test_mixed_rescored_and_unscored_hybrid_results() -> None:
    cands = [rescored("scored-low", 0.04, 0.1), cand("unscored", 0.03, kind=ScoreKind.RRF)]
    sel = select(cands, only(), 0.5)
    assert ids(sel.kept) == ["unscored"]
    assert reasons(sel) == {"scored-low": DropReason.BELOW_THRESHOLD}
    assert sel.passed_through == (ScoreKind.RRF,)
