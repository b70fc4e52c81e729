"""Neighbours and parent summaries, attached after selection and only for kept sections.

They carry no score of their own, so they are fetched only once selection is
done: a filter after them would delete them, and fetching them for dropped
candidates would be wasted work. Each hop is one batch: one docstore lookup,
and one vector-store ``get_nodes`` for what the docstore does not hold.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Sequence
from dataclasses import dataclass

from llama_index.core.schema import BaseNode, NodeRelationship
from llama_index.core.storage.docstore.types import BaseDocumentStore

from llama_index_thresholded.nodes import to_attachment
from thresholded.selection import AttachedRole, Candidate

logger = logging.getLogger(__name__)

# A plan yields the ids it needs for the next hop and receives the nodes found.
Plan = Generator[list[str], dict[str, BaseNode], list[Candidate]]


@dataclass(frozen=True)
class AttachmentSpec:
    """What to attach: the neighbour window on each side, and parent levels to walk."""

    neighbours: int = 1
    parent_levels: int = 0

    def __post_init__(self) -> None:
        if self.neighbours < 0:
            raise ValueError(f"neighbours must be 0 or more, got {self.neighbours}")
        if self.parent_levels < 0:
            raise ValueError(f"parent levels must be 0 or more, got {self.parent_levels}")

    @property
    def enabled(self) -> bool:
        return self.neighbours > 0 or self.parent_levels > 0


def plan_attachments(kept: Sequence[BaseNode], spec: AttachmentSpec, source_key: str) -> Plan:
    """Walk prev/next up to the window, then PARENT up to the levels, one batch per hop."""
    seen = {node.node_id for node in kept}
    found: list[Candidate] = []

    def take(anchor: str, node: BaseNode, role: AttachedRole) -> bool:
        if node.node_id in seen:
            return False
        seen.add(node.node_id)
        found.append(to_attachment(node, anchor=anchor, role=role, source_key=source_key))
        return True

    frontier = [(n.node_id, n, rel) for n in kept for rel in _NEIGHBOUR_RELATIONS]
    for _ in range(spec.neighbours):
        wanted = [(a, rel, _related_id(n, rel)) for a, n, rel in frontier]
        wanted = [(a, rel, i) for a, rel, i in wanted if i is not None and i not in seen]
        if not wanted:
            break
        nodes = yield _unique(i for _, _, i in wanted)
        frontier = [
            (anchor, nodes[i], rel)
            for anchor, rel, i in wanted
            if i in nodes and take(anchor, nodes[i], AttachedRole.NEIGHBOUR)
        ]

    parents = [(n.node_id, n) for n in kept]
    for _ in range(spec.parent_levels):
        wanted_parents = [(a, _related_id(n, NodeRelationship.PARENT)) for a, n in parents]
        wanted_parents = [(a, i) for a, i in wanted_parents if i is not None and i not in seen]
        if not wanted_parents:
            break
        nodes = yield _unique(i for _, i in wanted_parents)
        parents = [
            (anchor, nodes[i])
            for anchor, i in wanted_parents
            if i in nodes and take(anchor, nodes[i], AttachedRole.PARENT_SUMMARY)
        ]
    return found


_NEIGHBOUR_RELATIONS = (NodeRelationship.PREVIOUS, NodeRelationship.NEXT)


def _related_id(node: BaseNode, relation: NodeRelationship) -> str | None:
    info = node.relationships.get(relation)
    if info is None or isinstance(info, list):
        return None
    return info.node_id


def _unique(ids: object) -> list[str]:
    return list(dict.fromkeys(ids))  # type: ignore[arg-type]


class NodeSource:
    """Fetches nodes by id: the docstore first, then the vector store."""

    def __init__(self, docstore: BaseDocumentStore | None, vector_store: object | None) -> None:
        self._docstore = docstore
        self._vector_store = vector_store
        self._store_can_fetch = vector_store is not None and bool(
            getattr(vector_store, "stores_text", False)
        )

    def fetch(self, ids: list[str]) -> dict[str, BaseNode]:
        found: dict[str, BaseNode] = {}
        if self._docstore is not None:
            found.update((n.node_id, n) for n in self._docstore.get_nodes(ids, raise_error=False))
        missing = [i for i in ids if i not in found]
        if missing and self._store_can_fetch:
            try:
                nodes = self._vector_store.get_nodes(node_ids=missing)  # type: ignore[union-attr]
            except NotImplementedError:
                self._store_can_fetch = False
                nodes = []
            found.update((n.node_id, n) for n in nodes)
        self._log_missing(ids, found)
        return found

    async def afetch(self, ids: list[str]) -> dict[str, BaseNode]:
        found: dict[str, BaseNode] = {}
        if self._docstore is not None:
            nodes = await self._docstore.aget_nodes(ids, raise_error=False)
            found.update((n.node_id, n) for n in nodes)
        missing = [i for i in ids if i not in found]
        if missing and self._store_can_fetch:
            try:
                nodes = await self._vector_store.aget_nodes(node_ids=missing)  # type: ignore[union-attr]
            except NotImplementedError:
                self._store_can_fetch = False
                nodes = []
            found.update((n.node_id, n) for n in nodes)
        self._log_missing(ids, found)
        return found

    @staticmethod
    def _log_missing(ids: list[str], found: dict[str, BaseNode]) -> None:
        if len(found) < len(ids):
            logger.debug(
                "%d related node(s) not found in docstore or vector store", len(ids) - len(found)
            )


def run_plan(plan: Plan, source: NodeSource) -> list[Candidate]:
    try:
        ids = next(plan)
        while True:
            ids = plan.send(source.fetch(ids))
    except StopIteration as done:
        return done.value


async def arun_plan(plan: Plan, source: NodeSource) -> list[Candidate]:
    try:
        ids = next(plan)
        while True:
            ids = plan.send(await source.afetch(ids))
    except StopIteration as done:
        return done.value
