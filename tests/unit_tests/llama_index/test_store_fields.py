"""A filter key that names a store's own field rather than metadata is refused.

On Milvus, ``doc_id``, ``id``, the text and vector fields are columns of the collection:
the store applies a filter on them to those columns, while the sections returned, their
neighbours and summaries are checked against their metadata, which does not hold them.
``doc_id != "secret"`` kept a public section and attached its neighbour from "secret".
LlamaIndex writes ``_node_content``, ``_node_type``, ``document_id``, ``doc_id`` and
``ref_doc_id`` beside the metadata in most stores: they are refused on every store.
"""

from __future__ import annotations

import pytest
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from llama_index_thresholded import MultiCollectionRetriever, ThresholdedRetriever
from thresholded.errors import UnsafeFilterError

LLAMA_INDEX_KEYS = ["doc_id", "document_id", "ref_doc_id", "_node_content", "_node_type"]


def not_(key, value):
    return MetadataFilters(
        filters=[MetadataFilter(key=key, value=value, operator=FilterOperator.NE)]
    )


def linked_documents(kit):
    """``faq-0`` (document faq) followed by ``secret-0`` (document secret)."""
    faq = kit.section("faq-0", 0.9, axis=1, doc_type="public")
    secret = kit.section("secret-0", 0.1, axis=2, doc_type="internal")
    faq.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="faq")
    secret.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="secret")
    kit.link_chain([faq, secret])
    return [faq, secret]


@pytest.fixture
def milvus_index(kit, milvus_uri):
    store = kit.milvus_store(milvus_uri, "fields", dim=kit.DIM)
    return kit.build_index(linked_documents(kit), kit.embedding(), store=store)


@pytest.fixture
def simple_index(kit):
    return kit.build_index(linked_documents(kit), kit.embedding())


@pytest.mark.parametrize("key", [*LLAMA_INDEX_KEYS, "id", "text", "embedding"])
def test_a_filter_on_a_milvus_field_is_refused_at_construction(kit, milvus_index, key):
    with pytest.raises(UnsafeFilterError, match=rf"\['{key}'\] name .*own fields.*doc_ids="):
        ThresholdedRetriever(milvus_index, kit.policy(min_similarity=0.5), filters=not_(key, "x"))


@pytest.mark.parametrize("key", ["doc_id", "id"])
def test_a_call_s_filter_on_a_milvus_field_is_refused(kit, milvus_index, key):
    """It used to keep faq-0 and attach secret-0, the excluded document's section."""
    retriever = ThresholdedRetriever(milvus_index, kit.policy(min_similarity=0.5))
    excluded = not_(key, "secret" if key == "doc_id" else "secret-0")
    with pytest.raises(UnsafeFilterError, match=rf"\['{key}'\]"):
        retriever.retrieve_with_report(kit.QUESTION, filters=excluded)


def test_a_multi_collection_retriever_refuses_them_too(kit, milvus_index):
    with pytest.raises(UnsafeFilterError, match=r"\['doc_id'\]"):
        MultiCollectionRetriever(
            [milvus_index], policy=kit.policy(min_similarity=0.5), filters=not_("doc_id", "x")
        )
    retriever = MultiCollectionRetriever([milvus_index], policy=kit.policy(min_similarity=0.5))
    with pytest.raises(UnsafeFilterError, match=r"\['id'\]"):
        retriever.retrieve_with_report(kit.QUESTION, filters=not_("id", "secret-0"))


@pytest.mark.parametrize("key", LLAMA_INDEX_KEYS)
def test_llama_index_s_own_keys_are_refused_on_any_store(kit, simple_index, key):
    with pytest.raises(UnsafeFilterError, match=rf"\['{key}'\]"):
        ThresholdedRetriever(simple_index, kit.policy(min_similarity=0.5), filters=not_(key, "x"))


def test_metadata_keys_pass_and_id_is_metadata_off_milvus(kit, simple_index):
    retriever = ThresholdedRetriever(
        simple_index, kit.policy(min_similarity=0.5), filters=not_("doc_type", "internal")
    )
    report = retriever.retrieve_with_report(kit.QUESTION, filters=not_("id", "x"))
    assert [n.node.node_id for n in report.items] == ["faq-0"]
