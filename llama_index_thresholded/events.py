"""Instrumentation events: what one selection kept, attached and dropped, and why."""

from __future__ import annotations

from typing import Any

from llama_index.core.instrumentation.events.base import BaseEvent


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
