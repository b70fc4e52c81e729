"""``SimilarityThresholdPostprocessor``: the same policy for query engines that have a retriever.

Where it belongs: directly after the retriever, before any neighbour
postprocessor (``PrevNextNodePostprocessor``) and before any reranker. It trusts
the marks (``similarity``, ``score_kind``, ``attached_role``, ``attached_to``) only
on nodes this package's retriever produced in this process: an attachment among
them is kept exactly when its section is kept. Any other node is judged by the
cosine it computes with ``embed_model``; without one, by its score when
``score_kind="cosine"`` is declared; an unscored one is dropped as ``unscored``.
See :mod:`thresholded.trusted_scores`.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
from pydantic import Field

from llama_index_thresholded.embeddings import named_model
from llama_index_thresholded.events import ThresholdSelectionEvent, is_heard
from llama_index_thresholded.nodes import (
    asked,
    describe,
    marked_copy,
    marks_of,
    source_of,
    text_length,
)
from llama_index_thresholded.retriever import question_of
from thresholded import metadata_keys
from thresholded.engine import Pipeline, Step, adrive, check_question, drive
from thresholded.judging import to_judge
from thresholded.policy import RetrievalPolicy
from thresholded.policy_arguments import PolicyInForce
from thresholded.provenance import Asked, Standing, asked_of, register, standing
from thresholded.report import Report
from thresholded.scores import ScoreKind
from thresholded.selection import Candidate, Selection, select
from thresholded.trusted_scores import cosines, undeclared_score_error

dispatcher = get_dispatcher(__name__)


class SimilarityThresholdPostprocessor(PolicyInForce, BaseNodePostprocessor):
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

    Which score meets the floor (the same rule as the compressor's):

    - a node ``ThresholdedRetriever`` produced in this process: its marks, ``similarity``
      (its cosine, so a reranker's score before this postprocessor is never mistaken for
      one) and ``score_kind``; a hybrid or sparse node re-scored by the retriever meets
      the floor with its ``similarity`` and keeps its hybrid score and order, one without
      passes the floor untouched; an attachment is kept exactly when its section is;
    - any other node (marks in its metadata are ignored: anyone can write them): with
      ``embed_model``, the cosine between the question and its text, computed here (the
      question embedded once, the texts in one batch); without, its score, read as
      ``score_kind`` only when ``score_kind`` is given (a raw score of unknown kind is an
      error: a Chroma or L2 distance read as a cosine would be silently wrong; so is a
      declared cosine outside [-1, 1], such as a cross-encoder's logit); a node
      with no score is dropped as ``unscored``. When no node has a trusted mark or a
      score, the error says to pass ``embed_model``.

    A section is its id and the collection a multi-collection retriever marked it with
    (``source_collection``): two collections may number their sections alike, and their
    sections of one id are two sections, not a duplicate.

    Every kept node leaves with its ``score_kind`` and cosine in metadata. Each call sends
    one :class:`~llama_index_thresholded.events.ThresholdSelectionEvent`, stage
    ``postprocessor``, with every drop and its reason. ``postprocess_with_report`` returns
    the call's ``Report`` (its ``items`` are what ``postprocess_nodes`` returns), as the
    compressor's ``compress_with_report`` does.
    """

    policy: RetrievalPolicy = Field(
        frozen=True,
        description=(
            "The policy in force, its floor set; read-only. Given as policy=, all its rules "
            "apply (floor, gate, per-source cap, character budget, top_k). Built from "
            "min_similarity= (the cosine floor) and min_top_similarity= (the answer gate, "
            "None or 0: off), which the constructor also takes: the floor and gate only."
        ),
    )
    score_kind: ScoreKind | None = Field(
        default=None,
        description=(
            "What the scores of nodes this package did not produce are, e.g. 'cosine' when "
            "you know they are cosine similarities; None: unknown (such a score is an error "
            "without embed_model)."
        ),
    )
    embed_model: BaseEmbedding | None = Field(
        default=None,
        exclude=True,
        description=(
            "The model the store was built with: the cosine of every node this package did "
            "not produce is computed with it (the question embedded once, texts in a batch). "
            "Not serialised: give it again to from_dict(data, embed_model=...). When the "
            "policy names a model, it must be that model."
        ),
    )
    allow_model_mismatch: bool = Field(
        default=False,
        strict=True,
        description=(
            "Compute cosines with embed_model even when it is not the policy's model, or names "
            "none: a floor measured for one model means nothing for another; only when you know."
        ),
    )
    embedding_model: str | None = Field(
        default=None,
        frozen=True,
        description=(
            "The model in use (name or name@dimension): the floor when none is given is its "
            "calibrated default, and a policy measured for another model is refused."
        ),
    )

    def _model_in_use(self) -> tuple[Any, str] | None:
        if self.embed_model is None:
            return None
        return named_model(self.embed_model), "embed_model"

    @classmethod
    def class_name(cls) -> str:
        return "SimilarityThresholdPostprocessor"

    def select(
        self, nodes: list[NodeWithScore], query: str | QueryBundle | None = None
    ) -> Selection[NodeWithScore]:
        """The full selection, with every drop and its reason; ``query`` (the question) is
        needed when ``embed_model`` computes cosines."""
        return drive(self._selected(nodes, query))

    async def aselect(
        self, nodes: list[NodeWithScore], query: str | QueryBundle | None = None
    ) -> Selection[NodeWithScore]:
        """Async ``select``: the question and the texts are embedded with the model's async
        calls."""
        return await adrive(self._selected(nodes, query))

    def _selected(
        self, nodes: list[NodeWithScore], query: str | QueryBundle | None
    ) -> Pipeline[Selection[NodeWithScore]]:
        computed: dict[int, float] = {}
        wanted = self._to_embed(nodes, query)
        if wanted is not None:
            model, to_judge, bundle = wanted
            question = (
                list(bundle.embedding)
                if bundle.embedding is not None
                else (
                    yield Step.call(model, "get_agg_embedding_from_queries", bundle.embedding_strs)
                )
            )
            vectors = yield Step.call(model, "get_text_embedding_batch", _texts(to_judge))
            computed = _by_node(to_judge, cosines(question, vectors))
        return self._select(nodes, computed, query)

    def postprocess_with_report(
        self, nodes: list[NodeWithScore], query: str | QueryBundle | None = None
    ) -> Report[NodeWithScore]:
        """What ``postprocess_nodes`` returns (``report.items``), with every drop and its
        reason, as LangChain's ``compress_with_report`` and the retriever's
        ``retrieve_with_report`` report theirs; ``query`` is needed when ``embed_model``
        computes cosines."""
        return _report(self.select(nodes, query), query)

    async def apostprocess_with_report(
        self, nodes: list[NodeWithScore], query: str | QueryBundle | None = None
    ) -> Report[NodeWithScore]:
        """Async ``postprocess_with_report``: the question and the texts are embedded with
        the model's async calls."""
        return _report(await self.aselect(nodes, query), query)

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        report = self.postprocess_with_report(nodes, query_bundle)
        _announce(report.selection, query_bundle)
        return list(report.items)

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        report = await self.apostprocess_with_report(nodes, query_bundle)
        _announce(report.selection, query_bundle)
        return list(report.items)

    def _select(
        self,
        nodes: list[NodeWithScore],
        computed: dict[int, float],
        query: str | QueryBundle | None,
    ) -> Selection[NodeWithScore]:
        question = asked(query)
        candidates = [self._candidate(n, computed.get(id(n)), question) for n in nodes]
        return select(candidates, self.policy, self.min_similarity)

    def _to_embed(
        self, nodes: list[NodeWithScore], query: str | QueryBundle | None
    ) -> tuple[BaseEmbedding, list[NodeWithScore], QueryBundle] | None:
        """The model, the nodes to judge by their cosines (:func:`thresholded.judging.to_judge`)
        and the question; None when none is. A question with no text to embed is an error,
        as the retriever refuses it."""
        positions = to_judge(
            self,
            [n.node for n in nodes],
            asked(query),
            model_argument="embed_model",
            has_model=self.embed_model is not None,
            scoreless=all(n.score is None for n in nodes),
        )
        if not positions or self.embed_model is None:
            return None
        if query is None:
            raise ValueError(
                f"{type(self).__name__} computes cosines with embed_model and needs the "
                "question: pass the query bundle (postprocess_nodes(nodes, query_str=...))"
            )
        bundle = query if isinstance(query, QueryBundle) else QueryBundle(query)
        check_question(question_of(bundle))  # a blank text embeds into the vector of nothing
        return self.embed_model, [nodes[i] for i in positions], bundle

    def _candidate(
        self, scored: NodeWithScore, computed: float | None, question: Asked | None
    ) -> Candidate[NodeWithScore]:
        node = scored.node
        common: dict[str, Any] = {
            "item": scored,
            "id": node.node_id,
            "collection": metadata_keys.collection_of(node.metadata),
            "source": source_of(node, self.policy.source_key),
            "chars": text_length(node),
        }
        trust = standing(node, question)
        if trust is Standing.ANOTHER_QUESTION:  # its marks and score are another question's
            assert computed is not None  # without a model, _to_embed raised
            return Candidate(score=computed, score_kind=ScoreKind.COSINE, **common)
        if trust is Standing.FOREIGN:
            return self._foreign_candidate(scored, computed, common)
        kind, anchor, role = marks_of(node)
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
        kind = kind or self.score_kind or ScoreKind.COSINE
        if has_similarity and kind is not ScoreKind.COSINE:
            # re-scored hybrid or sparse result: the floor reads the cosine, the order the score
            return Candidate(
                score=scored.score, score_kind=kind, cosine=float(similarity), **common
            )
        if has_similarity:
            return Candidate(score=float(similarity), score_kind=ScoreKind.COSINE, **common)
        return Candidate(score=scored.score, score_kind=kind, **common)

    def _foreign_candidate(
        self, scored: NodeWithScore, computed: float | None, common: dict[str, Any]
    ) -> Candidate[NodeWithScore]:
        """A node this package did not produce: its marks are ignored (see the class)."""
        declared = self.score_kind
        if computed is not None:
            if scored.score is not None and declared not in (None, ScoreKind.COSINE):
                return Candidate(score=scored.score, score_kind=declared, cosine=computed, **common)
            return Candidate(score=computed, score_kind=ScoreKind.COSINE, **common)
        if scored.score is None:  # tied to no section: dropped as unscored
            return Candidate(score=None, score_kind=ScoreKind.UNKNOWN, is_attachment=True, **common)
        if declared is None:
            raise undeclared_score_error(type(self).__name__, "embed_model", scored.score)
        return Candidate(score=scored.score, score_kind=declared, **common)


def _texts(nodes: list[NodeWithScore]) -> list[str]:
    """The texts of nodes as an index embeds them."""
    return [n.node.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]


def _by_node(nodes: list[NodeWithScore], values: list[float]) -> dict[int, float]:
    return {id(n): value for n, value in zip(nodes, values, strict=True)}


def _announce(selection: Selection[NodeWithScore], query: QueryBundle | None) -> None:
    """Send the selection as one ``ThresholdSelectionEvent``, stage ``postprocessor`` (as
    LangChain's compressor sends its ``compressor`` one), when a handler listens."""
    if is_heard(dispatcher):
        report = Report.build(
            "" if query is None else query.query_str,
            selection,
            output=lambda c: c.item,
            as_dropped=lambda c: c.item,
        )
        dispatcher.event(ThresholdSelectionEvent(**report.to_event_data("postprocessor")))


def _report(
    selection: Selection[NodeWithScore], query: str | QueryBundle | None
) -> Report[NodeWithScore]:
    """The report of a selection: the kept nodes, marked, then their attachments, and every
    drop with its node as it came in."""
    question = asked(query)
    return Report.build(
        "" if question is None else question.text,
        selection,
        output=lambda c: c.item if c.is_attachment else _with_kind(c, question),
        as_dropped=lambda c: c.item,
        describe=describe,
    )


def _with_kind(candidate: Candidate[NodeWithScore], question: Asked | None) -> NodeWithScore:
    """A kept node, marked with its score kind (and cosine) when it does not say yet; a node
    whose marks are not this question's always leaves as a marked copy, registered for the
    question (for the question it was registered for when the call names none; not at all
    when neither is known: its marks would otherwise be trusted for any question).

    The node's score is left as it came in: it may be a reranker's.
    """
    node = candidate.item.node
    trusted = standing(node, question) is Standing.OURS
    marks: dict[str, object] = {metadata_keys.SCORE_KIND: str(candidate.score_kind)}
    similarity = node.metadata.get(metadata_keys.SIMILARITY) if trusted else None
    if similarity is None:
        similarity = candidate.floor_score
    if similarity is not None:
        marks[metadata_keys.SIMILARITY] = similarity
    if trusted and all(node.metadata.get(k) == v for k, v in marks.items()):
        return candidate.item
    copy = marked_copy(node, marks)
    for_question = question if question is not None else asked_of(node) if trusted else None
    if for_question is not None:
        register(copy, for_question)
    return NodeWithScore(node=copy, score=candidate.item.score)
