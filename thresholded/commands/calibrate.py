"""``thresholded calibrate``: measure the floor and the gate of one model over one collection.

The maths lives in ``thresholded.calibration`` and knows no framework; this command
loads the embedding model through an installed adapter (``thresholded.embedders``),
prints the measured report and writes the profile atomically. The passages come from
a corpus file, embedded as an adapter indexes them (``--as``), or from an existing
Milvus collection with their stored vectors (``--uri`` and ``--milvus-collection``).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from thresholded.commands.arguments import add_passages, at_least, fraction
from thresholded.embedders import load_embedder
from thresholded.errors import ProfileError

logger = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "calibrate",
        help="measure the cosine floor and answer gate on real questions and write a profile",
        description=(
            "Embed a corpus (or read a Milvus collection's stored vectors) and questions with "
            "one model, measure where answering passages, the answerable questions' best "
            "results and the best results of unrelated questions score per language pair, "
            "suggest a floor and a gate (never-lose, loss-budget or separate) and write a "
            "calibration profile. Questions are JSON Lines with gold passages, or one YAML "
            "file with the lists should_match and should_not_match."
        ),
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--corpus", help="passages, JSON Lines {pid, text, [lang, source]}")
    source.add_argument("--uri", help="Milvus URI (server or Milvus Lite file) of a collection")
    parser.add_argument(
        "--milvus-collection", help="with --uri: the collection whose sections are calibrated"
    )
    parser.add_argument(
        "--id-field",
        help="with --uri: metadata key matching the questions' gold ids (default: primary key)",
    )
    parser.add_argument(
        "--filter",
        default="",
        help="with --uri: calibrate under a Milvus filter expression (doc_type == 'faq')",
    )
    parser.add_argument(
        "--as",
        dest="index_as",
        choices=("text", "llama-index", "langchain"),
        default="text",
        help="with --corpus: embed each passage as this adapter indexes it (default: its text)",
    )
    parser.add_argument(
        "--queries",
        required=True,
        action="append",
        help="questions, JSON Lines (repeatable), or one YAML simple form",
    )
    parser.add_argument(
        "--model", required=True, help="minilm, use-multilingual, BAAI/bge-m3 or a local model dir"
    )
    add_passages(parser)
    parser.add_argument(
        "--question-lang",
        action="append",
        help="only questions in this language (repeatable; default: every language)",
    )
    parser.add_argument(
        "--mode",
        choices=("never-lose", "loss-budget", "separate"),
        default="never-lose",
        help="how the floor and the gate are chosen from the measurements",
    )
    parser.add_argument(
        "--max-loss",
        type=fraction,
        default=0.005,
        help="loss-budget: share of answering passages a pair may lose",
    )
    parser.add_argument(
        "--margin",
        type=fraction,
        default=None,
        help="margin under the floor (default 0.02 for never-lose, 0 for loss-budget)",
    )
    parser.add_argument(
        "--gate-margin",
        type=fraction,
        default=None,
        help="margin under the gate (default 0.02 for never-lose, 0 for loss-budget)",
    )
    parser.add_argument("--out", required=True, help="profile to write (JSON)")
    parser.add_argument("--plot", help="also write a PNG of the distributions and the curve")
    parser.add_argument("--force", action="store_true", help="replace an existing profile")
    parser.add_argument("--collection", help="the collection the profile is for")
    parser.add_argument(
        "--folds", type=at_least(2), default=8, help="cross-validation folds (articles)"
    )
    parser.add_argument(
        "--batch-size", type=at_least(1), default=32, help="texts per embedding batch"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.set_defaults(run=run)


def check_out(path: Path, *, force: bool) -> None:
    """Refuse before any embedding: an existing profile needs --force, a corrupt file is kept."""
    if not path.exists():
        return
    from thresholded.profile import CalibrationProfile

    try:
        CalibrationProfile.load(path)
    except ProfileError as exc:
        raise ProfileError(
            f"{exc}; it is left untouched, even with --force: remove it or choose another --out"
        ) from None
    if not force:
        raise FileExistsError(f"{path} exists; pass --force to overwrite it")


def _check_source(args: argparse.Namespace) -> None:
    if args.uri and not args.milvus_collection:
        raise ValueError("--uri needs --milvus-collection: the collection to calibrate")
    if not args.uri and (args.milvus_collection or args.id_field or args.filter):
        raise ValueError("--milvus-collection, --id-field and --filter go with --uri")
    if args.uri and args.index_as != "text":
        raise ValueError("--as goes with --corpus: a collection's vectors are already stored")


def _questions(cal: Any, paths: list[str]) -> Any:
    """One simple form, or the questions of every JSON Lines file."""
    simple = [q for q in paths if cal.is_simple_form(q)]
    if simple and len(paths) > 1:
        raise ValueError(
            "a YAML simple form is calibrated on its own: pass it as the only --queries"
        )
    if simple:
        return cal.load_simple_form(simple[0])
    return [q for path in paths for q in cal.load_questions(path)]


def _check_answerable(questions: list[Any]) -> None:
    """Refuse, before a model is loaded or a text embedded, questions none of which has a gold
    passage: the floor and the gate of a profile are measured on answerable questions."""
    if not any(q.answerable for q in questions):
        raise ValueError(
            "no answerable questions in --queries: a floor and a gate are measured on "
            "answerable questions: give questions with their gold passages (gold_pids) that "
            "the collection holds, beside the unrelated ones"
        )


def run(args: argparse.Namespace) -> int:
    from thresholded import calibration as cal

    out = Path(args.out)
    check_out(out, force=args.force)
    _check_source(args)
    if args.folds < 2:
        raise ValueError(f"--folds must be at least 2, got {args.folds}")
    questions = _questions(cal, args.queries)
    if isinstance(questions, cal.SimpleForm) and args.question_lang:
        raise ValueError(
            "--question-lang selects JSON Lines questions by their 'lang'; the questions of a "
            "simple form have none: list only the questions of that language in the form"
        )
    if not isinstance(questions, cal.SimpleForm):
        _check_answerable(questions)
    corpus = None if args.uri else cal.load_corpus(args.corpus)
    embedder = load_embedder(args.model, batch_size=args.batch_size, progress=not args.no_progress)
    options: dict[str, Any] = {
        "passages": args.passages,
        "mode": args.mode,
        "margin": args.margin,
        "gate_margin": args.gate_margin,
        "max_loss": args.max_loss,
    }
    if not isinstance(questions, cal.SimpleForm):
        options.update(question_langs=args.question_lang, folds=args.folds)
    result: cal.CalibrationResult | cal.SimpleCalibrationResult
    if args.uri:
        result = cal.calibrate_collection(
            embedder,
            args.uri,
            args.milvus_collection,
            questions,
            id_field=args.id_field,
            filter=args.filter,
            progress=not args.no_progress,
            **options,
        )
    elif isinstance(questions, cal.SimpleForm):
        result = cal.calibrate_simple(
            embedder, corpus, questions, index_as=args.index_as, **options
        )
    else:
        result = cal.calibrate(embedder, corpus, questions, index_as=args.index_as, **options)
    print(result.to_text())
    if args.plot:
        print(f"plot: {result.plot(args.plot)}")
    profile = result.to_profile(
        corpus=args.corpus or args.uri,
        collection=args.collection or args.milvus_collection,
        queries=args.queries,
    )
    profile.save(out, force=args.force)
    gate = "off" if profile.min_top_similarity is None else f"{profile.min_top_similarity:.2f}"
    print(
        f"profile: {out} (min_similarity {profile.min_similarity:.2f}, "
        f"min_top_similarity {gate}, {profile.embedding_model})"
    )
    sys.stdout.flush()
    return 0
