"""A document compressor that applies the cosine floor to documents already scored."""

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
from pydantic import Field, field_validator

from langchain_thresholded._documents import document_id, read_kind, read_role, read_score
from langchain_thresholded.backend import describe
from langchain_thresholded.events import EVENT_NAME
from thresholded import metadata_keys
from thresholded.policy import RetrievalPolicy
from thresholded.report import Report
from thresholded.scores import ScoreKind
from thresholded.selection import Candidate, select

_Item = tuple[int, Document]


class SimilarityThresholdCompressor(BaseDocumentCompressor):
    """Drops documents whose cosine is below a floor, before a reranker sees them.

    For ``ContextualCompressionRetriever`` and ``DocumentCompressorPipeline``. It
    reads the cosine from ``metadata["similarity"]`` and the kind from
    ``metadata["score_kind"]`` (default cosine). ``similarity`` is always a cosine,
    so it meets the floor whatever the kind (a re-scored hybrid result carries its
    dense cosine there); a hybrid or sparse result without one passes. It
    is safe in any position: it keeps the order it is given (a reranker's order
    survives), and a document with no score is not dropped for it: an attachment
    (``attached_to``) stays exactly when its section stays, anything else stays
    with one warning per call. Documents are returned as given, never copied or
    changed.
    """

    min_similarity: float = Field(ge=-1.0, le=1.0)
    """The cosine floor; 0 keeps every document."""
    min_top_similarity: float | None = Field(default=None, ge=-1.0, le=1.0)
    """The answer gate: when even the best document's cosine is below it, none is kept.
    None or 0: off."""
    similarity_key: str = metadata_keys.SIMILARITY
    score_kind_key: str = metadata_keys.SCORE_KIND
    attached_to_key: str = metadata_keys.ATTACHED_TO
    default_score_kind: ScoreKind = ScoreKind.COSINE
    """The kind of a score whose document does not say."""
    strict_score_kind: bool = False
    """Raise instead of passing through when a non-cosine score meets the floor."""
    id_key: str | None = "id"
    """Metadata key of a document's id when ``Document.id`` is empty."""
    source_key: str = "source"

    @field_validator("default_score_kind", mode="before")
    @classmethod
    def _parse_kind(cls, value: Any) -> Any:
        return ScoreKind(str(value).strip().lower()) if isinstance(value, str) else value

    def compress_with_report(self, documents: Sequence[Document]) -> Report[Document]:
        """Apply the floor and return what was kept, kept as attachments, and dropped."""
        docs = list(documents)
        policy = RetrievalPolicy(
            min_similarity=self.min_similarity,
            min_top_similarity=self.min_top_similarity,
            top_k=max(1, len(docs)),
            over_fetch=1,
            max_per_source=None,
            max_chars=None,
            source_key=self.source_key,
            strict_score_kind=self.strict_score_kind,
        )
        candidates = [self._candidate(i, doc) for i, doc in enumerate(docs)]
        selection = select(candidates, policy, self.min_similarity)
        return Report.build(
            "", selection, output=_document_of, as_dropped=_document_of, describe=describe
        )

    def compress_documents(
        self,
        documents: Sequence[Document],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> Sequence[Document]:
        """The documents that clear the floor, in the order given."""
        report = self.compress_with_report(documents)
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
        """Async ``compress_documents``: the selection itself is pure computation."""
        report = self.compress_with_report(documents)
        if _has_parent_run(callbacks):
            data = {**report.to_event_data("compressor"), "query": query}
            if isinstance(callbacks, AsyncCallbackManager):
                await adispatch_custom_event(EVENT_NAME, data, config={"callbacks": callbacks})
            else:
                dispatch_custom_event(EVENT_NAME, data, config={"callbacks": callbacks})
        return _in_input_order(documents, report)

    def _candidate(self, index: int, doc: Document) -> Candidate[_Item]:
        meta = doc.metadata
        score = read_score(meta.get(self.similarity_key))
        kind = read_kind(meta.get(self.score_kind_key), self.default_score_kind)
        anchor = meta.get(self.attached_to_key)
        doc_id = document_id(doc, self.id_key)
        source = meta.get(self.source_key)
        common: dict[str, Any] = {
            "item": (index, doc),
            "id": doc_id,
            "source": str(source) if source is not None and str(source) != "" else doc_id,
            "chars": len(doc.page_content),
        }
        if score is None and (anchor is not None or kind is ScoreKind.COSINE):
            # No score to judge: an attachment follows its section; an unknown one stays.
            return Candidate(
                **common,
                score=None,
                score_kind=ScoreKind.UNKNOWN,
                is_attachment=True,
                attached_to=None if anchor is None else str(anchor),
                attached_role=read_role(meta.get(metadata_keys.ATTACHED_ROLE)),
            )
        if kind is ScoreKind.COSINE:
            return Candidate(**common, score=score, score_kind=kind)
        # A hybrid or sparse result: "similarity" is its dense cosine when it was re-scored.
        return Candidate(**common, score=None, score_kind=kind, cosine=score)


def _document_of(candidate: Candidate[_Item]) -> Document:
    return candidate.item[1]


def _in_input_order(documents: Sequence[Document], report: Report[Document]) -> list[Document]:
    keep = {c.item[0] for c in (*report.selection.kept, *report.selection.attached)}
    return [doc for i, doc in enumerate(documents) if i in keep]


def _has_parent_run(callbacks: Callbacks | None) -> bool:
    """Whether a custom event can be tied to a run: only through a child callback manager."""
    return isinstance(callbacks, BaseCallbackManager) and callbacks.parent_run_id is not None
