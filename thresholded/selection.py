"""Selection: the framework-free heart of the package.

Given the candidates of one search and a policy, decide which sections are
kept, in exactly this order: the answer gate (when even the best cosine is below
it, nothing is kept), the cosine floor, the per-source cap, the character
budget, top_k. Only a cosine meets the floor: a candidate's ``score`` when it
is one, or the ``cosine`` a hybrid or sparse candidate was re-scored with; any
other score passes the floor untouched. Every dropped candidate keeps its
reason. Attachments (neighbours and parent summaries) carry no score of their
own: they live and die with the section they were attached to, and are never
compared with the floor. An unscored result tied to no section among the
candidates is dropped as ``unscored``.
"""

from __future__ import annotations

import logging
import math
import operator
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Generic, TypeVar

from thresholded.errors import NonCosineScoreError, ScoreRangeError
from thresholded.gate import best_similarity, gate_is_on, gate_passes
from thresholded.guarded import Guarded
from thresholded.policy import RetrievalPolicy
from thresholded.scores import COSINE_RANGE_TOLERANCE, ScoreKind, is_valid_score

logger = logging.getLogger(__name__)

T = TypeVar("T")


class DropReason(StrEnum):
    """Why a candidate did not reach the result."""

    BELOW_GATE = "below_gate"
    """Even the question's best cosine is below the answer gate: nothing is kept."""
    BELOW_THRESHOLD = "below_threshold"
    SOURCE_CAP = "source_cap"
    BUDGET = "budget"
    BEYOND_TOP_K = "beyond_top_k"
    INVALID_SCORE = "invalid_score"
    """A cosine that is missing or NaN cannot be shown to clear an active floor."""
    DUPLICATE = "duplicate"
    ANCHOR_DROPPED = "anchor_dropped"
    """An attachment whose section was dropped."""
    ATTACHMENT_BUDGET = "attachment_budget"
    OUTSIDE_FILTERS = "outside_filters"
    """A section, neighbour or parent summary that the call's filters exclude: only
    counted (``Selection.outside_filters``), never carried."""
    UNSCORED = "unscored"
    """A result with no score that cannot be tied to a section among the candidates: no
    floor can vouch for it (e.g. a node another postprocessor added)."""

    def __str__(self) -> str:
        return self.value


class AttachedRole(StrEnum):
    """Why an attachment is in the result: a kept section's prev/next ``neighbour``, or its
    ``parent_summary`` (in ``metadata["attached_role"]``, and ``Report.attached_as``)."""

    NEIGHBOUR = "neighbour"
    PARENT_SUMMARY = "parent_summary"

    def __str__(self) -> str:
        return self.value


_COSINE = ScoreKind.COSINE
"""Read on every candidate: a module's name is read faster than an enum member off its class."""


@dataclass(slots=True, weakref_slot=True, unsafe_hash=True)
class Candidate(Generic[T]):
    """One search result as the core sees it; ``item`` is the framework's object.

    One is built for every hit of every call, so it is a slotted dataclass, about four
    times quicker to build than a frozen one. It is used as a frozen one: nothing
    changes a candidate once built (a changed one is a copy, ``dataclasses.replace``),
    so it hashes like one, by its fields.
    """

    item: T
    id: str
    score: float | None
    score_kind: ScoreKind = ScoreKind.COSINE
    source: str | None = None
    chars: int = 0
    is_attachment: bool = False
    """Attachments carry no score of their own and follow their section."""
    attached_to: str | None = None
    attached_role: AttachedRole | None = None
    cosine: float | None = None
    """The cosine between question and section when the score is not one (re-scored
    with the dense model, see :mod:`thresholded.rescore`). When present, the floor is
    compared with it, whatever ``score_kind`` is; ``score`` still orders the results."""
    collection: str = ""
    """The collection it came from, when several are searched at once. Identity is the
    pair (collection, id): ids need not be unique across collections."""

    @property
    def key(self) -> tuple[str, str]:
        """What makes a section unique: its collection and its id."""
        return (self.collection, self.id)

    @property
    def anchor_key(self) -> tuple[str, str | None]:
        """The key of the section an attachment belongs to."""
        return (self.collection, self.attached_to)

    @property
    def floor_score(self) -> float | None:
        """The cosine the floor is compared with: ``cosine``, else a cosine ``score``."""
        if self.cosine is not None:
            return self.cosine
        return self.score if self.score_kind is _COSINE else None

    @property
    def has_cosine(self) -> bool:
        """True when the floor can be compared with this candidate at all."""
        return self.cosine is not None or self.score_kind is _COSINE


@dataclass(frozen=True)
class Dropped(Generic[T]):
    candidate: Candidate[T]
    reason: DropReason


@dataclass(frozen=True)
class Selection(Generic[T]):
    """What one selection kept, attached and dropped, and under which floor."""

    kept: tuple[Candidate[T], ...]
    attached: tuple[Candidate[T], ...]
    dropped: tuple[Dropped[T], ...]
    min_similarity: float
    passed_through: tuple[ScoreKind, ...] = field(default=())
    """Non-cosine score kinds that met an active floor and were not compared with it."""
    best_similarity: float | None = None
    """The best cosine among the candidates (all of them passed the filters); None: none."""
    gate: float | None = None
    """The answer gate in force; None: off."""
    outside_filters: int = 0
    """How many sections, neighbours and parent summaries the store returned outside the
    call's filters (but within the retriever's own: those it holds back are not counted).
    They are counted, never carried (not even their ids or cosines): no report, event or
    log tells of a section the filters exclude."""

    def __post_init__(self) -> None:
        if any(d.reason is DropReason.OUTSIDE_FILTERS for d in self.dropped):
            raise ValueError(
                "a selection never carries a section outside the filters: count it in "
                "outside_filters (see thresholded.engine.within_filters)"
            )

    @property
    def nothing_matched(self) -> bool:
        """True when no section cleared the policy: the caller should say "I don't know"."""
        return not self.kept

    @property
    def threshold_active(self) -> bool:
        return self.min_similarity != 0.0

    def drop_counts(self) -> dict[str, int]:
        """How many candidates each reason dropped, those outside the filters included."""
        counts = Counter(d.reason.value for d in self.dropped)
        if self.outside_filters:
            counts[DropReason.OUTSIDE_FILTERS.value] = self.outside_filters
        return dict(counts)

    @property
    def emptied_by(self) -> str | None:
        """Why nothing was kept: ``gate``, ``floor``, or ``filters`` (nothing was found
        within the filters: what the store returned lay outside them, or it returned
        nothing); ``policy`` when the cap or budget dropped the rest; None when something
        was kept."""
        if self.kept:
            return None
        reasons = {d.reason for d in self.dropped if not d.candidate.is_attachment}
        if DropReason.BELOW_GATE in reasons:
            return "gate"
        if reasons & {DropReason.BELOW_THRESHOLD, DropReason.INVALID_SCORE}:
            return "floor"
        return "policy" if reasons else "filters"

    def dropped_for(self, reason: DropReason | str) -> tuple[Candidate[T], ...]:
        """The candidates one reason dropped; the reason may be given by name."""
        wanted = DropReason(reason)
        return tuple(d.candidate for d in self.dropped if d.reason is wanted)

    def with_items(self, change: Callable[[T], T]) -> Selection[T]:
        """This selection with ``change`` applied to the item of every candidate, kept,
        attached or dropped: itself when ``change`` returned each item as it was."""

        def candidate(c: Candidate[T]) -> Candidate[T]:
            item = change(c.item)
            return c if item is c.item else replace(c, item=item)

        def drop(d: Dropped[T]) -> Dropped[T]:
            changed = candidate(d.candidate)
            return d if changed is d.candidate else Dropped(changed, d.reason)

        kept = _each(candidate, self.kept)
        attached = _each(candidate, self.attached)
        dropped = _each(drop, self.dropped)
        if kept is self.kept and attached is self.attached and dropped is self.dropped:
            return self
        return replace(self, kept=kept, attached=attached, dropped=dropped)


def _each(change: Callable[[Any], Any], items: tuple[Any, ...]) -> tuple[Any, ...]:
    """``change`` applied to every item: ``items`` itself when it changed none of them."""
    changed = tuple(map(change, items))
    return items if all(map(operator.is_, changed, items)) else changed


def select(
    candidates: Iterable[Candidate[T]],
    policy: RetrievalPolicy,
    min_similarity: float,
    *,
    best: float | None = None,
) -> Selection[T]:
    """Apply ``policy`` to the candidates of one search.

    ``min_similarity`` is the resolved floor (see ``RetrievalPolicy.resolve_min_similarity``);
    0 turns the filter off. The answer gate (``policy.min_top_similarity``) judges
    ``best``, the best cosine of the whole search, when these candidates are only a
    part of it (a merge of collections); else their own best. Sections are returned
    in score order; attachments follow, in the order of their sections.

    A cosine outside [-1, 1] is a ``ScoreRangeError``: it is not a cosine, and neither
    the floor, the gate nor the best similarity may read it as one.
    """
    primaries: list[Candidate[T]] = []
    attachments: list[Candidate[T]] = []
    for cand in candidates:
        (attachments if cand.is_attachment else primaries).append(cand)
    _check_cosine_range(primaries)
    dropped: list[Dropped[T]] = []

    primaries = _drop_duplicates(primaries, dropped, seen=set())
    primaries = _score_order(primaries)
    best = best_similarity(primaries) if best is None else best
    primaries = _apply_gate(primaries, best, policy.min_top_similarity, dropped)

    survivors, passed_through = _apply_floor(primaries, min_similarity, policy, dropped)
    survivors = _apply_cap_and_budget(survivors, policy, dropped)
    kept = survivors[: policy.top_k]
    dropped.extend([Dropped(c, DropReason.BEYOND_TOP_K) for c in survivors[policy.top_k :]])

    attached = _select_attachments(attachments, kept, primaries, policy, dropped)
    selection = Selection(
        kept=tuple(kept),
        attached=tuple(attached),
        dropped=tuple(dropped),
        min_similarity=min_similarity,
        passed_through=passed_through,
        best_similarity=best,
        gate=policy.min_top_similarity if gate_is_on(policy.min_top_similarity) else None,
    )
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug(
            "selection: %d candidates, %d kept, %d attached, dropped %s (floor %s)",
            len(kept) + len(attached) + len(dropped),
            len(kept),
            len(attached),
            selection.drop_counts(),
            min_similarity,
        )
    return selection


def attach(
    selection: Selection[T], attachments: Iterable[Candidate[T]], policy: RetrievalPolicy
) -> Selection[T]:
    """Add attachments fetched for a selection's kept sections.

    An attachment stays exactly when its section was kept; it is never compared
    with the floor, never duplicates a kept section or another attachment, and
    only ``max_attachment_chars`` limits it.
    """
    dropped = list(selection.dropped)
    # Every section that was a candidate, kept or dropped: an attachment of a dropped
    # section must be dropped (anchor_dropped), not kept as an orphan.
    candidates = [
        *selection.kept,
        *(d.candidate for d in selection.dropped if not d.candidate.is_attachment),
    ]
    added = _select_attachments(
        [*selection.attached, *attachments],
        list(selection.kept),
        candidates,
        policy,
        dropped,
    )
    return replace(selection, attached=tuple(added), dropped=tuple(dropped))


def _check_cosine_range(items: Sequence[Candidate[Any]]) -> None:
    """Refuse a finite cosine outside [-1, 1] (beyond float rounding): a reranker's score,
    a text-search score or a distance taken for a cosine would be compared as one."""
    limit = 1.0 + COSINE_RANGE_TOLERANCE
    for cand in items:
        cosine = cand.floor_score
        if cosine is not None and not -limit <= cosine <= limit and math.isfinite(cosine):
            raise ScoreRangeError(
                f"result {cand.id!r} has the cosine {cosine!r}, outside [-1, 1]: it is not a "
                "cosine similarity (a reranker's or a text-search score, or a distance, read "
                "or declared as a cosine), so no floor or gate can be compared with it. "
                "Declare the score's real kind, or compute the cosine with the embedding "
                "model the store was built with"
            )


def _drop_duplicates(
    items: Sequence[Candidate[T]], dropped: list[Dropped[T]], seen: set[tuple[str, str]]
) -> list[Candidate[T]]:
    """Keep the best-scored copy of each section; later copies are dropped as duplicates."""
    keys = {(c.collection, c.id) for c in items}  # each one's ``key``
    if len(keys) == len(items) and not keys & seen:  # no copies: nothing to choose between
        seen |= keys
        return list(items)
    unique: list[Candidate[T]] = []
    for cand in _score_order(items):
        if cand.key in seen:
            dropped.append(Dropped(cand, DropReason.DUPLICATE))
        else:
            seen.add(cand.key)
            unique.append(cand)
    # restore the incoming order among the unique ones
    position = {id(c): i for i, c in enumerate(items)}
    return sorted(unique, key=lambda c: position[id(c)])


def _score_order(items: Sequence[Candidate[T]]) -> list[Candidate[T]]:
    """Best score first (stable); results without a usable score go last."""
    return sorted(items, key=_rank)


def _rank(candidate: Candidate[Any]) -> float:
    """A plain float to sort by (quicker to compare than a tuple): an unusable score sorts
    after every finite one."""
    score = candidate.score
    return -score if score is not None and math.isfinite(score) else math.inf


def _apply_gate(
    items: list[Candidate[T]], best: float | None, gate: float | None, dropped: list[Dropped[T]]
) -> list[Candidate[T]]:
    """If even the best cosine is below the gate, nothing is kept (see ``thresholded.gate``)."""
    if gate_passes(best, gate):
        return items
    dropped.extend(Dropped(c, DropReason.BELOW_GATE) for c in items)
    return []


def _apply_floor(
    items: list[Candidate[T]],
    floor: float,
    policy: RetrievalPolicy,
    dropped: list[Dropped[T]],
) -> tuple[list[Candidate[T]], tuple[ScoreKind, ...]]:
    if floor == 0.0:
        return items, ()
    survivors: list[Candidate[T]] = []
    passed: set[ScoreKind] = set()
    for cand in items:
        if not cand.has_cosine:
            if policy.strict_score_kind:
                raise NonCosineScoreError(
                    f"a {cand.score_kind.value} score ({cand.score}) met the cosine floor "
                    f"{floor}: it is not a cosine similarity and cannot be compared with one. "
                    "Re-score with the dense model (hybrid_policy='rescore'), or turn "
                    "strict_score_kind off "
                    "to pass it through."
                )
            passed.add(cand.score_kind)
            survivors.append(cand)
        elif not is_valid_score(cand.floor_score):
            dropped.append(Dropped(cand, DropReason.INVALID_SCORE))
        elif cand.floor_score < floor:  # type: ignore[operator]
            dropped.append(Dropped(cand, DropReason.BELOW_THRESHOLD))
        else:
            survivors.append(cand)
    if passed:
        kinds = ", ".join(sorted(k.value for k in passed))
        logger.info(
            "threshold %s not applied to %s scores: they are not cosine similarities", floor, kinds
        )
    return survivors, tuple(sorted(passed, key=lambda k: k.value))


def _apply_cap_and_budget(
    items: list[Candidate[T]], policy: RetrievalPolicy, dropped: list[Dropped[T]]
) -> list[Candidate[T]]:
    """The source cap, then the budget, in one pass in score order: a source's place goes
    to the sections it contributes, so one the budget drops leaves it to the next."""
    return _apply_budget(items, policy.max_chars, DropReason.BUDGET, dropped, policy.max_per_source)


def _apply_budget(
    items: list[Candidate[T]],
    budget: int | None,
    reason: DropReason,
    dropped: list[Dropped[T]],
    cap: int | None = None,
) -> list[Candidate[T]]:
    """Skip what would overflow the budget, and keep looking for what still fits; with a
    ``cap``, first drop a section whose source has given ``cap`` sections already."""
    per_source: Counter[str] = Counter()
    used = 0
    survivors = []
    for cand in items:
        if cap is not None and cand.source is not None and per_source[cand.source] >= cap:
            dropped.append(Dropped(cand, DropReason.SOURCE_CAP))
            continue
        if budget is not None and used + cand.chars > budget:
            dropped.append(Dropped(cand, reason))
            if cand.chars > budget:
                _say_too_long(cand, _BUDGET_NAMES[reason], budget)
            continue
        used += cand.chars
        if cand.source is not None:
            per_source[cand.source] += 1
        survivors.append(cand)
    return survivors


_BUDGET_NAMES = {
    DropReason.BUDGET: "max_chars",
    DropReason.ATTACHMENT_BUDGET: "max_attachment_chars",
}


class Remembered(Guarded):
    """The keys seen most recently, ``most`` of them at most: each is new the first time
    it is seen, and again once it has been forgotten (the least recently seen go first).
    Safe to share between threads.

    Args:
        most: How many keys are remembered; memory stays bounded by it.
    """

    def __init__(self, most: int = 10_000) -> None:
        if most < 1:
            raise ValueError(f"most must be at least 1, got {most}")
        self._most = most
        self._keys: OrderedDict[Hashable, None] = OrderedDict()
        self._lock = threading.Lock()

    def is_new(self, key: Hashable) -> bool:
        """Whether ``key`` is not remembered; it is remembered from now on."""
        with self._lock:
            if key in self._keys:
                self._keys.move_to_end(key)
                return False
            self._keys[key] = None
            if len(self._keys) > self._most:
                self._keys.popitem(last=False)
            return True


_TOLD_TOO_LONG = Remembered()
"""The sections named as longer than a budget: each is named once while remembered."""


def _say_too_long(cand: Candidate[Any], name: str, budget: int) -> None:
    """Once per section: it is longer than the whole budget, so no question can ever keep
    it. Its question then gets weaker sections, or none ("I don't know"), without a word."""
    if not _TOLD_TOO_LONG.is_new((cand.collection, cand.id, name)):
        return
    logger.warning(
        "section %r has %s characters, more than the whole budget (%s=%s), so it is never "
        "kept: raise %s, set %s=None (no budget), or index smaller sections. Said once per "
        "section",
        cand.id,
        f"{cand.chars:,}",
        name,
        f"{budget:,}",
        name,
        name,
    )


def _select_attachments(
    attachments: list[Candidate[T]],
    kept: list[Candidate[T]],
    primaries: list[Candidate[T]],
    policy: RetrievalPolicy,
    dropped: list[Dropped[T]],
) -> list[Candidate[T]]:
    """Keep an attachment exactly when its section is kept; never compare it with the floor.
    One tied to no candidate section cannot be vouched for: dropped as ``unscored``."""
    if not attachments:
        return []
    kept_keys: list[tuple[str, str | None]] = [c.key for c in kept]
    candidate_keys = {c.key for c in primaries}
    kept_set = set(kept_keys)
    seen: set[tuple[str, str | None]] = set(kept_keys)
    by_anchor: dict[tuple[str, str | None] | None, list[Candidate[T]]] = {}
    for att in attachments:
        if att.key in seen:
            dropped.append(Dropped(att, DropReason.DUPLICATE))
            continue
        anchor = att.anchor_key
        if anchor in kept_set:
            seen.add(att.key)
            by_anchor.setdefault(anchor, []).append(att)
        elif att.attached_to is not None and anchor in candidate_keys:
            dropped.append(Dropped(att, DropReason.ANCHOR_DROPPED))
        else:
            dropped.append(Dropped(att, DropReason.UNSCORED))
    ordered = [att for anchor in kept_keys for att in by_anchor.get(anchor, [])]
    return _apply_budget(
        ordered, policy.max_attachment_chars, DropReason.ATTACHMENT_BUDGET, dropped
    )
