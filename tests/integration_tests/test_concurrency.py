"""One retriever shared by many threads and tasks gives each query its own, serial, answer."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import NodeRelationship, QueryBundle, RelatedNodeInfo, TextNode

from llama_index_thresholded import RetrievalReport, ThresholdedRetriever
from llama_index_thresholded.milvus import milvus_store
from thresholded import RetrievalPolicy

pytestmark = pytest.mark.integration

DIM = 64
SECTIONS = 300
QUERIES = 40
THREADS = 8
PER_THREAD = 200
TASKS = 64


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, DIM))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def setup(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[ThresholdedRetriever, list[QueryBundle]]:
    rng = np.random.default_rng(7)
    vectors = _unit(rng, SECTIONS)
    nodes = [
        TextNode(
            id_=f"s{i}",
            text=f"section {i} " + "x" * int(rng.integers(50, 900)),
            metadata={"source": f"doc{i // 10}"},
            embedding=vectors[i].tolist(),
        )
        for i in range(SECTIONS)
    ]
    for i, node in enumerate(nodes):
        if i % 10:
            node.relationships[NodeRelationship.PREVIOUS] = RelatedNodeInfo(node_id=f"s{i - 1}")
        if (i + 1) % 10:
            node.relationships[NodeRelationship.NEXT] = RelatedNodeInfo(node_id=f"s{i + 1}")
    store = milvus_store(str(tmp_path_factory.mktemp("load") / "load.db"), "load", dim=DIM)
    index = VectorStoreIndex(
        nodes,
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=MockEmbedding(embed_dim=DIM),
    )
    policy = RetrievalPolicy(min_similarity=0.5, top_k=4, max_per_source=2, max_chars=2000)
    retriever = ThresholdedRetriever(index, policy, neighbours=1, parent_summaries=False)
    # Queries near a few sections (some match, some do not), with precomputed vectors.
    anchors = _unit(rng, QUERIES) * 0.6 + vectors[rng.integers(0, SECTIONS, QUERIES)] * 0.8
    anchors /= np.linalg.norm(anchors, axis=1, keepdims=True)
    anchors[::5] = _unit(rng, len(anchors[::5]))  # every fifth: a random direction
    bundles = [QueryBundle(f"q{i}", embedding=a.tolist()) for i, a in enumerate(anchors)]
    return retriever, bundles


def _fingerprint(report: RetrievalReport) -> tuple:
    return (
        report.query_str,
        tuple((n.node.node_id, round(n.score or 0.0, 6)) for n in report.kept),
        tuple((n.node.node_id, n.node.metadata["attached_to"]) for n in report.attached),
        tuple(sorted((d.candidate.id, d.reason.value) for d in report.selection.dropped)),
    )


def test_threads_match_a_serial_run(setup: tuple[ThresholdedRetriever, list[QueryBundle]]) -> None:
    retriever, bundles = setup
    serial = {b.query_str: _fingerprint(retriever.retrieve_with_report(b)) for b in bundles}
    assert any(f[1] for f in serial.values()) and any(not f[1] for f in serial.values())

    def worker(offset: int) -> list[tuple]:
        picks = [bundles[(offset + i * 7) % len(bundles)] for i in range(PER_THREAD)]
        return [_fingerprint(retriever.retrieve_with_report(b)) for b in picks]

    with ThreadPoolExecutor(THREADS) as pool:
        results = [f for chunk in pool.map(worker, range(THREADS)) for f in chunk]
    assert len(results) == THREADS * PER_THREAD
    mismatches = [f for f in results if f != serial[f[0]]]
    assert mismatches == []


async def test_async_tasks_match_a_serial_run(
    setup: tuple[ThresholdedRetriever, list[QueryBundle]],
) -> None:
    retriever, bundles = setup
    serial = {b.query_str: _fingerprint(retriever.retrieve_with_report(b)) for b in bundles}
    picks = [bundles[i % len(bundles)] for i in range(TASKS)]
    reports = await asyncio.gather(*(retriever.aretrieve_with_report(b) for b in picks))
    assert [_fingerprint(r) for r in reports] == [serial[b.query_str] for b in picks]
