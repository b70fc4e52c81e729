"""The pipeline behind ``thresholded bench``: Milvus Lite, then ``ThresholdedRetriever``.

The threshold's effect is told apart from the source cap's and the budget's:
``candidates_dropped`` counts only ``below_threshold`` drops, and the other
reasons are reported beside it. Context sizes with and without the floor and the gate
come from one search per question: the same candidates, selected twice.

The answer gate (``min_top_similarity``) is judged on the same candidates with
:mod:`thresholded.gate`: a question whose best cosine is below it is emptied.
``gold_lost`` counts answering passages lost to the floor or the gate,
``answerable_emptied`` and ``unrelated_emptied`` the questions left with nothing
by either.
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import QueryBundle, TextNode
from tqdm.auto import tqdm

from llama_index_thresholded.calibration import embedder_of
from llama_index_thresholded.embeddings import load_embed_model, model_id_of
from llama_index_thresholded.milvus import milvus_store
from llama_index_thresholded.retriever import ThresholdedRetriever
from thresholded.calibration import (
    Question,
    allowed_passages,
    load_corpus,
    load_questions,
)
from thresholded.embedders import loading_bars
from thresholded.files import atomic_write_text
from thresholded.gate import best_similarity, gate_passes
from thresholded.policy import RetrievalPolicy
from thresholded.selection import DropReason, select

logger = logging.getLogger(__name__)

COUNTS = (
    "answerable",
    "gold_in_candidates",
    "gold_lost",
    "answerable_emptied",
    "unrelated",
    "unrelated_emptied",
    "candidates",
    "candidates_dropped",
    "context_chars_with",
    "context_chars_without",
)


def run_bench(
    *,
    corpus: str | Path,
    queries: list[str],
    model: str,
    passages: str = "all",
    profile: str | Path | None = None,
    threshold: float | None = None,
    gate: float | None = None,
    json_out: str | Path | None = None,
    top_k: int = 4,
    over_fetch: int = 3,
    max_per_source: int | None = 2,
    uri: str | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    if (profile is None) == (threshold is None):
        raise ValueError("give exactly one of a profile or a threshold")
    if profile is not None and gate is not None:
        raise ValueError("a profile brings its own gate: give a gate with a threshold only")
    fields: dict[str, Any] = {
        "top_k": top_k,
        "over_fetch": over_fetch,
        "max_per_source": max_per_source,
    }
    policy = (
        RetrievalPolicy.from_profile(profile, **fields)
        if profile is not None
        else RetrievalPolicy(min_similarity=threshold, min_top_similarity=gate, **fields)
    )
    with loading_bars(progress):
        embed_model = load_embed_model(model)
    policy.resolve_min_similarity(model_id_of(embed_model))  # another model's: before embedding
    embedder = embedder_of(embed_model, progress=progress)
    allowed = allowed_passages(load_corpus(corpus), passages)
    questions = [q for path in queries for q in load_questions(path)]
    passage_vectors = embedder.embed_documents([p.text for p in allowed])
    question_vectors = embedder.embed_queries([q.question for q in questions])
    dim = passage_vectors.shape[1]

    nodes = [
        TextNode(
            id_=p.pid,
            text=p.text,
            metadata={"source": p.source or p.title or p.pid, "lang": p.lang, "group": p.group},
            embedding=vector.tolist(),
        )
        for p, vector in zip(allowed, passage_vectors, strict=True)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        store = milvus_store(uri or str(Path(tmp) / "bench.db"), "bench", dim=dim, overwrite=True)
        index = VectorStoreIndex(
            nodes,
            storage_context=StorageContext.from_defaults(vector_store=store),
            embed_model=embed_model,
        )
        # no pushdown: the threshold's drops must be seen to be counted
        retriever = ThresholdedRetriever(
            index, policy, neighbours=0, parent_summaries=False, pushdown=False
        )
        pairs, reasons = _measure(retriever, questions, question_vectors, passages, progress)
    result = {
        "model": str(embedder.model_id),
        "threshold": retriever.min_similarity,
        "gate": retriever.policy.min_top_similarity,
        "passages": passages,
        "policy": retriever.policy.to_dict(),
        "pairs": pairs,
        "drops_by_reason": reasons,
    }
    if json_out is not None:
        atomic_write_text(Path(json_out), json.dumps(result, indent=2) + "\n")
    return result


def _measure(
    retriever: ThresholdedRetriever,
    questions: list[Question],
    vectors: Any,
    passages: str,
    progress: bool,
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    pairs: dict[str, Counter[str]] = {}
    reasons: dict[str, Counter[str]] = {}
    for question, vector in tqdm(
        list(zip(questions, vectors, strict=True)), desc="retrieving", disable=not progress
    ):
        pair = f"{question.lang}->{passages}"
        counts = pairs.setdefault(pair, Counter({key: 0 for key in COUNTS}))
        report = retriever.retrieve_with_report(
            QueryBundle(question.question, embedding=vector.tolist())
        )
        selection = report.selection
        candidates = [*selection.kept, *(d.candidate for d in selection.dropped)]
        baseline = select(candidates, _without_thresholds(retriever.policy), 0.0)
        gated = not gate_passes(best_similarity(candidates), retriever.policy.min_top_similarity)
        emptied = gated or report.nothing_matched
        counts["candidates"] += len(candidates)
        counts["candidates_dropped"] += len(selection.dropped_for(DropReason.BELOW_THRESHOLD))
        counts["context_chars_with"] += 0 if gated else sum(c.chars for c in selection.kept)
        counts["context_chars_without"] += sum(c.chars for c in baseline.kept)
        reasons.setdefault(pair, Counter()).update(selection.drop_counts())
        if question.answerable:
            gold = set(question.gold_pids)
            counts["answerable"] += 1
            counts["answerable_emptied"] += int(emptied)
            gold_candidates = [c for c in candidates if c.id in gold]
            if gold_candidates:
                counts["gold_in_candidates"] += 1
                lost = {c.id for c in selection.dropped_for(DropReason.BELOW_THRESHOLD)}
                if gated or all(c.id in lost for c in gold_candidates):
                    counts["gold_lost"] += 1
        else:
            counts["unrelated"] += 1
            counts["unrelated_emptied"] += int(emptied)
    return (
        {pair: {key: int(c[key]) for key in COUNTS} for pair, c in sorted(pairs.items())},
        {pair: dict(sorted(c.items())) for pair, c in sorted(reasons.items())},
    )


def _without_thresholds(policy: RetrievalPolicy) -> RetrievalPolicy:
    """The policy with neither floor nor gate: the baseline of the context sizes."""
    return policy.model_copy(update={"min_similarity": 0.0, "min_top_similarity": None})


def format_bench(result: dict[str, Any]) -> str:
    """The figures as a table: one row per pair."""
    header = (
        f"{'pair':<10}{'answerable':>11}{'gold in cand':>13}{'gold lost':>10}{'ans emptied':>12}"
        f"{'unrelated':>10}{'emptied':>9}{'candidates':>11}{'dropped':>9}{'chars with':>12}"
        f"{'chars w/o':>11}"
    )
    gate = "off" if result.get("gate") is None else f"{result['gate']:g}"
    lines = [f"model {result['model']}, threshold {result['threshold']:g}, gate {gate}", header]
    for pair, c in result["pairs"].items():
        lines.append(
            f"{pair:<10}{c['answerable']:>11}{c['gold_in_candidates']:>13}{c['gold_lost']:>10}"
            f"{c['answerable_emptied']:>12}{c['unrelated']:>10}{c['unrelated_emptied']:>9}"
            f"{c['candidates']:>11}"
            f"{c['candidates_dropped']:>9}{c['context_chars_with']:>12}"
            f"{c['context_chars_without']:>11}"
        )
    for pair, reasons in result["drops_by_reason"].items():
        lines.append(f"{pair}: drops by reason {reasons}")
    return "\n".join(lines)
