"""A document compressor that applies the cosine floor to documents already retrieved.

It trusts the marks (``similarity``, ``score_kind``, ``attached_role``,
``attached_to``) only on documents this package's retriever produced in this process;
any other document is judged by the cosine it computes with ``embeddings``. See
:mod:`thresholded.trusted_scores`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManager,
    BaseCallbackManager,
    Callbacks,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.embeddings import Embeddings
from pydantic import ConfigDict, Field

from langchain_thresholded._documents import document_id, marked_copy, source_of
from langchain_thresholded.backend import describe
from langchain_thresholded.embeddings import OptionalEmbeddings, model_of
from langchain_thresholded.events import EVENT_NAME
from thresholded import metadata_keys
from thresholded.engine import Pipeline, Question, Step, adrive, check_question, drive
from thresholded.judging import to_judge
from thresholded.policy import RetrievalPolicy
from thresholded.policy_arguments import PolicyInForce
from thresholded.provenance import Asked, Standing, register, standing
from thresholded.report import Report
from thresholded.scores import ScoreKind
from thresholded.selection import Candidate, select
from thresholded.trusted_scores import cosines

_Item = tuple[int, Document]


class SimilarityThresholdCompressor(PolicyInForce, BaseDocumentCompressor):
    """Drops documents whose cosine is below a floor, before a reranker sees them.

    For ``ContextualCompressionRetriever`` and ``DocumentCompressorPipeline``. It takes
    the same arguments as the LlamaIndex ``SimilarityThresholdPostprocessor``, and they
    mean the same:

    - ``policy=RetrievalPolicy(...)``: every rule of the policy, as the retriever applies
      them: the floor, the answer gate, the per-source cap, the character budget, top_k;
    - ``min_similarity=0.35`` (and ``min_top_similarity=``, the answer gate, if wanted):
      the floor only; no source cap, no budget, no top_k (the policy in force keeps up
      to 16,384 results, the most one search returns);
    - both: a ``TypeError``; neither: the floor only, at the calibrated default floor of
      ``embedding_model`` (``"BAAI/bge-m3"``: 0.35); without such a model, a ``TypeError``
      that says to pass ``min_similarity=`` or ``policy=``.

    ``policy`` is the policy in force (the floor-only one for ``min_similarity=``) and
    ``min_similarity`` its floor; both are read-only.

    Which cosine meets the floor (the same rule as the postprocessor's):

    - a document ``ThresholdedRetriever`` produced in this process: its marks. The cosine
      is ``metadata["similarity"]`` and the kind ``metadata["score_kind"]`` (default:
      ``score_kind``); ``similarity`` is always a cosine, so it meets the floor whatever
      the kind (a re-scored hybrid result carries its dense cosine there); a hybrid or
      sparse result without one passes; an attachment (``attached_to``) stays exactly
      when its section stays;
    - any other document (marks in its metadata are ignored: anyone can write them):
      with ``embeddings``, the cosine between the query and its ``page_content``, computed
      here (the query embedded once, the texts in one batch, as ``EmbeddingsFilter``
      does); without, it has no score and is dropped as ``unscored``, and when no
      document at all was produced by the retriever the call is an error that says to
      pass ``embeddings``.

    A section is its id and the collection a multi-collection retriever marked it with
    (``source_collection``): two collections may number their sections alike, and their
    sections of one id are two sections, not a duplicate.

    It keeps the order it is given (a reranker's order survives). Documents are returned
    as given, never copied or changed.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    policy: RetrievalPolicy = Field(frozen=True)
    """The policy in force, its floor set; read-only. Given as ``policy=``, all its rules
    apply (floor, gate, per-source cap, character budget, top_k; its ``source_key`` names a
    document's source). Built from ``min_similarity=`` (the cosine floor) and
    ``min_top_similarity=`` (the answer gate; None or 0: off), which the constructor also
    takes: the floor and gate only."""
    score_kind: ScoreKind | None = None
    """What the score of a document the retriever produced is when it does not say
    (``metadata["score_kind"]``); None: a cosine."""
    embeddings: OptionalEmbeddings = None
    """The model the store was built with: the cosine of every document this package did
    not produce is computed with it (the query embedded once, the texts in one batch). When the
    policy names a model, it must be the model these embeddings name."""
    allow_model_mismatch: bool = Field(default=False, strict=True)
    """Compute cosines with ``embeddings`` even when they are not the policy's model, or name
    none: a floor measured for one model means nothing for another; only when you know."""
    embedding_model: str | None = Field(default=None, frozen=True)
    """The model in use (name or name@dimension): the floor when none is given is its
    calibrated default, and a policy measured for another model is refused."""
    id_key: str | None = "id"
    """Metadata key of a document's id when ``Document.id`` is empty."""

    def _model_in_use(self) -> tuple[str | None, str] | None:
        if self.embeddings is None:
            return None
        return model_of(self.embeddings), "the embeddings"

    def compress_with_report(
        self, documents: Sequence[Document], query: str | None = None
    ) -> Report[Document]:
        """Apply the policy and return what was kept, kept as attachments, and dropped;
        ``query`` is needed when ``embeddings`` computes cosines."""
        return drive(self._reported(documents, query))

    async def acompress_with_report(
        self, documents: Sequence[Document], query: str | None = None
    ) -> Report[Document]:
        """Async ``compress_with_report``: the query and the texts are embedded with the
        embeddings' async calls."""
        return await adrive(self._reported(documents, query))

    def _reported(self, documents: Sequence[Document], query: str | None) -> Pipeline[Report]:
        computed: dict[int, float] = {}
        wanted = self._to_embed(documents, query)
        if wanted is not None:
            embeddings, foreign, text = wanted
            question = yield Step.call(embeddings, "embed_query", text)
            texts = [documents[i].page_content for i in foreign]
            vectors = yield Step.call(embeddings, "embed_documents", texts)
            computed = dict(zip(foreign, cosines(question, vectors), strict=True))
        return self._report(documents, computed, query)

    def compress_documents(
        self,
        documents: Sequence[Document],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> Sequence[Document]:
        """The documents that clear the floor, in the order given."""
        report = self.compress_with_report(documents, query)
        if _has_parent_run(callbacks):
            data = {**report.to_event_data("compressor"), "query": query}
            dispatch_custom_event(EVENT_NAME, data, config={"callbacks": callbacks})
        return _in_input_order(documents, report)

    async def acompress_documents(
        self,
        documents: Sequence[Document],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> Sequence[Document]:
        """Async ``compress_documents``."""
        report = await self.acompress_with_report(documents, query)
        if _has_parent_run(callbacks):
            data = {**report.to_event_data("compressor"), "query": query}
            if isinstance(callbacks, AsyncCallbackManager):
                await adispatch_custom_event(EVENT_NAME, data, config={"callbacks": callbacks})
            else:
                dispatch_custom_event(EVENT_NAME, data, config={"callbacks": callbacks})
        return _in_input_order(documents, report)

    def _report(
        self, documents: Sequence[Document], computed: dict[int, float], query: str | None
    ) -> Report[Document]:
        question = None if query is None else Asked(query)
        candidates = [
            self._candidate(i, doc, computed.get(i), question) for i, doc in enumerate(documents)
        ]
        selection = select(candidates, self.policy, self.min_similarity)
        return Report.build(
            query or "",
            selection,
            output=lambda candidate: _with_kind(candidate, question),
            as_dropped=_document_of,
            describe=describe,
        )

    def _to_embed(
        self, documents: Sequence[Document], query: str | None
    ) -> tuple[Embeddings, list[int], str] | None:
        """The embeddings, the positions of the documents this package did not produce and
        the query, when they are to be embedded for their cosines; None when nothing is.
        Without embeddings, documents none of which can be judged are an error; so is a
        blank query, as the retriever refuses it."""
        foreign = to_judge(
            self,
            documents,
            None if query is None else Asked(query),
            model_argument="embeddings",
            has_model=self.embeddings is not None,
        )
        if not foreign or self.embeddings is None:
            return None
        if query is None:
            raise ValueError(
                f"{type(self).__name__} computes cosines with embeddings and needs the query: "
                "use compress_documents(documents, query)"
            )
        check_question(Question(query))  # a blank query embeds into the vector of nothing
        return self.embeddings, foreign, query

    def _candidate(
        self, index: int, doc: Document, computed: float | None, question: Asked | None
    ) -> Candidate[_Item]:
        meta = doc.metadata
        doc_id = document_id(doc, self.id_key)
        common: dict[str, Any] = {
            "item": (index, doc),
            "id": doc_id,
            "collection": metadata_keys.collection_of(meta),
            "source": source_of(doc, self.policy.source_key, doc_id),
            "chars": len(doc.page_content),
        }
        if standing(doc, question) is not Standing.OURS:  # anyone's, or another question's
            if computed is not None:
                return Candidate(**common, score=computed, score_kind=ScoreKind.COSINE)
            return Candidate(**common, score=None, score_kind=ScoreKind.UNKNOWN, is_attachment=True)
        score = metadata_keys.read_score(meta.get(metadata_keys.SIMILARITY))
        kind = metadata_keys.read_kind(
            meta.get(metadata_keys.SCORE_KIND), self.score_kind or ScoreKind.COSINE
        )
        anchor = meta.get(metadata_keys.ATTACHED_TO)
        if score is None and (anchor is not None or kind is ScoreKind.COSINE):
            # No score to judge: an attachment follows its section; anything else is unscored.
            return Candidate(
                **common,
                score=None,
                score_kind=ScoreKind.UNKNOWN,
                is_attachment=True,
                attached_to=None if anchor is None else str(anchor),
                attached_role=metadata_keys.read_role(meta.get(metadata_keys.ATTACHED_ROLE)),
            )
        if kind is ScoreKind.COSINE:
            return Candidate(**common, score=score, score_kind=kind)
        # A hybrid or sparse result: "similarity" is its dense cosine when it was re-scored.
        return Candidate(**common, score=None, score_kind=kind, cosine=score)


def _document_of(candidate: Candidate[_Item]) -> Document:
    return candidate.item[1]


def _with_kind(candidate: Candidate[_Item], question: Asked | None) -> Document:
    """A kept document as it goes on: unchanged when its marks are this question's; else a
    copy marked with its score kind and the cosine it was judged by (never the marks it
    came with: anyone's, or another question's), registered for the question when the
    call names one."""
    doc = candidate.item[1]
    if standing(doc, question) is Standing.OURS:
        return doc
    copy = marked_copy(doc, metadata_keys.marks(candidate))
    return register(copy, question) if question is not None else copy


def _in_input_order(documents: Sequence[Document], report: Report[Document]) -> list[Document]:
    """What the report kept and attached, in the order the documents came in."""
    selection = report.selection
    given = [c.item[0] for c in (*selection.kept, *selection.attached)]
    out = dict(zip(given, (*report.kept, *report.attached), strict=True))
    return [out[i] for i in range(len(documents)) if i in out]


def _has_parent_run(callbacks: Callbacks | None) -> bool:
    """Whether a custom event can be tied to a run: only through a child callback manager."""
    return isinstance(callbacks, BaseCallbackManager) and callbacks.parent_run_id is not None
