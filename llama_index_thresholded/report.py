"""The per-call report: the result, and what was dropped and why.

It is returned with the result, never kept on the retriever, because one
retriever serves many concurrent queries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llama_index.core.schema import BaseNode, NodeWithScore

from llama_index_thresholded.nodes import output
from thresholded.engine import Result
from thresholded.scores import ScoreKind
from thresholded.selection import DropReason, Selection


@dataclass(frozen=True)
class RetrievalReport:
    """One retrieval: kept sections, their attachments, and every drop with its reason."""

    query_str: str
    selection: Selection[BaseNode]
    kept: list[NodeWithScore]
    attached: list[NodeWithScore]
    score_kind: ScoreKind
    result: Result[BaseNode]

    @classmethod
    def from_result(
        cls, result: Result[BaseNode], score_kind: ScoreKind, collection_key: str | None = None
    ) -> Any:
        selection = result.selection
        extra = {"collections": result.collections} if collection_key else {}
        return cls(
            query_str=result.question.text,
            selection=selection,
            kept=[output(c, collection_key=collection_key) for c in selection.kept],
            attached=[output(c, collection_key=collection_key) for c in selection.attached],
            score_kind=score_kind,
            result=result,
            **extra,
        )

    @property
    def nodes(self) -> list[NodeWithScore]:
        """What goes on to the reranker: kept sections first, then their attachments."""
        return [*self.kept, *self.attached]

    @property
    def nothing_matched(self) -> bool:
        """No section cleared the policy: the application should say it does not know."""
        return not self.kept

    @property
    def min_similarity(self) -> float:
        return self.selection.min_similarity

    @property
    def best_similarity(self) -> float | None:
        """The best cosine among the candidates that passed the filters."""
        return self.selection.best_similarity

    @property
    def gate(self) -> float | None:
        """The answer gate in force; None: off."""
        return self.selection.gate

    @property
    def dropped(self) -> list[tuple[NodeWithScore, DropReason]]:
        """Each dropped candidate as it came from the store, with its score, and why."""
        return [
            (NodeWithScore(node=d.candidate.item, score=d.candidate.score), d.reason)
            for d in self.selection.dropped
        ]

    def drop_counts(self) -> dict[str, int]:
        return self.selection.drop_counts()

    def extra_payload(self) -> dict[str, Any]:
        """More for the RETRIEVE callback event's end payload."""
        return {}

    def explain(self, width: int = 70) -> str:
        """A readable account of the call, for logs and demos."""
        gate = "" if self.gate is None else f", gate {self.gate:g}"
        lines = [
            f"query: {self.query_str!r}  (floor {self.min_similarity:g}{gate}, {self.score_kind})"
        ]
        for n in self.kept:
            lines.append(f"  kept      {_score(n.score)}  {_source(n)}  {_snippet(n, width)}")
        for n in self.attached:
            role = n.node.metadata.get("attached_role", "attached")
            lines.append(f"  + {role:<15}      {_source(n)}  {_snippet(n, width)}")
        for node, reason in self.dropped:
            lines.append(
                f"  dropped   {_score(node.score)}  {reason.value:<15} {_source(node)}  "
                f"{_snippet(node, width // 2)}"
            )
        if self.nothing_matched:
            lines.append("  nothing matched")
        return "\n".join(lines)


def _score(score: float | None) -> str:
    return "  -   " if score is None else f"{score:6.3f}"


def _source(node: NodeWithScore) -> str:
    return str(node.node.metadata.get("source") or node.node.ref_doc_id or "-")


def _snippet(node: NodeWithScore, width: int) -> str:
    text = " ".join(node.node.get_content().split())
    return text if len(text) <= width else text[: width - 1] + "…"
