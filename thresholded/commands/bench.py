"""``thresholded bench``: what a threshold keeps and drops, through the real pipeline.

It indexes the corpus into Milvus Lite and retrieves every question through
``ThresholdedRetriever``, counting answering passages lost, unrelated questions
emptied and candidates dropped, per question-language -> passage-language pair.
"""

from __future__ import annotations

import argparse
from typing import Any

from thresholded.commands.arguments import add_passages, at_least, cosine
from thresholded.extras import require


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="measure a threshold through Milvus Lite and ThresholdedRetriever",
        description=__doc__.replace("``", ""),
    )
    parser.add_argument("--corpus", required=True, help="passages JSONL (pid, lang, text, source)")
    parser.add_argument(
        "--queries", required=True, action="append", help="questions JSONL (repeatable)"
    )
    parser.add_argument("--model", required=True, help="minilm, use-multilingual, BAAI/bge-m3, dir")
    add_passages(parser)
    floor = parser.add_mutually_exclusive_group(required=True)
    floor.add_argument("--profile", help="calibration profile JSON")
    floor.add_argument("--threshold", type=cosine, help="a cosine floor")
    parser.add_argument(
        "--gate",
        type=cosine,
        help="with --threshold: an answer gate on each question's best cosine",
    )
    parser.add_argument("--json", required=True, dest="json_out", help="write the figures here")
    parser.add_argument("--top-k", type=at_least(1), default=4, help="sections kept per question")
    parser.add_argument(
        "--over-fetch", type=at_least(1), default=3, help="candidates fetched per section kept"
    )
    parser.add_argument(
        "--max-per-source", type=at_least(1), default=2, help="sections kept per source document"
    )
    parser.add_argument("--uri", help="Milvus URI (default: a temporary Milvus Lite file)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    require("llama-index-milvus", "thresholded bench")
    from llama_index_thresholded.bench import format_bench, run_bench

    result = run_bench(
        corpus=args.corpus,
        queries=args.queries,
        model=args.model,
        passages=args.passages,
        profile=args.profile,
        threshold=args.threshold,
        gate=args.gate,
        json_out=args.json_out,
        top_k=args.top_k,
        over_fetch=args.over_fetch,
        max_per_source=args.max_per_source,
        uri=args.uri,
        progress=not args.no_progress,
    )
    print(format_bench(result))
    return 0
