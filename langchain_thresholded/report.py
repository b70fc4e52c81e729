"""What one retrieval kept, attached and dropped, returned per call.

A retriever is shared between threads and tasks, so the report of a call is
returned to its caller (and sent through its callbacks), never stored on the
retriever.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.documents import Document

from langchain_thresholded.backend import output
from thresholded.engine import Result
from thresholded.scores import ScoreKind
from thresholded.selection import Candidate, DropReason, Selection

EVENT_NAME = "thresholded_selection"
"""The name of the custom callback event that carries a selection's report."""


@dataclass(frozen=True)
class DroppedDocument:
    """A candidate that did not reach the result, and why."""

    document: Document
    reason: DropReason
    id: str
    similarity: float | None
    """The cosine, where one is known (dense or re-scored results); None for attachments."""
    collection: str = ""
    """The collection it came from, when several were searched."""


@dataclass(frozen=True)
class ThresholdedReport:
    """The outcome of one selection.

    ``kept`` is in score order, each with ``metadata["similarity"]`` (the cosine)
    and ``metadata["score_kind"]``; ``attached`` follows in the order of the
    sections it belongs to. ``documents`` is what the retriever returns.
    """

    query: str
    kept: tuple[Document, ...]
    attached: tuple[Document, ...]
    dropped: tuple[DroppedDocument, ...]
    min_similarity: float
    passed_through: tuple[ScoreKind, ...]
    selection: Selection[Any]
    """The core's selection, for callers that want the candidates themselves."""

    @classmethod
    def from_selection(
        cls,
        query: str,
        selection: Selection[Any],
        document_of: Callable[[Any], Document] | None = None,
        **extra: Any,
    ) -> Any:
        """A report over a selection; ``document_of`` maps a candidate's item to its document."""
        document_of = document_of or _itself
        return cls(
            query=query,
            kept=tuple(document_of(c.item) for c in selection.kept),
            attached=tuple(document_of(c.item) for c in selection.attached),
            dropped=tuple(
                DroppedDocument(
                    document=document_of(d.candidate.item),
                    reason=d.reason,
                    id=d.candidate.id,
                    similarity=None if d.candidate.is_attachment else d.candidate.floor_score,
                    collection=d.candidate.collection,
                )
                for d in selection.dropped
            ),
            min_similarity=selection.min_similarity,
            passed_through=selection.passed_through,
            selection=selection,
            **extra,
        )

    @classmethod
    def from_result(cls, result: Result[Document], collection_key: str | None = None) -> Any:
        """The report of an engine result: what it returns are marked copies."""
        selection = result.selection
        report = cls.from_selection(
            result.question.text,
            selection,
            **({"collections": result.collections} if collection_key else {}),
        )
        return replace(
            report,
            kept=tuple(output(c, collection_key=collection_key) for c in selection.kept),
            attached=tuple(output(c, collection_key=collection_key) for c in selection.attached),
        )

    @property
    def documents(self) -> list[Document]:
        """The kept sections, then their attachments: what goes to the reranker."""
        return [*self.kept, *self.attached]

    @property
    def best_similarity(self) -> float | None:
        """The best cosine among the candidates that passed the filters."""
        return self.selection.best_similarity

    @property
    def gate(self) -> float | None:
        """The answer gate in force; None: off."""
        return self.selection.gate

    @property
    def nothing_matched(self) -> bool:
        """No section cleared the policy: the caller should say "I don't know"."""
        return not self.kept

    def drop_counts(self) -> dict[str, int]:
        """How many candidates each reason dropped."""
        return self.selection.drop_counts()

    def dropped_for(self, reason: DropReason | str) -> list[Document]:
        """The documents one reason dropped."""
        wanted = DropReason(reason)
        return [d.document for d in self.dropped if d.reason is wanted]

    def summary(self) -> str:
        """One line for logs and ``on_text`` handlers."""
        counts = ", ".join(f"{k}={v}" for k, v in sorted(self.drop_counts().items())) or "none"
        return (
            f"thresholded selection (floor {self.min_similarity:g}"
            f"{'' if self.gate is None else f', gate {self.gate:g}'}): kept {len(self.kept)}, "
            f"attached {len(self.attached)}, dropped {len(self.dropped)} ({counts})"
        )

    def to_event_data(self, stage: str) -> dict[str, Any]:
        """The report as JSON-ready data for the ``thresholded_selection`` event."""
        return {
            "stage": stage,
            "query": self.query,
            "min_similarity": self.min_similarity,
            "best_similarity": self.best_similarity,
            "gate": self.gate,
            "nothing_matched": self.nothing_matched,
            "kept": [
                {"id": c.id, "similarity": _similarity(c), "score_kind": c.score_kind.value}
                for c in self.selection.kept
            ],
            "attached": [
                {"id": c.id, "attached_to": c.attached_to, "role": _value(c.attached_role)}
                for c in self.selection.attached
            ],
            "dropped": [
                {
                    "id": d.id,
                    **({"collection": d.collection} if d.collection else {}),
                    "reason": d.reason.value,
                    "similarity": d.similarity,
                }
                for d in self.dropped
            ],
            "drop_counts": self.drop_counts(),
            "passed_through": [k.value for k in self.passed_through],
        }


def _itself(item: Any) -> Document:
    return item  # type: ignore[no-any-return]


def _similarity(candidate: Candidate[Any]) -> float | None:
    return candidate.floor_score


def _value(role: Any) -> str | None:
    return None if role is None else str(role)
