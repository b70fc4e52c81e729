"""``SimilarityThresholdPostprocessor``: the same policy for query engines that have a retriever.

Where it belongs: directly after the retriever, before any neighbour
postprocessor (``PrevNextNodePostprocessor``) and before any reranker. It is
safe in any position all the same: a node with no score is never dropped for
lacking one. An attachment is kept exactly when its section is kept; an
unscored node it cannot tie to a section is kept, with one warning.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from pydantic import Field, PrivateAttr, model_validator

from llama_index_thresholded.nodes import marked_copy, marks_of, source_of, text_length
from thresholded import metadata_keys
from thresholded.policy import RetrievalPolicy
from thresholded.scores import ScoreKind
from thresholded.selection import Candidate, Selection, select


class SimilarityThresholdPostprocessor(BaseNodePostprocessor):
    """Drop nodes whose cosine similarity is below the floor; cap sources; keep a budget.

    Incoming scores are read as cosines (``score_kind="cosine"``) unless a node's
    metadata says otherwise, or carries its cosine in ``similarity`` (as the
    nodes of ``ThresholdedRetriever`` do, so a reranker's score before this
    postprocessor is never mistaken for a cosine). A hybrid or sparse node that
    carries a ``similarity`` (re-scored by the retriever) meets the floor with
    that cosine and keeps its hybrid score and order; one without passes the
    floor untouched. Every kept node leaves with its ``score_kind`` in metadata.
    """

    policy: RetrievalPolicy = Field(default_factory=RetrievalPolicy)
    score_kind: ScoreKind = Field(
        default=ScoreKind.COSINE, description="What incoming scores are, unless a node says."
    )
    embedding_model: str | None = Field(
        default=None, description="The model in use, to resolve min_similarity=None."
    )
    _min_similarity: float = PrivateAttr(default=0.0)

    @model_validator(mode="after")
    def _resolve_floor(self) -> SimilarityThresholdPostprocessor:
        self._min_similarity = self.policy.resolve_min_similarity(self.embedding_model)
        return self

    @classmethod
    def class_name(cls) -> str:
        return "SimilarityThresholdPostprocessor"

    @property
    def min_similarity(self) -> float:
        return self._min_similarity

    def select(self, nodes: list[NodeWithScore]) -> Selection[NodeWithScore]:
        """The full selection, with every drop and its reason."""
        candidates = [self._candidate(n) for n in nodes]
        return select(candidates, self.policy, self._min_similarity)

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        selection = self.select(nodes)
        return [*(_with_kind(c) for c in selection.kept), *(c.item for c in selection.attached)]

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        return self._postprocess_nodes(nodes, query_bundle)

    def _candidate(self, scored: NodeWithScore) -> Candidate[NodeWithScore]:
        node = scored.node
        kind, anchor, role = marks_of(node)
        common: dict[str, Any] = {
            "item": scored,
            "id": node.node_id,
            "source": source_of(node, self.policy.source_key),
            "chars": text_length(node),
        }
        if anchor is not None or role is not None or scored.score is None:
            return Candidate(
                score=None,
                score_kind=ScoreKind.UNKNOWN,
                is_attachment=True,
                attached_to=anchor,
                attached_role=role,
                **common,
            )
        similarity = node.metadata.get(metadata_keys.SIMILARITY)
        has_similarity = isinstance(similarity, (int, float)) and not isinstance(similarity, bool)
        kind = kind or self.score_kind
        if has_similarity and kind is not ScoreKind.COSINE:
            # re-scored hybrid or sparse result: the floor reads the cosine, the order the score
            return Candidate(
                score=scored.score, score_kind=kind, cosine=float(similarity), **common
            )
        if has_similarity:
            return Candidate(score=float(similarity), score_kind=ScoreKind.COSINE, **common)
        return Candidate(score=scored.score, score_kind=kind, **common)


def _with_kind(candidate: Candidate[NodeWithScore]) -> NodeWithScore:
    """A kept node, marked with its score kind (and cosine) when it does not say yet.

    The node's score is left as it came in: it may be a reranker's.
    """
    node = candidate.item.node
    marks: dict[str, object] = {}
    if node.metadata.get(metadata_keys.SCORE_KIND) != candidate.score_kind.value:
        marks[metadata_keys.SCORE_KIND] = candidate.score_kind.value
    if metadata_keys.SIMILARITY not in node.metadata and candidate.floor_score is not None:
        marks[metadata_keys.SIMILARITY] = candidate.floor_score
    if not marks:
        return candidate.item
    return NodeWithScore(node=marked_copy(node, marks), score=candidate.item.score)
