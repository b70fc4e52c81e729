"""Score kinds and metrics: turning raw store scores into cosines."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from thresholded import (
    Metric,
    NotUnitVectorError,
    ScoreKind,
    ScoreRangeError,
    UnsupportedMetricError,
    to_cosine,
)
from thresholded.scores import check_unit_norm, is_valid_score, to_cosines


def _unit_pair(cosine: float, dim: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Two unit vectors whose cosine is exactly ``cosine``."""
    q = np.zeros(dim)
    q[0] = 1.0
    s = np.zeros(dim)
    s[0] = cosine
    s[1] = math.sqrt(1.0 - cosine * cosine)
    return q, s


def _random_unit(rng: np.random.Generator, dim: int) -> np.ndarray:
    v = rng.normal(size=dim)
    return v / np.linalg.norm(v)


# Metric.parse ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "metric"),
    [
        ("IP", Metric.IP),
        ("ip", Metric.IP),
        ("Ip", Metric.IP),
        (" ip ", Metric.IP),
        ("COSINE", Metric.COSINE),
        ("cosine", Metric.COSINE),
        ("CoSiNe", Metric.COSINE),
        ("L2", Metric.L2),
        ("l2", Metric.L2),
        (Metric.L2, Metric.L2),
    ],
)
def test_metric_parse_is_case_insensitive(text: str, metric: Metric) -> None:
    assert Metric.parse(text) is metric


@pytest.mark.parametrize("text", ["HAMMING", "jaccard", "", "L1", "dot"])
def test_unknown_metric_is_an_error_naming_it(text: str) -> None:
    with pytest.raises(UnsupportedMetricError) as info:
        Metric.parse(text)
    assert repr(text) in str(info.value)
    # the message lists what is supported
    for known in ("IP", "COSINE", "L2"):
        assert known in str(info.value)


def test_unsupported_metric_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        Metric.parse("BM25")


def test_to_cosine_refuses_unknown_metric() -> None:
    with pytest.raises(UnsupportedMetricError) as info:
        to_cosine(0.5, "HAMMING")
    assert "HAMMING" in str(info.value)


def test_str_of_enums_is_their_value() -> None:
    assert str(Metric.IP) == "IP"
    assert str(ScoreKind.RRF) == "rrf"
    assert f"{ScoreKind.COSINE}" == "cosine"


# to_cosine -------------------------------------------------------------------------------


@pytest.mark.parametrize("metric", ["IP", "ip", "COSINE", "cosine", Metric.IP, Metric.COSINE])
@pytest.mark.parametrize("raw", [-1.0, -0.3, 0.0, 0.35, 0.9, 1.0])
def test_ip_and_cosine_are_identity(metric: str, raw: float) -> None:
    assert to_cosine(raw, metric) == raw


@pytest.mark.parametrize(
    ("distance", "cosine"),
    [(0.0, 1.0), (2.0, 0.0), (4.0, -1.0), (1.0, 0.5), (1.3, 0.35), (0.2, 0.9)],
)
def test_l2_squared_distance_to_cosine(distance: float, cosine: float) -> None:
    assert to_cosine(distance, "L2") == pytest.approx(cosine)
    assert to_cosine(distance, "l2") == pytest.approx(cosine)


@pytest.mark.parametrize("cosine", [-1.0, -0.6, 0.0, 0.35, 0.5, 0.8, 0.99, 1.0])
def test_l2_on_hand_made_unit_vectors(cosine: float) -> None:
    q, s = _unit_pair(cosine)
    assert np.linalg.norm(q) == pytest.approx(1.0)
    assert np.linalg.norm(s) == pytest.approx(1.0)
    ip = float(q @ s)
    assert ip == cosine  # exact by construction
    squared_distance = float(np.sum((q - s) ** 2))
    assert to_cosine(squared_distance, Metric.L2) == pytest.approx(cosine, abs=1e-12)
    assert to_cosine(ip, Metric.IP) == cosine
    assert to_cosine(ip, Metric.COSINE) == cosine


def test_l2_on_random_unit_vectors_agrees_with_ip() -> None:
    rng = np.random.default_rng(1234)
    for dim in (3, 16, 384, 1024):
        for _ in range(20):
            a = _random_unit(rng, dim)
            b = _random_unit(rng, dim)
            cos = float(a @ b)
            d = float(np.sum((a - b) ** 2))
            assert to_cosine(d, "L2") == pytest.approx(cos, abs=1e-9)
            assert to_cosine(cos, "IP") == cos


def test_l2_is_not_the_plain_distance() -> None:
    # Milvus L2 is the squared distance: reading the plain distance would be wrong.
    q, s = _unit_pair(0.5)
    plain = float(np.linalg.norm(q - s))  # = 1.0 for cos 0.5
    squared = plain**2
    assert to_cosine(squared, "L2") == pytest.approx(0.5)
    q, s = _unit_pair(0.0)
    plain = float(np.linalg.norm(q - s))  # sqrt(2)
    assert to_cosine(plain, "L2") != pytest.approx(0.0)
    assert to_cosine(plain**2, "L2") == pytest.approx(0.0)


@given(
    st.lists(
        st.one_of(st.none(), st.floats(min_value=-1.0, max_value=4.0), st.just(math.nan)),
        max_size=20,
    ),
    st.sampled_from(list(Metric)),
)
def test_to_cosines_is_to_cosine_of_each_comparable_score(
    raws: list[float | None], metric: Metric
) -> None:
    """The batch conversion the engine uses agrees with the formula score by score;
    what cannot be compared (None, NaN) is left as it is, for the selection to drop."""
    comparable = [r for r in raws if r is not None and math.isfinite(r)]
    try:
        expected = {r: to_cosine(r, metric) for r in comparable}
    except ScoreRangeError:
        with pytest.raises(ScoreRangeError):
            to_cosines(raws, metric)
        return
    converted = to_cosines(raws, metric)
    assert len(converted) == len(raws)
    for raw, cosine in zip(raws, converted, strict=True):
        if raw is None:
            assert cosine is None
        elif math.isnan(raw):
            assert cosine is not None and math.isnan(cosine)
        else:
            assert cosine == expected[raw]
            assert -1.0 <= cosine <= 1.0


@pytest.mark.parametrize("raw", [None, math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("metric", list(Metric))
def test_to_cosine_refuses_what_is_not_a_finite_score(raw: float | None, metric: Metric) -> None:
    """One score in, one cosine within [-1, 1] out: an overflowed score must not clear
    every floor (``to_cosines`` leaves such scores for the selection to drop)."""
    with pytest.raises(ScoreRangeError, match="not a finite number"):
        to_cosine(raw, metric)  # type: ignore[arg-type]


# check_unit_norm -------------------------------------------------------------------------


def test_unit_vectors_are_accepted() -> None:
    check_unit_norm([1.0, 0.0, 0.0])
    check_unit_norm((0.6, 0.8))
    check_unit_norm([1 / math.sqrt(3)] * 3)
    rng = np.random.default_rng(7)
    check_unit_norm(_random_unit(rng, 1024).tolist())


def test_small_rounding_is_tolerated() -> None:
    check_unit_norm([1.005, 0.0])
    check_unit_norm([0.995, 0.0])


@pytest.mark.parametrize(
    "vector",
    [
        [2.0, 0.0],
        [0.5, 0.5],
        [0.0, 0.0, 0.0],
        [1.02, 0.0],
        [0.98, 0.0],
        [math.nan, 0.0],
        [math.inf, 0.0],
        [3.0, 4.0],
    ],
)
def test_non_unit_vectors_are_refused(vector: list[float]) -> None:
    with pytest.raises(NotUnitVectorError) as info:
        check_unit_norm(vector)
    assert "query vector" in str(info.value)
    assert "norm" in str(info.value)


def test_non_unit_error_names_what_and_norm() -> None:
    with pytest.raises(NotUnitVectorError) as info:
        check_unit_norm([3.0, 4.0], what="section vector")
    assert "section vector" in str(info.value)
    assert "5.0000" in str(info.value)


def test_raw_embedding_unnormalised_is_refused_normalised_accepted() -> None:
    rng = np.random.default_rng(3)
    raw = rng.normal(size=384) * 3.0
    with pytest.raises(NotUnitVectorError):
        check_unit_norm(raw.tolist())
    check_unit_norm((raw / np.linalg.norm(raw)).tolist())


# is_valid_score --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("score", "valid"),
    [
        (0.0, True),
        (-1.0, True),
        (0.5, True),
        (None, False),
        (math.nan, False),
        (math.inf, False),
        (-math.inf, False),
    ],
)
def test_is_valid_score(score: float | None, valid: bool) -> None:
    assert is_valid_score(score) is valid


# distances and the range -----------------------------------------------------------------


@pytest.mark.parametrize("cosine", [-1.0, -0.6, 0.0, 0.35, 0.99, 1.0])
def test_cosine_and_ip_distances_are_one_minus_the_cosine(cosine: float) -> None:
    assert to_cosine(1.0 - cosine, "COSINE_DISTANCE") == pytest.approx(cosine, abs=1e-12)
    assert to_cosine(1.0 - cosine, Metric.IP_DISTANCE) == pytest.approx(cosine, abs=1e-12)


def test_only_cosine_metrics_accept_vectors_of_any_length() -> None:
    assert {m for m in Metric if not m.needs_unit_vectors} == {
        Metric.COSINE,
        Metric.COSINE_DISTANCE,
    }


@pytest.mark.parametrize(
    ("raw", "metric", "cosine"),
    [(1.0009, "IP", 1.0), (-1.0009, "COSINE", -1.0), (-0.0009, "L2", 1.0), (4.0018, "L2", -1.0)],
)
def test_a_hair_outside_the_range_is_clamped(raw: float, metric: str, cosine: float) -> None:
    assert to_cosine(raw, metric) == cosine


@pytest.mark.parametrize(
    ("raw", "metric"),
    [(1.07, "IP"), (1.07, "COSINE"), (5.0, "L2"), (-0.3, "L2"), (2.1, "COSINE_DISTANCE")],
)
def test_beyond_the_range_is_an_error_naming_the_store_the_metric_and_the_fix(
    raw: float, metric: str
) -> None:
    with pytest.raises(ScoreRangeError) as info:
        to_cosine(raw, metric, store="collection 'kb'")
    message = str(info.value)
    assert "collection 'kb'" in message and Metric.parse(metric).value in message
    assert "Normalise" in message and "COSINE" in message and "metric=" in message


def test_l2_at_any_distance_is_no_longer_clamped_silently() -> None:
    with pytest.raises(ScoreRangeError):
        to_cosine(9.0, "L2")  # vectors of norm 2 at opposite ends: no cosine reads as -3.5


@pytest.mark.parametrize(
    "known", [ScoreKind.MMR, ScoreKind.RRF, ScoreKind.WEIGHTED, ScoreKind.BM25]
)
def test_cosine_declared_for_scores_of_another_kind_is_refused(known: ScoreKind) -> None:
    from thresholded.scores import declared_kind

    with pytest.raises(ValueError, match=f"of kind '{known.value}'"):
        declared_kind("Cosine", known, source="this search")
    assert declared_kind(None, known, source="this search") is known
    assert declared_kind("unknown", known, source="this search") is ScoreKind.UNKNOWN
    assert declared_kind("cosine", ScoreKind.UNKNOWN, source="it") is ScoreKind.COSINE
    assert declared_kind("rrf", ScoreKind.COSINE, source="it") is ScoreKind.RRF


@pytest.mark.parametrize("text", ["hybrid", "dense", "", "cos"])
def test_unknown_score_kind_is_an_error_naming_the_kinds(text: str) -> None:
    """score_kind="hybrid" failed with "'hybrid' is not a valid ScoreKind", which named no
    kind a caller could write instead."""
    kinds = "cosine, rrf, weighted, bm25, mmr, unknown"
    with pytest.raises(ValueError, match=f"unknown score_kind {text!r}: one of {kinds}"):
        ScoreKind.parse(text)
