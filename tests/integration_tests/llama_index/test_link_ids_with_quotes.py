"""Links are data: an id a section links to is read as an id, whatever its quotes (Milvus Lite).

A section's PREVIOUS/NEXT/PARENT ids come from whoever wrote the section. Fetched by id on
Milvus, they must stay literals: an id with a quote (``O'Brien``, or ``x'] and id in ['``)
neither breaks the hop's one query nor changes which rows it reads. Were it to, the other
kept sections' neighbours would be missing from the store's answer and would be read from
the docstore instead, whose copy may have been left as it was when the section was moved
out of the filters.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

from llama_index_thresholded import ThresholdedRetriever
from llama_index_thresholded.milvus import milvus_store
from thresholded import RetrievalPolicy

pytestmark = pytest.mark.integration

QUESTION = [1.0, 0.0, 0.0, 0.0]
FAR = [0.0, 1.0, 0.0, 0.0]
TENANT_A = MetadataFilters(filters=[MetadataFilter(key="tenant", value="a")])
POLICY = RetrievalPolicy(min_similarity=0.5, top_k=10, max_per_source=None, max_chars=None)
MOVED = "Section a1, now tenant b's."
LINKS = ["O'Brien", "x'] and id in ['", "back\\slash'", 'say "hi"', "x\ny", "a1\x00"]


class _Question(BaseEmbedding):
    def _get_query_embedding(self, query: str) -> list[float]:
        return list(QUESTION)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return list(QUESTION)

    def _get_text_embedding(self, text: str) -> list[float]:
        return list(QUESTION)


def _section(node_id: str, text: str, tenant: str, vector: list[float], **links: str) -> TextNode:
    node = TextNode(id_=node_id, text=text, metadata={"tenant": tenant}, embedding=vector)
    for relation, target in links.items():
        node.relationships[NodeRelationship[relation]] = RelatedNodeInfo(node_id=target)
    return node


def _retriever(path: Path, link: str) -> ThresholdedRetriever:
    """``a0`` links to ``a1``, which the store now holds as tenant b's while the docstore
    keeps its old copy (tenant a); ``e0``, kept in the same call, links to ``link``."""
    store = milvus_store(str(path / "links.db"), "sections", dim=4)
    nodes = [
        _section("a0", "Section a0.", "a", QUESTION, NEXT="a1"),
        _section("e0", "Section e0.", "a", QUESTION, NEXT=link),
        _section("a1", "Section a1, as it was.", "a", FAR),
    ]
    storage = StorageContext.from_defaults(vector_store=store)
    index = VectorStoreIndex(
        nodes, storage_context=storage, embed_model=_Question(), store_nodes_override=True
    )
    store.delete_nodes(node_ids=["a1"])
    store.add([_section("a1", MOVED, "b", FAR)])
    return ThresholdedRetriever(
        index, POLICY, neighbours=1, parent_summaries=False, filters=TENANT_A
    )


@pytest.mark.parametrize("link", LINKS)
def test_a_quoted_link_does_not_bring_back_a_moved_sections_old_copy(
    tmp_path: Path, link: str
) -> None:
    report = _retriever(tmp_path, link).retrieve_with_report("q")
    assert sorted(n.node.node_id for n in report.kept) == ["a0", "e0"]
    assert list(report.attached) == []


@pytest.mark.parametrize("link", LINKS[:2])
def test_nor_in_async_calls(tmp_path: Path, link: str) -> None:
    report = asyncio.run(_retriever(tmp_path, link).aretrieve_with_report("q"))
    assert sorted(n.node.node_id for n in report.kept) == ["a0", "e0"]
    assert list(report.attached) == []


def test_a_section_whose_id_has_quotes_is_attached(tmp_path: Path) -> None:
    store = milvus_store(str(tmp_path / "quoted.db"), "sections", dim=4)
    quoted = 'say "hi" or not'  # Milvus Lite cannot store an id with a '
    nodes = [
        _section("a0", "Section a0.", "a", QUESTION, NEXT=quoted),
        _section(quoted, "Section O'Brien.", "a", FAR),
    ]
    storage = StorageContext.from_defaults(vector_store=store)
    index = VectorStoreIndex(nodes, storage_context=storage, embed_model=_Question())
    retriever = ThresholdedRetriever(
        index, POLICY, neighbours=1, parent_summaries=False, filters=TENANT_A
    )
    for report in (
        retriever.retrieve_with_report("q"),
        asyncio.run(retriever.aretrieve_with_report("q")),
    ):
        assert [n.node.node_id for n in report.attached] == [quoted]
