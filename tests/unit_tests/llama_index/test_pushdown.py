"""Range-search pushdown on Milvus Lite: the same result as client-side filtering, less traffic.

The question is e0 and every section's first component is its cosine, so a score
equal to the floor is exact wherever the floor is a dyadic number (0.25, 0.5,
0.75, -0.25): Milvus must return it, because the policy keeps it. 0.35 is not a
float32: its section scores 0.34999999 and both paths drop it.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from pymilvus import MilvusClient
from pymilvus.exceptions import MilvusException

from llama_index_thresholded import MultiCollectionRetriever, ThresholdedRetriever
from llama_index_thresholded.pushdown import PUSHDOWN_EPSILON, range_search_kwargs
from thresholded import NotUnitVectorError, ScoreRangeError

COSINES = {
    "top": 0.95,
    "high": 0.75,
    "half-a": 0.5,
    "mid": 0.35,
    "mid-b": 0.35,
    "quarter": 0.25,
    "low": 0.1,
    "zero": 0.0,
    "neg-quarter": -0.25,
    "neg": -0.6,
}
ALL_COSINES = {**COSINES, "half-b": 0.5}
FLOORS = [0.75, 0.5, 0.35, 0.25, 0.1, -0.25, -0.5, 0.99, -1.0]
LOGGER = "thresholded.pushdown"


class SearchSpy:
    """Records every MilvusClient.search: its collection, search_params and result count."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def install(self, monkeypatch: pytest.MonkeyPatch, refuse_range: bool = False) -> SearchSpy:
        original = MilvusClient.search

        def search(client, *args, **kwargs):
            params = (kwargs.get("search_params") or {}).get("params") or {}
            if refuse_range and "radius" in params:
                self.calls.append({"params": params, "returned": None, **kwargs})
                raise MilvusException(code=1100, message="range search is not supported")
            result = original(client, *args, **kwargs)
            self.calls.append({"params": params, "returned": len(result[0]), **kwargs})
            return result

        monkeypatch.setattr(MilvusClient, "search", search)
        return self

    @property
    def radii(self) -> list[float | None]:
        return [c["params"].get("radius") for c in self.calls]

    def clear(self) -> None:
        self.calls.clear()


@pytest.fixture
def sections(kit):
    nodes = []
    for i, (name, cos) in enumerate(COSINES.items()):
        nodes.append(kit.section(name, cos, axis=1 + i % 6, source=f"src-{i}"))
    nodes.append(kit.section("half-b", embedding=kit.HALF, source="src-half"))  # exactly 0.5
    return nodes


@pytest.fixture
def index(kit, sections, milvus_uri):
    """COSINE: under IP a floor is never pushed (see the tests of IP at the end)."""
    store = kit.milvus_store(milvus_uri, "pushdown", dim=kit.DIM, metric="COSINE")
    return kit.build_index(sections, kit.embedding(), store=store)


def _policy(kit, floor=0.5):
    return kit.policy(min_similarity=floor, top_k=20, over_fetch=1)


def _kept(report):
    """Kept (id, score), best first; sections of equal score (ties) in id order."""
    kept = [(n.node.node_id, n.score) for n in report.kept]
    assert [s for _, s in kept] == sorted((s for _, s in kept), reverse=True)
    return sorted(kept, key=lambda pair: (-pair[1], pair[0]))


@pytest.mark.parametrize("floor", FLOORS)
def test_pushdown_keeps_exactly_what_client_side_filtering_keeps(kit, index, monkeypatch, floor):
    spy = SearchSpy().install(monkeypatch)
    pushed = ThresholdedRetriever(index, _policy(kit), neighbours=0)
    client_side = ThresholdedRetriever(index, _policy(kit), neighbours=0, pushdown=False)

    with_pushdown = pushed.retrieve_with_report(kit.QUESTION, min_similarity=floor)
    pushed_call = spy.calls[-1]
    without = client_side.retrieve_with_report(kit.QUESTION, min_similarity=floor)
    plain_call = spy.calls[-1]

    assert _kept(with_pushdown) == _kept(without)
    assert pushed_call["params"]["radius"] == pytest.approx(floor - PUSHDOWN_EPSILON, abs=1e-12)
    assert "range_filter" not in pushed_call["params"]
    assert "radius" not in plain_call["params"]
    # Milvus scores in float32; the policy keeps a score equal to the floor.
    scores = {name: float(np.float32(c)) for name, c in ALL_COSINES.items()}
    assert {i for i, _ in _kept(with_pushdown)} == {n for n, s in scores.items() if s >= floor}
    assert pushed_call["returned"] == sum(s > floor - PUSHDOWN_EPSILON for s in scores.values())
    assert plain_call["returned"] == len(ALL_COSINES)


def test_scores_equal_to_the_floor_are_kept_and_float32_roundings_below_it_dropped(kit, index):
    retriever = ThresholdedRetriever(index, _policy(kit), neighbours=0)
    at_half = retriever.retrieve_with_report(kit.QUESTION, min_similarity=0.5)
    assert [i for i, _ in _kept(at_half)] == ["top", "high", "half-a", "half-b"]
    assert [s for _, s in _kept(at_half)][-2:] == [0.5, 0.5]

    at_quarter = retriever.retrieve_with_report(kit.QUESTION, min_similarity=0.25)
    assert "quarter" in [i for i, _ in _kept(at_quarter)]

    # 0.35 is 0.34999999 in float32: below a floor of 0.35, with and without pushdown.
    at_mid = retriever.retrieve_with_report(kit.QUESTION, min_similarity=0.35)
    assert not {"mid", "mid-b"} & {i for i, _ in _kept(at_mid)}


def test_pushdown_transfers_fewer_results(kit, index, monkeypatch):
    spy = SearchSpy().install(monkeypatch)
    ThresholdedRetriever(index, _policy(kit), neighbours=0).retrieve(kit.QUESTION)
    ThresholdedRetriever(index, _policy(kit), neighbours=0, pushdown=False).retrieve(kit.QUESTION)
    assert [c["returned"] for c in spy.calls] == [4, len(ALL_COSINES)]


def test_a_floor_of_zero_is_never_pushed_and_negative_cosines_stay(kit, index, monkeypatch):
    spy = SearchSpy().install(monkeypatch)
    retriever = ThresholdedRetriever(index, _policy(kit, floor=0.0), neighbours=0)
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert spy.radii == [None]
    assert {"neg", "neg-quarter", "zero"} <= {i for i, _ in _kept(report)}


async def test_async_pushdown_matches_client_side_filtering(kit, index, monkeypatch):
    spy = SearchSpy().install(monkeypatch)
    pushed = ThresholdedRetriever(index, _policy(kit), neighbours=0)
    client_side = ThresholdedRetriever(index, _policy(kit), neighbours=0, pushdown=False)
    with_pushdown = await pushed.aretrieve_with_report(kit.QUESTION, min_similarity=0.25)
    without = await client_side.aretrieve_with_report(kit.QUESTION, min_similarity=0.25)
    assert _kept(with_pushdown) == _kept(without)
    assert len(_kept(with_pushdown)) == 7
    # the async client is used here; the sync one saw no search
    assert spy.calls == []


def test_a_near_unit_vector_scoring_above_one_is_kept(kit, milvus_uri):
    """No range_filter is sent: 1.0 + eps as upper bound would drop this section. Its score,
    a hair above 1 (within the range tolerance), is clamped to 1 on both paths."""
    nodes = [
        kit.section("long", embedding=[1.0005] + [0.0] * (kit.DIM - 1)),
        kit.section("ok", 0.6),
    ]
    store = kit.milvus_store(milvus_uri, "near_unit", dim=kit.DIM)
    index = kit.build_index(nodes, kit.embedding(), store=store)
    pushed = ThresholdedRetriever(index, _policy(kit), neighbours=0)
    client_side = ThresholdedRetriever(index, _policy(kit), neighbours=0, pushdown=False)
    assert _kept(pushed.retrieve_with_report(kit.QUESTION)) == _kept(
        client_side.retrieve_with_report(kit.QUESTION)
    )
    kept = _kept(pushed.retrieve_with_report(kit.QUESTION))
    assert [i for i, _ in kept] == ["long", "ok"]
    assert kept[0][1] == 1.0


def test_a_score_beyond_the_range_tolerance_is_an_error_on_both_paths(kit, milvus_uri):
    """An inner product of 1.005 is no cosine: the stored vector is not unit length."""
    nodes = [kit.section("long", embedding=[1.005] + [0.0] * (kit.DIM - 1))]
    store = kit.milvus_store(milvus_uri, "beyond", dim=kit.DIM)
    index = kit.build_index(nodes, kit.embedding(), store=store)
    for pushdown in (True, False):
        retriever = ThresholdedRetriever(index, _policy(kit), neighbours=0, pushdown=pushdown)
        with pytest.raises(ScoreRangeError, match=r"'beyond'.*IP score.*Normalise"):
            retriever.retrieve(kit.QUESTION)


@pytest.mark.parametrize(("metric", "radius"), [("COSINE", 0.5 - PUSHDOWN_EPSILON), ("IP", None)])
def test_the_floor_is_pushed_under_cosine_not_ip_and_the_result_is_the_same(
    kit, sections, milvus_uri, monkeypatch, metric, radius
):
    """Under IP the floor stays on the client: a short stored vector would hide below the
    radius (see the tests of IP at the end)."""
    store = kit.milvus_store(milvus_uri, metric.lower(), dim=kit.DIM, metric=metric)
    index = kit.build_index(sections, kit.embedding(), store=store)
    spy = SearchSpy().install(monkeypatch)
    pushed = ThresholdedRetriever(index, _policy(kit), neighbours=0).retrieve_with_report(
        kit.QUESTION
    )
    client = ThresholdedRetriever(index, _policy(kit), neighbours=0, pushdown=False)
    assert _kept(pushed) == _kept(client.retrieve_with_report(kit.QUESTION))
    assert spy.radii == [None if radius is None else pytest.approx(radius), None]
    below = pushed.drop_counts().get("below_threshold", 0)
    assert below == (7 if radius is None else 0)  # what comes back, the client drops


def test_l2_is_filtered_on_the_client_only(kit, sections, milvus_uri, monkeypatch):
    store = kit.milvus_store(milvus_uri, "l2", dim=kit.DIM, metric="L2")
    index = kit.build_index(sections, kit.embedding(), store=store)
    spy = SearchSpy().install(monkeypatch)
    retriever = ThresholdedRetriever(index, _policy(kit), neighbours=0)
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert retriever.to_dict()["pushdown"] is False
    assert spy.radii == [None]
    assert [i for i, _ in _kept(report)] == ["top", "high", "half-a", "half-b"]


def test_stores_other_than_milvus_are_never_pushed(kit, sections):
    index = kit.build_index(sections, kit.embedding())
    retriever = ThresholdedRetriever(index, _policy(kit), neighbours=0)
    assert retriever.to_dict()["pushdown"] is False
    assert len(retriever.retrieve(kit.QUESTION)) == 4


def test_the_search_config_in_use_is_kept_and_a_callers_radius_wins(kit, index, monkeypatch):
    spy = SearchSpy().install(monkeypatch)
    own = {"milvus_search_config": {"params": {"nprobe": 8}}}
    ThresholdedRetriever(index, _policy(kit), neighbours=0, vector_store_kwargs=own).retrieve(
        kit.QUESTION
    )
    assert spy.calls[-1]["params"] == {"nprobe": 8, "radius": 0.5 - PUSHDOWN_EPSILON}

    mine = {"milvus_search_config": {"params": {"radius": 0.9}}}
    report = ThresholdedRetriever(
        index, _policy(kit), neighbours=0, vector_store_kwargs=mine
    ).retrieve_with_report(kit.QUESTION)
    assert spy.calls[-1]["params"] == {"radius": 0.9}
    assert [i for i, _ in _kept(report)] == ["top"]


def test_range_search_kwargs_uses_the_stores_own_search_config():
    class Store:
        def __init__(self) -> None:
            self.search_config = {"metric_type": "IP", "params": {"ef": 32}}

    store = Store()
    pushed = range_search_kwargs({"string_expr": "x"}, store, 0.4 - PUSHDOWN_EPSILON)
    assert pushed == {
        "string_expr": "x",
        "milvus_search_config": {
            "metric_type": "IP",
            "params": {"ef": 32, "radius": 0.4 - PUSHDOWN_EPSILON},
        },
    }
    assert store.search_config == {"metric_type": "IP", "params": {"ef": 32}}


def test_an_engine_that_refuses_range_search_falls_back_and_says_so_once(
    kit, index, monkeypatch, caplog
):
    client_side = ThresholdedRetriever(index, _policy(kit), neighbours=0, pushdown=False)
    expected = _kept(client_side.retrieve_with_report(kit.QUESTION))
    spy = SearchSpy().install(monkeypatch, refuse_range=True)
    retriever = ThresholdedRetriever(index, _policy(kit), neighbours=0)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        first = retriever.retrieve_with_report(kit.QUESTION)
        second = retriever.retrieve_with_report(kit.QUESTION)
    assert _kept(first) == _kept(second) == expected
    assert spy.radii == [pytest.approx(0.5 - PUSHDOWN_EPSILON), None, None]
    warnings = [r for r in caplog.records if r.name == LOGGER]
    assert len(warnings) == 1
    assert "range search refused" in warnings[0].getMessage()
    assert retriever.to_dict()["pushdown"] is False


async def test_async_refusal_falls_back_too(kit, index, monkeypatch):
    from pymilvus import AsyncMilvusClient

    original = AsyncMilvusClient.search
    seen = []

    async def search(client, *args, **kwargs):
        params = (kwargs.get("search_params") or {}).get("params") or {}
        seen.append(params.get("radius"))
        if "radius" in params:
            raise MilvusException(code=1100, message="range search is not supported")
        return await original(client, *args, **kwargs)

    monkeypatch.setattr(AsyncMilvusClient, "search", search)
    retriever = ThresholdedRetriever(index, _policy(kit), neighbours=0)
    report = await retriever.aretrieve_with_report(kit.QUESTION)
    assert [i for i, _ in _kept(report)] == ["top", "high", "half-a", "half-b"]
    assert seen[0] is not None and seen[1:] == [None]
    assert retriever.to_dict()["pushdown"] is False


def test_a_real_failure_is_raised_not_taken_for_a_refusal(kit, index):
    retriever = ThresholdedRetriever(index, _policy(kit), neighbours=0)
    index.vector_store.client.drop_collection("pushdown")
    with pytest.raises(MilvusException):
        retriever.retrieve(kit.QUESTION)
    assert retriever.to_dict()["pushdown"] is True


# IP: a short vector is refused, with or without pushdown --------------------------------------
@pytest.mark.parametrize("pushdown", [True, False])
def test_under_ip_a_short_vector_below_the_floor_is_refused_with_or_without_pushdown(
    kit, milvus_uri, pushdown
):
    """Cosine 0.9 stored with norm 0.3 scores 0.27: a radius of 0.5 would hide it, and the
    call would silently lose it; its length is checked, and refused, either way."""
    hidden = [x * 0.3 for x in kit.vec(0.9)]
    nodes = [kit.section("ok", 0.6, axis=2), kit.section("hidden", embedding=hidden)]
    store = kit.milvus_store(milvus_uri, "short", dim=kit.DIM, metric="IP")
    index = kit.build_index(nodes, kit.embedding(), store=store)
    retriever = ThresholdedRetriever(index, _policy(kit), neighbours=0, pushdown=pushdown)
    with pytest.raises(NotUnitVectorError, match=r"section 'hidden' is stored with norm 0\.3000"):
        retriever.retrieve(kit.QUESTION)


@pytest.mark.parametrize(("floor", "gate", "why"), [(0.97, 0.98, "gate"), (0.97, 0.5, "floor")])
def test_an_emptied_search_names_the_same_rule_with_the_floor_pushed_down(
    kit, index, floor, gate, why
):
    """Nothing clears the floor (the best cosine is 0.95). Searched on the client, the gate
    is what emptied it when it stands at or above the floor; the pushed-down search said
    ``floor`` whatever the gate, so an application reading ``emptied_by`` told two stories
    for one collection and one question."""
    policy = kit.policy(min_similarity=floor, min_top_similarity=gate, top_k=20, over_fetch=1)
    for kind, searched in ((ThresholdedRetriever, index), (MultiCollectionRetriever, [index])):
        reports = [
            kind(searched, policy, neighbours=0, pushdown=pushdown).retrieve_with_report(
                kit.QUESTION
            )
            for pushdown in (True, False)
        ]
        assert [r.emptied_by for r in reports] == [why, why]
        assert not reports[0].dropped  # the engine dropped them: the floor was pushed down
