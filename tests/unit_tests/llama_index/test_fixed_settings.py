"""A ThresholdedRetriever's settings are fixed when it is built: setting one afterwards
would change nothing, so it is an error, never silently ignored."""

from __future__ import annotations

import pytest
from llama_index.core.callbacks import CallbackManager
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

from llama_index_thresholded import MultiCollectionRetriever, ThresholdedRetriever


@pytest.fixture
def index(kit):
    nodes = [kit.section("public", 0.9, kind="public"), kit.section("secret", 0.8, kind="secret")]
    return kit.build_index(nodes, kit.embedding())


def ids(nodes):
    return [n.node.node_id for n in nodes]


@pytest.mark.parametrize("name", ["filters", "policy", "min_similarity", "top_k", "neighbours"])
def test_a_setting_cannot_be_set_after_construction(kit, index, name):
    retriever = ThresholdedRetriever(index, kit.policy(min_similarity=0.5), neighbours=0)
    public = MetadataFilters(filters=[MetadataFilter(key="kind", value="public")])
    with pytest.raises(AttributeError, match=rf"ThresholdedRetriever\.{name} cannot be set"):
        setattr(retriever, name, public)
    assert ids(retriever.retrieve(kit.QUESTION)) == ["public", "secret"]
    narrowed = retriever.retrieve_with_report(kit.QUESTION, filters=public)
    assert ids(narrowed.items) == ["public"]


def test_a_multi_collection_retriever_s_settings_are_fixed_too(kit, index):
    retriever = MultiCollectionRetriever(
        [index], policy=kit.policy(min_similarity=0.5), neighbours=0
    )
    with pytest.raises(AttributeError, match=r"MultiCollectionRetriever\.filters cannot be set"):
        retriever.filters = MetadataFilters(filters=[])


def test_what_llama_index_reads_can_still_be_set(kit, index):
    retriever = ThresholdedRetriever(index, kit.policy(min_similarity=0.5), neighbours=0)
    manager = CallbackManager()
    retriever.callback_manager = manager
    assert retriever.callback_manager is manager
