"""Translation between LlamaIndex nodes and the core's candidates.

Nodes are copied before anything is written on them: the docstore's and the
vector store's objects are never mutated.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from llama_index.core.schema import (
    BaseNode,
    MetadataMode,
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeType,
    TextNode,
)

from thresholded import metadata_keys
from thresholded.copies import updated_copy
from thresholded.provenance import Asked, register
from thresholded.scores import ScoreKind
from thresholded.selection import AttachedRole, Candidate

if TYPE_CHECKING:
    from thresholded.engine import Result

_HIDDEN_KEYS = list(metadata_keys.ALL_KEYS)


def source_of(node: BaseNode, source_key: str) -> str | None:
    """The node's source: its ``source_key`` metadata, else the document it came from."""
    return metadata_keys.source_from(node.metadata, source_key, node.ref_doc_id)


def text_length(node: BaseNode) -> int:
    """The length of a node's text, without its metadata."""
    if type(node) is TextNode:  # its content without metadata is its text
        return len(node.text)
    return len(node.get_content(metadata_mode=MetadataMode.NONE))


def marks_of(node: BaseNode) -> tuple[ScoreKind | None, str | None, AttachedRole | None]:
    """What this package already wrote on a node: its score kind and attachment marks."""
    kind = node.metadata.get(metadata_keys.SCORE_KIND)
    return (
        ScoreKind(kind) if kind in ScoreKind._value2member_map_ else None,
        node.metadata.get(metadata_keys.ATTACHED_TO),
        metadata_keys.read_role(node.metadata.get(metadata_keys.ATTACHED_ROLE)),
    )


def marked_copy(node: BaseNode, marks: dict[str, object]) -> BaseNode:
    """A copy of ``node`` with ``marks`` in its metadata, hidden from the LLM and embedder.

    Marks the node itself holds (stored metadata, anyone's to write) are removed first, and
    so is the metadata its relationships copy from other nodes, and the object an
    ``IndexNode`` holds. The node is left as it was: the copy gets new metadata and key
    lists.
    """
    update = {
        "metadata": metadata_keys.remarked(node.metadata, marks),
        "excluded_llm_metadata_keys": _hidden(node.excluded_llm_metadata_keys),
        "excluded_embed_metadata_keys": _hidden(node.excluded_embed_metadata_keys),
        "embedding": None,
        "relationships": _by_id_only(node.relationships),
    }
    if _holds_object(node):
        update["obj"] = None
    return updated_copy(node, update)


def unlinked(node: BaseNode) -> BaseNode:
    """``node`` naming other nodes by id only: a copy without an ``IndexNode``'s object and
    without the metadata and hashes its relationships copy from other nodes; the node itself
    when it holds none of them. The node is left as it was."""
    update: dict[str, Any] = {"obj": None} if _holds_object(node) else {}
    if any(map(_names_more_than_id, node.relationships.values())):
        update["relationships"] = _by_id_only(node.relationships)
    return updated_copy(node, update) if update else node


def unlinked_result(result: Result[BaseNode]) -> Result[BaseNode]:
    """``result`` with every candidate's node :func:`unlinked`: a report carries the
    candidates (``Report.selection``) and the dropped nodes, and a span handler reads the
    report, so a node kept, attached or dropped names no other section but by its id."""
    selection = result.selection.with_items(unlinked)
    return result if selection is result.selection else replace(result, selection=selection)


def _holds_object(node: BaseNode) -> bool:
    """Whether the node is an ``IndexNode`` holding its object (``obj``: the node it stands
    for, which a store keeps with it), which a copy leaves out, as it names it by its
    ``index_id``: the filters judge the ``IndexNode``'s own metadata, and its object may be
    a section outside them, which a recursive retriever around this one
    (``QueryFusionRetriever``) returns in its place."""
    # read from the fields: pydantic answers a missing attribute slowly, by raising
    return node.__dict__.get("obj") is not None


def _by_id_only(relationships: dict[NodeRelationship, RelatedNodeType]) -> dict:
    """The relationships with each related node named by its id and type only: its metadata,
    which LlamaIndex copies in (a parent lists every child's), and its hash (of its text and
    metadata, which would confirm a guess of them) may be of a section outside the call's
    filters."""
    if not any(map(_names_more_than_id, relationships.values())):
        return relationships  # shared, as every unchanged field is: never written on
    return {relation: _without_metadata(info) for relation, info in relationships.items()}


def _names_more_than_id(info: RelatedNodeType) -> bool:
    infos = info if isinstance(info, list) else (info,)
    return any(i.metadata or i.hash for i in infos)


def _without_metadata(info: RelatedNodeType) -> RelatedNodeType:
    if isinstance(info, list):
        return [updated_copy(i, _UNNAMED) for i in info]
    return updated_copy(info, _UNNAMED) if info.metadata or info.hash else info


_UNNAMED = {"metadata": {}, "hash": None}


def _hidden(keys: list[str]) -> list[str]:
    """A new list of the keys, and this package's marks after them."""
    return list(_with_marks(tuple(keys)) if keys else _HIDDEN_KEYS)


@functools.lru_cache(maxsize=1024)
def _with_marks(keys: tuple[str, ...]) -> tuple[str, ...]:
    """Most nodes share a few key lists: each is extended once."""
    return (*keys, *(k for k in _HIDDEN_KEYS if k not in keys))


def output(
    candidate: Candidate[BaseNode], *, asked: Asked, collection_key: str | None = None
) -> NodeWithScore:
    """The output node of a kept section or an attachment: a copy carrying its score (None
    for an attachment) and the package's marks (:func:`thresholded.metadata_keys.marks`),
    registered as this package's answer to ``asked`` (:mod:`thresholded.provenance`)."""
    written = metadata_keys.marks(candidate, collection_key=collection_key)
    node = register(marked_copy(candidate.item, written), asked)
    return NodeWithScore(node=node, score=candidate.score)


def asked(query: str | QueryBundle | None) -> Asked | None:
    """The question a filter judges for (:class:`thresholded.provenance.Asked`): a
    bundle's text, its own vector if it has one, and its custom embedding texts."""
    if query is None or isinstance(query, str):
        return None if query is None else Asked(query)
    custom = query.custom_embedding_strs
    vector = query.embedding
    return Asked(query.query_str, vector, tuple(custom) if custom else (), vector is not None)


def asked_by(result: Result[BaseNode]) -> Asked:
    """The question of a retrieval, as its results are registered for it: with the vector
    it was searched with, the caller's own or the embedded one."""
    question = result.question
    bundle = question.item if isinstance(question.item, QueryBundle) else question.text
    found = asked(bundle)
    assert found is not None
    return replace(
        found,
        vector=result.vector,
        given=question.vector is not None,
        model=result.model,
        held_back=result.held_back,
    )


def as_dropped(candidate: Candidate[BaseNode]) -> NodeWithScore:
    """A dropped candidate as it came from the store, with its raw score, for a report; it
    names other nodes by id only (:func:`unlinked`)."""
    return NodeWithScore(node=unlinked(candidate.item), score=candidate.score)


def describe(node: NodeWithScore) -> str:
    """A node's text, for a report's ``explain``."""
    return node.node.get_content()
