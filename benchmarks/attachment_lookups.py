"""Neighbour and parent lookups: attaching for kept sections only vs for every candidate.

The thresholded retriever fetches ``top_k * over_fetch`` candidates, keeps what
clears the floor (capped, budgeted, top_k), and only then looks up prev/next
neighbours and parent summaries, for the kept sections. The alternative attaches
before filtering (e.g. a neighbour postprocessor straight after the search): a
lookup for every candidate. Both are measured here on the same searches of a
Milvus Lite collection (sections linked 10 to a document, each document with a
summary in the docstore): node ids looked up, lookup batches, and lookup time.

    .venv/bin/python benchmarks/attachment_lookups.py
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

from llama_index_thresholded import ThresholdedRetriever
from llama_index_thresholded.backend import index_collection
from llama_index_thresholded.milvus import milvus_store
from thresholded import RetrievalPolicy
from thresholded.attachments import AttachmentSpec, walk
from thresholded.engine import Fetch, drive
from thresholded.selection import Candidate

DIM = 384
PER_DOCUMENT = 10


class Lookups:
    """Attachment walks of the engine over one index, counting the ids and batches fetched."""

    def __init__(self, index, spec: AttachmentSpec) -> None:
        self.collection = index_collection(index, None, attachments=spec)
        self.ids = 0
        self.batches = 0

    def attach(self, nodes) -> list:
        backend = self.collection.backend
        kept = [Candidate(n, *backend.identify(n, "source")) for n in nodes]
        return drive(
            walk(self.collection, kept, "source", fetch=self._fetch, within=lambda item: True)
        )

    def _fetch(self, collection, ids):
        self.ids += len(ids)
        self.batches += 1
        return Fetch(collection, ids)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--floor", type=float, default=0.35)
    args = parser.parse_args()

    rng = np.random.default_rng(1)
    vectors, centres = clustered(rng, args.vectors, DIM, clusters=100, spread=1.2)
    # Half the questions are about something in the collection, half about nothing.
    related = centres[rng.integers(0, len(centres), size=args.queries // 2)]
    unrelated = rng.normal(size=(args.queries - len(related), DIM)).astype(np.float32)
    raw = np.vstack([related, unrelated])
    noisy = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    queries = bundles(noisy)
    sections = nodes_for(vectors, per_document=PER_DOCUMENT, link=True)
    summaries = []
    for doc in range(0, len(sections), PER_DOCUMENT):
        summary = TextNode(id_=f"summary{doc // PER_DOCUMENT}", text="summary " + "y" * 300)
        summaries.append(summary)
        for node in sections[doc : doc + PER_DOCUMENT]:
            node.relationships[NodeRelationship.PARENT] = RelatedNodeInfo(node_id=summary.node_id)

    rows, results = [], []
    with tempfile.TemporaryDirectory() as tmp:
        store = milvus_store(str(Path(tmp) / "attach.db"), "attach", dim=DIM)
        index = index_nodes(store, sections, DIM)
        index.docstore.add_documents(summaries)
        spec = AttachmentSpec(neighbours=1, parent_levels=1)
        for top_k, over_fetch in ((4, 3), (10, 5)):
            policy = RetrievalPolicy(
                min_similarity=args.floor, top_k=top_k, over_fetch=over_fetch, max_chars=None
            )
            retriever = ThresholdedRetriever(index, policy, neighbours=0, parent_summaries=False)
            kept_source, every_source = Lookups(index, spec), Lookups(index, spec)
            search = VectorIndexRetriever(index, similarity_top_k=policy.fetch_k)
            retriever.retrieve(queries[0]), search.retrieve(queries[0])  # warm-up
            kept_ms, every_ms, kept_counts, candidates = [], [], [], []
            for q in queries:
                report = retriever.retrieve_with_report(q)
                kept_counts.append(len(report.kept))
                # the lookups the retriever makes for what it kept, timed apart from its search
                kept = [n.node for n in report.kept]
                ms, _ = timed(lambda kept=kept, src=kept_source: src.attach(kept))
                kept_ms.append(ms if kept else 0.0)
                found = [n.node for n in search.retrieve(q)]
                candidates.append(len(found))
                ms, _ = timed(lambda found=found, src=every_source: src.attach(found))
                every_ms.append(ms)
            n = len(queries)
            result = {
                "top_k": top_k,
                "fetch_k": policy.fetch_k,
                "mean_candidates": float(np.mean(candidates)),
                "mean_kept": float(np.mean(kept_counts)),
                "ids_kept_only": kept_source.ids / n,
                "ids_every_candidate": every_source.ids / n,
                "batches_kept_only": kept_source.batches / n,
                "batches_every_candidate": every_source.batches / n,
                "lookup_ms_kept_only": median(kept_ms),
                "lookup_ms_every_candidate": median(every_ms),
                "mean_lookup_ms_kept_only": float(np.mean(kept_ms)),
                "mean_lookup_ms_every_candidate": float(np.mean(every_ms)),
            }
            results.append(result)
            rows.append(
                [
                    f"{top_k} of {policy.fetch_k}",
                    f"{result['mean_kept']:.1f}",
                    f"{result['ids_kept_only']:.1f} / {result['ids_every_candidate']:.1f}",
                    f"{result['batches_kept_only']:.1f} / {result['batches_every_candidate']:.1f}",
                    f"{result['mean_lookup_ms_kept_only']:.2f} / "
                    f"{result['mean_lookup_ms_every_candidate']:.2f}",
                ]
            )
    print(
        f"{engine()}, {args.vectors} sections ({PER_DOCUMENT} per document, linked, with "
        f"summaries), floor {args.floor}, {args.queries} questions (half unrelated)"
    )
    print(
        table(
            [
                "top_k of fetched",
                "kept per question",
                "ids looked up: kept only / every candidate",
                "lookup batches",
                "lookup ms (mean)",
            ],
            rows,
        )
    )
    write_json("attachment_lookups", {"engine": engine(), "args": vars(args), "results": results})


if __name__ == "__main__":
    main()
