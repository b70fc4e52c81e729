"""``thresholded calibrate``: measure the cosine floor of one model over one collection.

The maths lives in ``thresholded.calibration`` and knows no framework; this command
loads the embedding model through an installed adapter (``thresholded.embedders``),
prints the measured report and writes the profile atomically.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from thresholded.embedders import load_embedder
from thresholded.errors import ProfileError

logger = logging.getLogger(__name__)


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must lie in [0, 1), got {text}")
    return value


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "calibrate",
        help="measure the cosine threshold on real questions and write a profile",
        description=(
            "Embed a corpus and questions with one model, measure where answering passages "
            "and the best results of unrelated questions score per language pair, suggest a "
            "threshold (never-lose, loss-budget or separate) and write a calibration profile. "
            "Questions are JSON Lines with gold passages, or one YAML file with the lists "
            "should_match and should_not_match."
        ),
    )
    parser.add_argument("--corpus", required=True, help="passages, JSON Lines {pid, lang, text}")
    parser.add_argument(
        "--queries",
        required=True,
        action="append",
        help="questions, JSON Lines (repeatable), or one YAML simple form",
    )
    parser.add_argument(
        "--model", required=True, help="minilm, use-multilingual, BAAI/bge-m3 or a local model dir"
    )
    parser.add_argument(
        "--passages",
        default="all",
        help="passage language a search may return: en, de (any language code) or all",
    )
    parser.add_argument(
        "--question-lang",
        action="append",
        help="only questions in this language (repeatable; default: every language)",
    )
    parser.add_argument(
        "--mode", choices=("never-lose", "loss-budget", "separate"), default="never-lose"
    )
    parser.add_argument(
        "--max-loss",
        type=_fraction,
        default=0.005,
        help="loss-budget: share of answering passages a pair may lose (default 0.005)",
    )
    parser.add_argument(
        "--margin",
        type=_fraction,
        default=None,
        help="margin under the floor (default 0.02 for never-lose, 0 for loss-budget)",
    )
    parser.add_argument("--out", required=True, help="profile to write (JSON)")
    parser.add_argument("--plot", help="also write a PNG of the distributions and the curve")
    parser.add_argument("--force", action="store_true", help="replace an existing profile")
    parser.add_argument("--collection", help="the collection the profile is for")
    parser.add_argument("--folds", type=int, default=8, help="cross-validation folds (articles)")
    parser.add_argument("--batch-size", type=int, default=32, help="texts per embedding batch")
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


def run(args: argparse.Namespace) -> int:
    from thresholded import calibration as cal

    out = Path(args.out)
    check_out(out, force=args.force)
    if args.folds < 2:
        raise ValueError(f"--folds must be at least 2, got {args.folds}")
    corpus = cal.load_corpus(args.corpus)
    simple = [q for q in args.queries if cal.is_simple_form(q)]
    if simple and len(args.queries) > 1:
        raise ValueError(
            "a YAML simple form is calibrated on its own: pass it as the only --queries"
        )
    form = cal.load_simple_form(simple[0]) if simple else None
    questions = [] if simple else [q for path in args.queries for q in cal.load_questions(path)]
    embedder = load_embedder(args.model, batch_size=args.batch_size, progress=not args.no_progress)
    options = {"passages": args.passages, "mode": args.mode, "margin": args.margin}
    result: cal.CalibrationResult | cal.SimpleCalibrationResult
    if form is not None:
        result = cal.calibrate_simple(embedder, corpus, form, max_loss=args.max_loss, **options)
    else:
        result = cal.calibrate(
            embedder,
            corpus,
            questions,
            max_loss=args.max_loss,
            question_langs=args.question_lang,
            folds=args.folds,
            **options,
        )
    print(result.to_text())
    if args.plot:
        print(f"plot: {result.plot(args.plot)}")
    profile = result.to_profile(
        corpus=args.corpus, collection=args.collection, queries=args.queries
    )
    profile.save(out, force=args.force)
    print(
        f"profile: {out} (min_similarity {profile.min_similarity:.2f}, {profile.embedding_model})"
    )
    sys.stdout.flush()
    return 0
