"""A filter cannot name a key this package writes on its results.

The filter is judged on the stored sections, which lack the marks (``similarity``,
``score_kind``, ``attached_role``, ``attached_to``) and, in a multi-collection call, the
``source_collection`` the results are labelled with: ``!=`` would exclude nothing and
``==`` everything, whatever the results show. Such a filter is refused before any request,
naming the key and what to use instead.
"""

from __future__ import annotations

from typing import Any

import pytest

from thresholded import RetrievalPolicy, UnsafeFilterError, metadata_keys
from thresholded.engine import Collection, Question, plan
from thresholded.filters import Combine, Condition, Group, Op
from thresholded.scores import Metric


class Unsearched:
    """A backend that is planned for, never searched."""

    name = "store"
    dimension = None

    def __init__(self) -> None:
        self.prepared: list[Any] = []

    def prepare(self, where: Any, options: Any = None) -> Any:
        self.prepared.append(where)
        return where

    def metric(self, filters: Any) -> Metric:
        return Metric.COSINE


POLICY = RetrievalPolicy(min_similarity=0.5)


def planned(filters: Any, *names: str) -> Unsearched:
    backend = Unsearched()
    collections = [Collection(backend, name=n) for n in names] or [Collection(backend)]
    plan(Question("q"), collections, POLICY, filters=filters)
    return backend


@pytest.mark.parametrize("key", sorted(metadata_keys.MARKS))
def test_a_filter_on_a_mark_is_refused_before_any_request(key):
    nested = Group(Combine.NOT, (Condition(key, Op.EQ, "x"),))
    with pytest.raises(UnsafeFilterError, match=rf"filter key '{key}' is a mark .* stored"):
        planned(Group(Combine.AND, (Condition("doc_type", Op.EQ, "public"), nested)))


def test_the_floor_is_named_instead_of_a_filter_on_similarity():
    with pytest.raises(UnsafeFilterError, match="set min_similarity"):
        planned(Condition("similarity", Op.GTE, 0.8))


@pytest.mark.parametrize("op, value", [(Op.NE, "staff_kb"), (Op.EQ, "public_kb")])
def test_the_collection_label_is_refused_in_a_multi_collection_call(op, value):
    with pytest.raises(UnsafeFilterError, match=r"'source_collection'.*collections"):
        planned(Condition(metadata_keys.COLLECTION, op, value), "public_kb", "staff_kb")


def test_a_single_retriever_filters_on_a_stored_source_collection():
    """Only a multi-collection retriever writes the label: a single one's results carry
    the stored value, which the filter then judges."""
    where = Condition(metadata_keys.COLLECTION, Op.EQ, "imported")
    assert planned(where).prepared == [where]
