"""``SimilarityThresholdPostprocessor``: the same policy for query engines that have a retriever.

Where it belongs: directly after the retriever, before any neighbour
postprocessor (``PrevNextNodePostprocessor``) and before any reranker. It is
safe in any position all the same: a node with no score is never dropped for
lacking one. An attachment is kept exactly when its section is kept; an
unscored node it cannot tie to a section is kept, with one warning.
"""

from __future__ import annotations

from typing import Any, ClassVar

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from pydantic import Field

from llama_index_thresholded.nodes import marked_copy, marks_of, source_of, text_length
from thresholded import metadata_keys
from thresholded.policy import RetrievalPolicy
from thresholded.policy_arguments import policy_in_force
from thresholded.scores import ScoreKind
from thresholded.selection import Candidate, Selection, select
from thresholded.strict import StrictArguments


class SimilarityThresholdPostprocessor(StrictArguments, BaseNodePostprocessor):
    """Drop nodes whose cosine similarity is below the floor; with a policy, all its rules.

    It takes the same arguments as the LangChain ``SimilarityThresholdCompressor``, and
    they mean the same:

    - ``policy=RetrievalPolicy(...)``: every rule of the policy, as the retriever applies
      them: the floor, the answer gate, the per-source cap, the character budget, top_k;
    - ``min_similarity=0.35`` (and ``min_top_similarity=``, the answer gate, if wanted):
      the floor only; no source cap, no budget, no top_k (the policy in force keeps up
      to 16,384 results, the most one search returns);
    - both: a ``TypeError``; neither: the floor only, at the calibrated default floor of
      ``embedding_model`` (``"BAAI/bge-m3"``: 0.35); without such a model, a ``TypeError``
      that says to pass ``min_similarity=`` or ``policy=``.

    ``policy`` is the policy in force (the floor-only one for ``min_similarity=``) and
    ``min_similarity`` its floor; both are read-only. ``callback_manager`` is LlamaIndex's,
    as for every postprocessor.

    Incoming scores are read as cosines (``score_kind="cosine"``) unless a node's
    metadata says otherwise, or carries its cosine in ``similarity`` (as the
    nodes of ``ThresholdedRetriever`` do, so a reranker's score before this
    postprocessor is never mistaken for a cosine). A hybrid or sparse node that
    carries a ``similarity`` (re-scored by the retriever) meets the floor with
    that cosine and keeps its hybrid score and order; one without passes the
    floor untouched. Every kept node leaves with its ``score_kind`` in metadata.
    """

    _init_keywords: ClassVar[tuple[str, ...]] = ("min_similarity", "min_top_similarity")

    policy: RetrievalPolicy = Field(
        frozen=True,
        description=(
            "The policy in force, its floor set; read-only. Given as policy=, all its rules "
            "apply (floor, gate, per-source cap, character budget, top_k). Built from "
            "min_similarity= (the cosine floor) and min_top_similarity= (the answer gate, "
            "None or 0: off), which the constructor also takes: the floor and gate only."
        ),
    )
    score_kind: ScoreKind = Field(
        default=ScoreKind.COSINE, description="What incoming scores are, unless a node says."
    )
    embedding_model: str | None = Field(
        default=None,
        frozen=True,
        description=(
            "The model in use (name or name@dimension): the floor when none is given is its "
            "calibrated default, and a policy measured for another model is refused."
        ),
    )

    def __init__(self, /, **data: Any) -> None:
        self._check_keywords(data)
        data["policy"] = policy_in_force(
            type(self).__name__,
            policy=data.get("policy"),
            min_similarity=data.pop("min_similarity", None),
            min_top_similarity=data.pop("min_top_similarity", None),
            embedding_model=data.get("embedding_model"),
        )
        super().__init__(**data)

    @classmethod
    def class_name(cls) -> str:
        return "SimilarityThresholdPostprocessor"

    @property
    def min_similarity(self) -> float:
        """The floor in force: ``policy.min_similarity``."""
        return self.policy.resolve_min_similarity()

    @property
    def min_top_similarity(self) -> float | None:
        """The answer gate in force (None or 0: off): ``policy.min_top_similarity``."""
        return self.policy.min_top_similarity

    def select(self, nodes: list[NodeWithScore]) -> Selection[NodeWithScore]:
        """The full selection, with every drop and its reason."""
        candidates = [self._candidate(n) for n in nodes]
        return select(candidates, self.policy, self.min_similarity)

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
