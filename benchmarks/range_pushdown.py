"""Range-search pushdown vs client-side filtering: latency and results transferred.

100,000 synthetic 384-dimensional unit vectors (clustered), indexed through
LlamaIndex's MilvusVectorStore (FLAT, COSINE: an IP floor is never pushed). Half the
questions are near a cluster (several sections clear the floor), half are random
(nothing does).
The same ThresholdedRetriever runs with ``pushdown=True`` (the floor goes to
Milvus as a range-search radius) and ``pushdown=False`` (Milvus returns the top
``fetch_k`` and the client drops what is below the floor), calls interleaved.
"Transferred" counts the results Milvus returned and the bytes of their
entities; the kept results are checked to be identical.

    .venv/bin/python benchmarks/range_pushdown.py            # milvus-lite 2.5.1
    .venv/bin/python benchmarks/range_pushdown.py --server   # Milvus 2.3.5 server
    .venv/bin/python benchmarks/run_all.py --only range_pushdown   # the three, 3.2.2 included
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
from _bench_common import (
    bundles,
    clustered,
    engine,
    median,
    milvus_server,
    nodes_for,
    table,
    timed,
    write_json,
)
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from pymilvus import MilvusClient

from llama_index_thresholded import ThresholdedRetriever
from llama_index_thresholded.milvus import milvus_store
from thresholded import RetrievalPolicy
from thresholded.scores import Metric

DIM = 384
BATCH = 5000


class Transfer:
    """Counts what MilvusClient.search returns: results and the JSON size of their entities."""

    def __init__(self) -> None:
        self.results = 0
        self.bytes = 0
        self._original = MilvusClient.search
        transfer = self

        def search(client, *args, **kwargs):
            hits = transfer._original(client, *args, **kwargs)
            for hit in hits[0]:
                transfer.results += 1
                transfer.bytes += len(json.dumps(hit.get("entity", {}), default=str))
            return hits

        MilvusClient.search = search  # type: ignore[method-assign]

    def take(self) -> tuple[int, int]:
        counts = (self.results, self.bytes)
        self.results = self.bytes = 0
        return counts


def build(uri: str, n: int, rng: np.random.Generator) -> tuple[VectorStoreIndex, np.ndarray, float]:
    vectors, centres = clustered(rng, n, DIM, clusters=n // 100, spread=1.2)
    store = milvus_store(
        uri, "pushdown", dim=DIM, batch_size=BATCH, overwrite=True, metric=Metric.COSINE
    )
    storage = StorageContext.from_defaults(vector_store=store)
    index = VectorStoreIndex([], storage_context=storage, embed_model=MockEmbedding(embed_dim=DIM))
    start = time.perf_counter()
    for lo in range(0, n, BATCH):
        index.insert_nodes(nodes_for(vectors[lo : lo + BATCH], prefix=f"s{lo}-", text_chars=200))
        print(f"  inserted {min(lo + BATCH, n)}/{n}", end="\r", flush=True)
    elapsed = time.perf_counter() - start
    print(f"  inserted {n} in {elapsed:.0f} s" + " " * 20)
    return index, centres, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--floor", type=float, default=0.35)
    parser.add_argument("--server", action="store_true", help="Milvus 2.3.5 standalone server")
    args = parser.parse_args()

    rng = np.random.default_rng(3)
    transfer = Transfer()
    rows, results = [], []
    with tempfile.TemporaryDirectory() as tmp:
        server = milvus_server(Path(tmp) / "server") if args.server else None
        uri = server.__enter__() if server else str(Path(tmp) / "pushdown.db")
        setup = "Milvus 2.3.5 standalone server" if server else engine()
        try:
            index, centres, insert_s = build(uri, args.vectors, rng)
            near = centres[rng.integers(0, len(centres), size=args.queries // 2)]
            near = near + rng.normal(size=near.shape).astype(np.float32) * (0.5 / np.sqrt(DIM))
            far = rng.normal(size=(args.queries - len(near), DIM)).astype(np.float32)
            raw = np.vstack([near, far])
            queries = bundles(raw / np.linalg.norm(raw, axis=1, keepdims=True))
            kinds = ["related"] * len(near) + ["unrelated"] * len(far)
            for top_k, over_fetch in ((4, 3), (10, 10)):
                policy = RetrievalPolicy(
                    min_similarity=args.floor, top_k=top_k, over_fetch=over_fetch
                )
                on = ThresholdedRetriever(index, policy, neighbours=0)
                off = ThresholdedRetriever(index, policy, neighbours=0, pushdown=False)
                for q in queries[:3]:
                    on.retrieve(q), off.retrieve(q)
                transfer.take()
                stats = {
                    (mode, kind): {"ms": [], "results": [], "bytes": []}
                    for mode in ("pushdown", "client")
                    for kind in ("related", "unrelated")
                }
                mismatches = 0
                for r in range(args.rounds):
                    for i, (q, kind) in enumerate(zip(queries, kinds, strict=True)):
                        order = [("pushdown", on), ("client", off)]
                        if (i + r) % 2:
                            order.reverse()
                        kept = {}
                        for mode, retriever in order:
                            ms, nodes = timed(
                                lambda retriever=retriever, q=q: retriever.retrieve(q)
                            )
                            n_results, n_bytes = transfer.take()
                            entry = stats[(mode, kind)]
                            entry["ms"].append(ms), entry["results"].append(n_results)
                            entry["bytes"].append(n_bytes)
                            kept[mode] = [(n.node.node_id, round(n.score, 6)) for n in nodes]
                        mismatches += kept["pushdown"] != kept["client"]
                for kind in ("related", "unrelated"):
                    on_s, off_s = stats[("pushdown", kind)], stats[("client", kind)]
                    result = {
                        "fetch_k": policy.fetch_k,
                        "questions": kind,
                        "pushdown_ms": median(on_s["ms"]),
                        "client_ms": median(off_s["ms"]),
                        "pushdown_results": float(np.mean(on_s["results"])),
                        "client_results": float(np.mean(off_s["results"])),
                        "pushdown_kb": float(np.mean(on_s["bytes"])) / 1024,
                        "client_kb": float(np.mean(off_s["bytes"])) / 1024,
                        "mismatches": mismatches,
                    }
                    results.append(result)
                    rows.append(
                        [
                            policy.fetch_k,
                            kind,
                            f"{result['pushdown_ms']:.1f} / {result['client_ms']:.1f}",
                            f"{result['pushdown_results']:.1f} / {result['client_results']:.1f}",
                            f"{result['pushdown_kb']:.1f} / {result['client_kb']:.1f}",
                            mismatches,
                        ]
                    )
        finally:
            if server:
                server.__exit__(None, None, None)
    print(
        f"{setup}: {args.vectors} vectors of {DIM} dims (inserted in {insert_s:.0f} s), "
        f"floor {args.floor}, median of {args.queries // 2} questions x {args.rounds} per row"
    )
    print(
        table(
            [
                "fetch_k",
                "questions",
                "ms: pushdown / client-side",
                "results transferred",
                "KB transferred",
                "differing results",
            ],
            rows,
        )
    )
    name = "range_pushdown_server" if args.server else f"range_pushdown_{engine().split()[-1]}"
    write_json(
        name,
        {"setup": setup, "insert_s": insert_s, "args": vars(args), "results": results},
    )


if __name__ == "__main__":
    main()
