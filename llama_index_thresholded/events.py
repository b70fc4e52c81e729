"""Instrumentation events: what one selection kept, attached and dropped, and why."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llama_index.core.callbacks import CallbackManager, CBEventType, EventPayload
from llama_index.core.instrumentation.events.base import BaseEvent

if TYPE_CHECKING:
    from llama_index.core.instrumentation.dispatcher import Dispatcher

    from llama_index_thresholded.report import RetrievalReport


class ThresholdSelectionEvent(BaseEvent):
    """Emitted once per retrieval, after the policy and the attachments."""

    query_str: str
    min_similarity: float
    score_kind: str
    kept_ids: list[str]
    attached_ids: list[str]
    dropped: list[dict[str, Any]]
    """One entry per dropped candidate: ``id``, ``reason`` and ``score``."""

    @classmethod
    def class_name(cls) -> str:
        return "ThresholdSelectionEvent"


def announce_selection(
    dispatcher: Dispatcher,
    callback_manager: CallbackManager,
    report: RetrievalReport,
    dropped: list[dict[str, Any]],
    **extra_payload: Any,
) -> None:
    """Send one retrieval's drops out as an instrumentation event and a callback event."""
    dispatcher.event(
        ThresholdSelectionEvent(
            query_str=report.query_str,
            min_similarity=report.min_similarity,
            score_kind=report.score_kind.value,
            kept_ids=[n.node.node_id for n in report.kept],
            attached_ids=[n.node.node_id for n in report.attached],
            dropped=dropped,
        )
    )
    payload = {
        EventPayload.QUERY_STR: report.query_str,
        EventPayload.NODES: report.nodes,
        "thresholded_dropped": dropped,
        "thresholded_min_similarity": report.min_similarity,
        **extra_payload,
    }
    with callback_manager.event(CBEventType.RETRIEVE, payload=payload) as event:
        event.on_end(payload=payload)
