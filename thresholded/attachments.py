"""Neighbours and parent summaries of kept sections, fetched hop by hop.

They carry no score of their own, so they are fetched only once selection is
done, and only for what was kept. Each hop is one batch: every id the hop needs,
fetched in one request. The walk is framework-free: a backend reads an item's
links (previous, next, parent ids) and fetches items by id.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

from thresholded.filters import Filter, matches
from thresholded.scores import ScoreKind
from thresholded.selection import AttachedRole, Candidate

logger = logging.getLogger(__name__)

T = TypeVar("T")


class Links(NamedTuple):
    """The ids an item points to; None where it has no such link."""

    prev: str | None = None
    next: str | None = None
    parent: str | None = None


class FirstCopies(Generic[T]):
    """Sections read by id from several stores, store by store, as an ensemble's fusion
    keeps them: the first copy a member would return (one within its filters, ``where`` of
    each :meth:`take`; ``metadata`` reads an item's). A section the stores hold only outside
    their members' filters is held back: no member returns it, so the docstore's copy does
    not stand in for it (nor is it judged by the filters of a member that never searches the
    store holding it)."""

    def __init__(self, ids: list[str], metadata: Callable[[T], Mapping[str, Any]]) -> None:
        self._ids = ids
        self._metadata = metadata
        self.found: dict[str, T] = {}
        self._outside: set[str] = set()

    @property
    def missing(self) -> list[str]:
        return [i for i in self._ids if i not in self.found]

    @property
    def unread(self) -> list[str]:
        """The ids no store holds, neither within nor outside its member's filters: the
        docstore's copy stands in for them."""
        return [i for i in self._ids if i not in self.found and i not in self._outside]

    def take(self, where: Filter | None, copies: Mapping[str, T]) -> None:
        for key, item in copies.items():
            if matches(where, self._metadata(item)):
                self.found[key] = item
            else:
                self._outside.add(key)


@dataclass(frozen=True)
class AttachmentSpec:
    """What to attach: the neighbour window on each side, and parent levels to walk up."""

    neighbours: int = 0
    parent_levels: int = 0

    def __post_init__(self) -> None:
        for name in ("neighbours", "parent_levels"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int, 0 or more, got {value!r}")

    @classmethod
    def of(cls, *, neighbours: int, parent_summaries: bool, parent_levels: int) -> AttachmentSpec:
        """The spec of a retriever's ``neighbours``, ``parent_summaries`` and ``parent_levels``.
        More than one parent level with ``parent_summaries=False`` is refused: no summary
        would be attached, whatever the levels."""
        levels = cls(parent_levels=parent_levels).parent_levels  # a bad value is refused too
        if not parent_summaries and levels > 1:
            raise ValueError(
                f"parent_levels={levels} walks up the parent summaries, which "
                "parent_summaries=False turns off, so none would be attached: set "
                "parent_summaries=True to attach them, or leave parent_levels out"
            )
        return cls(neighbours=neighbours, parent_levels=levels if parent_summaries else 0)

    @property
    def enabled(self) -> bool:
        return self.neighbours > 0 or self.parent_levels > 0


_DIRECTIONS = ("prev", "next")


def walk(
    collection: Any,
    kept: Sequence[Candidate[T]],
    source_key: str,
    *,
    fetch: Callable[[Any, list[str]], Any],
    within: Callable[[T], bool],
) -> Generator[Any, dict[str, T], list[Candidate[T]]]:
    """Attachments of the kept sections, in reading order per section.

    For each kept section: its parent summaries (nearest first), its earlier
    neighbours (farthest first), then its later ones. A section already kept, or
    already attached, is neither attached again nor walked through. Nor is one that
    is not ``within`` the call's filters: it is returned for the caller to count as
    outside them, and the walk stops there, so nothing is reached through a section
    the call excludes. ``fetch`` makes the request that fetches one hop's ids from
    ``collection``.
    """
    backend, spec = collection.backend, collection.attachments
    seen = {c.id for c in kept}
    found: dict[str, dict[str, list[Candidate[T]]]] = {
        c.id: {"parent": [], "prev": [], "next": []} for c in kept
    }

    def take(anchor: str, direction: str, key: str, item: T) -> bool:
        item_id, source, chars = backend.identify(item, source_key, key)
        if item_id in seen:
            return False
        seen.add(item_id)
        role = AttachedRole.PARENT_SUMMARY if direction == "parent" else AttachedRole.NEIGHBOUR
        found[anchor][direction].append(
            Candidate(
                item=item,
                id=item_id,
                score=None,
                score_kind=ScoreKind.UNKNOWN,
                source=source,
                chars=chars,
                is_attachment=True,
                attached_to=anchor,
                attached_role=role,
                collection=collection.name,
            )
        )
        return True

    limits = {"prev": spec.neighbours, "next": spec.neighbours, "parent": spec.parent_levels}
    frontier = [(c.id, d, c.item) for c in kept for d in ("parent", *_DIRECTIONS) if limits[d]]
    hop = 1
    while frontier:  # one fetch per hop, neighbours and parents together
        wanted = [
            (anchor, direction, getattr(backend.links(item), direction))
            for anchor, direction, item in frontier
        ]
        if hop == 1 and all(key is None for _, _, key in wanted):
            _say_unlinked(collection)
        wanted = [(a, d, key) for a, d, key in wanted if key is not None and key not in seen]
        if not wanted:
            break
        items = yield fetch(collection, list(dict.fromkeys(key for _, _, key in wanted)))
        if hop == 1:  # the kept sections' links; later ones are of sections not yet judged
            _say_not_found(collection, [key for _, _, key in wanted if key not in items])
        hop += 1
        frontier = [
            (anchor, direction, items[key])
            for anchor, direction, key in wanted
            if key in items
            and take(anchor, direction, key, items[key])
            and hop <= limits[direction]
            and within(items[key])
        ]
    return [
        att
        for c in kept
        for att in (
            *found[c.id]["parent"],
            *reversed(found[c.id]["prev"]),
            *found[c.id]["next"],
        )
    ]


_TOLD: weakref.WeakSet[Any] = weakref.WeakSet()
_TOLD_NOT_FOUND: weakref.WeakSet[Any] = weakref.WeakSet()


def _say_not_found(collection: Any, missing: list[str]) -> None:
    """Once per collection: sections link to ids that are nowhere, so nothing is attached
    for them (e.g. summaries kept in a docstore that was not persisted with the store)."""
    backend = collection.backend
    if not missing or backend.fetch_holds_back or backend in _TOLD_NOT_FOUND:
        return
    _TOLD_NOT_FOUND.add(backend)
    logger.warning(
        "the kept sections of %s link to sections that were not found, so they were not "
        "attached (%s): index them with the sections, or keep them in a docstore that is "
        "saved and loaded with the store (LlamaIndex: StorageContext.persist; LangChain: the "
        "retriever's docstore). Said once per collection",
        backend.name,
        ", ".join(repr(key) for key in dict.fromkeys(missing[:5])),
    )


def _say_unlinked(collection: Any) -> None:
    """Once per collection: attachments were asked for, but the sections link to nothing."""
    if collection.backend in _TOLD:
        return
    _TOLD.add(collection.backend)
    spec = collection.attachments
    logger.info(
        "neighbours=%d, parent_levels=%d, but the kept sections of %s link to no previous, "
        "next or parent section, so none were found: set the links when indexing (LlamaIndex: "
        "PREVIOUS/NEXT/PARENT relationships; LangChain: prev_id/next_id/parent_id metadata "
        "and a docstore), or turn attachments off",
        spec.neighbours,
        spec.parent_levels,
        collection.backend.name,
    )
