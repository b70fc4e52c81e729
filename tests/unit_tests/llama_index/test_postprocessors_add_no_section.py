"""The abstaining engines answer only from sections their retriever returned, where it
holds some back: a node postprocessor that adds one (a PrevNextNodePostprocessor's
neighbour, read from the docstore) would bring it past the retriever's filters."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from llama_index.core.llms import MockLLM
from llama_index.core.postprocessor import (
    LongContextReorder,
    PrevNextNodePostprocessor,
    SimilarityPostprocessor,
)
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.retrievers import QueryFusionRetriever, VectorIndexRetriever
from llama_index.core.schema import NodeRelationship, NodeWithScore, RelatedNodeInfo
from llama_index.core.vector_stores import SimpleVectorStore
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQueryResult,
)

from llama_index_thresholded import (
    AbstainingCondensePlusContextChatEngine,
    AbstainingContextChatEngine,
    AbstainingQueryEngine,
    MultiCollectionRetriever,
    ThresholdedRetriever,
)
from thresholded.errors import UnsafeFilterError

PUBLIC = MetadataFilters(filters=[MetadataFilter(key="kind", value="public")])


def public_then_internal(kit):
    public = kit.section("public", 0.9, kind="public")
    internal = kit.section("internal", 0.1, axis=2, kind="internal", text="INTERNAL ONLY")
    kit.link_chain([public, internal])
    return kit.build_index([public, internal], kit.embedding())


def retriever_of(kind, index, kit, filters):
    policy = kit.policy(min_similarity=0.5)
    if kind == "single":
        return ThresholdedRetriever(index, policy, filters=filters)
    return MultiCollectionRetriever([index], policy=policy, filters=filters)


def next_section(index):
    return PrevNextNodePostprocessor(docstore=index.docstore, num_nodes=1, mode="next")


def engine(kind, retriever, postprocessors):
    if kind == "query":
        return AbstainingQueryEngine.from_args(
            retriever, llm=MockLLM(), node_postprocessors=postprocessors
        )
    chat = (
        AbstainingContextChatEngine if kind == "chat" else AbstainingCondensePlusContextChatEngine
    )
    return chat.from_defaults(retriever, llm=MockLLM(), node_postprocessors=postprocessors)


def query(retriever, postprocessors, kit):
    return engine("query", retriever, postprocessors).query(kit.QUESTION).source_nodes


async def aquery(retriever, postprocessors, kit):
    return (await engine("query", retriever, postprocessors).aquery(kit.QUESTION)).source_nodes


def engine_retrieve(retriever, postprocessors, kit):
    return engine("query", retriever, postprocessors).retrieve(kit.QUESTION)


def chat(retriever, postprocessors, kit):
    return engine("chat", retriever, postprocessors).chat(kit.QUESTION).source_nodes


async def achat(retriever, postprocessors, kit):
    return (await engine("condense", retriever, postprocessors).achat(kit.QUESTION)).source_nodes


CALLS = [query, aquery, engine_retrieve, chat, achat]


async def answered(call, retriever, postprocessors, kit):
    nodes = call(retriever, postprocessors, kit)
    if not isinstance(nodes, list):
        nodes = await nodes
    return [n.node.node_id for n in nodes]


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("kind", ["single", "multi"])
async def test_a_neighbour_added_past_the_filters_is_refused(kit, kind, call):
    index = public_then_internal(kit)
    retriever = retriever_of(kind, index, kit, PUBLIC)
    with pytest.raises(UnsafeFilterError, match="read sections from the docstore") as raised:
        await answered(call, retriever, [next_section(index)], kit)
    assert "internal" not in str(raised.value)


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("kind", ["single", "multi"])
async def test_a_docstore_reading_postprocessor_is_refused_before_its_span(
    kit, kind, call, recorder
):
    """The engine refused the section the PrevNextNodePostprocessor added, after it ran: its
    span's result, the internal neighbour's text, had gone to every span handler."""
    index = public_then_internal(kit)
    retriever = retriever_of(kind, index, kit, PUBLIC)
    with pytest.raises(UnsafeFilterError, match="PrevNextNodePostprocessor"):
        await answered(call, retriever, [next_section(index)], kit)
    assert recorder.seen, "no span recorded"
    assert not [seen for seen in recorder.seen if "INTERNAL ONLY" in seen]


@pytest.mark.parametrize("call", CALLS)
async def test_postprocessors_that_only_reorder_are_fine(kit, call):
    index = public_then_internal(kit)
    retriever = retriever_of("single", index, kit, PUBLIC)
    assert await answered(call, retriever, [LongContextReorder()], kit) == ["public"]


@pytest.mark.parametrize("call", CALLS)
async def test_without_filters_a_neighbour_may_be_added(kit, call):
    index = public_then_internal(kit)
    retriever = ThresholdedRetriever(index, kit.policy(min_similarity=0.5), neighbours=0)
    ids = await answered(call, retriever, [next_section(index)], kit)
    assert ids == ["public", "internal"]


@pytest.mark.parametrize("call", CALLS)
async def test_a_similarity_postprocessor_deleting_attachments_is_refused(kit, call):
    """``SimilarityPostprocessor`` deletes every neighbour and summary the retriever attached
    (they carry no score): the engines answered from the kept sections alone, silently."""
    index = public_then_internal(kit)
    retriever = ThresholdedRetriever(index, kit.policy(min_similarity=0.5), neighbours=1)
    cutoff = SimilarityPostprocessor(similarity_cutoff=0.5)
    with pytest.raises(ValueError, match=r"SimilarityThresholdPostprocessor\(min_similarity="):
        await answered(call, retriever, [cutoff], kit)
    bare = ThresholdedRetriever(index, kit.policy(min_similarity=0.5), neighbours=0)
    assert await answered(call, bare, [cutoff], kit) == ["public"]  # nothing to delete


def test_an_engine_over_another_retriever_still_refuses_an_added_section(kit):
    """``with_retriever`` (LlamaIndex's) built a plain ``RetrieverQueryEngine``: over the new
    retriever it let the ``PrevNextNodePostprocessor`` add the internal neighbour, and
    answered "Empty Response" where the engine was to answer its own message."""
    index = public_then_internal(kit)
    original = engine("query", retriever_of("single", index, kit, None), [next_section(index)])
    original.no_match_message = "Ask a human."
    swapped = original.with_retriever(retriever_of("single", index, kit, PUBLIC))
    assert isinstance(swapped, AbstainingQueryEngine)
    with pytest.raises(UnsafeFilterError, match="read sections from the docstore"):
        swapped.query(kit.QUESTION)
    abstaining = original.with_retriever(retriever_of("single", index, kit, PUBLIC))
    abstaining._node_postprocessors = []
    assert abstaining.query(kit.ORTHOGONAL).response == "Ask a human."


def fused(retriever):
    """A retriever that passes on what ours returned, such as a QueryFusionRetriever."""
    return QueryFusionRetriever(
        [retriever], llm=MockLLM(), num_queries=1, mode="reciprocal_rerank", use_async=False
    )


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("kind", ["single", "multi"])
async def test_a_neighbour_added_behind_a_fusion_retriever_is_refused(kit, kind, call):
    """The engine's retriever is LlamaIndex's, around ours: the check looked at the engine's
    retriever only, found none of ours, and the PrevNextNodePostprocessor's internal
    neighbour went to the LLM and came back in source_nodes."""
    index = public_then_internal(kit)
    retriever = fused(retriever_of(kind, index, kit, PUBLIC))
    with pytest.raises(UnsafeFilterError, match="read sections from the docstore"):
        await answered(call, retriever, [next_section(index)], kit)


@pytest.mark.parametrize("call", CALLS)
async def test_behind_a_fusion_retriever_without_filters_a_neighbour_may_be_added(kit, call):
    index = public_then_internal(kit)
    retriever = fused(ThresholdedRetriever(index, kit.policy(min_similarity=0.5), neighbours=0))
    assert await answered(call, retriever, [next_section(index)], kit) == ["public", "internal"]


async def test_a_call_s_own_filters_count_as_held_back(kit):
    """A report's nodes of a call narrowed by its own filters, from a retriever that has
    none, are held back too: an engine over a retriever that passes them on refuses a
    section its postprocessors add."""
    from llama_index_thresholded.query_engine import none_added

    index = public_then_internal(kit)
    plain = ThresholdedRetriever(index, kit.policy(min_similarity=0.5), neighbours=0)
    retrieved = plain.retrieve_with_report(kit.QUESTION, filters=PUBLIC).items
    added = next_section(index).postprocess_nodes(retrieved)
    with pytest.raises(UnsafeFilterError, match="postprocessors added 1 section"):
        none_added(fused(plain), retrieved, added)


def previous_section(index):
    return PrevNextNodePostprocessor(docstore=index.docstore, num_nodes=1, mode="previous")


def public_pair_under_an_internal_parent(kit):
    """Two public sections, a then b, whose parent is an internal summary: LlamaIndex copies
    a linked node's metadata into the relationship that names it."""
    parent = kit.section("plan", axis=3, embedding=kit.vec(0.0, 3), kind="internal")
    parent.metadata["title"] = "Merger plan"
    a = kit.section("a", 0.9, kind="public")
    b = kit.section("b", 0.8, axis=2, kind="public")
    kit.link_chain([a, b])
    a.relationships[NodeRelationship.PARENT] = parent.as_related_node_info()
    return kit.build_index([a, b], kit.embedding(), docstore_nodes=[parent])


@pytest.mark.parametrize("call", CALLS)
async def test_a_section_swapped_for_its_stored_copy_names_no_other_by_more_than_id(
    kit, call, recorder
):
    """A PrevNextNodePostprocessor puts b's previous section, a, back as the docstore holds
    it, in place of the copy the retriever returned: no section is added, but the stored
    copy's relationships carry the internal parent's metadata. It reached source_nodes, and
    (until the postprocessor was refused before it ran) every span handler."""
    index = public_pair_under_an_internal_parent(kit)
    retriever = retriever_of("single", index, kit, PUBLIC)
    with pytest.raises(UnsafeFilterError, match="PrevNextNodePostprocessor"):
        nodes = call(retriever, [previous_section(index)], kit)
        if not isinstance(nodes, list):
            await nodes
    assert not [seen for seen in recorder.seen if "Merger plan" in seen]


@pytest.mark.parametrize("call", CALLS)
async def test_a_section_a_postprocessor_swaps_for_a_stored_copy_names_no_other(kit, call):
    """A postprocessor (here one that reads no docstore) that returns the docstore's copy
    of a section in place of the retriever's: its relationships name other sections by id
    only in source_nodes."""
    index = public_pair_under_an_internal_parent(kit)
    retriever = retriever_of("single", index, kit, PUBLIC)
    nodes = call(retriever, [StoredCopies(stored=index.docstore.docs)], kit)
    if not isinstance(nodes, list):
        nodes = await nodes
    assert sorted(n.node.node_id for n in nodes) == ["a", "b"]
    assert {n.node.node_id: n.node.text for n in nodes} == {"a": "Section a.", "b": "Section b."}
    for node in nodes:
        for info in node.node.relationships.values():
            for related in info if isinstance(info, list) else [info]:
                assert related.metadata == {}, (node.node.node_id, related.metadata)
                assert related.hash is None


class StoredCopies(BaseNodePostprocessor):
    """Puts each node back as ``stored`` holds it (a cache of the docstore's nodes)."""

    stored: dict[str, Any]

    def _postprocess_nodes(self, nodes: list[Any], query_bundle: Any = None) -> list[Any]:
        return [NodeWithScore(node=self.stored[n.node.node_id], score=n.score) for n in nodes]


def plain_retriever(index, filters):
    """LlamaIndex's own vector retriever, with its own filters."""
    return index.as_retriever(filters=filters, similarity_top_k=5)


@pytest.mark.parametrize("call", CALLS)
async def test_a_neighbour_added_behind_a_plain_filtered_retriever_is_refused(kit, call):
    """The engine's retriever is LlamaIndex's own ``VectorIndexRetriever`` with filters: the
    check looked for ours only, and the PrevNextNodePostprocessor's internal neighbour went
    to the LLM and came back in source_nodes."""
    index = public_then_internal(kit)
    retriever = plain_retriever(index, PUBLIC)
    with pytest.raises(UnsafeFilterError, match="read sections from the docstore") as raised:
        await answered(call, retriever, [next_section(index)], kit)
    assert "internal" not in str(raised.value)


@pytest.mark.parametrize("call", CALLS)
async def test_a_neighbour_added_behind_a_fusion_of_a_plain_filtered_retriever_is_refused(
    kit, call
):
    index = public_then_internal(kit)
    retriever = fused(plain_retriever(index, PUBLIC))
    with pytest.raises(UnsafeFilterError, match="read sections from the docstore"):
        await answered(call, retriever, [next_section(index)], kit)


@pytest.mark.parametrize("call", CALLS)
async def test_behind_a_plain_retriever_without_filters_a_neighbour_may_be_added(kit, call):
    index = public_then_internal(kit)
    ids = await answered(call, plain_retriever(index, None), [next_section(index)], kit)
    assert ids == ["public", "internal"]


def around_public_and_internal(kit):
    """Public sections around an internal one, linked in reading order."""
    first = kit.section("first", 0.9, kind="public")
    internal = kit.section("internal", 0.1, axis=2, kind="internal", text="INTERNAL ONLY")
    last = kit.section("last", 0.85, axis=3, kind="public")
    kit.link_chain([first, internal, last])
    return kit.build_index([first, internal, last], kit.embedding())


def merging(kind, index, kit):
    from llama_index.core.retrievers import AutoMergingRetriever

    inner = (
        plain_retriever(index, PUBLIC)
        if kind == "plain"
        else ThresholdedRetriever(index, kit.policy(min_similarity=0.5), filters=PUBLIC)
    )
    return AutoMergingRetriever(inner, index.storage_context)


@pytest.mark.parametrize("engine_kind", ["query", "chat", "condense"])
@pytest.mark.parametrize("kind", ["plain", "ours"])
def test_a_retriever_merging_in_docstore_sections_past_the_filters_is_refused(
    kit, kind, engine_kind
):
    """An ``AutoMergingRetriever`` fills in the sections between two it retrieved from the
    docstore, held to none of its vector retriever's filters: the engine answered from the
    internal section between two public ones."""
    index = around_public_and_internal(kit)
    with pytest.raises(UnsafeFilterError, match="AutoMergingRetriever merges in sections"):
        engine(engine_kind, merging(kind, index, kit), [])
    with pytest.raises(UnsafeFilterError, match="AutoMergingRetriever merges in sections"):
        engine("query", fused(merging(kind, index, kit)), [])


def test_a_retriever_merging_in_docstore_sections_without_filters_is_fine(kit):
    from llama_index.core.retrievers import AutoMergingRetriever

    index = around_public_and_internal(kit)
    retriever = AutoMergingRetriever(plain_retriever(index, None), index.storage_context)
    nodes = engine("query", retriever, []).query(kit.QUESTION).source_nodes
    assert [n.node.node_id for n in nodes] == ["first", "internal", "last"]


@pytest.mark.parametrize("call", CALLS)
async def test_behind_a_plain_filtered_retriever_nodes_name_related_nodes_by_id_only(kit, call):
    """LlamaIndex copies a node's metadata into the relationships that point at it: the
    public section LlamaIndex's own filtered retriever returned named the internal one after
    it, its title included, in the engine's source_nodes."""
    public = kit.section("public", 0.9, kind="public")
    internal = kit.section("internal", 0.1, axis=2, kind="internal", title="Layoffs in Q3")
    public.relationships[NodeRelationship.NEXT] = internal.as_related_node_info()
    index = kit.build_index([public, internal], kit.embedding())
    nodes = call(plain_retriever(index, PUBLIC), [], kit)
    if not isinstance(nodes, list):
        nodes = await nodes
    assert [n.node.node_id for n in nodes] == ["public"]
    assert nodes[0].node.next_node.node_id == "internal"
    assert nodes[0].node.next_node.metadata == {}
    assert index.docstore.get_node("public").next_node.metadata["title"] == "Layoffs in Q3"


def public_pointer(kit, obj=None):
    """A public ``IndexNode`` pointing at "internal" (carrying ``obj``, if given)."""
    from llama_index.core.schema import IndexNode

    return IndexNode(
        id_="pointer",
        text="Section pointer.",
        index_id="internal",
        obj=obj,
        metadata={"kind": "public"},
        embedding=kit.vec(0.9),
    )


def recursive(kit, filters):
    """A recursive retriever over ours: a public ``IndexNode`` points at an internal section
    held in its ``node_dict``."""
    from llama_index.core.retrievers import RecursiveRetriever

    pointer = public_pointer(kit)
    internal = kit.section("internal", 0.1, axis=2, kind="internal", text="INTERNAL ONLY")
    index = kit.build_index([pointer], kit.embedding())
    ours = ThresholdedRetriever(index, kit.policy(min_similarity=0.5), filters=filters)
    return RecursiveRetriever("vector", {"vector": ours}, node_dict={"internal": internal})


@pytest.mark.parametrize("engine_kind", ["query", "chat", "condense"])
def test_a_recursive_retriever_following_index_nodes_past_the_filters_is_refused(kit, engine_kind):
    """It follows the public ``IndexNode`` to the section its ``node_dict`` holds, held to
    none of the filters: the engine answered from the internal section."""
    with pytest.raises(UnsafeFilterError, match="RecursiveRetriever merges in sections"):
        engine(engine_kind, recursive(kit, PUBLIC), [])


def test_a_recursive_retriever_over_a_retriever_without_filters_is_fine(kit):
    nodes = engine("query", recursive(kit, None), []).query(kit.QUESTION).source_nodes
    assert [n.node.node_id for n in nodes] == ["internal"]


@pytest.mark.parametrize("extra_filters", [None, PUBLIC], ids=["llm-filters", "extra-filters"])
def test_a_docstore_reading_postprocessor_behind_an_auto_retriever_is_refused(kit, extra_filters):
    """LlamaIndex's ``VectorIndexAutoRetriever`` searches under the filters its LLM writes
    from the question, and its ``extra_filters`` (a tenant's, say): the check did not know
    it, so a ``PrevNextNodePostprocessor`` behind it could add a section past both."""
    from llama_index.core.retrievers import VectorIndexAutoRetriever
    from llama_index.core.vector_stores.types import MetadataInfo, VectorStoreInfo

    from llama_index_thresholded.query_engine import check_postprocessors

    index = public_then_internal(kit)
    info = VectorStoreInfo(
        content_info="sections",
        metadata_info=[MetadataInfo(name="kind", type="str", description="public or internal")],
    )
    auto = VectorIndexAutoRetriever(
        index, vector_store_info=info, llm=MockLLM(), extra_filters=extra_filters
    )
    with pytest.raises(UnsafeFilterError, match="read sections from the docstore"):
        check_postprocessors(auto, [], [next_section(index)])
    with pytest.raises(UnsafeFilterError, match="read sections from the docstore"):
        check_postprocessors(fused(auto), [], [next_section(index)])


def test_behind_a_plain_filtered_retriever_the_errors_name_a_retriever_that_attaches(kit):
    """Both errors said to attach neighbours with "the retriever's own neighbours=", which
    LlamaIndex's ``VectorIndexRetriever`` has not: they name ThresholdedRetriever's."""
    from llama_index_thresholded.query_engine import check_postprocessors, none_added

    index = public_then_internal(kit)
    plain = plain_retriever(index, PUBLIC)
    retrieved = plain.retrieve(kit.QUESTION)
    with pytest.raises(UnsafeFilterError, match=r"ThresholdedRetriever's neighbours="):
        check_postprocessors(plain, retrieved, [next_section(index)])
    added = next_section(index).postprocess_nodes(retrieved)
    with pytest.raises(UnsafeFilterError, match=r"ThresholdedRetriever's neighbours="):
        none_added(plain, retrieved, added)


def followed_index_node(kit, obj_kind, filters):
    """LlamaIndex's own retriever over one public ``IndexNode`` that carries an internal
    section, or names a retriever of it in the retriever's ``object_map``: it follows either,
    past its filters."""
    from llama_index.core.retrievers import VectorIndexRetriever

    internal = kit.section("internal", 0.1, axis=2, kind="internal", text="INTERNAL ONLY")
    carried = internal if obj_kind == "section" else None
    pointer = public_pointer(kit, carried)
    index = kit.build_index([pointer], kit.embedding())
    mapped = {} if carried else {"internal": kit.build_index([internal], kit.embedding())}
    objects = {key: other.as_retriever() for key, other in mapped.items()}
    return VectorIndexRetriever(index, filters=filters, similarity_top_k=5, object_map=objects)


@pytest.mark.parametrize("obj_kind", ["section", "object-map-retriever"])
@pytest.mark.parametrize("call", CALLS)
async def test_a_plain_filtered_retriever_following_an_index_node_past_its_filters_is_refused(
    kit, obj_kind, call
):
    """``index.as_retriever(filters=...)`` follows a public ``IndexNode`` to the object it
    carries, held to none of its filters: the engine answered from the internal section.
    The error names no section outside the filters."""
    plain = followed_index_node(kit, obj_kind, PUBLIC)
    for retriever in (plain, fused(plain)):
        with pytest.raises(UnsafeFilterError, match="outside its filters") as raised:
            await answered(call, retriever, [], kit)
        assert "'internal'" not in str(raised.value)


READ_BY_THE_STORE = [  # (filters, the followed section's value under their key)
    (
        MetadataFilter(key="kind", operator=FilterOperator.TEXT_MATCH, value="internal"),
        ["internal"],
    ),
    (MetadataFilter(key="level", operator=FilterOperator.EQ, value=1), True),
    (MetadataFilter(key="kind", operator=FilterOperator.ANY, value=["internal"]), 5),
]


@pytest.mark.parametrize(("condition", "value"), READ_BY_THE_STORE, ids=["text", "bool", "any"])
@pytest.mark.parametrize("call", CALLS)
async def test_a_section_outside_a_not_as_simple_vector_store_reads_it_is_refused(
    kit, condition, value, call
):
    """``SimpleVectorStore`` reads ``True == 1`` and fails a TEXT_MATCH or ANY on a value it
    cannot look in; the check found the condition false there, and the NOT around it held
    for the internal section a public pointer carries."""
    internal = kit.section("internal", 0.1, axis=2, text="INTERNAL ONLY", **{condition.key: value})
    index = kit.build_index([public_pointer(kit, internal)], kit.embedding())
    filters = MetadataFilters(filters=[condition], condition=FilterCondition.NOT)
    plain = VectorIndexRetriever(index, filters=filters, similarity_top_k=5)
    for retriever in (plain, fused(plain)):
        with pytest.raises(UnsafeFilterError, match="outside its filters") as raised:
            await answered(call, retriever, [], kit)
        assert "INTERNAL ONLY" not in str(raised.value)


def test_a_plain_retriever_following_an_index_node_without_filters_is_fine(kit):
    plain = followed_index_node(kit, "section", None)
    nodes = engine("query", plain, []).query(kit.QUESTION).source_nodes
    assert [n.node.node_id for n in nodes] == ["internal"]


def test_a_plain_filtered_retriever_within_its_filters_is_fine(kit):
    index = public_then_internal(kit)
    nodes = engine("query", plain_retriever(index, PUBLIC), []).query(kit.QUESTION).source_nodes
    assert nodes and all(n.node.metadata["kind"] == "public" for n in nodes)


def of_documents(kit):
    from llama_index.core.schema import RelatedNodeInfo

    public = kit.section("public", 0.9, kind="public")
    internal = kit.section("internal", 0.8, kind="internal", text="INTERNAL ONLY")
    for node, document in ((public, "doc-a"), (internal, "doc-b")):
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=document)
    return kit.build_index([public, internal], kit.embedding())


@pytest.mark.parametrize("key", ["ref_doc_id", "doc_id", "document_id"])
def test_a_plain_retriever_filtered_on_its_documents_is_fine(kit, key):
    """LlamaIndex's stores keep each node's document id beside its metadata under these keys,
    and filter on them: every node the retriever returned was refused as outside its filters,
    its metadata lacking them."""
    filters = MetadataFilters(filters=[MetadataFilter(key=key, value="doc-a")])
    nodes = engine("query", plain_retriever(of_documents(kit), filters), [])
    assert [n.node.node_id for n in nodes.query(kit.QUESTION).source_nodes] == ["public"]


def test_a_plain_retriever_with_a_filter_the_core_model_cannot_read_is_taken(kit):
    """LlamaIndex's own retriever filtered on a key such as ``content-type``, which
    LlamaIndex filters on but the core's model (written for Milvus expressions) refuses: the
    engine failed with the model's "not a plain field name", though the retriever had
    returned exactly what its filter admits. Its filter still counts as holding sections
    back (a docstore-reading postprocessor is refused behind it)."""
    from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

    index = kit.build_index(
        [kit.section("public", 0.9, kind="public", **{"content-type": "faq"})], kit.embedding()
    )
    odd = MetadataFilters(filters=[MetadataFilter(key="content-type", value="faq")])
    nodes = engine("query", plain_retriever(index, odd), []).query(kit.QUESTION).source_nodes
    assert [n.node.node_id for n in nodes] == ["public"]
    with pytest.raises(UnsafeFilterError, match="read sections from the docstore"):
        engine("query", plain_retriever(index, odd), [next_section(index)]).query(kit.QUESTION)


CONTENT_TYPE_FAQ = MetadataFilters(filters=[MetadataFilter(key="content-type", value="faq")])


@pytest.mark.parametrize(
    "filters",
    [CONTENT_TYPE_FAQ, MetadataFilters(filters=[*PUBLIC.filters, *CONTENT_TYPE_FAQ.filters])],
    ids=["content-type", "kind-and-content-type"],
)
@pytest.mark.parametrize("call", CALLS)
async def test_a_filter_the_core_model_cannot_name_still_holds_an_index_node_back(
    kit, call, filters
):
    """LlamaIndex's own retriever filtered on ``content-type`` follows a public ``IndexNode``
    to the internal section it carries: the filter, which the core's model cannot write as a
    field name, was taken as none to check, and the engine answered from the section."""
    from llama_index.core.retrievers import VectorIndexRetriever
    from llama_index.core.schema import IndexNode

    internal = kit.section(
        "internal", 0.1, axis=2, kind="internal", text="INTERNAL ONLY", **{"content-type": "x"}
    )
    pointer = IndexNode(
        id_="pointer",
        text="Section pointer.",
        index_id="internal",
        obj=internal,
        metadata={"kind": "public", "content-type": "faq"},
        embedding=kit.vec(0.9),
    )
    index = kit.build_index([pointer], kit.embedding())
    plain = VectorIndexRetriever(index, filters=filters, similarity_top_k=5)
    for retriever in (plain, fused(plain)):
        with pytest.raises(UnsafeFilterError, match="outside its filters") as raised:
            await answered(call, retriever, [], kit)
        assert "'internal'" not in str(raised.value)
        assert "INTERNAL ONLY" not in str(raised.value)


def test_a_filter_the_core_model_refuses_for_its_value_is_still_refused(kit):
    """Only a key is read past the model's field names: a filter whose value means nothing
    to it (no value) is refused, naming its key, rather than taken as no filter to check."""
    index = public_then_internal(kit)
    odd = MetadataFilters(filters=[MetadataFilter(key="content-type", operator="!=", value=None)])
    with pytest.raises(UnsafeFilterError, match=r"filter on 'content-type' \(!=\) has no value"):
        engine("query", plain_retriever(index, odd), []).query(kit.QUESTION)


@pytest.mark.parametrize("order", [sorted, lambda keys: sorted(keys, reverse=True)])
def test_a_refused_filter_names_its_own_key_beside_one_it_begins_with(monkeypatch, order):
    """The key ``ab`` begins with the key ``a``: the error names ``ab``, in whatever order the
    keys are read."""
    from llama_index_thresholded import query_engine

    keys = query_engine._keys
    monkeypatch.setattr(query_engine, "_keys", lambda filters: order(keys(filters)))
    odd = MetadataFilters(
        filters=[
            MetadataFilter(key="a", value="x"),
            MetadataFilter(key="ab", operator="!=", value=None),
        ]
    )
    with pytest.raises(UnsafeFilterError, match=r"filter on 'ab' \(!=\) has no value"):
        query_engine._readable(odd)


def spec_llm(question: str) -> MockLLM:
    """An auto retriever's LLM that asks ``question`` and writes no filter of its own."""

    class SpecLLM(MockLLM):
        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
            import json

            from llama_index.core.base.llms.types import CompletionResponse

            spec = {"query": question, "filters": [], "top_k": 5}
            return CompletionResponse(text=json.dumps(spec))

    return SpecLLM()


@pytest.mark.parametrize("call", CALLS)
async def test_an_auto_retriever_following_an_index_node_past_its_extra_filters_is_refused(
    kit, call
):
    """A ``VectorIndexAutoRetriever`` with ``extra_filters`` (a tenant's) follows a public
    ``IndexNode`` to the internal section it carries, as the plain retriever does: the check
    took its filters as unknown, and the engine answered from the section."""
    from llama_index.core.retrievers import VectorIndexAutoRetriever
    from llama_index.core.vector_stores.types import MetadataInfo, VectorStoreInfo

    plain = followed_index_node(kit, "section", PUBLIC)
    info = VectorStoreInfo(
        content_info="sections",
        metadata_info=[MetadataInfo(name="kind", type="str", description="public or internal")],
    )
    auto = VectorIndexAutoRetriever(
        plain._index, vector_store_info=info, llm=spec_llm(kit.QUESTION), extra_filters=PUBLIC
    )
    for retriever in (auto, fused(auto)):
        with pytest.raises(UnsafeFilterError, match="outside its filters") as raised:
            await answered(call, retriever, [], kit)
        assert "'internal'" not in str(raised.value)


@pytest.mark.parametrize(
    "filters",
    [
        MetadataFilters(filters=[MetadataFilter(key="kind", operator="!=", value="internal")]),
        MetadataFilters(filters=[MetadataFilter(key="kind", value="public")]),
    ],
    ids=["ne", "eq"],
)
@pytest.mark.parametrize("call", CALLS)
async def test_a_plain_filtered_retriever_following_an_index_node_to_a_query_engine_is_refused(
    kit, call, filters
):
    """LlamaIndex's own filtered retriever follows a public ``IndexNode`` to a query engine
    its ``object_map`` names, and returns the engine's answer as a new node whose metadata is
    the response's (keyed by its sources' ids): ``kind != "internal"`` held for it, and the
    engine answered from what the query engine made of the internal section."""
    from llama_index.core.retrievers import VectorIndexRetriever

    internal = kit.section("internal", 0.1, axis=2, kind="internal", text="INTERNAL ONLY")
    answers = kit.build_index([internal], kit.embedding()).as_query_engine(
        llm=MockLLM(), response_mode="simple_summarize"
    )
    pointer = public_pointer(kit)
    index = kit.build_index([pointer], kit.embedding())
    plain = VectorIndexRetriever(
        index, filters=filters, similarity_top_k=5, object_map={"internal": answers}
    )
    for retriever in (plain, fused(plain)):
        with pytest.raises(UnsafeFilterError, match="query engine") as raised:
            await answered(call, retriever, [], kit)
        assert "INTERNAL ONLY" not in str(raised.value)


def on_some_nodes(index, kit):
    """``index`` with a section beside its ``IndexNode``: ``node_ids=["pointer"]`` names some
    of its nodes (naming every one restricts nothing, as ``index.as_retriever()``'s)."""
    index.insert_nodes([kit.section("other", 0.2, axis=3, kind="public")])
    return index


@pytest.mark.parametrize("call", CALLS)
async def test_a_plain_retriever_on_some_nodes_following_an_index_node_past_them_is_refused(
    kit, call
):
    """``VectorIndexRetriever(index, node_ids=[...])`` follows a public ``IndexNode`` among
    them to the internal section it carries, which is none of them: the check read its
    filters alone, and the engine answered from the section."""
    from llama_index.core.retrievers import VectorIndexRetriever

    index = on_some_nodes(followed_index_node(kit, "section", None)._index, kit)
    plain = VectorIndexRetriever(index, node_ids=["pointer"], similarity_top_k=5)
    for retriever in (plain, fused(plain)):
        with pytest.raises(UnsafeFilterError, match="outside its node_ids") as raised:
            await answered(call, retriever, [], kit)
        assert "'internal'" not in str(raised.value)
    within = VectorIndexRetriever(index, node_ids=["pointer", "internal"], similarity_top_k=5)
    assert [n.node.node_id for n in engine("query", within, []).query(kit.QUESTION).source_nodes]


# LlamaIndex's own retriever with store restrictions or doc_ids --------------------
"""LlamaIndex's own vector retriever follows a returned ``IndexNode`` to the object it
carries (or its ``object_map`` holds), held to none of its store restrictions
(``vector_store_kwargs={"where": ...}`` on Chroma) or ``doc_ids``: the abstaining engines
answered from the internal section. A node the store itself returned needs no new check
(``SimpleVectorStore`` ignores ``doc_ids``: such a setup still answers)."""


def chroma_store():
    import chromadb
    from llama_index.vector_stores.chroma import ChromaVectorStore

    client = chromadb.EphemeralClient()
    name = f"c{uuid.uuid4().hex}"
    collection = client.get_or_create_collection(name, metadata={"hnsw:space": "cosine"})
    return ChromaVectorStore(chroma_collection=collection)


def of_document(node, document):
    node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=document)
    return node


def internal_section(kit):
    section = kit.section("internal", 0.1, axis=2, kind="internal", text="INTERNAL ONLY")
    return of_document(section, "doc-b")


def pointer(kit, obj=None):
    return of_document(public_pointer(kit, obj), "doc-a")


RESTRICTED = {
    "chroma": {"where": {"kind": "public"}},
    "milvus": {"string_expr": 'kind == "public"'},
}
"""A restriction to public sections, as each store's ``vector_store_kwargs`` write it."""


def followed_past_store_restriction(kit, store, obj_kind, tmp_path):
    """An index holding a public pointer to an internal section it carries (or its
    ``object_map`` holds), searched by LlamaIndex's own retriever restricted to public
    sections in the store's own terms (:data:`RESTRICTED`)."""
    internal = internal_section(kit)
    carried = internal if obj_kind == "obj" else None
    vectors = (
        chroma_store()
        if store == "chroma"
        else kit.milvus_store(str(tmp_path / "kb.db"), "kb", dim=kit.DIM)
    )
    index = kit.build_index([pointer(kit, carried)], kit.embedding(), store=vectors)
    objects = {} if carried else {"internal": internal}
    return VectorIndexRetriever(
        index, similarity_top_k=5, object_map=objects, vector_store_kwargs=RESTRICTED[store]
    )


@pytest.mark.parametrize("store", ["chroma", "milvus"])
@pytest.mark.parametrize("obj_kind", ["obj", "object-map"])
@pytest.mark.parametrize("call", CALLS)
async def test_a_section_followed_past_store_restrictions_is_refused(
    kit, store, obj_kind, call, tmp_path
):
    plain = followed_past_store_restriction(kit, store, obj_kind, tmp_path)
    for retriever in (plain, fused(plain)):
        with pytest.raises(UnsafeFilterError, match="outside its doc_ids") as raised:
            await answered(call, retriever, [], kit)
        assert "vector_store_kwargs" in str(raised.value)
        assert "ThresholdedRetriever(index, policy, filters=...)" in str(raised.value)
        assert "'internal'" not in str(raised.value)


@pytest.mark.parametrize("store", ["chroma", "milvus"])
@pytest.mark.parametrize("call", CALLS)
async def test_a_section_followed_under_the_id_of_a_row_within_them_is_refused(
    kit, store, call, tmp_path
):
    """The public pointer's ``object_map`` entry is an internal section under the pointer's
    own id: the store holds a row of that id within its restriction (the pointer), and the
    section answered as that row."""
    from llama_index.core.schema import IndexNode

    internal = kit.section("pointer", 0.1, axis=2, kind="internal", text="INTERNAL ONLY")
    public = IndexNode(
        id_="pointer",
        text="Section pointer.",
        index_id="internal",
        metadata={"kind": "public"},
        embedding=kit.vec(0.9),
    )
    vectors = (
        chroma_store()
        if store == "chroma"
        else kit.milvus_store(str(tmp_path / "kb.db"), "kb", dim=kit.DIM)
    )
    index = kit.build_index([public], kit.embedding(), store=vectors)
    plain = VectorIndexRetriever(
        index,
        similarity_top_k=5,
        object_map={"internal": internal},
        vector_store_kwargs=RESTRICTED[store],
    )
    for retriever in (plain, fused(plain)):
        with pytest.raises(UnsafeFilterError, match="vector_store_kwargs") as raised:
            await answered(call, retriever, [], kit)
        assert "INTERNAL ONLY" not in str(raised.value)


@pytest.mark.parametrize("call", CALLS)
async def test_a_section_followed_past_doc_ids_is_refused(kit, call):
    index = kit.build_index([pointer(kit, internal_section(kit))], kit.embedding())
    plain = VectorIndexRetriever(index, similarity_top_k=5, doc_ids=["doc-a"])
    for retriever in (plain, fused(plain)):
        with pytest.raises(UnsafeFilterError, match="outside its doc_ids") as raised:
            await answered(call, retriever, [], kit)
        assert "doc_ids" in str(raised.value)


class DocIdsStore(SimpleVectorStore):
    """A store whose search holds to ``doc_ids``, as most of LlamaIndex's do, and that
    cannot be asked which of its rows lie within them."""

    def query(self, query: Any, **kwargs: Any) -> VectorStoreQueryResult:
        found = super().query(query, **kwargs)
        if query.doc_ids is None:
            return found
        document = self.data.text_id_to_ref_doc_id
        kept = [
            (i, s)
            for i, s in zip(found.ids, found.similarities, strict=True)
            if document.get(i) in query.doc_ids
        ]
        return VectorStoreQueryResult(ids=[i for i, _ in kept], similarities=[s for _, s in kept])


@pytest.mark.parametrize("call", CALLS)
async def test_a_row_followed_past_doc_ids_on_a_store_holding_to_them_is_refused(kit, call):
    """The followed section is also a row of the index, of another document: taken as one
    the store returned itself, it answered, though this store never returns such a row."""
    internal = internal_section(kit)
    nodes = [pointer(kit, internal), internal]
    index = kit.build_index(nodes, kit.embedding(), store=DocIdsStore())
    plain = VectorIndexRetriever(index, similarity_top_k=1, doc_ids=["doc-a"])
    assert [n.node.node_id for n in plain.retrieve(kit.QUESTION)] == ["internal"]
    for retriever in (plain, fused(plain)):
        with pytest.raises(UnsafeFilterError, match="outside its doc_ids") as raised:
            await answered(call, retriever, [], kit)
        assert "INTERNAL ONLY" not in str(raised.value)


def test_a_section_followed_within_doc_ids_is_fine(kit):
    index = kit.build_index([pointer(kit, internal_section(kit))], kit.embedding())
    plain = VectorIndexRetriever(index, similarity_top_k=5, doc_ids=["doc-a", "doc-b"])
    nodes = engine("query", plain, []).query(kit.QUESTION).source_nodes
    assert [n.node.node_id for n in nodes] == ["internal"]


def test_rows_a_chroma_where_returned_are_fine(kit):
    public = kit.section("public", 0.9, kind="public")
    internal = kit.section("internal", 0.8, kind="internal", text="INTERNAL ONLY")
    index = kit.build_index([public, internal], kit.embedding(), store=chroma_store())
    restricted = RESTRICTED["chroma"]
    plain = VectorIndexRetriever(index, similarity_top_k=5, vector_store_kwargs=restricted)
    nodes = engine("query", plain, []).query(kit.QUESTION).source_nodes
    assert [n.node.node_id for n in nodes] == ["public"]


@pytest.mark.parametrize("store", ["simple", "chroma"])
def test_rows_of_a_store_that_ignores_doc_ids_still_answer(kit, store):
    """No IndexNode: what comes back is the store's own rows, which these stores return
    whatever the ``doc_ids`` (LlamaIndex's behaviour); the engine does not refuse them."""
    public = of_document(kit.section("public", 0.9, kind="public"), "doc-a")
    other = of_document(kit.section("other", 0.8, kind="public"), "doc-c")
    index = kit.build_index(
        [public, other], kit.embedding(), store=None if store == "simple" else chroma_store()
    )
    plain = VectorIndexRetriever(index, similarity_top_k=5, doc_ids=["doc-a"])
    nodes = engine("query", plain, []).query(kit.QUESTION).source_nodes
    assert {n.node.node_id for n in nodes} >= {"public"}


UNKNOWN_KEYWORDS = [{"vector_store_kwargs": {"namespace": "public"}}, {}]
"""A restriction in a store's keywords not known here (each one restricts), and none."""


def on_a_store_of_unknown_keywords(kit, nodes, restricted):
    """LlamaIndex's own retriever over ``nodes`` in a store that stores text and reads its
    nodes back by id, whose keywords are not known here: nothing can ask it which ids lie
    within them."""
    index = kit.build_index(nodes, kit.embedding(), store=kit.SpyStore())
    return VectorIndexRetriever(index, similarity_top_k=5, doc_ids=["doc-a"], **restricted)


@pytest.mark.parametrize("restricted", UNKNOWN_KEYWORDS)
def test_on_a_store_of_unknown_keywords_its_own_rows_are_taken(kit, restricted):
    public = of_document(kit.section("public", 0.8, kind="public"), "doc-a")
    plain = on_a_store_of_unknown_keywords(kit, [public], restricted)
    nodes = engine("query", plain, []).query(kit.QUESTION).source_nodes
    assert [n.node.node_id for n in nodes] == ["public"]


@pytest.mark.parametrize("restricted", UNKNOWN_KEYWORDS)
def test_on_a_store_of_unknown_keywords_a_followed_section_is_refused(kit, restricted):
    """The section a public pointer carries is none of the store's rows: it was followed
    past the restrictions and ``doc_ids``."""
    plain = on_a_store_of_unknown_keywords(kit, [pointer(kit, internal_section(kit))], restricted)
    with pytest.raises(UnsafeFilterError, match="outside its doc_ids or vector_store_kwargs"):
        engine("query", plain, []).query(kit.QUESTION)


@pytest.mark.parametrize("restricted", [{}, {"vector_store_kwargs": RESTRICTED["milvus"]}])
def test_on_milvus_a_stored_section_followed_past_doc_ids_is_refused(kit, restricted, tmp_path):
    """Milvus holds a search to ``doc_ids``: an internal section of another document that it
    also stores, carried by a public pointer, is one it never returns itself."""
    internal = internal_section(kit)
    internal.metadata["kind"] = "public"  # within the store's restriction, outside doc_ids
    vectors = kit.milvus_store(str(tmp_path / "kb.db"), "kb", dim=kit.DIM)
    index = kit.build_index([pointer(kit, internal), internal], kit.embedding(), store=vectors)
    plain = VectorIndexRetriever(index, similarity_top_k=5, doc_ids=["doc-a"], **restricted)
    with pytest.raises(UnsafeFilterError, match="outside its doc_ids or vector_store_kwargs"):
        engine("query", plain, []).query(kit.QUESTION)


def test_on_milvus_rows_within_doc_ids_answer(kit, tmp_path):
    public = of_document(kit.section("public", 0.9, kind="public"), "doc-a")
    other = of_document(kit.section("other", 0.8, kind="public"), "doc-c")
    vectors = kit.milvus_store(str(tmp_path / "kb.db"), "kb", dim=kit.DIM)
    index = kit.build_index([public, other], kit.embedding(), store=vectors)
    plain = VectorIndexRetriever(index, similarity_top_k=5, doc_ids=["doc-a"])
    nodes = engine("query", plain, []).query(kit.QUESTION).source_nodes
    assert [n.node.node_id for n in nodes] == ["public"]


async def test_asking_the_store_for_the_awaited_engine_blocks_no_event_loop(
    kit, tmp_path, monkeypatch
):
    """The awaited engine asks the store which sections lie within the restrictions off the
    event loop: the store's blocking client is not called on it."""
    import threading

    from llama_index_thresholded import query_engine

    asked_on = []
    held = query_engine.ids_held

    def recorded(*args, **kwargs):
        asked_on.append(threading.current_thread())
        return held(*args, **kwargs)

    monkeypatch.setattr(query_engine, "ids_held", recorded)
    public = of_document(kit.section("public", 0.9, kind="public"), "doc-a")
    vectors = kit.milvus_store(str(tmp_path / "kb.db"), "kb", dim=kit.DIM)
    index = kit.build_index([public], kit.embedding(), store=vectors)
    plain = VectorIndexRetriever(index, similarity_top_k=5, doc_ids=["doc-a"])
    response = await engine("query", plain, []).aquery(kit.QUESTION)
    assert [n.node.node_id for n in response.source_nodes] == ["public"]
    assert asked_on and threading.main_thread() not in asked_on


def test_on_a_store_that_reads_no_node_back_its_keywords_are_refused_by_name(kit):
    """A store that reads no node back by id cannot say which sections lie within keywords
    not known here: the error says so, naming them, rather than calling its own rows
    outside them."""

    class NoReadBack(kit.SpyStore):
        def get_nodes(self, node_ids=None, filters=None, **kwargs):
            raise NotImplementedError

    public = of_document(kit.section("public", 0.9, kind="public"), "doc-a")
    index = kit.build_index([public], kit.embedding(), store=NoReadBack())
    restricted = {"namespace": "public"}
    plain = VectorIndexRetriever(index, similarity_top_k=5, vector_store_kwargs=restricted)
    with pytest.raises(UnsafeFilterError, match="reads no node back by id") as raised:
        engine("query", plain, []).query(kit.QUESTION)
    assert "['namespace']" in str(raised.value)
    assert "ThresholdedRetriever(index, policy, filters=...)" in str(raised.value)


def test_an_auto_retriever_on_some_nodes_following_an_index_node_past_them_is_refused(kit):
    """``VectorIndexAutoRetriever(index, ..., node_ids=[...])`` passes them on to the plain
    retriever it builds, which follows a public ``IndexNode`` among them to the internal
    section it carries: the check read the auto retriever's filters alone."""
    from llama_index.core.retrievers import VectorIndexAutoRetriever
    from llama_index.core.vector_stores.types import MetadataInfo, VectorStoreInfo

    index = on_some_nodes(followed_index_node(kit, "section", None)._index, kit)
    info = VectorStoreInfo(
        content_info="sections",
        metadata_info=[MetadataInfo(name="kind", type="str", description="public or internal")],
    )
    auto = VectorIndexAutoRetriever(
        index, vector_store_info=info, llm=spec_llm(kit.QUESTION), node_ids=["pointer"]
    )
    with pytest.raises(UnsafeFilterError, match="outside its node_ids") as raised:
        engine("query", auto, []).query(kit.QUESTION)
    assert "'internal'" not in str(raised.value)


@pytest.mark.parametrize("filters", [None, PUBLIC], ids=["no-filters", "filters"])
@pytest.mark.parametrize("call", CALLS)
async def test_on_chroma_index_as_retriever_s_empty_node_ids_restrict_nothing(kit, filters, call):
    """``index.as_retriever()`` passes ``node_ids=[]`` on a store that keeps the text, which
    reads it as every node: the check took it as naming none, and every question was refused
    as outside its restrictions."""
    public = kit.section("public", 0.9, kind="public")
    internal = kit.section("internal", 0.8, kind="internal")
    index = kit.build_index([public, internal], kit.embedding(), store=chroma_store())
    plain = index.as_retriever(filters=filters, similarity_top_k=5)
    expected = ["public"] if filters else ["internal", "public"]
    for retriever in (plain, fused(plain)):
        assert sorted(await answered(call, retriever, [], kit)) == expected


@pytest.mark.parametrize("store", ["simple", "chroma"])
@pytest.mark.parametrize("filters", [None, PUBLIC], ids=["no-filters", "filters"])
@pytest.mark.parametrize("call", CALLS)
async def test_index_as_retriever_s_every_node_restricts_nothing(kit, store, filters, call):
    """``index.as_retriever()`` passes every node its index lists as ``node_ids`` (on a
    store that keeps the text, its ``IndexNode`` objects): they were checked as a list of
    some nodes, and every question a public ``IndexNode`` answered, carrying a public section
    within the filters, was refused."""
    carried = of_document(kit.section("carried", 0.1, axis=2, kind="public"), "doc-b")
    public = of_document(kit.section("public", 0.8, kind="public"), "doc-a")
    vectors = chroma_store() if store == "chroma" else None
    index = kit.build_index([pointer(kit, carried), public], kit.embedding(), store=vectors)
    plain = index.as_retriever(filters=filters, similarity_top_k=5)
    for retriever in (plain, fused(plain)):
        assert "carried" in await answered(call, retriever, [], kit)
