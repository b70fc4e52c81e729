"""Wrapper overhead: ThresholdedRetriever vs a bare VectorIndexRetriever, same search.

Both retrieve k sections from the same Milvus Lite collection, in the same run,
calls interleaved, with the query embedding precomputed (no model is called).
The thresholded retriever runs with floor 0 (nothing dropped, nothing pushed
down), no cap, no budget and no attachments, so the search is identical and the
difference is the wrapper: score conversion, selection, marked copies, events.
That column skips the check of the stored vectors' norms (the wrapper as it was
before the check); the next one is the default, which checks every candidate's
stored norm, the vectors returned with the search as an output field. A further
column shows the everyday use: a floor (on this IP collection, cut on the client after
the stored norms are checked: an IP floor is never pushed down). A last
compares both with a metadata filter (every section matches it, so the same sections
come back): the bare retriever with LlamaIndex's expression, the thresholded one with
the core's, plus its check of every returned section against the filter.

    .venv/bin/python benchmarks/wrapper_overhead.py
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from _bench_common import (
    bundles,
    clustered,
    engine,
    index_nodes,
    median,
    nodes_for,
    table,
    timed,
    write_json,
)
from llama_index.core.indices.vector_store.retrievers.retriever import VectorIndexRetriever
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from llama_index_thresholded import ThresholdedRetriever
from llama_index_thresholded.milvus import milvus_store
from thresholded import RetrievalPolicy
from thresholded.scores import Metric

DIM = 384
KS = (4, 20, 100)
FILTERS = MetadataFilters(
    filters=[MetadataFilter(key="source", value="nowhere", operator=FilterOperator.NE)]
)


def without_norm_check(retriever: ThresholdedRetriever) -> ThresholdedRetriever:
    """The wrapper as it was before stored norms were checked: its scores (inner products of
    the unit vectors below, so cosines) read as COSINE, which has no stored norm to check."""
    retriever._collection.backend._metric = Metric.COSINE
    return retriever


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--floor", type=float, default=0.35)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    vectors, centres = clustered(rng, args.vectors, DIM, clusters=100, spread=1.0)
    picked = centres[rng.integers(0, len(centres), size=args.queries)]
    noisy = picked + rng.normal(size=picked.shape).astype(np.float32) * (0.5 / np.sqrt(DIM))
    queries = bundles(noisy / np.linalg.norm(noisy, axis=1, keepdims=True))
    rows, results = [], []
    with tempfile.TemporaryDirectory() as tmp:
        store = milvus_store(str(Path(tmp) / "overhead.db"), "overhead", dim=DIM)
        index = index_nodes(store, nodes_for(vectors), DIM)
        for k in KS:
            bare = VectorIndexRetriever(index, similarity_top_k=k)
            policy = RetrievalPolicy(
                min_similarity=0.0, top_k=k, over_fetch=1, max_per_source=None, max_chars=None
            )
            wrapped = without_norm_check(
                ThresholdedRetriever(index, policy, neighbours=0, parent_summaries=False)
            )
            checked = ThresholdedRetriever(index, policy, neighbours=0, parent_summaries=False)
            floored = ThresholdedRetriever(
                index,
                policy.with_overrides(min_similarity=args.floor),
                neighbours=0,
                parent_summaries=False,
            )
            bare_filtered = VectorIndexRetriever(index, similarity_top_k=k, filters=FILTERS)
            filtered = ThresholdedRetriever(
                index, policy, neighbours=0, parent_summaries=False, filters=FILTERS
            )
            retrievers = {
                "bare": bare,
                "wrapped": wrapped,
                "checked": checked,
                "floored": floored,
                "bare_filtered": bare_filtered,
                "filtered": filtered,
            }
            for q in queries[:3]:  # warm-up
                for retriever in retrievers.values():
                    retriever.retrieve(q)
            times: dict[str, list[float]] = {name: [] for name in retrievers}
            kept: dict[str, list[int]] = {name: [] for name in retrievers}
            for r in range(args.rounds):
                for i, q in enumerate(queries):
                    order = list(retrievers.items())
                    if (i + r) % 2:
                        order.reverse()
                    for name, retriever in order:
                        ms, nodes = timed(lambda retriever=retriever, q=q: retriever.retrieve(q))
                        times[name].append(ms)
                        kept[name].append(len(nodes))
            m = {name: median(values) for name, values in times.items()}
            result = {
                "k": k,
                "bare_ms": m["bare"],
                "thresholded_ms": m["wrapped"],
                "ratio": m["wrapped"] / m["bare"],
                "overhead_ms": m["wrapped"] - m["bare"],
                "norms_checked_ms": m["checked"],
                "norms_checked_ratio": m["checked"] / m["bare"],
                "floored_ms": m["floored"],
                "floored_ratio": m["floored"] / m["bare"],
                "floored_mean_kept": float(np.mean(kept["floored"])),
                "bare_filtered_ms": m["bare_filtered"],
                "filtered_ms": m["filtered"],
                "filtered_ratio": m["filtered"] / m["bare_filtered"],
                "calls_each": len(times["bare"]),
            }
            results.append(result)
            rows.append(
                [
                    k,
                    f"{m['bare']:.2f}",
                    f"{m['wrapped']:.2f}",
                    f"{result['ratio']:.2f}x",
                    f"{result['overhead_ms']:+.2f}",
                    f"{m['checked']:.2f} ({result['norms_checked_ratio']:.2f}x)",
                    f"{m['floored']:.2f} ({result['floored_ratio']:.2f}x, "
                    f"{result['floored_mean_kept']:.1f} kept)",
                    f"{m['bare_filtered']:.2f} / {m['filtered']:.2f} "
                    f"({result['filtered_ratio']:.2f}x)",
                ]
            )
    print(
        f"{engine()}, {args.vectors} vectors of {DIM} dims, median of {args.queries}x{args.rounds}"
    )
    print(
        table(
            [
                "k",
                "bare ms",
                "thresholded ms (floor 0, norms not checked)",
                "ratio",
                "overhead ms",
                "floor 0, stored norms checked",
                f"thresholded ms, floor {args.floor}",
                "filtered: bare / thresholded ms (floor 0)",
            ],
            rows,
        )
    )
    write_json("wrapper_overhead", {"engine": engine(), "args": vars(args), "results": results})


if __name__ == "__main__":
    main()
