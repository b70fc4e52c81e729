"""A returned node names its related nodes by id (and type) only.

LlamaIndex copies a node's metadata into the relationships that point at it (its
splitters do; a parent summary lists every child with its metadata). A section outside
the call's filters would be read there, through a kept section's NEXT or an attached
summary's CHILD list: the copies returned carry no related node's metadata. The stored
nodes keep theirs.
"""

from __future__ import annotations

import asyncio

from llama_index.core.schema import IndexNode, NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

from llama_index_thresholded import MultiCollectionRetriever, ThresholdedRetriever
from llama_index_thresholded.nodes import unlinked_result
from thresholded.engine import Question, Result
from thresholded.selection import Candidate, Dropped, DropReason, Selection

SECRET = "The layoff plan."
PUBLIC = MetadataFilters(filters=[MetadataFilter(key="doc_type", value="public")])


def corpus(kit):
    public = kit.section("pub", 0.9, doc_type="public")
    internal = kit.section("int", 0.2, doc_type="internal", title="Layoffs in Q3")
    summary = TextNode(id_="sum", text="Summary.", metadata={"doc_type": "public"})
    public.relationships[NodeRelationship.NEXT] = internal.as_related_node_info()
    internal.relationships[NodeRelationship.PREVIOUS] = public.as_related_node_info()
    for node in (public, internal):
        node.relationships[NodeRelationship.PARENT] = summary.as_related_node_info()
    summary.relationships[NodeRelationship.CHILD] = [
        public.as_related_node_info(),
        internal.as_related_node_info(),
    ]
    index = kit.build_index([public, internal], kit.embedding(), docstore_nodes=[summary])
    return index, public


def related(node) -> list[RelatedNodeInfo]:
    infos = []
    for info in node.relationships.values():
        infos.extend(info if isinstance(info, list) else [info])
    return infos


def test_returned_nodes_name_related_nodes_by_id_only(kit) -> None:
    index, _ = corpus(kit)
    retriever = ThresholdedRetriever(
        index, kit.policy(min_similarity=0.5), filters=PUBLIC, neighbours=1
    )
    found = retriever.retrieve(kit.QUESTION)
    assert [n.node.node_id for n in found] == ["pub", "sum"]
    infos = [info for n in found for info in related(n.node)]
    assert {i.node_id for i in infos} == {"pub", "int", "sum"}
    assert [(i.metadata, i.hash) for i in infos] == [({}, None)] * len(infos)
    assert found[0].node.next_node.node_id == "int"


def test_the_stored_nodes_keep_their_related_metadata(kit) -> None:
    index, public = corpus(kit)
    retriever = ThresholdedRetriever(
        index, kit.policy(min_similarity=0.5), filters=PUBLIC, neighbours=1
    )
    retriever.retrieve(kit.QUESTION)
    assert public.next_node.metadata["title"] == "Layoffs in Q3"
    stored = index.docstore.get_node("sum")
    assert stored.child_nodes[1].metadata["doc_type"] == "internal"


def test_a_report_names_no_section_outside_the_filters_through_its_candidates(kit) -> None:
    """The report carries the dropped nodes and the candidates themselves (``selection``), and
    a span handler reads it: a public section below the floor whose NEXT copies an internal
    section's metadata, and a public ``IndexNode`` whose object is that section, named it."""
    public = kit.section("pub", 0.9, doc_type="public")
    below = kit.section("low", 0.3, doc_type="public")
    internal = kit.section("int", 0.2, doc_type="internal", title="Layoffs in Q3", text=SECRET)
    below.relationships[NodeRelationship.NEXT] = internal.as_related_node_info()
    public.relationships[NodeRelationship.NEXT] = internal.as_related_node_info()
    pointer = IndexNode(
        id_="ptr",
        text="A public pointer.",
        index_id="int",
        obj=internal,
        metadata={"doc_type": "public"},
        embedding=kit.vec(0.35),
    )
    index = kit.build_index([public, below, internal, pointer], kit.embedding())
    policy = kit.policy(min_similarity=0.5)
    common = {"filters": PUBLIC, "neighbours": 0, "parent_summaries": False}
    for retriever in (
        ThresholdedRetriever(index, policy, **common),
        MultiCollectionRetriever([index], policy, **common),
    ):
        for report in (
            retriever.retrieve_with_report(kit.QUESTION),
            asyncio.run(retriever.aretrieve_with_report(kit.QUESTION)),
        ):
            assert [n.node.node_id for n in report.items] == ["pub"]
            assert [d.id for d in report.dropped] == ["ptr", "low"]
            selection = report.selection
            nodes = [
                *(d.item.node for d in report.dropped),
                *(c.item for c in (*selection.kept, *(d.candidate for d in selection.dropped))),
            ]
            infos = [info for node in nodes for info in related(node)]
            assert {i.node_id for i in infos} == {"int"}
            assert [(i.metadata, i.hash) for i in infos] == [({}, None)] * len(infos)
            assert [node.obj for node in nodes if isinstance(node, IndexNode)] == [None, None]
            assert "Layoffs" not in repr(report) and SECRET not in repr(report)
    assert below.next_node.metadata["title"] == "Layoffs in Q3"
    assert pointer.obj is internal


def test_candidates_that_name_other_nodes_by_id_only_are_reported_as_they_are() -> None:
    """Unlinking rebuilds only what names more than an id: a result with nothing to unlink
    is reported as the engine returned it, and a drop with nothing to unlink is the same
    drop, beside one whose node is copied without its related metadata."""
    plain = [TextNode(id_=f"n{i}", text="A section.") for i in range(3)]
    linked = TextNode(id_="linked", text="A section.")
    linked.relationships[NodeRelationship.NEXT] = RelatedNodeInfo(
        node_id="int", metadata={"title": "Layoffs in Q3"}
    )
    candidates = [Candidate(node, node.node_id, 0.9) for node in (*plain, linked)]
    kept, dropped = candidates[:2], [Dropped(c, DropReason.BEYOND_TOP_K) for c in candidates[2:]]

    clean = _result(kept, dropped[:1])
    assert unlinked_result(clean) is clean

    mixed = unlinked_result(_result(kept, dropped))
    assert mixed.selection.kept == tuple(kept) and mixed.selection.dropped[0] is dropped[0]
    copied = mixed.selection.dropped[1].candidate.item
    assert copied is not linked and copied.next_node.metadata == {}
    assert linked.next_node.metadata == {"title": "Layoffs in Q3"}


def _result(kept: list[Candidate], dropped: list[Dropped]) -> Result:
    selection = Selection(tuple(kept), (), tuple(dropped), min_similarity=0.5)
    return Result(Question("q"), selection)
