"""Metadata keys this package writes on results, shared by every adapter.

They are excluded from what the LLM and the embedder see: they describe how a
section was retrieved, not what it says.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from thresholded.scores import ScoreKind

if TYPE_CHECKING:
    from thresholded.selection import AttachedRole, Candidate

SIMILARITY = "similarity"
"""The cosine similarity between the question and the section."""

SCORE_KIND = "score_kind"
"""What the result's score is: see :class:`thresholded.ScoreKind`."""

ATTACHED_ROLE = "attached_role"
"""Set on attachments only: ``neighbour`` or ``parent_summary``."""

ATTACHED_TO = "attached_to"
"""Set on attachments only: the id of the kept section they belong to."""

COLLECTION = "source_collection"
"""Set by multi-collection retrievers: the collection a result came from."""

ALL_KEYS: tuple[str, ...] = (SIMILARITY, SCORE_KIND, ATTACHED_ROLE, ATTACHED_TO, COLLECTION)

MARKS: frozenset[str] = frozenset({SIMILARITY, SCORE_KIND, ATTACHED_ROLE, ATTACHED_TO})
"""The marks only this package writes: a stored item's own are removed from its copy."""

NOT_STORED: dict[str, str] = {
    SIMILARITY: "the floor judges a section's cosine: set min_similarity (per call, or in "
    "the policy)",
    SCORE_KIND: "every score of a collection is of one kind, its score_kind setting",
    ATTACHED_ROLE: "attachments follow their kept sections: choose them with the neighbour "
    "and parent summary settings",
    ATTACHED_TO: "attachments follow their kept sections: choose them with the neighbour "
    "and parent summary settings",
}
"""The marks a filter cannot name, with what to use instead: a filter is judged on the
stored sections, which do not carry them (a stored item's own are replaced)."""

COLLECTION_HINT = (
    "to search some collections only, build the multi-collection retriever over those "
    "collections, or give a collection's own retriever its filters"
)
"""What to use instead of a filter on :data:`COLLECTION` in a multi-collection call."""


def remarked(stored: Mapping[str, Any], marks: Mapping[str, Any]) -> dict[str, Any]:
    """A copy's new metadata: ``stored`` with ``marks``, the :data:`MARKS` it held removed
    first (stored metadata, anyone's to write)."""
    if MARKS.isdisjoint(stored):
        return {**stored, **marks}
    return {**{k: v for k, v in stored.items() if k not in MARKS}, **marks}


def collection_of(metadata: Mapping[str, Any]) -> str:
    """The collection a result came from, as a multi-collection retriever marks it; "" when
    it is unmarked. Part of a section's identity: ids need not be unique across collections,
    so two results of one id from two collections are two sections, not a duplicate."""
    value = metadata.get(COLLECTION)
    return "" if value is None else str(value)


def source_from(metadata: Mapping[str, Any], source_key: str, fallback: str | None) -> str | None:
    """The source the per-source cap counts: ``metadata[source_key]`` as text, else
    ``fallback`` (an empty text names none)."""
    value = metadata.get(source_key)
    return fallback if value is None or str(value) == "" else str(value)


def read_score(value: Any) -> float | None:
    """A metadata score as a float: missing is None, anything unreadable is NaN.

    NaN makes the core drop it as ``invalid_score`` under an active floor, rather
    than guess.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def read_kind(value: Any, default: ScoreKind) -> ScoreKind:
    """A metadata score kind; missing is ``default``, unknown text is ``unknown``."""
    if value is None:
        return default
    try:
        return ScoreKind.parse(value)
    except ValueError:
        return ScoreKind.UNKNOWN


def read_role(value: Any) -> AttachedRole | None:
    """A metadata attachment role; missing or unknown is None."""
    from thresholded.selection import AttachedRole

    try:
        return AttachedRole(str(value)) if value is not None else None
    except ValueError:
        return None


def marks(candidate: Candidate[Any], *, collection_key: str | None = None) -> dict[str, Any]:
    """What a returned result carries: a section its score kind and, whenever one is known,
    its cosine (its score, or the dense cosine of a re-scored hybrid or sparse result); an
    attachment its role and the section it belongs to. With ``collection_key``, also the
    collection it came from."""
    written: dict[str, Any]
    if candidate.is_attachment:
        written = {ATTACHED_ROLE: str(candidate.attached_role), ATTACHED_TO: candidate.attached_to}
    else:
        written = {SCORE_KIND: str(candidate.score_kind)}  # the plain string
        similarity = candidate.floor_score
        if similarity is not None:
            written[SIMILARITY] = similarity
    if collection_key is not None:
        written[collection_key] = candidate.collection
    return written
