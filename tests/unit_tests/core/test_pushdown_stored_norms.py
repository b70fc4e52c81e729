"""A pushed-down floor never hides a stored vector whose length the engine must check.

The question is e0. Under IP, "hidden" (cosine 0.9, stored with norm 0.3) scores 0.27:
below a floor of 0.5, so a range search with that radius never returns it, and its
length is never checked; the call would silently lose a section whose cosine clears the
floor. Without the radius it comes back and the call is a ``NotUnitVectorError``. So
under IP the floor is not pushed: both settings give the same answer. Under COSINE the
store normalises every vector, nothing can hide, and the floor is pushed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from thresholded import NotUnitVectorError, RetrievalPolicy
from thresholded.attachments import Links
from thresholded.engine import Collection, Question, SearchArgs, drive, plan, retrieve
from thresholded.pushdown import PUSHDOWN_EPSILON, PushdownSwitch
from thresholded.scores import Metric

FLOOR = 0.5
QUESTION = [1.0, 0.0, 0.0]
UNIT = {"ok": [0.8, 0.6, 0.0], "low": [0.2, 0.0, 0.979795897]}
SHORT = {**UNIT, "hidden": [0.27, 0.130766968, 0.0]}  # cosine 0.9, norm 0.3: IP 0.27
POLICY = RetrievalPolicy(min_similarity=FLOOR, top_k=5, max_per_source=None, max_chars=None)


class HandStore:
    """A store of hand-made vectors, searched by IP (or COSINE), with range search."""

    name = "hand store"
    dimension = 3
    attempt_timeout = None
    threaded = False
    restricted = False
    fetch_holds_back = False
    admits_nothing = False

    def __init__(self, vectors: Mapping[str, Sequence[float]], metric: Metric) -> None:
        self.vectors = dict(vectors)
        self._metric = metric
        self.radii: list[float | None] = []

    def prepare(self, where: Any, options: Any = None) -> Any:
        return None

    def metric(self, filters: Any) -> Metric:
        return self._metric

    def can_push_down(self, metric: Metric | None) -> bool:
        return metric in (Metric.IP, Metric.COSINE)

    def embed_query(self, question: Question) -> list[float]:
        return QUESTION

    def searched_vector(self, vector: Sequence[float]) -> Sequence[float]:
        return vector

    def search(self, args: SearchArgs) -> list[tuple[str, float]]:
        self.radii.append(args.radius)
        assert args.vector is not None
        scored = sorted(
            ((i, self._score(args.vector, v)) for i, v in self.vectors.items()),
            key=lambda pair: -pair[1],
        )
        if args.radius is not None:
            scored = [(i, s) for i, s in scored if s > args.radius]
        return scored[: args.k]

    def _score(self, question: Sequence[float], stored: Sequence[float]) -> float:
        product = sum(q * s for q, s in zip(question, stored, strict=True))
        if self._metric is Metric.COSINE:
            return product / sum(s * s for s in stored) ** 0.5
        return product

    def stored_vector(self, item: str) -> Sequence[float]:
        return self.vectors[item]

    def fetch_vectors(self, ids: list[str]) -> dict[str, Sequence[float]]:
        return {i: self.vectors[i] for i in ids if i in self.vectors}

    def fetch(self, ids: list[str]) -> dict[str, str]:
        return {i: i for i in ids if i in self.vectors}

    def links(self, item: str) -> Links:
        return Links()

    def identify(self, item: str, source_key: str, key: str | None = None) -> tuple[str, str, int]:
        return item, item, len(item)

    def admits(self, item: str) -> bool:
        return True

    def metadata(self, item: str) -> dict[str, Any]:
        return {}


def run(store: HandStore, *, pushdown: bool) -> Any:
    collection = Collection(store, pushdown=PushdownSwitch(pushdown))
    return drive(retrieve(plan(Question("q"), [collection], POLICY)))


def kept(result: Any) -> list[str]:
    return [c.id for c in result.selection.kept]


@pytest.mark.parametrize("pushdown", [True, False])
def test_under_ip_a_short_vector_below_the_floor_is_refused_with_or_without_pushdown(pushdown):
    store = HandStore(SHORT, Metric.IP)
    with pytest.raises(NotUnitVectorError, match=r"section 'hidden' is stored with norm 0\.3000"):
        run(store, pushdown=pushdown)
    assert store.radii == [None]


def test_under_ip_unit_vectors_give_the_same_result_and_the_floor_stays_on_the_client():
    pushed, plain = HandStore(UNIT, Metric.IP), HandStore(UNIT, Metric.IP)
    with_pushdown, without = run(pushed, pushdown=True), run(plain, pushdown=False)
    assert kept(with_pushdown) == kept(without) == ["ok"]
    assert pushed.radii == plain.radii == [None]
    assert [s.pushdown for s in with_pushdown.collections] == [False]
    assert {d.candidate.id: str(d.reason) for d in with_pushdown.selection.dropped} == {
        "low": "below_threshold"
    }


def test_under_cosine_the_floor_is_pushed_and_nothing_hides():
    store = HandStore(SHORT, Metric.COSINE)
    result = run(store, pushdown=True)
    assert store.radii == [pytest.approx(FLOOR - PUSHDOWN_EPSILON)]
    assert [s.pushdown for s in result.collections] == [True]
    assert kept(result) == ["hidden", "ok"]  # its cosine, 0.9: COSINE normalises
    assert kept(result) == kept(run(HandStore(SHORT, Metric.COSINE), pushdown=False))
