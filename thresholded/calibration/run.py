"""The whole run: check the inputs, embed, score, and summarise into floor and gate.

``calibrate`` is the single entry point. Passages are embedded as an adapter would
index them (``index_as``), or their stored vectors are given (``passage_vectors``),
in which case only the questions are embedded; ``calibrate_collection`` reads those
vectors from an existing Milvus collection.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from thresholded.calibration.collection import Layout, read_collection, resolve_gold
from thresholded.calibration.crossval import CrossValidation, cross_validate
from thresholded.calibration.curve import trade_off
from thresholded.calibration.data import Passage, Question, SimpleForm, same_text
from thresholded.calibration.embedder import Embedder, embed, model_id_of
from thresholded.calibration.embedder import passage_vectors as passage_vectors_of
from thresholded.calibration.floor import Suggestion, suggest
from thresholded.calibration.gate import suggest_gate
from thresholded.calibration.indexing import IndexAs
from thresholded.calibration.modes import DEFAULT_MAX_LOSS, MODES, Mode, check_params
from thresholded.calibration.result import CalibrationResult
from thresholded.calibration.scores import PairScores, allowed_passages, score_pairs
from thresholded.calibration.simple import (
    SimpleCalibrationResult,
    calibrate_simple,
    reachable_form,
)
from thresholded.calibration.table import pair_table
from thresholded.errors import DimensionMismatchError
from thresholded.models import ModelId
from thresholded.scores import Metric
from thresholded.strict import check_arguments, named_parameters

__all__ = ["calibrate", "calibrate_collection", "summarise"]

logger = logging.getLogger(__name__)


def _check_questions(
    corpus: Sequence[Passage], questions: Sequence[Question], langs: Collection[str] | None
) -> list[Question]:
    known = {p.pid for p in corpus}
    for q in questions:
        missing = [p for p in q.gold_pids if p not in known]
        if missing:
            raise ValueError(f"question {q.qid}: gold passages {missing} are not in the corpus")
    _check_question_langs(questions, langs)
    kept = [q for q in questions if not langs or q.lang in set(langs)]
    if not kept:
        raise ValueError("no questions left to calibrate on (check --question-lang)")
    seen: set[str] = set()
    for q in kept:
        if q.qid in seen:
            raise ValueError(f"duplicate question id {q.qid!r}")
        seen.add(q.qid)
    _check_labels(kept)
    return kept


def _check_question_langs(questions: Sequence[Question], langs: Collection[str] | None) -> None:
    """Refuse a question language (``--question-lang``) that no question has: it would be
    left out without a word, or leave nothing to calibrate on."""
    there = sorted({q.lang for q in questions})
    for lang in langs or ():
        if lang not in there:
            raise ValueError(
                f"no question is in {lang!r} (check --question-lang): the questions are in "
                f"{', '.join(there)}"
            )


def _check_labels(questions: Sequence[Question]) -> None:
    """Refuse a question asked as answerable and as unrelated: the gate cannot both keep
    and empty it. The same question twice with one label is two measurements, and stays."""
    answerable = {(q.lang, same_text(q.question)): q.qid for q in questions if q.answerable}
    for q in questions:
        qid = answerable.get((q.lang, same_text(q.question)))
        if not q.answerable and qid is not None:
            raise ValueError(
                f"question {q.question!r} ({q.lang}) is answerable as {qid} and unrelated as "
                f"{q.qid}: give it one label (remove it from the unrelated set, or its gold)"
            )


def calibrate(
    embedder: Embedder,
    corpus: Sequence[Passage],
    questions: Sequence[Question],
    *,
    passages: str = "all",
    mode: Mode = "never-lose",
    margin: float | None = None,
    gate_margin: float | None = None,
    max_loss: float = DEFAULT_MAX_LOSS,
    question_langs: Collection[str] | None = None,
    index_as: IndexAs = "text",
    passage_vectors: np.ndarray | None = None,
    top_k: int = 4,
    candidates: int = 12,
    folds: int = 8,
    grid: Sequence[float] | None = None,
    resolution: float = 0.01,
    seed: int = 0,
) -> CalibrationResult:
    """Measure where answering passages and unrelated questions score; suggest floor and gate.

    ``embedder`` embeds the ``corpus`` passages and the ``questions`` (answerable ones name
    their answering passages; unrelated ones none). ``passages`` restricts what a search
    may return: ``en``, ``de`` (any language code) or ``all``; each question language
    (``question_langs``: those measured, default all) makes one pair with it. Only the
    allowed passages are embedded (as ``index_as`` indexes them), unless their
    stored ``passage_vectors`` (one row per corpus passage) are given; all scores
    come from one matrix product.

    ``mode`` chooses the floor and gate from the measurements: ``never-lose`` (the lowest
    answering score less ``margin``, the gate likewise less ``gate_margin``: 0.02 by
    default), ``loss-budget`` (the highest that loses at most ``max_loss`` of each pair's
    answering passages; margins 0 by default) or ``separate`` (the midpoint of the gap
    between answering and unrelated scores, where there is one); see
    :func:`thresholded.calibration.suggest`. The report's tables count what ``top_k``
    kept sections per question would hold, of the best ``candidates`` scores a search
    fetches. ``folds`` cross-validation folds (by article, assigned with ``seed``) estimate
    the loss on unseen articles. ``grid`` is the thresholds the trade-off curve is drawn
    at (default 0 to 0.8 by 0.01); thresholds are rounded down to ``resolution``.
    """
    check_params(mode, margin, max_loss, gate_margin)
    questions = _check_questions(corpus, questions, question_langs)
    allowed = allowed_passages(corpus, passages)
    logger.info("calibrating on %d passages and %d questions", len(allowed), len(questions))
    pv = passage_vectors_of(embedder, corpus, allowed, passage_vectors, index_as)
    qv = embed(embedder, [q.question for q in questions], queries=True)
    if pv.shape[1] != qv.shape[1]:
        raise DimensionMismatchError(
            f"passages have {pv.shape[1]} dimensions, questions {qv.shape[1]}"
        )
    pairs = score_pairs(
        qv, pv, questions, allowed, passages=passages, top_k=top_k, candidates=candidates
    )
    return summarise(
        pairs,
        model_id=model_id_of(embedder, pv.shape[1]),
        passages=passages,
        mode=mode,
        margin=margin,
        gate_margin=gate_margin,
        max_loss=max_loss,
        top_k=top_k,
        candidates=candidates,
        folds=folds,
        grid=grid,
        resolution=resolution,
        seed=seed,
        extra={
            "n_passages": len(allowed),
            "question_langs": sorted({q.lang for q in questions}),
            "index_as": "stored vectors" if passage_vectors is not None else index_as,
        },
    )


def _suggestions(
    pairs: Sequence[PairScores], **options: Any
) -> tuple[dict[str, Suggestion], dict[str, Suggestion]]:
    """Every mode's floor, and every mode's gate (loss-budget shares its budget)."""
    gate_margin = options.pop("gate_margin")
    good = {s.pair: s.good for s in pairs}
    junk = {s.pair: s.junk for s in pairs}
    top = {s.pair: s.good_top for s in pairs}
    floors = {m: suggest(m, good, junk, **options) for m in MODES}
    gates = {
        m: suggest_gate(
            m,
            top,
            junk,
            good=good,
            floor=floors[m].threshold,
            margin=gate_margin,
            max_loss=options["max_loss"],
            resolution=options["resolution"],
        )
        for m in MODES
    }
    return floors, gates


def summarise(
    pairs: Sequence[PairScores],
    *,
    model_id: ModelId,
    passages: str,
    mode: Mode = "never-lose",
    margin: float | None = None,
    gate_margin: float | None = None,
    max_loss: float = DEFAULT_MAX_LOSS,
    top_k: int = 4,
    candidates: int = 12,
    folds: int = 8,
    grid: Sequence[float] | None = None,
    resolution: float = 0.01,
    seed: int = 0,
    extra: dict[str, Any] | None = None,
) -> CalibrationResult:
    """Tables, curves, all three modes' floors and gates and their cross-validation."""
    check_params(mode, margin, max_loss, gate_margin)
    options = {"margin": margin, "max_loss": max_loss, "resolution": resolution}
    floors, gates = _suggestions(pairs, gate_margin=gate_margin, **options)
    cv: dict[str, CrossValidation] = {
        m: cross_validate(pairs, m, folds=folds, seed=seed, gate_margin=gate_margin, **options)
        for m in MODES
    }
    return CalibrationResult(
        model_id=model_id,
        passages=passages,
        mode=mode,
        margin=margin,
        max_loss=max_loss,
        pairs=tuple(pairs),
        tables=tuple(pair_table(s, top_k=top_k) for s in pairs),
        curves={
            s.pair: trade_off(s.good, s.junk, s.candidates, grid, s.junk_origins) for s in pairs
        },
        suggestions=floors,
        cross_validation=cv,
        top_k=top_k,
        candidates=candidates,
        extra=dict(extra or {}),
        gate_margin=gate_margin,
        gate_curves={
            s.pair: trade_off(s.good_top, s.junk, None, grid, s.junk_origins) for s in pairs
        },
        gate_suggestions=gates,
    )


def calibrate_collection(
    embedder: Embedder,
    uri: str | None,
    collection: str,
    questions: Sequence[Question] | SimpleForm,
    *,
    id_field: str | None = None,
    filter: str = "",
    progress: bool = True,
    client_options: dict[str, Any] | None = None,
    client: Any = None,
    layout: Layout | None = None,
    **options: Any,
) -> CalibrationResult | SimpleCalibrationResult:
    """Calibrate on an existing Milvus collection: its sections and stored vectors.

    The collection is read at ``uri`` (with ``client_options``), or through ``client``, an
    open ``MilvusClient``, when ``uri`` is None.

    Only the questions are embedded. ``questions`` are JSON Lines questions (gold
    ids matched with the primary key, or the metadata key ``id_field``) or a simple
    form; an answerable question none of whose gold is a section read is left out, with a
    warning. ``filter`` (a Milvus expression) calibrates under a metadata filter. ``layout``
    names the id, vector and text fields (by default the adapters' layouts are tried).
    Other ``options`` are those of :func:`calibrate` or :func:`calibrate_simple`.
    """
    _check_before_reading(questions, options)
    raw = embedder.model_id
    model = ModelId.parse(raw) if isinstance(raw, str) else raw
    stored = read_collection(
        uri,
        collection,
        id_field=id_field,
        filter=filter,
        dimension=model.dimension,
        progress=progress,
        client=client,
        layout=layout,
        **(client_options or {}),
    )
    corpus = list(stored.passages)
    metric = (stored.metric or Metric.IP).value
    read = {"collection": collection, "layout": stored.layout.name, "filter": filter or None}
    if isinstance(questions, SimpleForm):
        form = reachable_form(questions, corpus)
        simple = calibrate_simple(embedder, corpus, form, passage_vectors=stored.vectors, **options)
        return replace(simple, metric=metric, extra=read)
    result = calibrate(
        embedder,
        corpus,
        resolve_gold(questions, stored),
        passage_vectors=stored.vectors,
        **options,
    )
    result.extra.update(read)
    return replace(result, metric=metric)


def _check_before_reading(questions: Any, options: dict[str, Any]) -> None:
    """Refuse questions of another type and options :func:`calibrate` (or, for a simple
    form, :func:`calibrate_simple`) does not take, before a collection is read: they
    failed only after it was read whole."""
    simple = isinstance(questions, SimpleForm)
    if not simple and (
        isinstance(questions, str | bytes)
        or not isinstance(questions, Sequence)
        or not all(isinstance(q, Question) for q in questions)
    ):
        kinds = sorted({type(q).__name__ for q in questions}) if isinstance(questions, list) else []
        got = f"a list of {', '.join(kinds)}" if kinds else type(questions).__name__
        raise TypeError(
            "questions must be the questions of load_questions(path) (JSON Lines, with gold "
            f"passages) or the form of load_simple_form(path) (YAML), got {got}"
        )
    target = calibrate_simple if simple else calibrate
    taken = set(named_parameters(target)) - {"embedder", "corpus", "questions", "form"}
    check_arguments("the calibration", options, taken - {"passage_vectors"})
    check_params(
        options.get("mode", "never-lose"),
        options.get("margin"),
        options.get("max_loss", DEFAULT_MAX_LOSS),
        options.get("gate_margin"),
    )
