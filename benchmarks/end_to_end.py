"""End-to-end query latency per engine against the physical floor, at 100,000 vectors.

One query = embed the question (MiniLM) + search + threshold + attach neighbours + rerank
(LlamaIndex's ``SentenceTransformerRerank`` on the packaged MiniLM weights, top_n 4; **its
head is untrained**, so it stands for a reranker's cost only). The collection holds the 160
English XQuAD passages (MiniLM vectors, linked prev/next) and 99,840 synthetic filler
sections (clustered unit vectors carrying real passage text), 100,000 in all.

The floor is the same pipeline with the vector store replaced by numpy: a brute-force
matrix product over the same float32 vectors, the same ``select`` of the core, neighbours
from a dict, the same reranker. Engines:

* Milvus Lite 2.5.1 (the embedded default, this environment);
* Milvus Lite 3.2.2 (its own packages, installed by this script under ``.bench/``, run in a
  child process with them first on ``PYTHONPATH``);
* Milvus 2.3.5 standalone (``--server``; the ``milvus`` PyPI package).

    .venv/bin/python benchmarks/end_to_end.py                  # all three engines
    .venv/bin/python benchmarks/end_to_end.py --engine lite    # only this environment's Lite
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
from _bench_common import (
    ROOT,
    clustered,
    engine,
    lite_322_environment,
    median,
    milvus_server,
    table,
    write_json,
)
from hybrid import passage_nodes, read_jsonl
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, TextNode
from rerank_pipeline import UNTRAINED, reranker
from tqdm import tqdm

from llama_index_thresholded import ThresholdedRetriever
from llama_index_thresholded.embeddings import load_embed_model
from llama_index_thresholded.milvus import milvus_store
from llama_index_thresholded.nodes import source_of, text_length
from thresholded.policy import RetrievalPolicy
from thresholded.selection import Candidate, select

DATA = ROOT / "data"
PROFILE = DATA / "profiles" / "xquad-minilm-en.json"
DIM = 384
TOTAL = 100_000
BATCH = 5_000


def corpus(embed_model: Any, total: int, seed: int = 0) -> list[TextNode]:
    """The English passages with their MiniLM vectors, then fillers up to ``total``."""
    passages = passage_nodes(read_jsonl(DATA / "xquad-bench" / "corpus.jsonl"))
    vectors = embed_model.get_text_embedding_batch([p.get_content("embed") for p in passages])
    for node, vector in zip(passages, vectors, strict=True):
        node.embedding = vector
    rng = np.random.default_rng(seed)
    fillers, _ = clustered(rng, total - len(passages), DIM, clusters=200, spread=1.2)
    texts = [p.text for p in passages]
    return passages + [
        TextNode(
            id_=f"filler-{i}",
            text=texts[i % len(texts)],
            metadata={"source": f"filler-doc-{i // 10}"},
            embedding=vector.tolist(),
        )
        for i, vector in enumerate(fillers)
    ]


def questions(limit: int) -> list[dict[str, Any]]:
    xquad = read_jsonl(DATA / "xquad-bench" / "queries_dev.jsonl")
    clinc = read_jsonl(DATA / "clinc-oos" / "queries_dev.jsonl")
    answerable = [q for q in xquad if q["lang"] == "en" and q["gold_group"]]
    unrelated = [q for q in clinc if q["lang"] == "en"]
    step_a, step_u = max(1, len(answerable) // limit), max(1, len(unrelated) // limit)
    return answerable[::step_a][:limit] + unrelated[::step_u][:limit]


class NumpyFloor:
    """The pipeline with numpy in place of the vector store: what the work costs at least."""

    def __init__(self, nodes: list[TextNode], policy: RetrievalPolicy) -> None:
        self.matrix = np.asarray([n.embedding for n in nodes], dtype=np.float32)
        self.nodes = nodes
        self.by_id = {n.node_id: n for n in nodes}
        self.policy = policy

    def retrieve(self, vector: list[float]) -> list[NodeWithScore]:
        scores = self.matrix @ np.asarray(vector, dtype=np.float32)
        k = self.policy.fetch_k
        top = np.argpartition(-scores, k)[:k]
        top = top[np.argsort(-scores[top])]
        key = self.policy.source_key
        candidates = [
            Candidate(
                self.nodes[i],
                self.nodes[i].node_id,
                float(scores[i]),
                source=source_of(self.nodes[i], key),
                chars=text_length(self.nodes[i]),
            )
            for i in top
        ]
        selection = select(candidates, self.policy, self.policy.min_similarity)
        kept = [NodeWithScore(node=c.item, score=c.score) for c in selection.kept]
        seen = {c.id for c in selection.kept}
        for c in selection.kept:
            for rel in (NodeRelationship.PREVIOUS, NodeRelationship.NEXT):
                info = c.item.relationships.get(rel)
                if info is not None and info.node_id not in seen:
                    seen.add(info.node_id)
                    kept.append(NodeWithScore(node=self.by_id[info.node_id], score=None))
        return kept


def measure(
    name: str,
    retrieve: Any,
    embed_model: Any,
    rerank: Any,
    asked: list[dict[str, Any]],
) -> dict[str, Any]:
    """Per-stage latencies of each question, and the ids handed to the reranker."""
    stages: dict[str, list[float]] = {"embed": [], "retrieve": [], "rerank": [], "total": []}
    handed: list[list[str]] = []
    for q in tqdm(asked, desc=name, leave=False):
        t0 = time.perf_counter()
        vector = embed_model.get_query_embedding(q["question"])
        t1 = time.perf_counter()
        nodes = retrieve(QueryBundle(query_str=q["question"], embedding=vector))
        t2 = time.perf_counter()
        if nodes:
            rerank.postprocess_nodes(nodes, QueryBundle(query_str=q["question"]))
        t3 = time.perf_counter()
        for stage, ms in zip(stages, (t1 - t0, t2 - t1, t3 - t2, t3 - t0), strict=True):
            stages[stage].append(1000 * ms)
        handed.append([n.node.node_id for n in nodes])
    return {
        "engine": name,
        "questions": len(asked),
        **{f"{stage}_ms_median": median(values) for stage, values in stages.items()},
        "handed": handed,
    }


def run_engine(kind: str, total: int, limit: int, uri: str | None = None) -> list[dict[str, Any]]:
    """The floor and one engine, measured in this process on the same questions."""
    embed_model = load_embed_model("minilm")
    nodes = corpus(embed_model, total)
    policy = RetrievalPolicy.from_profile(PROFILE, collection="xquad-bench")
    asked = questions(limit)
    rerank = reranker()
    floor = NumpyFloor(nodes, policy)
    with tempfile.TemporaryDirectory() as tmp:
        store = milvus_store(
            uri or str(Path(tmp) / "e2e.db"), "e2e", dim=DIM, batch_size=BATCH, overwrite=True
        )
        start = time.perf_counter()
        index = VectorStoreIndex(
            [],
            storage_context=StorageContext.from_defaults(vector_store=store),
            embed_model=embed_model,
        )
        for lo in tqdm(range(0, len(nodes), BATCH), desc="insert", leave=False):
            index.insert_nodes(nodes[lo : lo + BATCH])
        insert_s = time.perf_counter() - start
        retriever = ThresholdedRetriever(
            index,
            policy,  # the profile's, read for the collection xquad-bench
            embed_model=embed_model,
            neighbours=1,
            parent_summaries=False,
        )
        label = "Milvus 2.3.5 server" if uri else engine()
        for q in asked[:3]:  # warm both
            floor.retrieve(embed_model.get_query_embedding(q["question"]))
            retriever.retrieve(q["question"])
        engine_result = measure(label, retriever.retrieve, embed_model, rerank, asked)
        floor_result = measure(
            "numpy brute force (floor)",
            lambda bundle: floor.retrieve(bundle.embedding),
            embed_model,
            rerank,
            asked,
        )
        store.client.close()
    same = sum(a == b for a, b in zip(engine_result["handed"], floor_result["handed"], strict=True))
    for result in (engine_result, floor_result):
        result.pop("handed")
    engine_result.update(
        vectors=len(nodes),
        insert_seconds=insert_s,
        same_nodes_as_floor=same,
        total_ratio=engine_result["total_ms_median"] / floor_result["total_ms_median"],
        retrieve_ratio=engine_result["retrieve_ms_median"] / floor_result["retrieve_ms_median"],
    )
    return [engine_result, floor_result]


def child(engine_kind: str, args: argparse.Namespace, env: dict[str, str]) -> list[dict]:
    """Run one engine in a child process (another Milvus Lite), read its JSON."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = Path(f.name)
    command = [
        sys.executable,
        str(Path(__file__)),
        "--engine",
        engine_kind,
        "--vectors",
        str(args.vectors),
        "--questions",
        str(args.questions),
        "--json",
        str(out),
    ]
    subprocess.run(command, check=True, env=env, cwd=Path(__file__).parent)
    rows = json.loads(out.read_text())
    out.unlink()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["all", "lite", "server"], default="all")
    parser.add_argument("--vectors", type=int, default=TOTAL)
    parser.add_argument("--questions", type=int, default=25, help="of each kind")
    parser.add_argument("--json", help="(internal) write this engine's rows here")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    if args.engine in ("all", "lite"):
        rows += run_engine("lite", args.vectors, args.questions)
    if args.engine == "all":
        rows += child("lite", args, lite_322_environment())
    if args.engine in ("all", "server"):
        with tempfile.TemporaryDirectory() as data, milvus_server(Path(data)) as uri:
            rows += run_engine("server", args.vectors, args.questions, uri=uri)
    if args.json:
        Path(args.json).write_text(json.dumps(rows))
        return
    headers = [
        "pipeline",
        "embed ms",
        "search + threshold + attach ms",
        "rerank ms",
        "total ms",
        "total vs floor",
        "retrieval vs floor",
        "same nodes as floor",
    ]
    print(
        f"{rows[0].get('vectors', args.vectors):,} vectors, {2 * args.questions} questions "
        f"(half answerable), medians; {UNTRAINED}"
    )
    print(
        table(
            headers,
            [
                [
                    r["engine"],
                    f"{r['embed_ms_median']:.1f}",
                    f"{r['retrieve_ms_median']:.1f}",
                    f"{r['rerank_ms_median']:.1f}",
                    f"{r['total_ms_median']:.1f}",
                    f"{r['total_ratio']:.2f}x" if "total_ratio" in r else "1.00x",
                    f"{r['retrieve_ratio']:.1f}x" if "retrieve_ratio" in r else "1.0x",
                    f"{r['same_nodes_as_floor']}/{r['questions']}"
                    if "same_nodes_as_floor" in r
                    else "-",
                ]
                for r in rows
            ],
        )
    )
    write_json("end_to_end", {"rows": rows, "note": UNTRAINED})


if __name__ == "__main__":
    main()
