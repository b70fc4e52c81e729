"""The rerank pipeline with and without the threshold: pairs reranked, time, context, gold kept.

On the XQuAD + CLINC dev data, each question goes through:

* **baseline**: a plain ``VectorIndexRetriever`` (top 12), then the reranker (top_n 4);
* **thresholded**: ``ThresholdedRetriever`` with the calibrated profile's floor and the
  default policy (fetch 12, keep at most 4), then the same reranker;
* **floor only**: ``ThresholdedRetriever`` fetching the same 12 with no cap, budget or
  ``top_k`` cut, so that only the floor removes pairs;
* **thresholded + neighbours**: the default policy with one neighbour on each side of
  every kept section, all of which the reranker then scores;
* **floor + gate**: the floor-only pipeline with the profile's answer gate: a question whose
  best cosine is below the gate sends nothing to the reranker (``thresholded.gate``).

Two runs: English questions over the English passages with MiniLM, and every language
(English and German questions over English and German passages) with the multilingual
Universal Sentence Encoder. The reranker is LlamaIndex's ``SentenceTransformerRerank``, a
sentence-transformers ``CrossEncoder`` built on the packaged MiniLM weights. **Its
classification head is untrained** (initialised with a fixed seed): its scores order
nothing meaningfully, so this measures what reranking costs, not what it is worth.

Reported separately for answerable and unrelated questions: pairs reranked, retrieval and
reranker time, characters into the reranker and into the prompt (after top_n), and how
often an answering passage reaches the reranker. The question embeddings are computed once
and shared, so retrieval time is search + threshold (+ lookups). Retrieval runs for every
question; the reranker for every 8th (``--rerank-every``), whose time per pair gives the
estimated reranker time over all questions (it is linear in pairs).

    .venv/bin/python benchmarks/rerank_pipeline.py            # both models, Milvus Lite
    .venv/bin/python benchmarks/rerank_pipeline.py --model minilm --limit 50
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
from _bench_common import ROOT, table, write_json
from hybrid import passage_nodes, query_vectors, read_jsonl
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.indices.vector_store.retrievers.retriever import VectorIndexRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from tqdm import tqdm

from llama_index_thresholded import ThresholdedRetriever
from llama_index_thresholded.embeddings import load_embed_model, model_id_of
from llama_index_thresholded.milvus import milvus_store
from thresholded.gate import gate_passes
from thresholded.policy import RetrievalPolicy
from thresholded.profile import CalibrationProfile
from thresholded.weights import minilm_path

DATA = ROOT / "data"
BASELINE_TOP_K = 12
RERANK_TOP_N = 4
UNTRAINED = "reranker head untrained: cost only, not quality"


@dataclass(frozen=True)
class Run:
    """One model over one set of passages and questions."""

    name: str
    model: str
    dim: int
    profile: Path
    passage_langs: tuple[str, ...]
    question_langs: tuple[str, ...]


RUNS = {
    "minilm": Run(
        "MiniLM, English", "minilm", 384, DATA / "profiles/xquad-minilm-en.json", ("en",), ("en",)
    ),
    "use": Run(
        "USE multilingual, en + de",
        "use-multilingual",
        512,
        DATA / "profiles/xquad-use-all.json",
        ("en", "de"),
        ("en", "de"),
    ),
}


@dataclass
class Tally:
    """What one pipeline did to one group of questions."""

    questions: int = 0
    pairs: list[int] = field(default_factory=list)
    retrieval_ms: list[float] = field(default_factory=list)
    rerank_ms: list[float] = field(default_factory=list)
    rerank_pairs: int = 0
    """Pairs in the reranked sample (``rerank_ms`` is theirs)."""
    chars_in: int = 0
    chars_to_prompt: list[int] = field(default_factory=list)
    gold_present: int = 0
    gold_dropped: dict[str, int] = field(default_factory=dict)
    """Answering passages fetched but not passed on, by the reason they were dropped."""
    emptied: int = 0

    def summary(self) -> dict[str, Any]:
        n = max(self.questions, 1)
        return {
            "questions": self.questions,
            "pairs_reranked": sum(self.pairs),
            "pairs_per_question": sum(self.pairs) / n,
            "retrieval_ms_median": statistics.median(self.retrieval_ms),
            "retrieval_ms_total": sum(self.retrieval_ms),
            "reranked_sample": len(self.rerank_ms),
            "rerank_ms_median": statistics.median(self.rerank_ms),
            "rerank_ms_per_pair": sum(self.rerank_ms) / max(self.rerank_pairs, 1),
            "rerank_s_all_questions_estimated": sum(self.pairs)
            * sum(self.rerank_ms)
            / max(self.rerank_pairs, 1)
            / 1000,
            "chars_into_reranker_per_question": self.chars_in / n,
            "chars_to_prompt_per_question": statistics.mean(self.chars_to_prompt),
            "gold_present_before_rerank": self.gold_present,
            "gold_dropped_by": dict(sorted(self.gold_dropped.items())),
            "emptied": self.emptied,
        }


def reranker() -> Any:
    """LlamaIndex's cross-encoder reranker on the packaged MiniLM weights (untrained head)."""
    import torch
    from llama_index.core.postprocessor import SentenceTransformerRerank

    torch.manual_seed(0)  # the head is initialised at random: make it the same every run
    return SentenceTransformerRerank(top_n=RERANK_TOP_N, model=str(minilm_path()), device="cpu")


def questions_of(run: Run, limit: int | None) -> tuple[list[dict], list[dict]]:
    xquad = read_jsonl(DATA / "xquad-bench" / "queries_dev.jsonl")
    clinc = read_jsonl(DATA / "clinc-oos" / "queries_dev.jsonl")
    xquad = [q for q in xquad if q["lang"] in run.question_langs]
    answerable = [q for q in xquad if q["gold_group"]]
    unrelated = [q for q in xquad if not q["gold_group"]]
    unrelated += [q for q in clinc if q["lang"] in run.question_langs]
    if limit:
        answerable, unrelated = answerable[:limit], unrelated[:limit]
    return answerable, unrelated


def nodes_of(run: Run) -> list[TextNode]:
    return passage_nodes(read_jsonl(DATA / "xquad-bench" / "corpus.jsonl"), run.passage_langs)


Pipeline = Callable[[QueryBundle], tuple[list[NodeWithScore], dict[str, str]]]
"""A question in; the nodes for the reranker, and why each other candidate was dropped."""


def pipelines(index: VectorStoreIndex, embed_model: Any, run: Run) -> dict[str, Pipeline]:
    floor_only = RetrievalPolicy(top_k=12, over_fetch=1, max_per_source=None, max_chars=None)
    plain = VectorIndexRetriever(index, similarity_top_k=BASELINE_TOP_K, embed_model=embed_model)

    def thresholded(policy: RetrievalPolicy, neighbours: int) -> Pipeline:
        retriever = ThresholdedRetriever(
            index,
            policy,
            profile=run.profile,
            collection="xquad-bench",
            embed_model=embed_model,
            neighbours=neighbours,
            parent_summaries=False,
        )

        def retrieve(bundle: QueryBundle) -> tuple[list[NodeWithScore], dict[str, str]]:
            report = retriever.retrieve_with_report(bundle)
            dropped = {d.candidate.id: d.reason.value for d in report.selection.dropped}
            return report.items, dropped

        return retrieve

    def gated(inner: Pipeline, retriever_gate: float | None) -> Pipeline:
        def retrieve(bundle: QueryBundle) -> tuple[list[NodeWithScore], dict[str, str]]:
            nodes, dropped = inner(bundle)
            best = max((n.score for n in nodes if n.score is not None), default=None)
            if gate_passes(best, retriever_gate):
                return nodes, dropped
            return [], {**dropped, **dict.fromkeys((n.node.node_id for n in nodes), "below_gate")}

        return retrieve

    def baseline(bundle: QueryBundle) -> tuple[list[NodeWithScore], dict[str, str]]:
        return plain.retrieve(bundle), {}

    gate = CalibrationProfile.load(run.profile).min_top_similarity

    return {
        f"baseline (top {BASELINE_TOP_K})": baseline,
        "thresholded (default policy)": thresholded(RetrievalPolicy(), 0),
        "floor only (same 12 candidates)": thresholded(floor_only, 0),
        "thresholded + 1 neighbour": thresholded(RetrievalPolicy(), 1),
        "floor + gate (same 12)": gated(thresholded(floor_only, 0), gate),
    }


def gold_pids(question: dict) -> set[str]:
    return set(question.get("gold_pids") or [])


def measure(
    retrieve: Pipeline,
    rerank: Any,
    questions: list[dict],
    qvec: dict[str, np.ndarray],
    label: str,
    rerank_every: int,
) -> Tally:
    """Retrieve for every question; rerank every ``rerank_every``-th one (the timed sample)."""
    tally = Tally()
    for i, q in enumerate(tqdm(questions, desc=label, leave=False)):
        bundle = QueryBundle(query_str=q["question"], embedding=qvec[q["qid"]].tolist())
        start = time.perf_counter()
        nodes, dropped = retrieve(bundle)
        tally.retrieval_ms.append(1000 * (time.perf_counter() - start))
        tally.questions += 1
        tally.pairs.append(len(nodes))
        tally.chars_in += sum(len(n.node.get_content()) for n in nodes)
        gold = gold_pids(q)
        if gold & {n.node.node_id for n in nodes}:
            tally.gold_present += 1
        elif gold and (reasons := {dropped[g] for g in gold if g in dropped}):
            for reason in reasons:
                tally.gold_dropped[reason] = tally.gold_dropped.get(reason, 0) + 1
        tally.emptied += not nodes
        if i % rerank_every:
            continue
        start = time.perf_counter()
        reranked = rerank.postprocess_nodes(nodes, bundle) if nodes else []
        tally.rerank_ms.append(1000 * (time.perf_counter() - start))
        tally.rerank_pairs += len(nodes)
        tally.chars_to_prompt.append(sum(len(n.node.get_content()) for n in reranked))
    return tally


def run_one(
    run: Run, limit: int | None, rerank_every: int, only: list[str] | None = None
) -> dict[str, Any]:
    embed_model = load_embed_model(run.model)
    model = str(model_id_of(embed_model, run.dim))
    answerable, unrelated = questions_of(run, limit)
    nodes = nodes_of(run)
    start = time.perf_counter()
    vectors = embed_model.get_text_embedding_batch(
        [n.get_content("embed") for n in nodes], show_progress=True
    )
    for node, vector in zip(nodes, vectors, strict=True):
        node.embedding = vector
    questions = answerable + unrelated
    vectors_q = query_vectors(embed_model, questions)
    qvec = dict(zip([q["qid"] for q in questions], vectors_q, strict=True))
    embed_s = time.perf_counter() - start
    rerank = reranker()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = milvus_store(str(Path(tmp) / "rerank.db"), "xquad", dim=run.dim, overwrite=True)
        index = VectorStoreIndex(
            nodes,
            storage_context=StorageContext.from_defaults(vector_store=store),
            embed_model=embed_model,
        )
        for name, retrieve in pipelines(index, embed_model, run).items():
            if only and not any(name.startswith(prefix) for prefix in only):
                continue
            retrieve(QueryBundle("warm-up", embedding=qvec[questions[0]["qid"]].tolist()))
            results[name] = {
                group: measure(
                    retrieve, rerank, asked, qvec, f"{name}, {group}", rerank_every
                ).summary()
                for group, asked in (("answerable", answerable), ("unrelated", unrelated))
            }
        store.client.close()
    profile = CalibrationProfile.load(run.profile)
    return {
        "run": run.name,
        "embedding_model": model,
        "profile": str(run.profile.relative_to(ROOT)),
        "min_similarity": profile.min_similarity,
        "min_top_similarity": profile.min_top_similarity,
        "passages": len(nodes),
        "answerable": len(answerable),
        "unrelated": len(unrelated),
        "embedding_seconds": embed_s,
        "reranker": f"SentenceTransformerRerank(top_n={RERANK_TOP_N}) on MiniLM, {UNTRAINED}",
        "rerank_every": rerank_every,
        "pipelines": results,
    }


def report(result: dict[str, Any]) -> str:
    base_name = next(iter(result["pipelines"]))
    lines = [
        f"### {result['run']}: {result['embedding_model']}, floor {result['min_similarity']}, "
        f"gate {result.get('min_top_similarity')} ({result['profile']})",
        "",
        f"{result['passages']} passages; {result['answerable']} answerable and "
        f"{result['unrelated']} unrelated questions. Reranker: {result['reranker']}; "
        f"timed on every {result['rerank_every']}th question (reranker ms, chars to prompt), "
        "everything else on all of them.",
        "",
    ]
    headers = [
        "pipeline",
        "questions",
        "pairs reranked",
        "vs baseline",
        "retrieval ms (median)",
        "reranker ms (median)",
        "reranker s, all questions (est.)",
        "chars to reranker / q",
        "chars to prompt / q",
        "gold before rerank",
        "gold dropped by",
        "emptied",
    ]
    rows = []
    for group in ("answerable", "unrelated"):
        base = result["pipelines"][base_name][group]
        for name, by_group in result["pipelines"].items():
            s = by_group[group]
            rows.append(
                [
                    name,
                    group,
                    f"{s['pairs_reranked']:,}",
                    f"{s['pairs_reranked'] / max(base['pairs_reranked'], 1):.2f}x",
                    f"{s['retrieval_ms_median']:.1f}",
                    f"{s['rerank_ms_median']:.1f}",
                    f"{s['rerank_s_all_questions_estimated']:.0f}",
                    f"{s['chars_into_reranker_per_question']:,.0f}",
                    f"{s['chars_to_prompt_per_question']:,.0f}",
                    f"{s['gold_present_before_rerank']} / {s['questions']}"
                    if group == "answerable"
                    else "-",
                    ", ".join(f"{k} {v}" for k, v in s["gold_dropped_by"].items()) or "-",
                    s["emptied"],
                ]
            )
    return "\n".join(lines) + table(headers, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=[*RUNS, "all"], default="all")
    parser.add_argument("--limit", type=int, help="at most this many questions of each group")
    parser.add_argument(
        "--rerank-every", type=int, default=8, help="rerank (and time) every n-th question"
    )
    parser.add_argument("--out", default="rerank_pipeline", help="results/<out>.json")
    parser.add_argument(
        "--pipelines", nargs="+", help="only the pipelines whose names start with these words"
    )
    args = parser.parse_args()
    chosen = list(RUNS) if args.model == "all" else [args.model]
    results = [
        run_one(RUNS[name], args.limit, args.rerank_every, args.pipelines) for name in chosen
    ]
    for result in results:
        print(report(result))
        print()
    write_json(args.out, {"runs": results, "note": UNTRAINED})


if __name__ == "__main__":
    main()
