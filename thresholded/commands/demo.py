"""``thresholded demo``: index the example knowledge base and show what the threshold does."""

from __future__ import annotations

import argparse
from typing import Any

from thresholded.commands.arguments import at_least, cosine, nonblank
from thresholded.extras import require

DEFAULT_QUESTIONS = (
    "How do I get my money back?",
    "I was charged twice",
    "What's the weather in Mumbai today?",
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="retrieve from the example support knowledge base on Milvus Lite",
        description=(
            "Index the example knowledge base into Milvus Lite with all-MiniLM-L6-v2, then "
            "retrieve for a few questions and print what was kept, attached and dropped."
        ),
    )
    parser.add_argument(
        "-q", "--question", action="append", type=nonblank, help="your own question (repeatable)"
    )
    parser.add_argument(
        "--doc-type", type=nonblank, help="only sections of this doc_type (e.g. faq, policy)"
    )
    parser.add_argument(
        "--uri",
        default=".thresholded/demo.db",
        help="Milvus URI: a local file or http://host:19530",
    )
    parser.add_argument("--profile", help="calibration profile (default: the knowledge base's)")
    parser.add_argument("--min-similarity", type=cosine, help="override the floor for this run")
    parser.add_argument("--top-k", type=at_least(1), help="override top_k for this run")
    parser.add_argument(
        "--neighbours", type=at_least(0), default=1, help="prev/next window (0: off)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    require("demo", "thresholded demo")
    from llama_index_thresholded.demo import run_demo

    run_demo(
        questions=args.question or list(DEFAULT_QUESTIONS),
        doc_type=args.doc_type,
        uri=args.uri,
        profile=args.profile,
        min_similarity=args.min_similarity,
        top_k=args.top_k,
        neighbours=args.neighbours,
    )
    return 0
