"""Translation between LlamaIndex nodes and the core's candidates.

Nodes are copied before anything is written on them: the docstore's and the
vector store's objects are never mutated.
"""

from __future__ import annotations

from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore

from thresholded import metadata_keys
from thresholded.scores import ScoreKind
from thresholded.selection import AttachedRole, Candidate

_HIDDEN_KEYS = list(metadata_keys.ALL_KEYS)


def source_of(node: BaseNode, source_key: str) -> str | None:
    """The node's source: its ``source_key`` metadata, else the document it came from."""
    value = node.metadata.get(source_key)
    if value is not None and str(value) != "":
        return str(value)
    return node.ref_doc_id


def text_length(node: BaseNode) -> int:
    return len(node.get_content(metadata_mode=MetadataMode.NONE))


def marks_of(node: BaseNode) -> tuple[ScoreKind | None, str | None, AttachedRole | None]:
    """What this package already wrote on a node: its score kind and attachment marks."""
    kind = node.metadata.get(metadata_keys.SCORE_KIND)
    role = node.metadata.get(metadata_keys.ATTACHED_ROLE)
    return (
        ScoreKind(kind) if kind in ScoreKind._value2member_map_ else None,
        node.metadata.get(metadata_keys.ATTACHED_TO),
        AttachedRole(role) if role in AttachedRole._value2member_map_ else None,
    )


def to_candidate(
    scored: NodeWithScore, *, score_kind: ScoreKind, source_key: str
) -> Candidate[NodeWithScore]:
    """A retrieved node as a candidate; its score is already a cosine where the kind says so."""
    node = scored.node
    return Candidate(
        item=scored,
        id=node.node_id,
        score=scored.score,
        score_kind=score_kind,
        source=source_of(node, source_key),
        chars=text_length(node),
    )


def to_attachment(
    node: BaseNode, *, anchor: str | None, role: AttachedRole | None, source_key: str
) -> Candidate[NodeWithScore]:
    return Candidate(
        item=NodeWithScore(node=node, score=None),
        id=node.node_id,
        score=None,
        score_kind=ScoreKind.UNKNOWN,
        source=source_of(node, source_key),
        chars=text_length(node),
        is_attachment=True,
        attached_to=anchor,
        attached_role=role,
    )


def marked_copy(node: BaseNode, marks: dict[str, object]) -> BaseNode:
    """A copy of ``node`` with ``marks`` in its metadata, hidden from the LLM and embedder."""
    copy = node.model_copy()
    copy.metadata = {**node.metadata, **marks}
    copy.excluded_llm_metadata_keys = _merge(node.excluded_llm_metadata_keys)
    copy.excluded_embed_metadata_keys = _merge(node.excluded_embed_metadata_keys)
    copy.embedding = None
    return copy


def _merge(keys: list[str]) -> list[str]:
    return [*keys, *(k for k in _HIDDEN_KEYS if k not in keys)]


def kept_node(candidate: Candidate[NodeWithScore]) -> NodeWithScore:
    """The output node of a kept section: a marked copy carrying its score.

    ``score_kind`` says what the score is; ``similarity`` is the cosine whenever
    one is known: the score itself, or the dense cosine of a re-scored hybrid or
    sparse result (whose score stays the hybrid score).
    """
    marks: dict[str, object] = {metadata_keys.SCORE_KIND: candidate.score_kind.value}
    if candidate.floor_score is not None:
        marks[metadata_keys.SIMILARITY] = candidate.floor_score
    return NodeWithScore(node=marked_copy(candidate.item.node, marks), score=candidate.score)


def attached_node(candidate: Candidate[NodeWithScore]) -> NodeWithScore:
    """The output node of an attachment: a marked copy with no score of its own."""
    node = candidate.item.node
    if candidate.attached_to is None or candidate.attached_role is None:
        return candidate.item  # an attachment we did not make: pass it on untouched
    marks = {
        metadata_keys.ATTACHED_ROLE: candidate.attached_role.value,
        metadata_keys.ATTACHED_TO: candidate.attached_to,
    }
    return NodeWithScore(node=marked_copy(node, marks), score=None)
