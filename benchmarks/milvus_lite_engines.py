"""Milvus Lite engine on the demo's and the tests' workload: open, insert, search.

Runs against whichever ``milvus_lite`` is importable. ``run_all.py`` runs it under
both engines (3.2.2 from its own folder, first on the path)::

    .venv/bin/python benchmarks/run_all.py --only milvus_lite_engines   # both engines
"""

from __future__ import annotations

import json
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np
from pymilvus import MilvusClient

QUERIES = 20
DIM = 384


def unit_vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def measure(n: int, folder: Path, rng: np.random.Generator) -> dict[str, float]:
    t0 = time.perf_counter()
    client = MilvusClient(str(folder / f"engine_{n}.db"))
    t1 = time.perf_counter()
    client.create_collection("c", dimension=DIM, metric_type="IP", consistency_level="Strong")
    vectors = unit_vectors(rng, n)
    rows = [{"id": i, "vector": vectors[i].tolist(), "source": f"s{i % 5}"} for i in range(n)]
    client.insert("c", rows)
    t2 = time.perf_counter()
    queries = unit_vectors(rng, QUERIES)
    client.search("c", [queries[0].tolist()], limit=12)  # warm-up
    t3 = time.perf_counter()
    for q in queries:
        client.search("c", [q.tolist()], limit=12, output_fields=["source"])
    t4 = time.perf_counter()
    for q in queries:
        client.search("c", [q.tolist()], limit=12, filter='source == "s1"')
    t5 = time.perf_counter()
    client.close()
    return {
        "vectors": n,
        "open_ms": 1000 * (t1 - t0),
        "create_insert_ms": 1000 * (t2 - t1),
        "search_ms": 1000 * (t4 - t3) / QUERIES,
        "filtered_search_ms": 1000 * (t5 - t4) / QUERIES,
    }


def main() -> None:
    rng = np.random.default_rng(0)
    engine = version("milvus-lite")
    with tempfile.TemporaryDirectory() as tmp:
        results = [measure(n, Path(tmp), rng) for n in (40, 2000)]
    print(f"milvus-lite {engine}")
    print(f"{'vectors':>8} {'open ms':>8} {'insert ms':>10} {'search ms':>10} {'filtered ms':>12}")
    for r in results:
        print(
            f"{r['vectors']:>8} {r['open_ms']:>8.0f} {r['create_insert_ms']:>10.0f} "
            f"{r['search_ms']:>10.1f} {r['filtered_search_ms']:>12.1f}"
        )
    print(json.dumps({"milvus_lite": engine, "results": results}))


if __name__ == "__main__":
    main()
