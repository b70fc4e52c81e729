"""Load held by one shared retriever: threads and async tasks against a serial run.

    .venv/bin/python benchmarks/concurrency_load.py [--threads 8] [--per-thread 200] [--tasks 64]

Prints queries, throughput and how many answers differ from the serial run
(the goal is 0), and writes the figures as JSON to stdout's last line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from llama_index_thresholded import Report, ThresholdedRetriever
from llama_index_thresholded.milvus import milvus_store
from llama_index_thresholded.testing import report_fingerprint as fingerprint
from llama_index_thresholded.testing import synthetic_corpus
from thresholded import RetrievalPolicy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--per-thread", type=int, default=200)
    parser.add_argument("--tasks", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = milvus_store(str(Path(tmp) / "load.db"), "load", dim=64)
        corpus = synthetic_corpus(store)
        retriever = ThresholdedRetriever(
            corpus.index,
            RetrievalPolicy(min_similarity=0.5, top_k=4, max_per_source=2, max_chars=2000),
            neighbours=1,
            parent_summaries=False,
            pushdown=False,
        )
        bundles = corpus.questions
        t0 = time.perf_counter()
        serial = {b.query_str: fingerprint(retriever.retrieve_with_report(b)) for b in bundles}
        serial_s = time.perf_counter() - t0

        def worker(offset: int) -> list[tuple]:
            picks = [bundles[(offset + i * 7) % len(bundles)] for i in range(args.per_thread)]
            return [fingerprint(retriever.retrieve_with_report(b)) for b in picks]

        t0 = time.perf_counter()
        with ThreadPoolExecutor(args.threads) as pool:
            threaded = [f for chunk in pool.map(worker, range(args.threads)) for f in chunk]
        threaded_s = time.perf_counter() - t0

        async def tasks() -> list[Report]:
            picks = [bundles[i % len(bundles)] for i in range(args.tasks)]
            return await asyncio.gather(*(retriever.aretrieve_with_report(b) for b in picks))

        t0 = time.perf_counter()
        reports = asyncio.run(tasks())
        async_s = time.perf_counter() - t0
    figures = {
        "questions": len(bundles),
        "serial_qps": len(bundles) / serial_s,
        "threads": args.threads,
        "threaded_queries": len(threaded),
        "threaded_qps": len(threaded) / threaded_s,
        "threaded_mismatches": sum(f != serial[f[0]] for f in threaded),
        "async_tasks": len(reports),
        "async_qps": len(reports) / async_s,
        "async_mismatches": sum(fingerprint(r) != serial[r.query] for r in reports),
    }
    print(
        f"serial {figures['serial_qps']:.0f} q/s; {args.threads} threads x {args.per_thread}: "
        f"{figures['threaded_queries']} queries, {figures['threaded_qps']:.0f} q/s, "
        f"{figures['threaded_mismatches']} differ from serial; {args.tasks} async tasks: "
        f"{figures['async_qps']:.0f} q/s, {figures['async_mismatches']} differ"
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
