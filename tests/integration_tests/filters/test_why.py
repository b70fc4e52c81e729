"""One test per way internal sections came back (and the engine died), on Milvus Lite 2.5."""

from __future__ import annotations

import pytest
from langchain_core.runnables import ConfigurableField
from leak_data import POLICY, QUESTION
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

import langchain_thresholded as lc
import llama_index_thresholded as li

pytestmark = pytest.mark.integration

PUBLIC = MetadataFilters(filters=[MetadataFilter(key="doc_type", value="public")])
PUBLIC_SECTIONS = {"h0", "h2", "f0", "f1"}


def llama(leaky, **settings):
    settings.setdefault("neighbours", 1)
    return li.ThresholdedRetriever(leaky.llama_index, POLICY, pushdown=False, **settings)


def langchain(leaky, **settings):
    settings.setdefault("neighbours", 1)
    return lc.ThresholdedRetriever(
        vectorstore=leaky.langchain_store,
        policy=POLICY,
        docstore=leaky.langchain_docstore,
        **settings,
    )


def llama_ids(report) -> set[str]:
    return {n.node.node_id for n in report.items}


def langchain_ids(report) -> set[str]:
    return {d.id for d in report.items}


def doc_types(nodes) -> set[str]:
    return {n.node.metadata["doc_type"] for n in nodes}


# 1. Attachments ------------------------------------------------------------------------------
def test_attachments_outside_the_filters_are_dropped_in_llama_index(leaky) -> None:
    report = llama(leaky).retrieve_with_report(QUESTION, filters=PUBLIC)
    assert llama_ids(report) == PUBLIC_SECTIONS | {"faq#summary"}
    assert report.outside_filters >= 3  # h1, h3 and handbook#summary: counted, never named
    assert not {"h1", "h3", "handbook#summary"} & {d.id for d in report.dropped}


def test_attachments_outside_the_filters_are_dropped_in_langchain(leaky) -> None:
    report = langchain(leaky).retrieve_with_report(QUESTION, filters={"doc_type": "public"})
    assert langchain_ids(report) == PUBLIC_SECTIONS | {"faq#summary"}
    assert report.outside_filters >= 3  # h1, h3 and handbook#summary: counted, never named
    assert not {"h1", "h3", "handbook#summary"} & {d.id for d in report.dropped}


# 2. NOT is "none of", and runs on Lite 2.5 -------------------------------------------------------
def test_not_means_none_of_on_milvus_lite_2(leaky) -> None:
    internal_or_ops = MetadataFilters(
        filters=[
            MetadataFilter(key="doc_type", value="internal"),
            MetadataFilter(key="source", value="ops"),
        ],
        condition=FilterCondition.NOT,
    )
    report = llama(leaky, neighbours=0, parent_summaries=False).retrieve_with_report(
        QUESTION, filters=internal_or_ops
    )
    assert llama_ids(report) == PUBLIC_SECTIONS
    lc_report = langchain(leaky, neighbours=0, parent_summaries=False).retrieve_with_report(
        QUESTION, filters={"$not": [{"doc_type": "internal"}, {"source": "ops"}]}
    )
    assert langchain_ids(lc_report) == PUBLIC_SECTIONS


# 3. IS_EMPTY ---------------------------------------------------------------------------------
def test_is_empty_matches_only_rows_without_the_key(leaky) -> None:
    unrestricted = MetadataFilters(
        filters=[MetadataFilter(key="restricted_to", value=None, operator=FilterOperator.IS_EMPTY)]
    )
    report = llama(leaky).retrieve_with_report(QUESTION, filters=unrestricted)
    assert doc_types(report.items) == {"public"}
    assert llama_ids(report) >= PUBLIC_SECTIONS


# 4. A call's filters narrow, never replace -----------------------------------------------------
@pytest.mark.parametrize(
    "call",
    [
        MetadataFilters(filters=[]),
        None,
        MetadataFilters(filters=[MetadataFilter(key="source", value="ops")]),
        MetadataFilters(filters=[MetadataFilter(key="doc_type", value="internal")]),
    ],
)
def test_a_call_cannot_widen_the_retriever_filters(leaky, call) -> None:
    retriever = llama(leaky, filters=PUBLIC)
    report = retriever.retrieve_with_report(QUESTION, filters=call)
    assert doc_types(report.items) <= {"public"}


EMPTY_OR = MetadataFilters(filters=[], condition=FilterCondition.OR)
"""An OR of the doc types a caller may read, built from rights that came out empty:
LlamaIndex reads it as no filter."""


def test_an_empty_or_is_refused_wherever_llama_index_filters_go(leaky) -> None:
    from thresholded import UnsafeFilterError

    refused = pytest.raises(UnsafeFilterError, match=r"filters=\[\], condition='or'")
    with refused:
        llama(leaky, filters=EMPTY_OR)
    with refused:
        llama(leaky).retrieve_with_report(QUESTION, filters=EMPTY_OR)
    with refused:
        li.ThresholdedRetriever.from_retriever(
            leaky.llama_index.as_retriever(), POLICY, filters=EMPTY_OR
        )
    multi = li.MultiCollectionRetriever([li.CollectionSpec(leaky.llama_index, name="kb")], POLICY)
    with refused:
        multi.retrieve_with_report(QUESTION, filters=EMPTY_OR)
    with refused:
        li.MultiCollectionRetriever(
            [li.CollectionSpec(leaky.llama_index, name="kb")], POLICY, filters=EMPTY_OR
        )


def test_langchain_refuses_an_empty_or_too(leaky) -> None:
    from thresholded import UnsafeFilterError

    with pytest.raises(UnsafeFilterError, match="empty OR group"):
        langchain(leaky).invoke(QUESTION, filters={"$or": []})


@pytest.mark.parametrize(
    "options",
    [{"expr": None}, {"expr": ""}, {"search_kwargs": {"expr": None}}, {"filter": "true"}],
)
def test_langchain_refuses_raw_filters_per_call(leaky, options) -> None:
    retriever = langchain(leaky, expr='doc_type == "public"')
    with pytest.raises(TypeError, match="filters="):
        retriever.invoke(QUESTION, **options)
    assert {d.metadata["doc_type"] for d in retriever.invoke(QUESTION)} == {"public"}


def test_a_base_search_kwargs_filter_survives_filter_none(leaky) -> None:
    retriever = langchain(leaky, search_kwargs={"filter": 'doc_type == "public"'})
    docs = retriever.invoke(QUESTION, filter=None)
    assert {d.metadata["doc_type"] for d in docs} == {"public"}
    assert {d.id for d in docs} <= PUBLIC_SECTIONS  # summaries are not in the collection


def test_langchain_filters_cannot_be_configured_away(leaky) -> None:
    retriever = langchain(leaky, filters={"doc_type": "public"})
    with pytest.raises(ValueError, match="call_filters"):
        retriever.configurable_fields(filters=ConfigurableField(id="filters"))
    configurable = retriever.configurable_fields(call_filters=ConfigurableField(id="narrow"))
    config = {"configurable": {"narrow": {"doc_type": "internal"}}}
    assert configurable.invoke(QUESTION, config=config) == []


# 5. from_retriever and the store's own filters ------------------------------------------------
def test_from_retriever_keeps_the_wrapped_filters(leaky) -> None:
    wrapped = leaky.llama_index.as_retriever(filters=PUBLIC)
    retriever = li.ThresholdedRetriever.from_retriever(wrapped, POLICY, pushdown=False)
    ops = MetadataFilters(filters=[MetadataFilter(key="source", value="ops")])
    assert retriever.retrieve_with_report(QUESTION, filters=ops).items == []
    assert doc_types(retriever.retrieve(QUESTION)) == {"public"}


def test_milvus_scalar_filters_are_kept_with_a_call_filter(leaky) -> None:
    from llama_index.vector_stores.milvus.utils import (
        FilterOperatorFunction,
        ScalarMetadataFilter,
        ScalarMetadataFilters,
    )

    public_tag = ScalarMetadataFilters(
        filters=[
            ScalarMetadataFilter(
                key="tags", value="public", operator=FilterOperatorFunction.ARRAY_CONTAINS
            )
        ]
    )
    retriever = llama(leaky, vector_store_kwargs={"milvus_scalar_filters": public_tag.to_dict()})
    handbook = MetadataFilters(filters=[MetadataFilter(key="source", value="handbook")])
    report = retriever.retrieve_with_report(QUESTION, filters=handbook)
    assert {n.node.node_id for n in report.kept} == {"h0", "h2"}
    assert doc_types(report.items) == {"public"}  # the internal summary is not attached


# A raw expression given at construction holds for attachments too ------------------------------
def test_langchain_attachments_are_held_to_a_raw_expr(leaky) -> None:
    report = langchain(leaky, expr='doc_type == "public"').retrieve_with_report(QUESTION)
    assert {d.metadata["doc_type"] for d in report.items} == {"public"}
    assert {d.id for d in report.kept} == PUBLIC_SECTIONS


def test_llama_index_attachments_are_held_to_a_raw_string_expr(leaky) -> None:
    retriever = llama(leaky, vector_store_kwargs={"string_expr": 'doc_type == "public"'})
    report = retriever.retrieve_with_report(QUESTION)
    assert doc_types(report.items) == {"public"}
    assert {n.node.node_id for n in report.kept} == PUBLIC_SECTIONS


# Keys ------------------------------------------------------------------------------------------
def test_allowed_filter_keys_in_every_multi_collection_retriever(leaky) -> None:
    from thresholded import UnsafeFilterError

    spec = li.CollectionSpec(leaky.llama_index, name="kb")
    multi = li.MultiCollectionRetriever([spec], POLICY, allowed_filter_keys=["doc_type"])
    source = MetadataFilters(filters=[MetadataFilter(key="source", value="faq")])
    with pytest.raises(UnsafeFilterError, match="allowed"):
        multi.retrieve_with_report(QUESTION, filters=source)
    assert doc_types(multi.retrieve_with_report(QUESTION, filters=PUBLIC).items) == {"public"}
    chains = lc.MultiCollectionRetriever(
        collections=[lc.CollectionSpec(retriever=langchain(leaky), name="kb")],
        policy=POLICY,
        allowed_filter_keys=["doc_type"],
    )
    with pytest.raises(UnsafeFilterError, match="allowed"):
        chains.invoke(QUESTION, filters={"source": "faq"})
    docs = chains.invoke(QUESTION, filters={"doc_type": "public"})
    assert {d.metadata["doc_type"] for d in docs} == {"public"}
