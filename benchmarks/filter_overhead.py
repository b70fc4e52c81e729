"""Filters with attachments on: what holding every section to the filters costs.

Sections linked 10 to a document, each document with a summary in the docstore, in a
Milvus Lite collection. Three retrievers answer the same questions, calls interleaved,
query embeddings precomputed: a bare ``VectorIndexRetriever`` (no attachments), and a
``ThresholdedRetriever`` with floor 0, neighbours and parent summaries on, without and
with a metadata filter that every section matches (``source != "nowhere"``), so the
same sections and attachments come back. With the filter, the store gets its expression
and the engine checks every section and every attachment against it.

    .venv/bin/python benchmarks/filter_overhead.py
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
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from llama_index_thresholded import ThresholdedRetriever
from llama_index_thresholded.milvus import milvus_store
from thresholded import RetrievalPolicy

DIM = 384
PER_DOCUMENT = 10
KS = (4, 20)
FILTERS = MetadataFilters(
    filters=[MetadataFilter(key="source", value="nowhere", operator=FilterOperator.NE)]
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    rng = np.random.default_rng(2)
    vectors, centres = clustered(rng, args.vectors, DIM, clusters=100, spread=1.0)
    picked = centres[rng.integers(0, len(centres), size=args.queries)]
    queries = bundles(picked / np.linalg.norm(picked, axis=1, keepdims=True))
    sections = nodes_for(vectors, per_document=PER_DOCUMENT, link=True)
    summaries = []
    for doc in range(0, len(sections), PER_DOCUMENT):
        summary = TextNode(
            id_=f"summary{doc // PER_DOCUMENT}",
            text="summary " + "y" * 300,
            metadata={"source": f"sdoc{doc // PER_DOCUMENT}"},
        )
        summaries.append(summary)
        for node in sections[doc : doc + PER_DOCUMENT]:
            node.relationships[NodeRelationship.PARENT] = RelatedNodeInfo(node_id=summary.node_id)
    rows, results = [], []
    with tempfile.TemporaryDirectory() as tmp:
        store = milvus_store(str(Path(tmp) / "filters.db"), "filters", dim=DIM)
        index = index_nodes(store, sections, DIM)
        index.docstore.add_documents(summaries)
        for k in KS:
            policy = RetrievalPolicy(
                min_similarity=0.0, top_k=k, over_fetch=1, max_per_source=None, max_chars=None
            )
            retrievers = {
                "bare": VectorIndexRetriever(index, similarity_top_k=k),
                "attached": ThresholdedRetriever(index, policy, neighbours=1, parent_levels=1),
                "filtered": ThresholdedRetriever(
                    index, policy, neighbours=1, parent_levels=1, filters=FILTERS
                ),
            }
            for q in queries[:3]:  # warm-up
                for retriever in retrievers.values():
                    retriever.retrieve(q)
            times: dict[str, list[float]] = {name: [] for name in retrievers}
            returned: dict[str, list[int]] = {name: [] for name in retrievers}
            for r in range(args.rounds):
                for i, q in enumerate(queries):
                    order = list(retrievers.items())
                    if (i + r) % 2:
                        order.reverse()
                    for name, retriever in order:
                        ms, nodes = timed(lambda retriever=retriever, q=q: retriever.retrieve(q))
                        times[name].append(ms)
                        returned[name].append(len(nodes))
            m = {name: median(values) for name, values in times.items()}
            result = {
                "k": k,
                **{f"{name}_ms": value for name, value in m.items()},
                **{f"{name}_returned": float(np.mean(v)) for name, v in returned.items()},
                "filter_ratio": m["filtered"] / m["attached"],
                "filtered_vs_bare": m["filtered"] / m["bare"],
                "calls_each": len(times["bare"]),
            }
            results.append(result)
            rows.append(
                [
                    k,
                    f"{m['bare']:.2f}",
                    f"{m['attached']:.2f} ({np.mean(returned['attached']):.1f} nodes)",
                    f"{m['filtered']:.2f} ({np.mean(returned['filtered']):.1f} nodes)",
                    f"{result['filter_ratio']:.2f}x",
                    f"{result['filtered_vs_bare']:.2f}x",
                ]
            )
    print(
        f"{engine()}, {args.vectors} sections ({PER_DOCUMENT} per document, linked, with "
        f"summaries), median of {args.queries}x{args.rounds}"
    )
    print(
        table(
            [
                "k",
                "bare ms",
                "thresholded + attachments ms",
                "same + filter ms",
                "filter / no filter",
                "filtered vs bare",
            ],
            rows,
        )
    )
    write_json("filter_overhead", {"engine": engine(), "args": vars(args), "results": results})


if __name__ == "__main__":
    main()
