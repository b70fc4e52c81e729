"""CONTAINS, ANY and ALL on a stored string look for the text in it, as LlamaIndex's
reference (``build_metadata_filter_fn``: ``value in stored``) does. Flat metadata (most
stores take no lists) keeps tags as a string, ``"faq,internal"``; the filter "none of the
sections tagged internal" held such a section back in LlamaIndex's own retriever over the
same index, and this package's retriever returned it."""

from __future__ import annotations

import pytest
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from llama_index_thresholded import MultiCollectionRetriever, ThresholdedRetriever

TAGS = {
    "public": "public",
    "public-faq": "public,faq",
    "internal": "internal",
    "faq-internal": "faq,internal",
    "listed": ["faq", "internal"],
}


@pytest.fixture
def tagged(kit):
    nodes = [
        kit.section(name, 0.9 - i / 20, axis=i + 1, tags=tags)
        for i, (name, tags) in enumerate(TAGS.items())
    ]
    return kit.build_index(nodes, kit.embedding())


def filters(operator, value, condition=FilterCondition.AND):
    one = MetadataFilter(key="tags", value=value, operator=operator)
    return MetadataFilters(filters=[one], condition=condition)


CASES = [
    filters(FilterOperator.CONTAINS, "internal", FilterCondition.NOT),
    filters(FilterOperator.ANY, ["internal", "secret"], FilterCondition.NOT),
    filters(FilterOperator.ALL, ["faq", "internal"], FilterCondition.NOT),
    filters(FilterOperator.CONTAINS, "faq"),
    filters(FilterOperator.ANY, ["faq", "secret"]),
    filters(FilterOperator.ALL, ["faq", "internal"]),
]


def ids(nodes):
    return sorted(n.node.node_id for n in nodes)


@pytest.mark.parametrize(
    "given", CASES, ids=lambda f: f"{f.condition.value}-{f.filters[0].operator.value}"
)
@pytest.mark.parametrize("shape", ["single", "multi"])
def test_the_text_is_looked_for_in_a_stored_string(kit, tagged, given, shape):
    theirs = ids(tagged.as_retriever(similarity_top_k=10, filters=given).retrieve(kit.QUESTION))
    policy = kit.policy(min_similarity=0.1, top_k=10)
    if shape == "single":
        retriever = ThresholdedRetriever(tagged, policy, neighbours=0, filters=given)
    else:
        retriever = MultiCollectionRetriever([tagged], policy, neighbours=0, filters=given)
    assert ids(retriever.retrieve(kit.QUESTION)) == theirs


def test_none_tagged_internal_leaves_out_the_strings_that_say_so(kit, tagged):
    not_internal = CASES[0]
    retriever = ThresholdedRetriever(tagged, kit.policy(min_similarity=0.1), neighbours=0)
    report = retriever.retrieve_with_report(kit.QUESTION, filters=not_internal)
    assert ids(report.items) == ["public", "public-faq"]
    assert report.outside_filters == 3
