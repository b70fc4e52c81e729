"""``$not`` and ``$or`` given one dict of several keys are refused: they have no single meaning.

The dict form reads several keys in one dict as all of them (AND), and ``$not`` as "none
of" its filters, so ``{"$not": {"doc_type": "internal", "tier": "secret"}}`` meant "not
both": an internal section of another tier came back, where its writer (an agent, say, who
writes ``$not`` as MongoDB's ``$nor``) meant "neither internal nor secret". ``$or`` over
such a dict meant AND, silently. A list says which is meant: ``[{...}, {...}]`` for each
on its own, ``[{..., ...}]`` for both together.
"""

from __future__ import annotations

import pytest

from langchain_thresholded import ThresholdedRetriever
from langchain_thresholded.filters import to_filter
from thresholded import RetrievalPolicy
from thresholded.errors import UnsafeFilterError
from thresholded.filters import Combine, Condition, Group, Op

QUERY = "the question"
POLICY = RetrievalPolicy(min_similarity=0.5, top_k=10, max_per_source=None, max_chars=None)
SEVERAL = {"doc_type": "internal", "tier": "secret"}


@pytest.mark.parametrize("group", ["$not", "$or"])
def test_a_dict_of_several_keys_under_not_or_or_is_refused(group) -> None:
    with pytest.raises(UnsafeFilterError, match=rf"{re_escape(group)} given one dict of 2 keys"):
        to_filter({group: SEVERAL})


def test_the_internal_section_of_another_tier_does_not_come_back(corpus) -> None:
    store = corpus(
        [
            ("pub", 0.75, {"doc_type": "public", "tier": "open"}),
            ("int", 0.75, {"doc_type": "internal", "tier": "open"}),
        ]
    ).store
    retriever = ThresholdedRetriever(vectorstore=store, policy=POLICY)
    with pytest.raises(UnsafeFilterError, match=r"\$not given one dict of 2 keys"):
        retriever.invoke(QUERY, filters={"$not": SEVERAL})
    neither = retriever.invoke(
        QUERY, filters={"$not": [{"doc_type": "internal"}, {"tier": "secret"}]}
    )
    assert [d.id for d in neither] == ["pub"]


def test_a_list_says_which_is_meant() -> None:
    internal, secret = Condition("doc_type", Op.EQ, "internal"), Condition("tier", Op.EQ, "secret")
    both = Group(Combine.AND, (internal, secret))
    assert to_filter({"$not": [SEVERAL]}) == Group(Combine.NOT, (both,))
    assert to_filter({"$not": [{"doc_type": "internal"}, {"tier": "secret"}]}) == Group(
        Combine.NOT, (internal, secret)
    )
    assert to_filter({"$or": [SEVERAL]}) == Group(Combine.OR, (both,))


@pytest.mark.parametrize("group", ["$not", "$or"])
def test_a_dict_of_one_key_stays_a_shorthand(group) -> None:
    ranged = {"year": {"$gte": 2020, "$lt": 2024}}
    assert to_filter({group: ranged}) == Group(Combine(group[1:]), (to_filter(ranged),))


def test_and_over_a_dict_of_several_keys_means_all_of_them() -> None:
    assert to_filter({"$and": SEVERAL}) == to_filter(SEVERAL)


def re_escape(text: str) -> str:
    return text.replace("$", r"\$")
