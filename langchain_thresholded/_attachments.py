"""Neighbours and parent summaries of kept sections, fetched hop by hop from a docstore.

The walk is separate from the docstore calls so the sync and async retrievers
share it: each hop is one ``mget`` / ``amget`` of every id it needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from langchain_core.documents import Document

from langchain_thresholded._documents import attachment_candidate, stored_id
from thresholded.selection import AttachedRole, Candidate

Direction = Literal["parent", "prev", "next"]


@dataclass(frozen=True)
class _Step:
    anchor: int
    direction: Direction
    key: str
    hop: int


@dataclass
class _Found:
    parent: list[tuple[str, Document]] = field(default_factory=list)
    prev: list[tuple[str, Document]] = field(default_factory=list)
    next: list[tuple[str, Document]] = field(default_factory=list)


class AttachmentWalk:
    """Which docstore ids to fetch next, and the attachments found so far.

    Use: ``while keys := walk.pending(): walk.receive(keys, docstore.mget(keys))``,
    then ``walk.candidates()``. Neighbours are followed up to ``neighbours`` hops
    through the prev/next ids of the documents found; parent summaries are one hop.
    """

    def __init__(
        self,
        kept: Sequence[Candidate[Document]],
        *,
        neighbours: int,
        parent_summaries: bool,
        prev_id_key: str,
        next_id_key: str,
        parent_id_key: str,
        id_key: str | None,
        source_key: str,
    ) -> None:
        self._anchors = [c.id for c in kept]
        self._neighbours = neighbours
        self._keys: dict[Direction, str] = {
            "parent": parent_id_key,
            "prev": prev_id_key,
            "next": next_id_key,
        }
        self._id_key = id_key
        self._source_key = source_key
        self._cache: dict[str, Document | None] = {}
        self._found = [_Found() for _ in kept]
        self._frontier: list[_Step] = []
        for index, cand in enumerate(kept):
            directions: list[Direction] = []
            if parent_summaries:
                directions.append("parent")
            if neighbours > 0:
                directions.extend(("prev", "next"))
            for direction in directions:
                self._follow(index, direction, cand.item, hop=1)

    def pending(self) -> list[str]:
        """The ids of the next hop, each once; empty when the walk is done."""
        self._advance()
        return list(dict.fromkeys(s.key for s in self._frontier if s.key not in self._cache))

    def receive(self, keys: Sequence[str], documents: Sequence[Document | None]) -> None:
        """Record one hop's ``mget`` result; a missing id is skipped."""
        if len(keys) != len(documents):
            raise ValueError(f"the docstore returned {len(documents)} results for {len(keys)} ids")
        for key, doc in zip(keys, documents, strict=True):
            self._cache[key] = doc

    def candidates(self) -> list[Candidate[Document]]:
        """Attachments in reading order per kept section: parent, earlier, later neighbours.

        A document already kept, or already attached to an earlier section, is left
        out; the core's ``attach`` would drop it as a duplicate anyway.
        """
        self._advance()
        out: list[Candidate[Document]] = []
        seen = set(self._anchors)  # a kept section or an earlier attachment is not repeated
        for anchor, found in zip(self._anchors, self._found, strict=True):
            for role, items in (
                (AttachedRole.PARENT_SUMMARY, found.parent),
                (AttachedRole.NEIGHBOUR, list(reversed(found.prev))),
                (AttachedRole.NEIGHBOUR, found.next),
            ):
                for key, doc in items:
                    doc_id = stored_id(doc, self._id_key) or key
                    if doc_id in seen:
                        continue
                    seen.add(doc_id)
                    out.append(
                        attachment_candidate(
                            doc,
                            doc_id=doc_id,
                            anchor=anchor,
                            role=role,
                            source_key=self._source_key,
                        )
                    )
        return out

    def _follow(self, anchor: int, direction: Direction, doc: Document, *, hop: int) -> None:
        value = doc.metadata.get(self._keys[direction])
        if value is not None and str(value) != "":
            self._frontier.append(_Step(anchor, direction, str(value), hop))

    def _advance(self) -> None:
        """Resolve every step whose document is known, following neighbours further."""
        while True:
            ready = [s for s in self._frontier if s.key in self._cache]
            if not ready:
                return
            self._frontier = [s for s in self._frontier if s.key not in self._cache]
            for step in ready:
                doc = self._cache[step.key]
                if doc is None:
                    continue
                getattr(self._found[step.anchor], step.direction).append((step.key, doc))
                if step.direction != "parent" and step.hop < self._neighbours:
                    self._follow(step.anchor, step.direction, doc, hop=step.hop + 1)
