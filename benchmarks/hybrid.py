"""Hybrid and sparse search with a cosine floor: what the floor still does when scores are RRF.

On the XQuAD benchmark data (English passages; English dev questions that the
index answers; English near-miss questions on articles that are not indexed and
CLINC out-of-scope requests, which it does not), with MiniLM and Milvus Lite's
built-in BM25, it compares:

* dense search with the cosine floor;
* hybrid search (dense + BM25, RRF) without a threshold: an RRF score is never
  compared with a cosine floor, so it has none;
* hybrid search with ``hybrid_policy="rescore"``: the floor applies to each
  candidate's dense cosine (its stored vector), the RRF order stays;
* and, for reference, BM25 alone without and with re-scoring.

For each it counts answering passages lost to the floor, unrelated questions
left with nothing, and the (question, section) pairs sent on to the reranker
(kept sections plus their attached neighbours). The floor comes from
``data/profiles/xquad-minilm-en.json`` when present; otherwise it is measured
here as the never-lose floor of the dev questions (the lowest cosine of an
answering passage, rounded down), and the output says so.

    .venv/bin/python benchmarks/hybrid.py                 # milvus-lite 2.5.1 (C++ engine)
    .venv/bin/python benchmarks/run_all.py --only hybrid     # both engines
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import (
    NodeRelationship,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)
from llama_index.vector_stores.milvus.utils import BM25BuiltInFunction

from llama_index_thresholded import ThresholdedRetriever
from llama_index_thresholded.embeddings import load_embed_model, model_id_of
from llama_index_thresholded.milvus import milvus_store
from thresholded.policy import RetrievalPolicy
from thresholded.selection import DropReason

ROOT = Path(__file__).resolve().parent.parent
PROFILE = "profiles/xquad-minilm-en.json"


@dataclass(frozen=True)
class Config:
    name: str
    mode: str
    floor: bool
    hybrid_policy: str = "pass"


CONFIGS = [
    Config("dense + floor", "default", floor=True),
    Config("hybrid RRF, no threshold", "hybrid", floor=False),
    Config("hybrid RRF + rescore", "hybrid", floor=True, hybrid_policy="rescore"),
    Config("BM25, no threshold", "sparse", floor=False),
    Config("BM25 + rescore", "sparse", floor=True, hybrid_policy="rescore"),
]


@dataclass
class Row:
    config: str
    mode: str
    hybrid_policy: str
    min_similarity: float
    answerable: int = 0
    gold_retrieved: int = 0
    """Answerable questions whose answering passage the search returned as a candidate."""
    gold_lost_to_floor: int = 0
    """... and that the floor then dropped: the answering passages lost."""
    gold_kept: int = 0
    """Answerable questions whose answering passage was kept (reaches the reranker)."""
    unrelated: int = 0
    unrelated_emptied: int = 0
    near_miss_emptied: int = 0
    clinc_emptied: int = 0
    kept: int = 0
    attached: int = 0
    pairs_answerable: int = 0
    pairs_unrelated: int = 0
    ms_per_query: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def pairs(self) -> int:
        return self.kept + self.attached


def data_dir(given: str | None) -> Path:
    if given:
        return Path(given)
    local = ROOT / "data"
    if (local / "xquad-bench" / "corpus.jsonl").is_file():
        return local
    return Path("/work/shared/data")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def passage_nodes(corpus: list[dict[str, Any]], langs: tuple[str, ...] = ("en",)) -> list[TextNode]:
    """Passages in ``langs``, linked prev/next within their article (so neighbours can attach)."""
    rows = [r for r in corpus if r["lang"] in langs]
    rows.sort(key=lambda r: (r["lang"], r["title"], int(r["group"].rsplit(":", 1)[1])))
    nodes = []
    for r in rows:
        meta = {"source": r["source"], "title": r["title"], "group": r["group"], "lang": r["lang"]}
        nodes.append(
            TextNode(
                id_=r["pid"],
                text=r["text"],
                metadata=meta,
                excluded_embed_metadata_keys=list(meta),
                excluded_llm_metadata_keys=list(meta),
            )
        )
    for prev, nxt in itertools.pairwise(nodes):
        if (prev.metadata["title"], prev.metadata["lang"]) == (
            nxt.metadata["title"],
            nxt.metadata["lang"],
        ):
            prev.relationships[NodeRelationship.NEXT] = RelatedNodeInfo(node_id=nxt.node_id)
            nxt.relationships[NodeRelationship.PREVIOUS] = RelatedNodeInfo(node_id=prev.node_id)
    return nodes


def floor_of(
    data: Path,
    answerable: list[dict[str, Any]],
    qvec: dict[str, np.ndarray],
    pvec: dict[str, np.ndarray],
    model: str,
) -> tuple[float, str, dict[str, Any]]:
    """The profile's floor if there is one, else the never-lose floor of the dev questions."""
    gold = np.array([float(qvec[q["qid"]] @ pvec[gold_pid(q)]) for q in answerable])
    measured = {
        "gold_cosine_min": float(gold.min()),
        "gold_cosine_p05": float(np.quantile(gold, 0.05)),
        "gold_cosine_median": float(np.median(gold)),
    }
    profile = data / PROFILE
    if profile.is_file():
        from thresholded.profile import CalibrationProfile

        loaded = CalibrationProfile.load(profile)
        if "minilm" not in loaded.embedding_model.lower():
            raise SystemExit(f"{profile} is a profile of {loaded.embedding_model}, not of {model}")
        return loaded.min_similarity, f"profile {profile}", measured
    floor = math.floor(gold.min() * 1000) / 1000  # never-lose, rounded down
    source = (
        f"measured here: never-lose floor of the {len(answerable)} English dev questions "
        f"(lowest answering-passage cosine {gold.min():.4f}, rounded down; no {PROFILE})"
    )
    return floor, source, measured


def query_vectors(embed_model: Any, questions: list[dict[str, Any]]) -> list[np.ndarray]:
    """The questions' embeddings, in one batch when the model embeds queries as texts."""
    texts = [q["question"] for q in questions]
    batch = [np.asarray(v) for v in embed_model.get_text_embedding_batch(texts)]
    sample = [np.asarray(embed_model.get_query_embedding(t)) for t in texts[:3]]
    if all(np.allclose(a, b, atol=1e-6) for a, b in zip(sample, batch, strict=False)):
        return batch  # MiniLM has no query instruction: same vectors, far faster
    return [np.asarray(embed_model.get_query_embedding(t)) for t in texts]


def gold_pid(question: dict[str, Any]) -> str:
    return f"{question['gold_group']}:en"


def run_config(
    config: Config,
    index: VectorStoreIndex,
    embed_model: Any,
    floor: float,
    answerable: list[dict[str, Any]],
    unrelated: Iterable[tuple[str, dict[str, Any]]],
    qvec: dict[str, np.ndarray],
) -> Row:
    policy = RetrievalPolicy(
        min_similarity=floor if config.floor else 0.0, hybrid_policy=config.hybrid_policy
    )
    retriever = ThresholdedRetriever(
        index,
        policy,
        vector_store_query_mode=config.mode,
        embed_model=embed_model,
        neighbours=1,
        parent_summaries=False,
    )
    row = Row(config.name, config.mode, config.hybrid_policy, policy.min_similarity or 0.0)
    started = time.perf_counter()
    queries = 0
    for q in answerable:
        report = retriever.retrieve_with_report(bundle(q, qvec))
        queries += 1
        gold = gold_pid(q)
        candidates = {c.id for c in report.selection.kept} | {
            d.candidate.id for d in report.selection.dropped if not d.candidate.is_attachment
        }
        row.answerable += 1
        row.gold_retrieved += gold in candidates
        row.gold_kept += gold in {c.id for c in report.selection.kept}
        row.gold_lost_to_floor += gold in {
            c.id for c in report.selection.dropped_for(DropReason.BELOW_THRESHOLD)
        }
        row.kept += len(report.kept)
        row.attached += len(report.attached)
        row.pairs_answerable += len(report.items)
    for origin, q in unrelated:
        report = retriever.retrieve_with_report(bundle(q, qvec))
        queries += 1
        row.unrelated += 1
        if report.nothing_matched:
            row.unrelated_emptied += 1
            if origin == "near-miss":
                row.near_miss_emptied += 1
            else:
                row.clinc_emptied += 1
        row.kept += len(report.kept)
        row.attached += len(report.attached)
        row.pairs_unrelated += len(report.items)
    row.ms_per_query = 1000 * (time.perf_counter() - started) / max(queries, 1)
    return row


def bundle(question: dict[str, Any], qvec: dict[str, np.ndarray]) -> QueryBundle:
    return QueryBundle(query_str=question["question"], embedding=qvec[question["qid"]].tolist())


def table(rows: list[Row], n_answerable: int, n_unrelated: int) -> str:
    head = (
        f"| configuration | floor | answering passages lost (of {n_answerable}) "
        f"| answering passage kept | unrelated emptied (of {n_unrelated}) "
        "| pairs to reranker (kept + attached) | per question |"
    )
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        floor = f"{r.min_similarity:.3f}" if r.min_similarity else "none"
        if r.hybrid_policy == "pass" and r.mode != "default":
            floor = "none"
        lines.append(
            f"| {r.config} | {floor} | {r.gold_lost_to_floor} | {r.gold_kept} "
            f"| {r.unrelated_emptied} ({r.near_miss_emptied} near-miss + {r.clinc_emptied} CLINC) "
            f"| {r.pairs} ({r.kept} + {r.attached}) "
            f"| {r.pairs / max(r.answerable + r.unrelated, 1):.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="benchmark data folder (default: data/, else shared)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "hybrid.json"))
    parser.add_argument(
        "--floor", type=float, help="use this floor instead of the profile's or the measured one"
    )
    args = parser.parse_args()

    data = data_dir(args.data)
    corpus = read_jsonl(data / "xquad-bench" / "corpus.jsonl")
    xquad = [q for q in read_jsonl(data / "xquad-bench" / "queries_dev.jsonl") if q["lang"] == "en"]
    clinc = [q for q in read_jsonl(data / "clinc-oos" / "queries_dev.jsonl") if q["lang"] == "en"]
    answerable = [q for q in xquad if q["gold_group"]]
    near_miss = [q for q in xquad if not q["gold_group"]]
    unrelated = [("near-miss", q) for q in near_miss] + [("clinc", q) for q in clinc]

    embed_model = load_embed_model("minilm")
    model = str(model_id_of(embed_model, 384))
    nodes = passage_nodes(corpus)
    t0 = time.perf_counter()
    vectors = embed_model.get_text_embedding_batch([n.get_content("embed") for n in nodes])
    for node, vector in zip(nodes, vectors, strict=True):
        node.embedding = vector
    pvec = {n.node_id: np.asarray(n.embedding) for n in nodes}
    questions = [*answerable, *(q for _, q in unrelated)]
    qvec = dict(
        zip((q["qid"] for q in questions), query_vectors(embed_model, questions), strict=True)
    )
    embed_s = time.perf_counter() - t0

    floor, floor_source, measured = floor_of(data, answerable, qvec, pvec, model)
    if args.floor is not None:
        floor, floor_source = args.floor, f"given on the command line (--floor {args.floor})"

    with tempfile.TemporaryDirectory() as tmp:
        store = milvus_store(
            str(Path(tmp) / "hybrid.db"),
            "xquad_en",
            dim=384,
            overwrite=True,
            enable_sparse=True,
            sparse_embedding_function=BM25BuiltInFunction(),
        )
        index = VectorStoreIndex(
            nodes,
            storage_context=StorageContext.from_defaults(vector_store=store),
            embed_model=embed_model,
        )
        rows = [
            run_config(c, index, embed_model, floor, answerable, unrelated, qvec) for c in CONFIGS
        ]
        store.client.close()

    engine = version("milvus-lite")
    policy = RetrievalPolicy()
    print(f"milvus-lite {engine}, {model}, {len(nodes)} English passages")
    print(f"floor {floor:.3f}: {floor_source}")
    print(
        f"policy: top_k={policy.top_k}, over_fetch={policy.over_fetch} "
        f"(fetch {policy.fetch_k}), max_per_source={policy.max_per_source}, "
        f"max_chars={policy.max_chars}; neighbours=1"
    )
    print(table(rows, len(answerable), len(unrelated)))
    result = {
        "milvus_lite": engine,
        "embedding_model": model,
        "passages": len(nodes),
        "answerable": len(answerable),
        "near_miss": len(near_miss),
        "clinc": len(clinc),
        "min_similarity": floor,
        "floor_source": floor_source,
        "gold_cosines": measured,
        "policy": {**policy.to_dict(), "neighbours": 1},
        "embedding_seconds": embed_s,
        "rows": [{**asdict(r), "pairs": r.pairs} for r in rows],
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
