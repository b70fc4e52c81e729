"""A store that cannot apply the filters exactly never silently empties a result.

The store here applies no filter at all (the widest inexact translation: Milvus Lite 2.5
has no expression for NOT over a list test, so none is sent). Its nearest rows are
"internal" ones, outside the call's filters; the "public" ones clear the floor but lie
beyond the candidates asked for. The engine widens the search until it holds enough
candidates within the filters, the store has no more rows, or every farther row is below
the floor; past :data:`MAX_FILTERED_SEARCH_ROWS` the call is an error.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from thresholded import InexactFilterError, RetrievalPolicy, ScoreRangeError
from thresholded.engine import Collection, Question, SearchArgs, drive, plan, retrieve
from thresholded.filters import Condition, Op
from thresholded.scores import Metric

QUESTION = [1.0, 0.0]
POLICY = RetrievalPolicy(
    min_similarity=0.5, top_k=3, over_fetch=3, max_per_source=None, max_chars=None
)  # 9 candidates asked for
PUBLIC = Condition("doc_type", Op.EQ, "public")


def unit(cosine: float) -> list[float]:
    """A unit vector at ``cosine`` with the question."""
    return [cosine, math.sqrt(1 - cosine * cosine)]


class UnfilteredStore:
    """Hand-made unit vectors, searched by cosine; the filters are not applied. Only what
    a search stage uses (no attachments: nothing is fetched by id)."""

    name = "unfiltered store"
    dimension = 2
    attempt_timeout = None
    threaded = False
    restricted = False
    admits_nothing = False

    def __init__(self, rows: dict[str, tuple[float, str]]) -> None:
        self.rows = {i: (unit(cos), doc_type) for i, (cos, doc_type) in rows.items()}
        self.asked: list[int] = []

    def prepare(self, where: Any, options: Any = None) -> Any:
        return None  # nothing of the filter could be written for this store

    def metric(self, filters: Any) -> Metric:
        return Metric.COSINE

    def can_push_down(self, metric: Metric | None) -> bool:
        return False

    def embed_query(self, question: Question) -> list[float]:
        return QUESTION

    def searched_vector(self, vector: list[float]) -> list[float]:
        return vector

    def search(self, args: SearchArgs) -> list[tuple[str, float]]:
        self.asked.append(args.k)
        assert args.vector is not None
        scored = [
            (i, sum(q * s for q, s in zip(args.vector, v, strict=True)))
            for i, (v, _) in self.rows.items()
        ]
        return sorted(scored, key=lambda pair: (-pair[1], pair[0]))[: args.k]

    def stored_vector(self, item: str) -> list[float]:
        return self.rows[item][0]

    def identify(self, item: str, source_key: str, key: str | None = None) -> tuple[str, str, int]:
        return item, item, len(item)

    def admits(self, item: str) -> bool:
        return True

    def metadata(self, item: str) -> dict[str, Any]:
        return {"doc_type": self.rows[item][1]}


def rows(internal: int, public: int, *, public_cosine: float = 0.8) -> dict[str, tuple[float, str]]:
    """``internal`` rows at cosine 0.95 (nearest), then ``public`` ones."""
    found = {f"int{i:04d}": (0.95, "internal") for i in range(internal)}
    found.update({f"pub{i}": (public_cosine, "public") for i in range(public)})
    return found


def run(store: UnfilteredStore, policy: RetrievalPolicy = POLICY) -> Any:
    return drive(retrieve(plan(Question("q"), [Collection(store)], policy, filters=PUBLIC)))


def kept(result: Any) -> list[str]:
    return sorted(c.id for c in result.selection.kept)


def test_sections_within_the_filters_beyond_the_candidates_asked_for_are_found():
    store = UnfilteredStore(rows(internal=12, public=3))
    result = run(store)
    assert kept(result) == ["pub0", "pub1", "pub2"]
    assert store.asked == [9, 18]  # the second search returned all 15 rows: no more
    assert result.selection.drop_counts() == {"outside_filters": 12}


def test_the_search_widens_until_enough_candidates_lie_within_the_filters():
    store = UnfilteredStore(rows(internal=30, public=20))
    result = run(store)
    assert store.asked == [9, 18, 36, 72]  # 36 rows: 6 public; 72: 20 of them
    assert len(result.selection.kept) == 3
    # the 9 nearest within the filters are the candidates, as under an exact filter
    candidates = [*result.selection.kept, *result.selection.dropped_for("beyond_top_k")]
    assert len(candidates) == 9


def test_no_wider_search_when_the_farthest_row_is_below_the_floor_already():
    store = UnfilteredStore(rows(internal=12, public=3, public_cosine=0.4))
    store.rows.update({f"low{i}": (unit(0.3), "internal") for i in range(10)}.items())
    result = run(store, POLICY.with_overrides(top_k=4, over_fetch=5))  # 20: 0.3 is reached
    assert store.asked == [20]
    assert result.selection.kept == ()
    assert result.emptied_by == "floor"


def test_an_empty_result_within_the_filters_says_so():
    store = UnfilteredStore(rows(internal=12, public=0))
    result = run(store)
    assert store.asked == [9, 18]
    assert result.selection.kept == () and result.emptied_by == "filters"


def test_a_store_applying_the_filters_is_searched_once():
    store = UnfilteredStore(rows(internal=0, public=12))
    assert len(run(store).selection.kept) == 3
    assert store.asked == [9]


def test_past_the_widest_search_the_call_is_an_error(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("thresholded.engine.MAX_FILTERED_SEARCH_ROWS", 36)
    store = UnfilteredStore(rows(internal=40, public=3))
    with pytest.raises(InexactFilterError, match=r"its 36 nearest rows hold only 0 of the 9"):
        run(store)
    assert store.asked == [9, 18, 36]


class LongVectorStore(UnfilteredStore):
    """Its ``int-long`` row has a stored vector of norm 2 under IP: its raw score, 1.8, is
    no cosine. Its ``score`` row gives ``score`` as its raw score, whatever it is."""

    def __init__(self, score: Any) -> None:
        super().__init__({"int-long": (0.9, "internal"), "pub": (0.5, "public")})
        self.score = score

    def metric(self, filters: Any) -> Metric:
        return Metric.IP

    def search(self, args: SearchArgs) -> list[tuple[str, Any]]:
        return [("int-long", self.score), ("pub", 0.5)]


@pytest.mark.parametrize("score", [1.7999999523162842, -3.25, "n/a"])
def test_a_score_outside_the_filters_that_is_no_cosine_neither_fails_nor_is_named(score):
    # It was a ScoreRangeError quoting the internal section's score, raised to the caller.
    result = run(LongVectorStore(score))
    assert kept(result) == ["pub"]
    assert result.selection.outside_filters == 1


def test_the_same_score_within_the_filters_is_still_an_error():
    store = LongVectorStore(1.7999999523162842)
    with pytest.raises(ScoreRangeError, match=r"1\.79"):
        drive(retrieve(plan(Question("q"), [Collection(store)], POLICY)))


class UnreadableNearestStore(UnfilteredStore):
    """Its nearest row, ``int-odd``, lies outside the filters and gives a score that is no
    number (read as NaN, unchecked); the other rows are scored as usual."""

    def __init__(self, rows: dict[str, tuple[float, str]]) -> None:
        super().__init__({**rows, "int-odd": (0.99, "internal")})

    def search(self, args: SearchArgs) -> list[tuple[str, Any]]:
        hits = super().search(args)
        return [(i, "n/a" if i == "int-odd" else score) for i, score in hits]


def test_a_row_outside_the_filters_whose_score_reads_as_nan_is_counted():
    """The widened search holds more candidates within the filters than asked for: the rows
    outside them returned before the last candidate are counted, ``int-odd`` included (it
    was left out: its NaN ranked it after every candidate, though the store returned it
    first)."""
    store = UnreadableNearestStore(rows(internal=7, public=10))
    result = run(store)
    assert store.asked == [9, 18]  # 1 public row in the first 9; 10 in 18, one more than asked
    assert kept(result) == ["pub0", "pub1", "pub2"]
    assert result.selection.outside_filters == 8  # int-odd and the 7 internal rows
