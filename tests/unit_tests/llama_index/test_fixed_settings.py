"""A ThresholdedRetriever's settings are fixed when it is built: setting one afterwards
would change nothing, so it is an error, never silently ignored."""

from __future__ import annotations

import pytest
from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import VectorIndexRetriever
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


def appended(filters):
    filters.filters.append(MetadataFilter(key="kind", value="public"))


def revalued(filters):
    filters.filters[0].value = "secret"


def nested(filters):
    filters.filters.append(MetadataFilters(filters=[MetadataFilter(key="kind", value="secret")]))


def retriever_of(kind, index, kit, filters):
    policy = kit.policy(min_similarity=0.5)
    if kind == "single":
        return ThresholdedRetriever(index, policy, filters=filters, neighbours=0)
    return MultiCollectionRetriever([index], policy=policy, filters=filters, neighbours=0)


@pytest.mark.parametrize("change", [appended, revalued, nested])
@pytest.mark.parametrize("kind", ["single", "multi"])
async def test_filters_changed_in_place_after_construction_are_refused(kit, index, kind, change):
    """The retriever holds its filters as they were when it was built: a change made in place
    afterwards used to be silently ignored, and every call now says so."""
    filters = MetadataFilters(filters=[MetadataFilter(key="kind", value="public")])
    retriever = retriever_of(kind, index, kit, filters)
    assert ids(retriever.retrieve(kit.QUESTION)) == ["public"]
    change(filters)
    name = type(retriever).__name__
    with pytest.raises(ValueError, match=rf"{name}\(filters=...\) were changed in place"):
        retriever.retrieve(kit.QUESTION)
    with pytest.raises(ValueError, match="retrieve_with_report"):
        await retriever.aretrieve_with_report(kit.QUESTION)


@pytest.mark.parametrize("kind", ["single", "multi"])
def test_empty_filters_filled_in_place_are_refused(kit, index, kind):
    filters = MetadataFilters(filters=[])
    retriever = retriever_of(kind, index, kit, filters)
    appended(filters)
    with pytest.raises(ValueError, match="changed in place"):
        retriever.retrieve(kit.QUESTION)


def test_a_wrapped_retriever_s_filters_changed_in_place_are_refused(kit, index):
    filters = MetadataFilters(filters=[MetadataFilter(key="kind", value="public")])
    wrapped = index.as_retriever(filters=filters)
    retriever = ThresholdedRetriever.from_retriever(
        wrapped, kit.policy(min_similarity=0.5), neighbours=0, filters=filters
    )
    revalued(filters)
    with pytest.raises(ValueError, match="wrapped VectorIndexRetriever was changed"):
        retriever.retrieve(kit.QUESTION)


def filters_set(wrapped):
    wrapped._filters = MetadataFilters(filters=[MetadataFilter(key="kind", value="public")])


def node_ids_set(wrapped):
    wrapped._node_ids = ["public"]


def doc_ids_set(wrapped):
    wrapped._doc_ids = ["public"]


def node_ids_narrowed_in_place(wrapped):
    wrapped._node_ids.remove("secret")


def store_kwargs_added(wrapped):
    wrapped._kwargs["string_expr"] = "kind == 'public'"


@pytest.mark.parametrize(
    "change",
    [filters_set, node_ids_set, doc_ids_set, node_ids_narrowed_in_place, store_kwargs_added],
)
async def test_a_wrapped_retriever_changed_after_from_retriever_is_refused(kit, index, change):
    """from_retriever copies the wrapped retriever's restrictions: a tenant's filter set on
    it afterwards narrowed what it returned, while the ThresholdedRetriever over it still
    returned the secret section."""
    wrapped = VectorIndexRetriever(index, node_ids=["public", "secret"])
    retriever = ThresholdedRetriever.from_retriever(
        wrapped, kit.policy(min_similarity=0.5), neighbours=0
    )
    assert ids(retriever.retrieve(kit.QUESTION)) == ["public", "secret"]
    change(wrapped)
    expected = "wrapped VectorIndexRetriever was changed after from_retriever"
    with pytest.raises(ValueError, match=expected):
        retriever.retrieve(kit.QUESTION)
    with pytest.raises(ValueError, match=r"from_retriever\(\.\.\.\) again"):
        await retriever.aretrieve_with_report(kit.QUESTION)


def test_a_wrapped_retriever_s_top_k_may_change(kit, index):
    """Its top k is replaced by the policy's anyway."""
    wrapped = index.as_retriever()
    retriever = ThresholdedRetriever.from_retriever(
        wrapped, kit.policy(min_similarity=0.5), neighbours=0
    )
    wrapped.similarity_top_k = 1
    assert ids(retriever.retrieve(kit.QUESTION)) == ["public", "secret"]


@pytest.mark.parametrize("changed", ["doc_ids", "node_ids", "vector_store_kwargs"])
def test_restrictions_changed_in_place_are_refused_at_the_next_call(kit, changed):
    """A retriever searches with a copy of them: a change would be ignored without a word."""
    sections = [kit.section("a", 0.9), kit.section("b", 0.8, axis=2)]
    index = kit.build_index(sections, kit.embedding(), store=kit.SpyStore())  # reads keywords
    given = {"doc_ids": ["a"], "node_ids": ["a"], "vector_store_kwargs": {"tuning": 1}}
    retriever = ThresholdedRetriever(
        index,
        kit.policy(min_similarity=0.0),
        neighbours=0,
        parent_summaries=False,
        metric="COSINE",
        **given,
    )
    retriever.retrieve(kit.QUESTION)
    value = given[changed]
    if isinstance(value, list):
        value.append("b")
    else:
        value["tuning"] = 2
    with pytest.raises(ValueError, match=f"{changed} given to ThresholdedRetriever were changed"):
        retriever.retrieve(kit.QUESTION)
