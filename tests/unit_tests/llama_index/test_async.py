"""aretrieve and aretrieve_with_report give what their sync twins give."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core.schema import TextNode

from llama_index_thresholded import ThresholdedRetriever

COSINES = [0.1, 0.9, 0.3, 0.75, 0.6, 0.2]


def as_tuples(nodes):
    return [
        (
            n.node.node_id,
            None if n.score is None else round(n.score, 9),
            n.node.metadata.get("attached_role"),
            n.node.metadata.get("attached_to"),
        )
        for n in nodes
    ]


@pytest.fixture
def index(kit):
    sections = [kit.section(f"s{i}", c, axis=1 + i) for i, c in enumerate(COSINES)]
    summary = TextNode(id_="doc#summary", text="Summary.")
    kit.link_chain(sections, summary)
    return kit.build_index(sections, kit.embedding(), docstore_nodes=[summary])


@pytest.fixture
def retriever(kit, index):
    return ThresholdedRetriever(index, kit.policy(min_similarity=0.5, top_k=2), neighbours=1)


async def test_aretrieve_equals_retrieve(kit, retriever):
    sync = retriever.retrieve(kit.QUESTION)
    asynchronous = await retriever.aretrieve(kit.QUESTION)
    assert as_tuples(asynchronous) == as_tuples(sync)
    # kept s1 and s3 with their neighbours and the document's summary
    assert [t[0] for t in as_tuples(sync)] == ["s1", "s3", "doc#summary", "s0", "s2", "s4"]


async def test_aretrieve_with_report_equals_retrieve_with_report(kit, retriever):
    for overrides in ({}, {"min_similarity": 0.0, "top_k": 4}, {"top_k": 1}):
        sync = retriever.retrieve_with_report(kit.QUESTION, **overrides)
        asynchronous = await retriever.aretrieve_with_report(kit.QUESTION, **overrides)
        assert as_tuples(asynchronous.kept) == as_tuples(sync.kept)
        assert as_tuples(asynchronous.attached) == as_tuples(sync.attached)
        assert asynchronous.drop_counts() == sync.drop_counts()
        assert [(d.candidate.id, d.reason) for d in asynchronous.selection.dropped] == [
            (d.candidate.id, d.reason) for d in sync.selection.dropped
        ]
        assert asynchronous.min_similarity == sync.min_similarity


async def test_nothing_matched_async(kit, retriever):
    report = await retriever.aretrieve_with_report(kit.ORTHOGONAL)
    assert report.nothing_matched
    assert await retriever.aretrieve(kit.ORTHOGONAL) == []


async def test_concurrent_calls_with_different_overrides_do_not_interfere(kit, retriever):
    low, high, plain = await asyncio.gather(
        retriever.aretrieve_with_report(kit.QUESTION, min_similarity=0.0, top_k=6),
        retriever.aretrieve_with_report(kit.QUESTION, min_similarity=0.8),
        retriever.aretrieve_with_report(kit.QUESTION),
    )
    assert len(low.kept) == 6
    assert [n.node.node_id for n in high.kept] == ["s1"]
    assert [n.node.node_id for n in plain.kept] == ["s1", "s3"]
    assert retriever.min_similarity == 0.5


async def test_async_on_milvus_lite_with_the_async_client(kit, milvus_uri):
    sections = [kit.section(f"s{i}", c, axis=1 + i) for i, c in enumerate(COSINES)]
    kit.link_chain(sections)
    store = kit.milvus_store(milvus_uri, "c", dim=kit.DIM, use_async_client=True)
    index = kit.build_index(sections, kit.embedding(), store=store)
    retriever = ThresholdedRetriever(index, kit.policy(min_similarity=0.5, top_k=2), neighbours=1)
    sync = retriever.retrieve(kit.QUESTION)
    asynchronous = await retriever.aretrieve(kit.QUESTION)
    assert as_tuples(asynchronous) == as_tuples(sync)
    assert [n.node.node_id for n in sync] == ["s1", "s3", "s0", "s2", "s4"]
    assert [n.score for n in sync[:2]] == pytest.approx([0.9, 0.75], abs=1e-6)
