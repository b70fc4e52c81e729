"""A bool is not a number (``thresholded.filters``: ``True != 1``), so ``flag != 1`` holds
for a stored ``True``. LlamaIndex's in-memory store compares with Python's ``==``, under
which ``True == 1``: given NE or NIN with a number, it held such sections back, and no
check after the search can bring back what the store never returned. Such a filter is now
applied by the engine alone; the others still go to the store."""

from __future__ import annotations

import pytest
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from llama_index_thresholded import MultiCollectionRetriever, ThresholdedRetriever
from llama_index_thresholded.filters import to_filter, to_metadata_filters


def one(key, value, operator):
    return MetadataFilters(filters=[MetadataFilter(key=key, value=value, operator=operator)])


@pytest.fixture
def flags(kit):
    nodes = [
        kit.section("true", 0.9, axis=1, flag=True),
        kit.section("false", 0.8, axis=2, flag=False),
        kit.section("one", 0.7, axis=3, flag=1),
        kit.section("none", 0.6, axis=4),
    ]
    return kit.build_index(nodes, kit.embedding())


@pytest.mark.parametrize(
    ("operator", "value", "expected"),
    [
        (FilterOperator.NE, 1, ["true", "false", "none"]),
        (FilterOperator.NIN, [1], ["true", "false", "none"]),
        (FilterOperator.NE, 0, ["true", "false", "one", "none"]),
        (FilterOperator.NIN, [0.0, 2], ["true", "false", "one", "none"]),
        (FilterOperator.EQ, 1, ["one"]),  # the store returns True too; the engine drops it
        (FilterOperator.IN, [1], ["one"]),
    ],
)
@pytest.mark.parametrize("shape", ["single", "multi"])
def test_a_stored_bool_is_not_a_number(kit, flags, operator, value, expected, shape):
    policy = kit.policy(min_similarity=0.5, top_k=4)
    filters = one("flag", value, operator)
    if shape == "single":
        retriever = ThresholdedRetriever(flags, policy, neighbours=0, filters=filters)
    else:
        retriever = MultiCollectionRetriever([flags], policy, neighbours=0, filters=filters)
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert [n.node.node_id for n in report.kept] == expected


def test_a_call_s_filter_is_held_the_same(kit, flags):
    retriever = ThresholdedRetriever(flags, kit.policy(min_similarity=0.5), neighbours=0)
    report = retriever.retrieve_with_report(kit.QUESTION, filters=one("flag", 1, "!="))
    assert [n.node.node_id for n in report.kept] == ["true", "false", "none"]


def test_only_ne_and_nin_with_a_number_stay_out_of_the_store():
    def sent(value, operator):
        return to_metadata_filters(to_filter(one("flag", value, operator)))

    assert sent(1, FilterOperator.NE) is None
    assert sent(2.5, FilterOperator.NE) is None
    assert sent([1, 2], FilterOperator.NIN) is None
    assert sent("x", FilterOperator.NE) is not None
    assert sent(["x"], FilterOperator.NIN) is not None
    assert sent(1, FilterOperator.EQ) is not None
    assert sent([1], FilterOperator.IN) is not None


def under_not(*conditions):
    return MetadataFilters(filters=list(conditions), condition=FilterCondition.NOT)


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        (MetadataFilter(key="flag", value=1), ["true", "false", "none"]),
        (MetadataFilter(key="flag", value=[1], operator="in"), ["true", "false", "none"]),
        (MetadataFilter(key="flag", value=1, operator="!="), ["one"]),
    ],
)
def test_under_not_a_stored_bool_is_not_a_number_either(kit, flags, condition, expected):
    """NOT (flag == 1) is flag != 1: the store, under which ``True == 1``, held back the
    section whose stored flag is True."""
    policy = kit.policy(min_similarity=0.5, top_k=4)
    retriever = ThresholdedRetriever(flags, policy, neighbours=0, filters=under_not(condition))
    assert [n.node.node_id for n in retriever.retrieve(kit.QUESTION)] == expected


def test_of_an_and_the_conditions_the_store_applies_are_still_sent():
    """``tenant == "a" and flag != 1`` sent nothing, and the store returned every tenant's
    rows, a search the engine then widened; the tenant's condition is sent alone."""
    both = MetadataFilters(
        filters=[
            MetadataFilter(key="tenant", value="a"),
            MetadataFilter(key="flag", value=1, operator="!="),
        ]
    )
    sent = to_metadata_filters(to_filter(both))
    assert [(f.key, f.value) for f in sent.filters] == [("tenant", "a")]
    either = both.model_copy(update={"condition": FilterCondition.OR})
    assert to_metadata_filters(to_filter(either)) is None
    tenant_or_one = under_not(both.filters[0], MetadataFilter(key="flag", value=1))
    assert to_metadata_filters(to_filter(tenant_or_one)) is None


@pytest.mark.parametrize("given", [{"doc_type": "policy"}, [], "doc_type == 'policy'"])
def test_filters_of_another_type_say_how_to_write_them(given):
    """A dict is how the LangChain adapter takes filters; here it must say what to write."""
    with pytest.raises(TypeError, match=r"got \w+: write .*MetadataFilters\(filters=\["):
        to_filter(given)
