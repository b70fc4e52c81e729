"""Metadata keys this package writes on results, shared by every adapter.

They are excluded from what the LLM and the embedder see: they describe how a
section was retrieved, not what it says.
"""

from __future__ import annotations

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
