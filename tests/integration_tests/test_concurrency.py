"""One retriever shared by many threads and tasks gives each query its own, serial, answer."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest
from llama_index.core.schema import QueryBundle

from llama_index_thresholded import ThresholdedRetriever
from llama_index_thresholded.milvus import milvus_store
from llama_index_thresholded.testing import report_fingerprint as fingerprint
from llama_index_thresholded.testing import synthetic_corpus
from thresholded import RetrievalPolicy

pytestmark = pytest.mark.integration

THREADS = 8
PER_THREAD = 200
TASKS = 64
LOOP_BATCH = 16


@pytest.fixture(scope="module")
def setup(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[ThresholdedRetriever, list[QueryBundle]]:
    store = milvus_store(str(tmp_path_factory.mktemp("load") / "load.db"), "load", dim=64)
    corpus = synthetic_corpus(store)
    policy = RetrievalPolicy(min_similarity=0.5, top_k=4, max_per_source=2, max_chars=2000)
    retriever = ThresholdedRetriever(
        corpus.index, policy, neighbours=1, parent_summaries=False, pushdown=False
    )
    return retriever, corpus.questions


def test_threads_match_a_serial_run(setup: tuple[ThresholdedRetriever, list[QueryBundle]]) -> None:
    retriever, bundles = setup
    serial = {b.query_str: fingerprint(retriever.retrieve_with_report(b)) for b in bundles}
    assert any(f[1] for f in serial.values()) and any(not f[1] for f in serial.values())

    def worker(offset: int) -> list[tuple]:
        picks = [bundles[(offset + i * 7) % len(bundles)] for i in range(PER_THREAD)]
        return [fingerprint(retriever.retrieve_with_report(b)) for b in picks]

    with ThreadPoolExecutor(THREADS) as pool:
        results = [f for chunk in pool.map(worker, range(THREADS)) for f in chunk]
    assert len(results) == THREADS * PER_THREAD
    assert [f for f in results if f != serial[f[0]]] == []


async def test_async_tasks_match_a_serial_run(
    setup: tuple[ThresholdedRetriever, list[QueryBundle]],
) -> None:
    retriever, bundles = setup
    serial = {b.query_str: fingerprint(retriever.retrieve_with_report(b)) for b in bundles}
    picks = [bundles[i % len(bundles)] for i in range(TASKS)]
    reports = await asyncio.gather(*(retriever.aretrieve_with_report(b) for b in picks))
    assert [fingerprint(r) for r in reports] == [serial[b.query_str] for b in picks]


def test_async_queries_from_successive_event_loops_match_a_serial_run(
    setup: tuple[ThresholdedRetriever, list[QueryBundle]], in_new_event_loops
) -> None:
    """Each ``asyncio.run`` closes its loop; the next one's queries still get their answers."""
    retriever, bundles = setup
    serial = {b.query_str: fingerprint(retriever.retrieve_with_report(b)) for b in bundles}
    picks = [bundles[(i * 3) % len(bundles)] for i in range(LOOP_BATCH)]
    batches = in_new_event_loops(lambda: [retriever.aretrieve_with_report(b) for b in picks])
    assert len(batches) == 3
    for reports in batches:
        assert [fingerprint(r) for r in reports] == [serial[b.query_str] for b in picks]


def test_a_plain_milvus_store_answers_from_successive_event_loops(
    tmp_path, in_new_event_loops
) -> None:
    """LlamaIndex's own ``MilvusVectorStore``, not built with ``milvus_store``: its async client
    belonged to the first loop, and every later ``asyncio.run`` failed with "Event loop is
    closed"."""
    from llama_index.vector_stores.milvus import MilvusVectorStore

    store = MilvusVectorStore(uri=str(tmp_path / "plain.db"), collection_name="plain", dim=64)
    corpus = synthetic_corpus(store, sections=60, questions=6)
    policy = RetrievalPolicy(min_similarity=0.5, top_k=4, max_per_source=2, max_chars=2000)
    retriever = ThresholdedRetriever(corpus.index, policy, neighbours=1, parent_summaries=False)
    serial = [fingerprint(retriever.retrieve_with_report(b)) for b in corpus.questions]
    batches = in_new_event_loops(
        lambda: [retriever.aretrieve_with_report(b) for b in corpus.questions]
    )
    assert [[fingerprint(r) for r in reports] for reports in batches] == [serial] * 3
