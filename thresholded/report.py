"""The report of one call: what was kept, attached and dropped, and why; in both adapters.

``Report[T]`` is the same type in LlamaIndex (``T`` = ``NodeWithScore``) and
LangChain (``T`` = ``Document``). It is returned to the caller with the result and
sent through the framework's callbacks; it is never kept on a retriever, which
serves many concurrent calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from thresholded.fanout import CollectionStatus
from thresholded.selection import Candidate, DropReason, Selection

if TYPE_CHECKING:
    from thresholded.engine import Result

T = TypeVar("T")

ABSTAINED_BY = "abstained_by"
"""Key in the metadata of an abstaining answer (LlamaIndex's ``AbstainingQueryEngine`` and
abstaining chat engines, LangChain's ``AbstainingChain``): what emptied the result. ``gate``
(even the best candidate was below the answer gate), ``floor`` (every candidate was below
the cosine floor), ``filters`` (nothing was found under the filters), ``empty`` (no filter
nor store restriction held anything back, and the search found no section: the collection is
empty), ``policy`` (the cap or the budget), or ``postprocessors`` (LlamaIndex's node
postprocessors, a reranker say, removed it all, behind any retriever). Absent when a
retriever that gives no report (another kind of retriever) returned nothing: what emptied it
is not known."""


def abstained_by_of(report: Any) -> str:
    """What emptied an abstaining answer whose retrieval gave ``report``: the report's
    ``emptied_by``; when it kept something, what came after it (the postprocessors)."""
    return report.emptied_by or "postprocessors"


def abstained_by_after(report: Any | None, retrieved: Sequence[Any]) -> str | None:
    """What emptied an abstaining answer whose retriever returned ``retrieved``, with
    ``report`` when it gives one (:func:`abstained_by_of`). Without a report: the
    postprocessors when the retriever returned something; None (not known) when it
    returned nothing."""
    if report is not None:
        return abstained_by_of(report)
    return "postprocessors" if retrieved else None


__all__ = [
    "ABSTAINED_BY",
    "DroppedItem",
    "MultiCollectionReport",
    "Report",
    "abstained_by_after",
    "abstained_by_of",
]


@dataclass(frozen=True)
class DroppedItem(Generic[T]):
    """A candidate that did not reach the result, and why."""

    item: T
    """The candidate as the store returned it (with its raw score, where it had one)."""
    id: str
    """Its id in its collection."""
    reason: DropReason
    """Why it was dropped."""
    similarity: float | None
    """Its cosine, where one is known (dense or re-scored results); None for attachments."""
    collection: str = ""
    """The collection it came from, when several were searched."""

    def to_data(self) -> dict[str, Any]:
        """The drop as JSON-ready data: its id, its collection (when several were searched),
        its reason and its cosine."""
        return {
            "id": self.id,
            **({"collection": self.collection} if self.collection else {}),
            "reason": self.reason.value,
            "similarity": self.similarity,
        }


@dataclass(frozen=True)
class Report(Generic[T]):
    """One call: the kept sections, their attachments, and every drop with its reason.

    ``kept`` is in score order; ``attached`` follows in the order of the sections it
    belongs to; ``items`` (both, in that order) is what the retriever returns.
    """

    query: str
    """The question's text."""
    kept: tuple[T, ...]
    """The sections that cleared the policy, in score order, each marked with its cosine."""
    attached: tuple[T, ...]
    """Their neighbours and parent summaries, in the order of the sections they belong to."""
    dropped: tuple[DroppedItem[T], ...]
    """Every candidate that did not reach the result, with its reason; those outside the
    filters are only counted (``outside_filters``)."""
    selection: Selection[Any] = field(repr=False)
    """The core's selection: the candidates themselves, with their scores and marks."""
    emptied_by: str | None = None
    """Why nothing was kept: ``gate``, ``floor``, ``filters`` (nothing within them) or
    ``policy`` (the cap or budget); None if kept."""
    describe: Callable[[T], str] = field(default=repr, repr=False, compare=False)
    """A short text of an item, for ``explain``."""

    STAGE: ClassVar[str] = "retriever"
    """What made a selection of this kind, as its events' ``stage`` says it in both adapters."""

    @classmethod
    def build(
        cls,
        query: str,
        selection: Selection[Any],
        *,
        output: Callable[[Candidate[Any]], T],
        as_dropped: Callable[[Candidate[Any]], T],
        describe: Callable[[T], str] = repr,
        emptied_by: str | None = None,
        **extra: Any,
    ) -> Any:
        """A report of a selection: ``output`` makes a kept or attached candidate's item,
        ``as_dropped`` a dropped one's (with its raw score)."""
        return cls(
            query=query,
            kept=tuple([output(c) for c in selection.kept]),
            attached=tuple([output(c) for c in selection.attached]),
            dropped=tuple(
                DroppedItem(
                    item=as_dropped(d.candidate),
                    id=d.candidate.id,
                    reason=d.reason,
                    similarity=None if d.candidate.is_attachment else d.candidate.floor_score,
                    collection=d.candidate.collection,
                )
                for d in selection.dropped
            ),
            selection=selection,
            emptied_by=emptied_by if emptied_by is not None else selection.emptied_by,
            describe=describe,
            **extra,
        )

    @classmethod
    def from_result(
        cls,
        result: Result[Any],
        *,
        output: Callable[[Candidate[Any]], T],
        as_dropped: Callable[[Candidate[Any]], T],
        describe: Callable[[T], str] = repr,
    ) -> Any:
        """The report of an engine result (a ``MultiCollectionReport`` adds the statuses)."""
        extra = (
            {"collections": result.collections} if issubclass(cls, MultiCollectionReport) else {}
        )
        return cls.build(
            result.question.text,
            result.selection,
            output=output,
            as_dropped=as_dropped,
            describe=describe,
            emptied_by=result.emptied_by,
            **extra,
        )

    # What was found -----------------------------------------------------------------
    @property
    def items(self) -> list[T]:
        """The kept sections, then their attachments: what goes on to the reranker."""
        return [*self.kept, *self.attached]

    @property
    def nothing_matched(self) -> bool:
        """No section cleared the policy: the application should say it does not know."""
        return not self.kept

    @property
    def min_similarity(self) -> float:
        """The floor in force (over several collections, the lowest of their floors)."""
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
    def outside_filters(self) -> int:
        """How many sections the store returned outside a call's filters: counted, never
        named, since they are what the filters keep from this call. Those outside the
        retriever's own filters are held back, not even counted."""
        return self.selection.outside_filters

    @property
    def score_kind(self) -> str | None:
        """The kind of the sections' scores (``cosine`` for dense search, ``rrf``...): the
        first section's, kept before dropped; None when the search returned nothing."""
        selection = self.selection
        for section in chain(selection.kept, (d.candidate for d in selection.dropped)):
            if not section.is_attachment:
                return str(section.score_kind)
        return None

    @property
    def passed_through(self) -> tuple[Any, ...]:
        """Score kinds that met an active floor without being compared with it."""
        return self.selection.passed_through

    # What was dropped ---------------------------------------------------------------
    def drop_counts(self) -> dict[str, int]:
        """How many candidates each reason dropped, those outside the filters included."""
        return self.selection.drop_counts()

    def dropped_for(self, reason: DropReason | str) -> list[T]:
        """The items one reason dropped; the reason may be given by name."""
        wanted = DropReason(reason)
        return [d.item for d in self.dropped if d.reason is wanted]

    def attached_as(self, dropped: DroppedItem[T]) -> str | None:
        """The role (``neighbour``, ``parent_summary``) under which a dropped candidate is in
        the result all the same, attached to a kept section; None when it is not. A section
        over the source cap, the budget or ``top_k``, or below the floor, may come back as a
        kept section's neighbour."""
        return self._attached_roles.get((dropped.collection, dropped.id))

    @cached_property
    def _attached_roles(self) -> dict[tuple[str, str], str]:
        """Each attached section's role, by its key: read once, not once per drop."""
        roles: dict[tuple[str, str], str] = {}
        for candidate in self.selection.attached:
            roles.setdefault(candidate.key, _text(candidate.attached_role) or "attachment")
        return roles

    # Telling ------------------------------------------------------------------------
    def explain(self, width: int = 70) -> str:
        """A readable account of the call, for logs and demos: one line per item."""
        gate = "" if self.gate is None else f", gate {self.gate:g}"
        lines = [f"query: {self.query!r}  (floor {self.min_similarity:g}{gate})"]
        for candidate, item in zip(self.selection.kept, self.kept, strict=True):
            lines.append(
                f"  kept      {_score(candidate.floor_score)}  {_source(candidate)}  "
                f"{_snippet(self.describe(item), width)}"
            )
        for candidate, item in zip(self.selection.attached, self.attached, strict=True):
            role = f"+ {candidate.attached_role or 'attached'}"
            of = "" if candidate.attached_to is None else f"  (of {candidate.attached_to!r})"
            lines.append(
                f"  {role:<17}       {_source(candidate)}  "
                f"{_snippet(self.describe(item), width)}{of}"
            )
        for dropped, drop in zip(self.selection.dropped, self.dropped, strict=True):
            lines.append(
                f"  dropped   {_score(drop.similarity)}  {drop.reason.value:<15} "
                f"{_source(dropped.candidate)}  {_snippet(self.describe(drop.item), width // 2)}"
                f"{self.attached_note(drop)}"
            )
        if self.nothing_matched:
            lines.append(f"  nothing matched ({self.emptied_by})")
        return "\n".join(lines)

    def attached_note(self, dropped: DroppedItem[T]) -> str:
        """`` (attached as neighbour)`` after a dropped candidate that is in the result all
        the same (see ``attached_as``); empty otherwise. For ``explain`` and the demo."""
        role = self.attached_as(dropped)
        return "" if role is None else f" (attached as {role})"

    def summary(self) -> str:
        """One line for logs and ``on_text`` handlers."""
        counts = ", ".join(f"{k}={v}" for k, v in sorted(self.drop_counts().items())) or "none"
        gate = "" if self.gate is None else f", gate {self.gate:g}"
        return (
            f"thresholded selection (floor {self.min_similarity:g}{gate}): kept "
            f"{len(self.kept)}, attached {len(self.attached)}, dropped {len(self.dropped)} "
            f"({counts})"
        )

    def dropped_data(self) -> list[dict[str, Any]]:
        """One JSON-ready entry per drop (those outside the filters are only counted): its
        id, its collection (over several collections), its reason, its cosine, and
        ``attached_as`` when it is in the result all the same (see :meth:`attached_as`)."""
        return [
            {**d.to_data(), **({"attached_as": role} if (role := self.attached_as(d)) else {})}
            for d in self.dropped
        ]

    def to_event_data(self, stage: str | None = None) -> dict[str, Any]:
        """The report as JSON-ready data, for callback events and traces: LangChain's
        ``thresholded_selection`` event and LlamaIndex's ``ThresholdSelectionEvent`` carry
        it, key for key. ``stage`` says what made the selection (default: the report's
        kind, :attr:`STAGE`; a compressor's says ``compressor``)."""
        return {
            "stage": stage or self.STAGE,
            "query": self.query,
            "min_similarity": self.min_similarity,
            "best_similarity": self.best_similarity,
            "gate": self.gate,
            "score_kind": self.score_kind,
            "nothing_matched": self.nothing_matched,
            "emptied_by": self.emptied_by,
            "kept": [
                {"id": c.id, "similarity": c.floor_score, "score_kind": c.score_kind.value}
                for c in self.selection.kept
            ],
            "attached": [
                {"id": c.id, "attached_to": c.attached_to, "role": _text(c.attached_role)}
                for c in self.selection.attached
            ],
            "dropped": self.dropped_data(),
            "drop_counts": self.drop_counts(),
            "outside_filters": self.outside_filters,
            "passed_through": [k.value for k in self.passed_through],
        }


@dataclass(frozen=True)
class MultiCollectionReport(Report[T]):
    """A ``Report`` over several collections, with each collection's status.

    ``min_similarity`` is the lowest floor of the collections (each collection's own
    floor is in its status); each dropped item names its collection.
    """

    collections: tuple[CollectionStatus, ...] = ()
    """What each collection did: its status, floor, latency and counts."""

    STAGE: ClassVar[str] = "multi_collection"

    @property
    def partial(self) -> bool:
        """True when a collection failed or timed out (the result may lack its sections), or
        fetching a collection's attachments failed (its kept sections came without their
        neighbours and summaries): the result lacks part of what the call returns."""
        return any(not s.ok or s.attachment_error for s in self.collections)

    @property
    def failed(self) -> tuple[CollectionStatus, ...]:
        """The collections that failed or timed out."""
        return tuple(s for s in self.collections if not s.ok)

    def status(self, name: str) -> CollectionStatus:
        """One collection's status, by its name."""
        for status in self.collections:
            if status.name == name:
                return status
        raise KeyError(name)

    def explain(self, width: int = 70) -> str:
        lines = [super().explain(width)]
        lines.extend(f"  collection {s.describe()}" for s in self.collections)
        return "\n".join(lines)

    def summary(self) -> str:
        return "; ".join([super().summary(), *(s.describe() for s in self.collections)])

    def to_event_data(self, stage: str | None = None) -> dict[str, Any]:
        return {
            **super().to_event_data(stage),
            "collections": [s.describe() for s in self.collections],
            "partial": self.partial,
        }


def _score(score: float | None) -> str:
    return "  -   " if score is None else f"{score:6.3f}"


def _source(candidate: Candidate[Any]) -> str:
    return str(candidate.source or candidate.id or "-")


def _snippet(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
