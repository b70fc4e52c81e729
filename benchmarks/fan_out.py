"""Fan-out: one question over 21 collections vs over one, with MultiCollectionRetriever.

Every collection holds the same number of synthetic unit vectors; the question
carries its embedding. The 21 searches run concurrently (a thread pool; the
async client for a Milvus server in async calls), so a call should take about
as long as the slowest search, not 21 of them: the goal is at most 2x the
latency of one collection. Three set-ups:

    .venv/bin/python benchmarks/fan_out.py                 # Milvus Lite, 21 collections, 1 file
    .venv/bin/python benchmarks/fan_out.py --lite-files    # Milvus Lite, one file per collection
    .venv/bin/python benchmarks/fan_out.py --server        # Milvus 2.3.5 standalone (sync + async)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from _bench_common import (
    CpuMeter,
    bundles,
    clustered,
    engine,
    index_nodes,
    median,
    milvus_server,
    nodes_for,
    table,
    timed,
    write_json,
)

from llama_index_thresholded import MultiCollectionRetriever, ThresholdedRetriever
from llama_index_thresholded.milvus import milvus_store
from llama_index_thresholded.pushdown import PUSHDOWN_EPSILON
from thresholded import RetrievalPolicy
from thresholded.scores import Metric

DIM = 384


def build(uri_of, names, vectors_per_collection, rng, **store_kwargs):
    indexes = []
    start = time.perf_counter()
    for i, name in enumerate(names):
        vectors, _ = clustered(rng, vectors_per_collection, DIM, clusters=20, spread=1.2)
        store = milvus_store(uri_of(i), name, dim=DIM, metric=Metric.COSINE, **store_kwargs)
        indexes.append(index_nodes(store, nodes_for(vectors, prefix=f"{name}-"), DIM))
    print(f"indexed {len(names)} x {vectors_per_collection} in {time.perf_counter() - start:.0f} s")
    return indexes


def measure(retriever, queries, rounds):
    for q in queries[:3]:
        retriever.retrieve(q)
    return [timed(lambda q=q: retriever.retrieve(q))[0] for _ in range(rounds) for q in queries]


def ameasure(retrievers, queries, rounds):
    """Async calls of each retriever, all in one event loop (pymilvus' async client is bound
    to the loop it first ran in)."""

    async def run():
        out = []
        for retriever in retrievers:
            for q in queries[:3]:
                await retriever.aretrieve(q)
            times = []
            for _ in range(rounds):
                for q in queries:
                    start = time.perf_counter()
                    await retriever.aretrieve(q)
                    times.append(1000 * (time.perf_counter() - start))
            out.append(times)
        return out

    return asyncio.run(run())


def sequential(indexes, policy, queries, rounds):
    """The same searches one after another: one ThresholdedRetriever per collection."""
    retrievers = [ThresholdedRetriever(index, policy, neighbours=0) for index in indexes]
    for q in queries[:3]:
        for r in retrievers:
            r.retrieve(q)
    times = []
    for _ in range(rounds):
        for q in queries:
            start = time.perf_counter()
            for r in retrievers:
                r.retrieve(q)
            times.append(1000 * (time.perf_counter() - start))
    return times


def raw(indexes, policy, queries, rounds):
    """Bare pymilvus searches (same limit, fields and radius as the retriever sends): one
    collection, and all collections in parallel threads: what the engine itself allows."""
    pool = ThreadPoolExecutor(max_workers=len(indexes))
    stores = [index.vector_store for index in indexes]
    params = {"params": {"radius": policy.min_similarity - PUSHDOWN_EPSILON}}

    def search(store, q):
        return store.client.search(
            store.collection_name,
            [q.embedding],
            limit=policy.fetch_k,
            output_fields=["*"],
            search_params=params,
            anns_field=store.embedding_field,
        )

    for q in queries[:3]:
        search(stores[0], q)
        list(pool.map(lambda s, q=q: search(s, q), stores))
    one, every = [], []
    for _ in range(rounds):
        for q in queries:
            one.append(timed(lambda q=q: search(stores[0], q))[0])
            every.append(timed(lambda q=q: list(pool.map(lambda s: search(s, q), stores)))[0])
    pool.shutdown()
    return one, every


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collections", type=int, default=21)
    parser.add_argument("--vectors", type=int, default=2000, help="per collection")
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--lite-files", action="store_true", help="one Lite file per collection")
    where.add_argument("--server", action="store_true", help="Milvus 2.3.5 standalone server")
    args = parser.parse_args()

    rng = np.random.default_rng(2)
    names = [f"c{i:02d}" for i in range(args.collections)]
    queries = bundles(clustered(rng, args.queries, DIM, clusters=5, spread=1.0)[0])
    policy = RetrievalPolicy(min_similarity=0.35, top_k=4, over_fetch=3)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        if args.server:
            setup = "Milvus 2.3.5 standalone server"
            server = milvus_server(Path(tmp) / "server")
            uri = server.__enter__()
            indexes = build(lambda i: uri, names, args.vectors, rng)
        else:
            server = None
            if args.lite_files:
                setup = f"{engine()}, one file per collection"
                indexes = build(lambda i: str(Path(tmp) / f"c{i}.db"), names, args.vectors, rng)
            else:
                setup = f"{engine()}, all collections in one file"
                indexes = build(lambda i: str(Path(tmp) / "all.db"), names, args.vectors, rng)
        try:
            single = ThresholdedRetriever(indexes[0], policy, neighbours=0)
            one = MultiCollectionRetriever(indexes[:1], policy, neighbours=0)
            fan = MultiCollectionRetriever(indexes, policy, neighbours=0)
            cpu = {}
            times = {"thresholded_one": measure(single, queries, args.rounds)}
            with CpuMeter() as cpu["one"]:
                times["multi_one"] = measure(one, queries, args.rounds)
            with CpuMeter() as cpu["all"]:
                times["multi_all"] = measure(fan, queries, args.rounds)
            times["sequential_all"] = sequential(indexes, policy, queries, args.rounds)
            times["pymilvus_one"], times["pymilvus_all"] = raw(
                indexes, policy, queries, args.rounds
            )
            report = fan.retrieve_with_report(queries[0])
            statuses = [s.status for s in report.collections]
            if args.server:
                one_async = MultiCollectionRetriever(indexes[:1], policy, neighbours=0)
                fan_async = MultiCollectionRetriever(indexes, policy, neighbours=0)
                times["multi_one_async"], times["multi_all_async"] = ameasure(
                    [one_async, fan_async], queries, args.rounds
                )
            fan.close()
            one.close()
        finally:
            if server is not None:
                server.__exit__(None, None, None)
    m = {k: median(v) for k, v in times.items()}
    calls = len(times["multi_all"]) + 3  # measure() warms up with three calls
    cores = os.cpu_count() or 1
    cpu_ms = {k: 1000 * meter.seconds / calls for k, meter in cpu.items()}
    results = {
        "setup": setup,
        "collections": args.collections,
        "vectors_per_collection": args.vectors,
        "median_ms": m,
        "ratio_sync": m["multi_all"] / m["multi_one"],
        "statuses_ok": statuses.count("ok"),
        "cpu_ms_per_call": cpu_ms,
        "cores": cores,
        # However well the searches overlap, a call cannot end before its CPU work is done
        # on every core: this is the lowest ratio the machine allows.
        "ratio_cpu_bound": max(1.0, cpu_ms["all"] / cores / m["multi_one"]),
    }
    rows = [
        ["ThresholdedRetriever, 1 collection", f"{m['thresholded_one']:.2f}", ""],
        ["MultiCollectionRetriever, 1 collection", f"{m['multi_one']:.2f}", "1.00x"],
        [
            f"MultiCollectionRetriever, {args.collections} collections",
            f"{m['multi_all']:.2f}",
            f"{results['ratio_sync']:.2f}x",
        ],
        [
            f"{args.collections} ThresholdedRetrievers one after another",
            f"{m['sequential_all']:.2f}",
            f"{m['sequential_all'] / m['multi_one']:.2f}x",
        ],
    ]
    results["ratio_pymilvus"] = m["pymilvus_all"] / m["pymilvus_one"]
    rows += [
        ["bare pymilvus search, 1 collection", f"{m['pymilvus_one']:.2f}", "1.00x"],
        [
            f"bare pymilvus search, {args.collections} collections in threads",
            f"{m['pymilvus_all']:.2f}",
            f"{results['ratio_pymilvus']:.2f}x",
        ],
    ]
    if args.server:
        results["ratio_async"] = m["multi_all_async"] / m["multi_one_async"]
        rows += [
            ["async, 1 collection", f"{m['multi_one_async']:.2f}", "1.00x"],
            [
                f"async, {args.collections} collections",
                f"{m['multi_all_async']:.2f}",
                f"{results['ratio_async']:.2f}x",
            ],
        ]
    print(f"{setup}; {args.vectors} vectors of {DIM} dims per collection")
    print(
        f"CPU per call (client + engine processes): {cpu_ms['one']:.1f} ms for one collection, "
        f"{cpu_ms['all']:.1f} ms for {args.collections}; on {cores} cores the {args.collections}"
        f" cannot take less than {results['ratio_cpu_bound']:.1f}x one collection's latency"
    )
    print(table(["retriever", "median ms", "vs one collection"], rows))
    name = (
        "fan_out_server" if args.server else "fan_out_lite_files" if args.lite_files else "fan_out"
    )
    write_json(name, results)


if __name__ == "__main__":
    main()
