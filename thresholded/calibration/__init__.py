"""Calibrate the cosine floor and the answer gate on real questions, per collection and model.

A floor and a gate are measurements: where do the passages that answer real
questions score, where do the answerable questions' best results score, and where
do the best results of unrelated questions score, for one embedding model over one
collection? The package reads top to bottom as a run does:

- ``data``: the corpus, the questions and the simple YAML form;
- ``indexing``: the text an adapter embeds for a passage;
- ``embedder``: what calibration needs from a model, and the unit-vector checks;
- ``collection``: the sections and stored vectors of an existing Milvus collection;
- ``scores``: every question against every allowed passage, one pair per language;
- ``table``, ``curve``: what each pair measured, and what each threshold costs;
- ``modes``, ``floor``, ``gate``: the suggested floor and gate of each mode;
- ``bounds``, ``crossval``: their loss on unseen articles, judged together;
- ``result``, ``run``, ``simple``: the whole run and its profile;
- ``markdown``, ``report``, ``plot``: Markdown and a PNG.

Framework-free: an embedder is anything with ``model_id``, ``embed_documents`` and
``embed_queries`` returning unit vectors. ``calibrate`` is the single entry point.
"""

from thresholded.calibration.bounds import clopper_pearson_upper
from thresholded.calibration.collection import read_collection
from thresholded.calibration.crossval import CrossValidation, PairCV, assign_folds, cross_validate
from thresholded.calibration.curve import CurvePoint, default_grid, trade_off
from thresholded.calibration.data import (
    Passage,
    Question,
    SimpleForm,
    is_simple_form,
    load_corpus,
    load_questions,
    load_simple_form,
)
from thresholded.calibration.embedder import BatchedEmbedder, Embedder
from thresholded.calibration.floor import Suggestion, suggest
from thresholded.calibration.gate import suggest_gate
from thresholded.calibration.indexing import INDEX_AS, IndexAs, passage_texts
from thresholded.calibration.modes import DEFAULT_MARGIN, DEFAULT_MAX_LOSS, MODES, Mode
from thresholded.calibration.result import CalibrationResult
from thresholded.calibration.run import calibrate, calibrate_collection, summarise
from thresholded.calibration.scores import PairScores, allowed_passages, score_pairs
from thresholded.calibration.simple import SimpleCalibrationResult, SimpleRow, calibrate_simple
from thresholded.calibration.table import OriginRange, PairTable, pair_table

__all__ = [
    "DEFAULT_MARGIN",
    "DEFAULT_MAX_LOSS",
    "INDEX_AS",
    "MODES",
    "BatchedEmbedder",
    "CalibrationResult",
    "CrossValidation",
    "CurvePoint",
    "Embedder",
    "IndexAs",
    "Mode",
    "OriginRange",
    "PairCV",
    "PairScores",
    "PairTable",
    "Passage",
    "Question",
    "SimpleCalibrationResult",
    "SimpleForm",
    "SimpleRow",
    "Suggestion",
    "allowed_passages",
    "assign_folds",
    "calibrate",
    "calibrate_collection",
    "calibrate_simple",
    "clopper_pearson_upper",
    "cross_validate",
    "default_grid",
    "is_simple_form",
    "load_corpus",
    "load_questions",
    "load_simple_form",
    "pair_table",
    "passage_texts",
    "read_collection",
    "score_pairs",
    "suggest",
    "suggest_gate",
    "summarise",
    "trade_off",
]
