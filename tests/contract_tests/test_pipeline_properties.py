"""The pipeline's contract on random fixtures: every variant agrees with the others, with
a reference written from the documentation, and with the filters.

``test_pipeline_contract.py`` checks the eight variants (both adapters, single and
multi-collection, sync and async) on one hand-made fixture. Here Hypothesis makes small
fixtures of its own: linked sections with exact cosines (unit vectors on a grid of
sixteenths, as in ``contract_data``), sources, text lengths, parent summaries (and a
summary above them), ``doc_type`` metadata; random policies; random filters on
``doc_type`` for the retriever and for the call. For each it asserts that

1. every variant keeps, attaches and drops the same sections, for the same reasons;
2. the outcome is the one a reference computed here with numpy says, written from the
   documentation (README, ``RetrievalPolicy``, ``thresholded.selection``,
   ``thresholded.gate``, ``thresholded.attachments``), not from the package's code;
3. no returned section, neighbour or summary lies outside the filters.

The same holds where links point anywhere (across documents, at summaries, at nothing),
and where ``doc_type`` holds values of several types (strings, numbers, bools), except that
a variant may report more sections outside the filters when its store returned them.
Where cosines tie, the two stores order the tied sections differently, so only each
adapter's own four variants must agree, and every limit of the policy must hold.

The stores are the in-memory ones (``SimpleVectorStore``, ``InMemoryVectorStore``).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from contract_data import QUESTION, FixedEmbedding, unit_vector
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import InMemoryStore
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores import SimpleVectorStore
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

import langchain_thresholded as lc
import llama_index_thresholded as li
from thresholded import RetrievalPolicy

QUESTION_VECTOR = np.array(unit_vector(1.0))
DOC_TYPES = ("faq", "guide", "internal")
MIXED_DOC_TYPES = ("faq", "guide", 0, 1, 2, 1.0, True, False)
"""Stored values of several types under one key: a bool is not a number, "1" is not 1."""
ROOT = "root#summary"
MIN_CHARS = len(ROOT) + 1
"""Every text is its id, a space, then dots up to its length: none is shorter."""


# The fixture ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Section:
    id: str
    document: str
    sixteenths: int
    """Its cosine with the question, in sixteenths: exact in every store."""
    chars: int
    source: str | None
    doc_type: Any
    """A string here; None: the section has no ``doc_type``."""
    prev: str | None
    next: str | None
    parent: str | None


@dataclass(frozen=True)
class Summary:
    """A document's summary (or the summary above them all): in the docstore only."""

    id: str
    chars: int
    doc_type: str | None
    parent: str | None


@dataclass(frozen=True)
class World:
    sections: tuple[Section, ...]
    summaries: tuple[Summary, ...]

    def by_id(self) -> dict[str, Section | Summary]:
        return {x.id: x for x in (*self.sections, *self.summaries)}


def text_of(item: Section | Summary) -> str:
    text = (item.id + " ").ljust(item.chars, ".")
    assert len(text) == item.chars
    return text


def metadata_of(item: Section | Summary) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if isinstance(item, Section) and item.source is not None:
        metadata["source"] = item.source
    if item.doc_type is not None:
        metadata["doc_type"] = item.doc_type
    return metadata


@st.composite
def worlds(draw: st.DrawFn, distinct: bool = True, stored: tuple[Any, ...] = DOC_TYPES) -> World:
    """Up to three documents of up to five linked sections; distinct cosines unless not
    ``distinct`` (ties: their order is the store's); ``doc_type`` one of ``stored``, or none."""
    lengths = draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    total = sum(lengths)
    cosines = draw(st.lists(st.integers(-16, 16), min_size=total, max_size=total, unique=distinct))
    doc_types = st.sampled_from((*stored, None))
    root = None
    if draw(st.booleans()):
        root = Summary(ROOT, draw(st.integers(MIN_CHARS, 300)), draw(doc_types), None)
    summaries = [root] if root else []
    sections = []
    for d, length in enumerate(lengths):
        document = f"d{d}"
        summary = None
        if draw(st.booleans()):
            parent = ROOT if root and draw(st.booleans()) else None
            summary = Summary(
                f"{document}#summary", draw(st.integers(MIN_CHARS, 300)), draw(doc_types), parent
            )
            summaries.append(summary)
        ids = [f"{document}s{i}" for i in range(length)]
        for i, section_id in enumerate(ids):
            sections.append(
                Section(
                    id=section_id,
                    document=document,
                    sixteenths=cosines[len(sections)],
                    chars=draw(st.integers(MIN_CHARS, 400)),
                    source=draw(st.sampled_from(("s0", "s1", "s2", None))),
                    doc_type=draw(doc_types),
                    prev=ids[i - 1] if i > 0 else None,
                    next=ids[i + 1] if i + 1 < length else None,
                    parent=summary.id if summary else None,
                )
            )
    return World(tuple(sections), tuple(summaries))


@st.composite
def tangled_worlds(draw: st.DrawFn) -> World:
    """Sections whose links point anywhere: across documents, at summaries, at themselves,
    at ids nothing has; summaries whose parents do too. Distinct cosines."""
    count = draw(st.integers(1, 8))
    section_ids = [f"x{i}" for i in range(count)]
    summary_ids = [f"p{i}#summary" for i in range(draw(st.integers(0, 3)))]
    target = st.sampled_from([*section_ids, *summary_ids, None, None, "nowhere"])
    cosines = draw(st.lists(st.integers(-16, 16), min_size=count, max_size=count, unique=True))
    doc_types = st.sampled_from((*DOC_TYPES, None))
    sections = tuple(
        Section(
            id=section_id,
            document="x",
            sixteenths=cosine,
            chars=draw(st.integers(MIN_CHARS, 300)),
            source=draw(st.sampled_from(("s0", "s1", None))),
            doc_type=draw(doc_types),
            prev=draw(target),
            next=draw(target),
            parent=draw(target),
        )
        for section_id, cosine in zip(section_ids, cosines, strict=True)
    )
    summaries = tuple(
        Summary(i, draw(st.integers(MIN_CHARS, 300)), draw(doc_types), draw(target))
        for i in summary_ids
    )
    return World(sections, summaries)


@dataclass(frozen=True)
class Condition:
    """``doc_type`` compared with a value: eq, ne, in or nin."""

    op: str
    value: Any

    def holds(self, metadata: dict[str, Any]) -> bool:
        """As the README says: NE and NIN hold where the key is missing, and a value of
        another type than the stored one does not match (``thresholded.filters``: a bool
        is not a number), so NE and NIN hold there too."""
        stored = metadata.get("doc_type")
        values = [self.value] if self.op in ("eq", "ne") else self.value
        found = stored is not None and any(same(stored, v) for v in values)
        return found if self.op in ("eq", "in") else not found

    def llama_index(self) -> MetadataFilters:
        operator = {
            "eq": FilterOperator.EQ,
            "ne": FilterOperator.NE,
            "in": FilterOperator.IN,
            "nin": FilterOperator.NIN,
        }[self.op]
        return MetadataFilters(
            filters=[MetadataFilter(key="doc_type", value=self.value, operator=operator)]
        )

    def langchain(self) -> dict[str, Any]:
        return {"doc_type": {f"${self.op}": self.value}}


def same(stored: Any, value: Any) -> bool:
    def kind(v: Any) -> str:
        return "bool" if isinstance(v, bool) else "number" if isinstance(v, int | float) else "str"

    return kind(stored) == kind(value) and stored == value


conditions = st.one_of(
    st.builds(Condition, st.sampled_from(("eq", "ne")), st.sampled_from(DOC_TYPES)),
    st.builds(
        Condition,
        st.sampled_from(("in", "nin")),
        st.lists(st.sampled_from(DOC_TYPES), max_size=2, unique=True),
    ),
)
numbers = st.sampled_from((0, 1, 2, 1.0))  # LlamaIndex's MetadataFilter takes no bool
mixed_conditions = st.one_of(
    conditions,
    st.builds(Condition, st.sampled_from(("eq", "ne")), numbers),
    st.builds(
        Condition, st.sampled_from(("in", "nin")), st.lists(numbers, max_size=2, unique=True)
    ),
)
sixteenths = st.integers(-16, 16).map(lambda n: n / 16)


@dataclass(frozen=True)
class Setup:
    policy: RetrievalPolicy
    neighbours: int
    parent_summaries: bool
    parent_levels: int
    filters: Condition | None
    """The retriever's own."""
    call_filters: Condition | None
    call_min_similarity: float | None = None
    call_top_k: int | None = None
    call_gate: float | None = None
    """The call's own floor, ``top_k`` and answer gate (None: the policy's)."""

    @property
    def conditions(self) -> list[Condition]:
        return [c for c in (self.filters, self.call_filters) if c is not None]

    @property
    def effective(self) -> RetrievalPolicy:
        """The policy of the call: the call's floor, ``top_k`` and gate where it gives them."""
        changes = {
            "min_similarity": self.call_min_similarity,
            "top_k": self.call_top_k,
            "min_top_similarity": self.call_gate,
        }
        return self.policy.model_copy(update={k: v for k, v in changes.items() if v is not None})


@st.composite
def setups(draw: st.DrawFn, filters: st.SearchStrategy[Condition] = conditions) -> Setup:
    policy = RetrievalPolicy(
        min_similarity=draw(st.one_of(st.just(0.0), sixteenths, st.floats(-1, 1))),
        min_top_similarity=draw(st.one_of(st.none(), st.none(), st.just(0.0), sixteenths)),
        top_k=draw(st.integers(1, 5)),
        over_fetch=draw(st.integers(1, 3)),
        max_per_source=draw(st.one_of(st.none(), st.integers(1, 3))),
        max_chars=draw(st.one_of(st.none(), st.integers(10, 1200))),
        max_attachment_chars=draw(st.one_of(st.none(), st.integers(10, 800))),
    )
    parent_summaries = draw(st.booleans())
    return Setup(
        policy=policy,
        neighbours=draw(st.integers(0, 2)),
        parent_summaries=parent_summaries,
        parent_levels=draw(st.integers(1, 2)) if parent_summaries else 1,  # 2 alone is refused
        filters=draw(st.one_of(st.none(), filters)),
        call_filters=draw(st.one_of(st.none(), filters)),
        call_min_similarity=draw(st.one_of(st.none(), st.just(0.0), sixteenths)),
        call_top_k=draw(st.one_of(st.none(), st.integers(1, 5))),
        call_gate=draw(st.one_of(st.none(), st.none(), st.just(0.0), sixteenths)),
    )


# The stores -----------------------------------------------------------------------------------
class WorldEmbeddings(Embeddings):
    """The world's texts to their vectors, the question to the first axis."""

    def __init__(self, world: World) -> None:
        self.vectors = {text_of(s): unit_vector(s.sixteenths / 16) for s in world.sections}
        self.vectors[QUESTION] = list(QUESTION_VECTOR)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(self.vectors[t]) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return list(self.vectors[text])


def llama_index_of(world: World) -> VectorStoreIndex:
    nodes = []
    for s in world.sections:
        node = TextNode(
            id_=s.id,
            text=text_of(s),
            metadata=metadata_of(s),
            embedding=unit_vector(s.sixteenths / 16),
        )
        for relation, target in (
            (NodeRelationship.PREVIOUS, s.prev),
            (NodeRelationship.NEXT, s.next),
            (NodeRelationship.PARENT, s.parent),
        ):
            if target is not None:
                node.relationships[relation] = RelatedNodeInfo(node_id=target)
        nodes.append(node)
    summaries = []
    for summary in world.summaries:
        node = TextNode(id_=summary.id, text=text_of(summary), metadata=metadata_of(summary))
        if summary.parent is not None:
            node.relationships[NodeRelationship.PARENT] = RelatedNodeInfo(node_id=summary.parent)
        summaries.append(node)
    storage = StorageContext.from_defaults(vector_store=SimpleVectorStore())
    storage.docstore.add_documents(summaries)
    # every node has its vector: FixedEmbedding only embeds the question
    return VectorStoreIndex(nodes, storage_context=storage, embed_model=FixedEmbedding())


def langchain_of(world: World) -> tuple[InMemoryVectorStore, InMemoryStore]:
    def document(item: Section | Summary) -> Document:
        links = {"parent_id": item.parent or ""}
        if isinstance(item, Section):
            links |= {"prev_id": item.prev or "", "next_id": item.next or ""}
        return Document(id=item.id, page_content=text_of(item), metadata=metadata_of(item) | links)

    sections = [document(s) for s in world.sections]
    store = InMemoryVectorStore(WorldEmbeddings(world))
    store.add_documents(sections, ids=[d.id for d in sections])
    docstore = InMemoryStore()
    docstore.mset([(d.id, d) for d in (*sections, *map(document, world.summaries))])
    return store, docstore


# The variants ---------------------------------------------------------------------------------
VARIANTS = [
    (framework, shape, mode)
    for framework in ("llama_index", "langchain")
    for shape in ("single", "multi")
    for mode in ("sync", "async")
]


def build(world: World, setup: Setup, framework: str, shape: str) -> Any:
    if framework == "llama_index":
        index = llama_index_of(world)
        common = {
            "neighbours": setup.neighbours,
            "parent_summaries": setup.parent_summaries,
            "parent_levels": setup.parent_levels,
            "pushdown": False,
            "filters": setup.filters.llama_index() if setup.filters else None,
        }
        if shape == "single":
            return li.ThresholdedRetriever(index, setup.policy, **common)
        specs = [li.CollectionSpec(index, name="kb")]
        return li.MultiCollectionRetriever(specs, setup.policy, **common)
    store, docstore = langchain_of(world)
    single = lc.ThresholdedRetriever(
        vectorstore=store,
        policy=setup.policy,
        docstore=docstore,
        neighbours=setup.neighbours,
        parent_summaries=setup.parent_summaries,
        parent_levels=setup.parent_levels,
        filters=setup.filters.langchain() if setup.filters else None,
    )
    if shape == "single":
        return single
    specs = [lc.CollectionSpec(retriever=single, name="kb")]
    return lc.MultiCollectionRetriever(collections=specs, policy=setup.policy)


@dataclass(frozen=True)
class Outcome:
    kept: list[str]
    cosines: list[float]
    attached: list[str]
    dropped: list[tuple[str, str]]
    """(id, reason) of every drop, sorted: an id may be dropped and attached, or twice."""
    outside: int
    """How many sections outside the filters were counted (they are never named)."""
    returned_metadata: list[dict[str, Any]]


def run(world: World, setup: Setup, variant: tuple[str, str, str]) -> Outcome:
    framework, shape, mode = variant
    retriever = build(world, setup, framework, shape)
    call = setup.call_filters
    arguments = {
        "filters": None if call is None else getattr(call, framework)(),
        "min_similarity": setup.call_min_similarity,
        "top_k" if framework == "llama_index" else "k": setup.call_top_k,
        "min_top_similarity": setup.call_gate,
    }
    arguments = {k: v for k, v in arguments.items() if v is not None}
    if mode == "sync":
        report = retriever.retrieve_with_report(QUESTION, **arguments)
    else:
        report = asyncio.run(retriever.aretrieve_with_report(QUESTION, **arguments))
    if framework == "llama_index":
        kept = [n.node.node_id for n in report.kept]
        cosines = [n.score for n in report.kept]
        attached = [n.node.node_id for n in report.attached]
        returned = [dict(n.node.metadata) for n in report.items]
    else:
        kept = [d.id for d in report.kept]
        cosines = [d.metadata["similarity"] for d in report.kept]
        attached = [d.id for d in report.attached]
        returned = [dict(d.metadata) for d in report.items]
    dropped = sorted((d.id, d.reason.value) for d in report.dropped)
    return Outcome(kept, cosines, attached, dropped, report.outside_filters, returned)


# The reference --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Expected:
    kept: list[str]
    cosines: list[float]
    attached: list[str]
    dropped: list[tuple[str, str]]
    outside: int = 0


def reference(world: World, setup: Setup) -> Expected:
    """What the documentation says the call returns, computed without the package.

    The search fetches the ``top_k * over_fetch`` nearest sections within the filters
    (a store that applies them returns nothing outside them). Then, in order: the answer
    gate (the best cosine among them below it: every one dropped ``below_gate``); the
    floor (0 turns it off; below it: ``below_threshold``); at most ``max_per_source``
    per source, in score order (``source_cap``; a section without a source is not
    capped), and the character budget, skipping what would overflow it and looking on
    (``budget``), in one pass: a section the budget drops takes no place of its source's;
    the first ``top_k`` (``beyond_top_k``). Then, for the kept sections
    only, their parent summaries (``parent_levels`` up) and ``neighbours`` on each side,
    fetched hop by hop; a section already kept or attached is neither attached again nor
    walked through; one outside the filters is only counted (``outside``), and nothing is
    reached through it (under a call's filters, only one within the retriever's own is
    counted). They follow their sections in order, per section: summaries
    nearest first, earlier neighbours farthest first, later ones; ``max_attachment_chars``
    skips what would overflow it (``attachment_budget``).
    """
    policy = setup.effective
    inside = [s for s in world.sections if all(c.holds(metadata_of(s)) for c in setup.conditions)]
    dropped: list[tuple[str, str]] = []
    if not inside:
        return Expected([], [], [], [])
    vectors = np.array([unit_vector(s.sixteenths / 16) for s in inside])
    cosines = vectors @ QUESTION_VECTOR
    order = np.argsort(-cosines, kind="stable")[: policy.top_k * policy.over_fetch]
    candidates = [(inside[i], float(cosines[i])) for i in order]

    gate = policy.min_top_similarity
    if gate and max(c for _, c in candidates) < gate:
        dropped += [(s.id, "below_gate") for s, _ in candidates]
        candidates = []
    floor = policy.min_similarity
    survivors = []
    for s, cosine in candidates:
        if floor != 0.0 and cosine < floor:
            dropped.append((s.id, "below_threshold"))
        else:
            survivors.append((s, cosine))
    within_budget, used, per_source = [], 0, Counter()
    for s, cosine in survivors:
        capped = s.source is not None and policy.max_per_source is not None
        if capped and per_source[s.source] >= policy.max_per_source:
            dropped.append((s.id, "source_cap"))
            continue
        if policy.max_chars is not None and used + s.chars > policy.max_chars:
            dropped.append((s.id, "budget"))
            continue
        used += s.chars
        per_source[s.source] += 1
        within_budget.append((s, cosine))
    kept = within_budget[: policy.top_k]
    dropped += [(s.id, "beyond_top_k") for s, _ in within_budget[policy.top_k :]]

    attachments = walk(world, [s for s, _ in kept], setup)
    by_id = world.by_id()
    attached, used, outside = [], 0, 0
    for item_id in attachments:
        item = by_id[item_id]
        if not all(c.holds(metadata_of(item)) for c in setup.conditions):
            outside += counted_outside(setup, metadata_of(item))
            continue
        if policy.max_attachment_chars is not None and (
            used + item.chars > policy.max_attachment_chars
        ):
            dropped.append((item_id, "attachment_budget"))
            continue
        used += item.chars
        attached.append(item_id)
    kept_ids, cosines = [s.id for s, _ in kept], [c for _, c in kept]
    return Expected(kept_ids, cosines, attached, sorted(dropped), outside)


def counted_outside(setup: Setup, metadata: dict[str, Any]) -> bool:
    """Whether a section outside the filters is counted: only one within the retriever's own
    (a count of the others would tell the question, or a call's filter, which of the
    sections the retriever holds back lie near it, or match it)."""
    own = setup.filters
    return own is None or own.holds(metadata)


def walk(world: World, kept: Sequence[Section], setup: Setup) -> list[str]:
    """The ids of the kept sections' attachments, in the order they follow them."""
    by_id = world.by_id()
    limits = {
        "parent": setup.parent_levels if setup.parent_summaries else 0,
        "prev": setup.neighbours,
        "next": setup.neighbours,
    }
    seen = {s.id for s in kept}
    found: dict[str, dict[str, list[str]]] = {s.id: {d: [] for d in limits} for s in kept}
    frontier = [(s.id, d, s) for s in kept for d in limits if limits[d]]
    hop = 0
    while frontier:  # one hop at a time: the nearer attachment wins
        hop += 1
        step = []
        for anchor, direction, item in frontier:
            target = getattr(item, direction, None)
            if target is None or target in seen or target not in by_id:
                continue
            seen.add(target)
            found[anchor][direction].append(target)
            excluded = not all(c.holds(metadata_of(by_id[target])) for c in setup.conditions)
            if hop < limits[direction] and not excluded:  # nothing is reached through it
                step.append((anchor, direction, by_id[target]))
        frontier = step
    return [
        item_id
        for s in kept
        for item_id in (
            *found[s.id]["parent"],
            *reversed(found[s.id]["prev"]),
            *found[s.id]["next"],
        )
    ]


# The property ---------------------------------------------------------------------------------
def check(world: World, setup: Setup) -> None:
    outcomes = {variant: run(world, setup, variant) for variant in VARIANTS}
    first = outcomes[VARIANTS[0]]
    for variant, outcome in outcomes.items():
        assert (outcome.kept, outcome.attached, outcome.dropped, outcome.outside) == (
            first.kept,
            first.attached,
            first.dropped,
            first.outside,
        ), f"{'-'.join(variant)} differs from {'-'.join(VARIANTS[0])}"
        assert outcome.cosines == first.cosines, "-".join(variant)
        for metadata in outcome.returned_metadata:
            assert all(c.holds(metadata) for c in setup.conditions), (variant, metadata)
    expected = reference(world, setup)
    assert (first.kept, first.cosines, first.attached, first.dropped, first.outside) == (
        expected.kept,
        expected.cosines,
        expected.attached,
        expected.dropped,
        expected.outside,
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world=worlds(), setup=setups())
def test_every_variant_keeps_what_the_reference_keeps(world: World, setup: Setup) -> None:
    check(world, setup)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world=tangled_worlds(), setup=setups())
def test_links_that_point_anywhere_change_nothing(world: World, setup: Setup) -> None:
    check(world, setup)


# Values of several types ---------------------------------------------------------------------
def check_mixed_types(world: World, setup: Setup) -> None:
    """Filters over values of several types. The LlamaIndex adapter's in-memory store holds
    ``True == 1``: under EQ and IN it returns sections outside the filters (the engine's
    check counts them, as ``outside_filters``), and NE and NIN with a number are left to that
    check alone, the store searching unfiltered. A store that applies the filters never
    returns such sections. And where rows outside the filters leave too few candidates,
    the search is widened only until its farthest row is below the floor (README,
    Filters): the sections beyond it are never seen, so their ``below_threshold`` drops
    are not reported. So every variant keeps and attaches exactly what the reference says;
    it drops for every other reason what the reference drops; it counts at least the
    sections outside the filters the reference counts, and names none of them."""
    expected = reference(world, setup)
    outside = {
        s.id for s in world.sections if not all(c.holds(metadata_of(s)) for c in setup.conditions)
    }
    expected_others = Counter(expected.dropped)
    for variant in VARIANTS:
        name = "-".join(variant)
        outcome = run(world, setup, variant)
        assert (outcome.kept, outcome.cosines, outcome.attached) == (
            expected.kept,
            expected.cosines,
            expected.attached,
        ), name
        others = Counter(outcome.dropped)
        assert not others - expected_others, name
        assert {r for _, r in expected_others - others} <= {"below_threshold"}, name
        assert outcome.outside >= expected.outside, name
        assert not {i for i, _ in outcome.dropped} & outside, name
        for metadata in outcome.returned_metadata:
            assert all(c.holds(metadata) for c in setup.conditions), (variant, metadata)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world=worlds(stored=MIXED_DOC_TYPES), setup=setups(mixed_conditions))
def test_a_value_of_another_type_does_not_match_in_any_variant(world: World, setup: Setup) -> None:
    check_mixed_types(world, setup)


# Ties -----------------------------------------------------------------------------------------
def check_with_ties(world: World, setup: Setup) -> None:
    """Where cosines tie, their order is each store's own (``SimpleVectorStore`` and
    ``InMemoryVectorStore`` order them differently), so the two adapters may keep different
    sections among equals. Each adapter's four variants still agree, and every variant holds
    the filters and the policy's limits."""
    policy = setup.effective
    by_id = world.by_id()
    for framework in ("llama_index", "langchain"):
        variants = [v for v in VARIANTS if v[0] == framework]
        outcomes = [run(world, setup, v) for v in variants]
        first = outcomes[0]
        for variant, outcome in zip(variants, outcomes, strict=True):
            assert (outcome.kept, outcome.attached, outcome.dropped, outcome.outside) == (
                first.kept,
                first.attached,
                first.dropped,
                first.outside,
            ), f"{'-'.join(variant)} differs from {'-'.join(variants[0])}"
            for metadata in outcome.returned_metadata:
                assert all(c.holds(metadata) for c in setup.conditions), (variant, metadata)
        kept = [by_id[i] for i in first.kept]
        assert len(kept) <= policy.top_k
        if policy.min_similarity != 0.0:
            assert all(c >= policy.min_similarity for c in first.cosines)
        assert first.cosines == sorted(first.cosines, reverse=True)
        if policy.max_per_source is not None:
            sources = Counter(s.source for s in kept if s.source is not None)
            assert all(n <= policy.max_per_source for n in sources.values())
        if policy.max_chars is not None:
            assert sum(s.chars for s in kept) <= policy.max_chars
        attached = [by_id[i] for i in first.attached]
        if policy.max_attachment_chars is not None:
            assert sum(a.chars for a in attached) <= policy.max_attachment_chars
        assert not set(first.attached) & set(first.kept)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world=worlds(distinct=False), setup=setups())
def test_with_ties_each_adapter_agrees_with_itself(world: World, setup: Setup) -> None:
    check_with_ties(world, setup)


# Found by these properties --------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS, ids="-".join)
def test_a_stored_bool_is_not_equal_to_a_number_in_any_variant(variant):
    """README, Filters: a value of another type than the stored one does not match, so NE
    and NIN hold there (``thresholded.filters``: ``True != 1``)."""
    world = World(
        (
            Section("a", "d0", 8, MIN_CHARS, None, True, None, None, None),
            Section("b", "d0", 4, MIN_CHARS, None, None, None, None, None),
        ),
        (),
    )
    policy = RetrievalPolicy(min_similarity=0.0, top_k=2, over_fetch=1)
    for condition in (Condition("ne", 1), Condition("nin", [1])):
        setup = Setup(policy, 0, False, 1, condition, None)
        assert run(world, setup, variant).kept == ["a", "b"], condition
