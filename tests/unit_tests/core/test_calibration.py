"""Calibration maths on hand-made vectors: pairs, modes, trade-off, grouped CV, forms, profiles.

Passages are orthonormal basis vectors, so a question's cosine with each passage is
exactly the coefficient we give it: every expected number below is written by hand.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from thresholded import CalibrationProfile, ModelId, RetrievalPolicy, files
from thresholded.calibration import (
    BatchedEmbedder,
    Passage,
    Question,
    SimpleForm,
    assign_folds,
    calibrate,
    calibrate_simple,
    clopper_pearson_upper,
    cross_validate,
    default_grid,
    load_corpus,
    load_questions,
    load_simple_form,
    score_pairs,
    suggest,
    trade_off,
)
from thresholded.cli import main
from thresholded.commands import calibrate as calibrate_command
from thresholded.errors import NotUnitVectorError, ThresholdedError

# A world of orthonormal passages ---------------------------------------------------------


class World:
    """Passages are basis vectors e1..em; a question gets the cosines we choose.

    Dimension 0 absorbs the rest of a question's unit length.
    """

    def __init__(self, passages: Sequence[Passage]) -> None:
        self.passages = list(passages)
        self.dim = len(self.passages) + 1
        self.vectors: dict[str, np.ndarray] = {}
        for i, p in enumerate(self.passages, start=1):
            v = np.zeros(self.dim)
            v[i] = 1.0
            self.vectors[p.text] = v

    def ask(self, text: str, cosines: dict[str, float]) -> str:
        v = np.zeros(self.dim)
        index = {p.pid: i for i, p in enumerate(self.passages, start=1)}
        for pid, c in cosines.items():
            v[index[pid]] = c
        rest = 1.0 - float(v @ v)
        assert rest >= -1e-12, "cosines too large for a unit vector"
        v[0] = math.sqrt(max(rest, 0.0))
        self.vectors[text] = v
        return text

    def embedder(self, model_id: str = "fake-model") -> FakeEmbedder:
        return FakeEmbedder(self.vectors, model_id)


class FakeEmbedder:
    """Maps each text to its chosen unit vector; counts calls to show batching."""

    def __init__(self, vectors: dict[str, np.ndarray], model_id: str = "fake-model") -> None:
        self.vectors = vectors
        self.model_id = model_id
        self.calls = 0

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        return np.array([self.vectors[t] for t in texts])

    embed_queries = embed_documents


def passage(pid: str, lang: str, title: str = "A") -> Passage:
    return Passage(pid=pid, lang=lang, text=f"text of {pid}", group=pid[:-3], title=title)


def question(
    world: World,
    qid: str,
    lang: str,
    cosines: dict[str, float],
    gold: Sequence[str] = (),
    title: str | None = None,
    origin: str = "dev",
) -> Question:
    text = world.ask(f"question {qid}", cosines)
    return Question(
        qid=qid,
        lang=lang,
        question=text,
        gold_pids=tuple(gold),
        gold_group=gold[0][:-3] if gold else None,
        title=title,
        origin=origin,
    )


@pytest.fixture
def bilingual() -> tuple[World, list[Question]]:
    """Two paragraphs in en and de; en and de questions; one unrelated question each."""
    world = World(
        [
            passage("A:0:en", "en"),
            passage("A:0:de", "de"),
            passage("B:0:en", "en", "B"),
            passage("B:0:de", "de", "B"),
        ]
    )
    questions = [
        question(
            world,
            "q1",
            "en",
            {"A:0:en": 0.6, "A:0:de": 0.5, "B:0:en": 0.3, "B:0:de": 0.2},
            ["A:0:en", "A:0:de"],
            "A",
        ),
        question(
            world,
            "q2",
            "de",
            {"A:0:en": 0.2, "A:0:de": 0.7, "B:0:en": 0.4, "B:0:de": 0.1},
            ["A:0:en", "A:0:de"],
            "A",
        ),
        question(world, "u1", "en", {"B:0:en": 0.25, "B:0:de": 0.15}, origin="junk"),
        question(world, "u2", "de", {"A:0:de": 0.05, "B:0:de": 0.12}, origin="junk"),
    ]
    return world, questions


# Pairs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("passages", "pairs", "gold", "top"),
    [
        # en passages: en->en and de->en; the de question's best en passage is B (0.4)
        ("en", ["en->en", "de->en"], {"q1": 0.6, "q2": 0.2}, {"q1": 0.6, "q2": 0.4, "u1": 0.25}),
        ("de", ["de->de", "en->de"], {"q2": 0.7, "q1": 0.5}, {"q2": 0.7, "u2": 0.12, "u1": 0.15}),
        ("all", ["en->all", "de->all"], {"q1": 0.6, "q2": 0.7}, {"q1": 0.6, "u2": 0.12}),
    ],
)
def test_pairs_restrict_passages_by_language(
    bilingual: tuple[World, list[Question]],
    passages: str,
    pairs: list[str],
    gold: dict[str, float],
    top: dict[str, float],
) -> None:
    world, questions = bilingual
    result = calibrate(world.embedder(), world.passages, questions, passages=passages, folds=2)
    assert [s.pair for s in result.pairs] == pairs
    for s in result.pairs:
        for qid, g, t, ok in zip(s.qids, s.gold, s.top, s.answerable, strict=True):
            if ok and qid in gold:
                assert g == pytest.approx(gold[qid])
            if qid in top:
                assert t == pytest.approx(top[qid])
    assert result.extra["n_passages"] == (4 if passages == "all" else 2)


def test_gold_rank_and_top_k(bilingual: tuple[World, list[Question]]) -> None:
    world, questions = bilingual
    pv = np.array([world.vectors[p.text] for p in world.passages])
    qv = np.array([world.vectors[q.question] for q in questions])
    pairs = score_pairs(qv, pv, questions, world.passages, passages="all", top_k=1, candidates=3)
    en, de = pairs
    assert en.gold_rank[list(en.qids).index("q1")] == 1
    # de question: gold de 0.7 is first; en->all candidates are the best 3 scores
    assert de.gold_rank[list(de.qids).index("q2")] == 1
    np.testing.assert_allclose(en.candidates[list(en.qids).index("q1")], [0.6, 0.5, 0.3])


def test_question_without_allowed_gold_is_left_out(caplog: pytest.LogCaptureFixture) -> None:
    world = World([passage("A:0:en", "en"), passage("A:0:de", "de")])
    questions = [
        question(world, "q1", "en", {"A:0:en": 0.5}, ["A:0:en"], "A"),
        question(world, "q2", "en", {"A:0:de": 0.5}, ["A:0:de"], "A"),  # gold only in German
    ]
    result = calibrate(world.embedder(), world.passages, questions, passages="en", folds=2)
    (table,) = result.tables
    assert table.n_answerable == 1
    assert table.no_allowed_gold == 1
    assert "no gold passage among the allowed" in caplog.text


def test_question_languages_can_be_restricted(bilingual: tuple[World, list[Question]]) -> None:
    world, questions = bilingual
    result = calibrate(
        world.embedder(), world.passages, questions, passages="en", question_langs=["en"]
    )
    assert [s.pair for s in result.pairs] == ["en->en"]


@pytest.mark.parametrize("langs", [["en", "fr"], ["EN"]])
def test_a_question_language_no_question_has_is_refused_with_the_languages_there_are(
    bilingual: tuple[World, list[Question]], langs: list[str]
) -> None:
    """--question-lang en --question-lang fr calibrated on the English questions alone,
    without a word about fr; a language none had said only "check --question-lang"."""
    world, questions = bilingual
    wrong = next(lang for lang in langs if lang not in {"de", "en"})
    with pytest.raises(ValueError, match=rf"no question is in {wrong!r}.*questions are in de, en"):
        calibrate(world.embedder(), world.passages, questions, passages="en", question_langs=langs)


def test_table_percentiles_top_k_and_origins() -> None:
    world = World([passage(f"A:{i}:en", "en") for i in range(5)])
    questions = [
        question(world, f"q{i}", "en", {"A:0:en": 0.1 * (i + 1), "A:1:en": 0.05}, ["A:0:en"], "A")
        for i in range(5)
    ]
    questions += [
        question(world, "u1", "en", {"A:2:en": 0.3}, origin="clinc"),
        question(world, "u2", "en", {"A:3:en": 0.45}, origin="near-miss"),
        question(world, "u3", "en", {"A:3:en": 0.2}, origin="near-miss"),
    ]
    result = calibrate(world.embedder(), world.passages, questions, passages="en")
    (t,) = result.tables
    assert (t.n_answerable, t.n_unrelated) == (5, 3)
    assert t.answer_min == pytest.approx(0.1)
    assert t.answer_max == pytest.approx(0.5)
    assert t.answer_p5 == pytest.approx(np.percentile([0.1, 0.2, 0.3, 0.4, 0.5], 5))
    assert t.in_top_k == 1.0
    assert t.unrelated_max == pytest.approx(0.45)
    assert t.overlap == pytest.approx(0.35)
    by_origin = {o.origin: (o.n, o.min, o.max) for o in t.by_origin}
    assert by_origin["clinc"] == (1, pytest.approx(0.3), pytest.approx(0.3))
    assert by_origin["near-miss"] == (2, pytest.approx(0.2), pytest.approx(0.45))
    assert "| en->en | 5 |" in result.to_text()


# Modes --------------------------------------------------------------------------------------


def test_never_lose_is_lowest_answer_minus_margin_rounded_down() -> None:
    good = {"en->en": np.array([0.437, 0.5, 0.77]), "de->en": np.array([0.52, 0.6])}
    junk = {"en->en": np.array([0.3]), "de->en": np.array([0.2])}
    s = suggest("never-lose", good, junk, margin=0.02)
    assert s.per_pair == {"en->en": 0.41, "de->en": 0.5}
    assert s.threshold == 0.41  # the lowest over the pairs
    assert s.note == "leaves a margin of 0.027 under the lowest answering passage"
    assert suggest("never-lose", good, junk).threshold == 0.41  # 0.02 is the default margin


def test_loss_budget_lets_one_outlier_go() -> None:
    good = np.concatenate([[0.05], np.linspace(0.40, 0.80, 199)])  # 200 answers, one outlier
    pairs = {"en->en": good}
    assert suggest("never-lose", pairs, {}, margin=0.02).threshold == 0.03
    s = suggest("loss-budget", pairs, {}, max_loss=0.005)
    assert s.threshold == 0.40  # one of 200 is within 0.5%: the outlier does not set the floor
    assert s.margin == 0.0 and s.max_loss == 0.005
    assert "loses 1 answering passage" in s.note
    assert suggest("loss-budget", pairs, {}, max_loss=0.0).threshold == 0.05
    assert suggest("loss-budget", pairs, {}, max_loss=0.005, margin=0.05).threshold == 0.35
    # two outliers exceed the budget of one
    two = {"en->en": np.concatenate([[0.05, 0.06], np.linspace(0.40, 0.80, 198)])}
    assert suggest("loss-budget", two, {}, max_loss=0.005).threshold == 0.06


def test_loss_budget_takes_the_lowest_pair() -> None:
    good = {"a": np.linspace(0.5, 0.9, 100), "b": np.linspace(0.3, 0.9, 100)}
    assert suggest("loss-budget", good, {}, max_loss=0.0).per_pair == {"a": 0.5, "b": 0.3}
    assert suggest("loss-budget", good, {}, max_loss=0.0).threshold == 0.3


def test_separate_midpoint_only_without_overlap() -> None:
    good = {"en->en": np.array([0.5, 0.7]), "de->en": np.array([0.45, 0.8])}
    junk = {"en->en": np.array([0.1, 0.3]), "de->en": np.array([0.35])}
    s = suggest("separate", good, junk)
    assert s.threshold == pytest.approx(0.4)  # (0.45 + 0.35) / 2 over both pairs
    assert s.per_pair == {"en->en": 0.4, "de->en": 0.4}
    assert "midpoint" in s.note
    overlapping = suggest("separate", good, {"en->en": np.array([0.52])})
    assert overlapping.threshold is None
    assert "overlap by 0.070" in overlapping.note
    assert overlapping.per_pair["en->en"] is None
    assert suggest("separate", good, {}).threshold is None  # nothing to separate


def test_unknown_mode_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown mode"):
        suggest("maximal", {}, {})  # type: ignore[arg-type]


# Trade-off curve ----------------------------------------------------------------------------


def test_trade_off_counts_lost_emptied_and_dropped() -> None:
    good = np.array([0.2, 0.4, 0.6])
    junk = np.array([0.1, 0.3])
    candidates = np.array([[0.6, 0.3], [0.3, 0.05]])
    curve = {p.threshold: p for p in trade_off(good, junk, candidates, default_grid())}
    assert len(curve) == 81 and min(curve) == 0.0 and max(curve) == 0.8
    assert (curve[0.35].lost, curve[0.35].emptied) == (1, 2)
    assert curve[0.35].lost_share == pytest.approx(1 / 3)
    assert curve[0.35].emptied_share == 1.0
    assert curve[0.35].dropped_share == 0.75
    assert curve[0.2].lost == 0  # equal to the threshold is kept
    assert curve[0.0].dropped_share == 0.0


# Grouped cross-validation -------------------------------------------------------------------


def _articles_world(outlier: float = 0.05) -> tuple[World, list[Question]]:
    """Four articles of 10 questions; one article holds a low outlier."""
    world = World([passage(f"{a}:0:en", "en", a) for a in "ABCD"])
    questions = []
    for a in "ABCD":
        for i in range(10):
            score = outlier if (a == "A" and i == 0) else 0.40 + 0.01 * i
            questions.append(
                question(world, f"{a}{i}", "en", {f"{a}:0:en": score}, [f"{a}:0:en"], a)
            )
    for i in range(8):
        questions.append(question(world, f"u{i}", "en", {"B:0:en": 0.1 + 0.02 * i}, origin="junk"))
    return world, questions


def test_folds_keep_articles_together() -> None:
    world, questions = _articles_world()
    result = calibrate(world.embedder(), world.passages, questions, passages="en", folds=2)
    fold_of = assign_folds(result.pairs, 2)
    assert {fold_of[a] for a in "ABCD"} == {0, 1}
    assert sorted(fold_of[a] for a in "ABCD") == [0, 0, 1, 1]  # balanced: 20 + 20


def test_cross_validation_loses_the_held_out_outlier() -> None:
    world, questions = _articles_world()
    result = calibrate(world.embedder(), world.passages, questions, passages="en", folds=4)
    cv = result.cross_validation["never-lose"]
    assert cv.folds == 4
    # when article A is held out, the floor is chosen on B-D (0.40 - 0.02): A's outlier is lost
    assert sorted(t for t in cv.fold_thresholds if t is not None) == [0.03, 0.03, 0.03, 0.38]
    pc = cv.pairs["en->en"]
    assert (pc.lost, pc.n) == (1, 40)
    assert pc.loss == pytest.approx(1 / 40)
    assert pc.worst_article == "A"
    assert pc.binomial_upper == pytest.approx(clopper_pearson_upper(1, 40))
    assert pc.bootstrap_upper >= pc.loss
    # the never-lose floor on all questions still keeps the outlier
    assert result.threshold == 0.03
    assert result.suggestions["never-lose"].per_pair == {"en->en": 0.03}


def test_cross_validation_direct_and_emptied_share() -> None:
    world, questions = _articles_world(outlier=0.45)
    result = calibrate(world.embedder(), world.passages, questions, passages="en", folds=2)
    cv = cross_validate(result.pairs, "separate", folds=2)
    assert cv.pairs["en->en"].lost == 0
    # junk tops 0.10..0.24, answers from 0.40: every fold separates, everything is emptied
    assert cv.pairs["en->en"].emptied_share == 1.0
    assert all(t is not None for t in cv.fold_thresholds)


def test_a_floor_or_gate_of_zero_is_off_as_the_policy_reads_it() -> None:
    # answers at 0.025 give a never-lose floor and gate of 0.00, which a policy reads as
    # "off": they drop no candidate and empty no question, not even those below 0. The
    # figures said the negative candidates were dropped and the unrelated questions emptied
    world = World([passage(f"{a}:0:en", "en", a) for a in "ABCD"])
    below = {f"{a}:0:en": -0.1 for a in "ABCD"}
    questions = [
        question(world, f"{a}{i}", "en", {**below, f"{a}:0:en": 0.025}, [f"{a}:0:en"], a)
        for a in "ABCD"
        for i in range(3)
    ]
    questions += [question(world, f"u{i}", "en", below, origin="junk") for i in range(4)]
    result = calibrate(world.embedder(), world.passages, questions, passages="en", folds=2)
    assert (result.threshold, result.gate) == (0.0, 0.0)
    floor_at_zero = result.curves["en->en"][0]
    gate_at_zero = result.gate_curves["en->en"][0]
    assert floor_at_zero.threshold == gate_at_zero.threshold == 0.0
    assert (floor_at_zero.emptied, floor_at_zero.dropped_share) == (0, 0.0)
    assert gate_at_zero.emptied == 0
    held_out = result.cross_validation["never-lose"].pairs["en->en"]
    assert set(result.cross_validation["never-lose"].fold_gates) == {0.0}
    assert (held_out.emptied_share, held_out.emptied_floor_share, held_out.lost) == (0, 0, 0)


def test_cross_validation_needs_two_articles() -> None:
    world = World([passage("A:0:en", "en")])
    qs = [question(world, "q", "en", {"A:0:en": 0.5}, ["A:0:en"], "A")]
    result = calibrate(world.embedder(), world.passages, qs, passages="en")
    assert result.cross_validation["never-lose"].pairs == {}
    assert "2+ articles" in result.cross_validation["never-lose"].note


def test_clopper_pearson_upper() -> None:
    assert clopper_pearson_upper(0, 369) == pytest.approx(1 - 0.05 ** (1 / 369), rel=1e-6)
    assert clopper_pearson_upper(5, 5) == 1.0
    stats = pytest.importorskip("scipy.stats")
    assert clopper_pearson_upper(3, 200) == pytest.approx(stats.beta.ppf(0.95, 4, 197), rel=1e-6)


# Embedding checks -----------------------------------------------------------------------


def test_vectors_must_be_unit_length(bilingual: tuple[World, list[Question]]) -> None:
    world, questions = bilingual
    embedder = world.embedder()
    embedder.vectors = {t: v * 2 for t, v in embedder.vectors.items()}
    with pytest.raises(NotUnitVectorError):
        calibrate(embedder, world.passages, questions)


def test_stored_vectors_of_the_simple_form_must_be_unit_length() -> None:
    # a stored section at norm 2.5 and cosine 0.6 scores 1.5 by inner product: it was
    # measured as the question's "cosine", and the gate suggested from it
    world = World([passage("A:0:en", "en"), passage("B:0:en", "en", "B")])
    form = SimpleForm((world.ask("refund?", {"A:0:en": 0.6}),), ())
    stored = np.array([world.vectors[p.text] for p in world.passages]) * 2.5
    with pytest.raises(NotUnitVectorError, match="2 stored passage vectors are not unit"):
        calibrate_simple(world.embedder(), world.passages, form, passage_vectors=stored)
    with pytest.raises(ValueError, match="1 stored vectors for 2 passages"):
        calibrate_simple(world.embedder(), world.passages, form, passage_vectors=stored[:1])


def test_model_id_gets_the_dimension(bilingual: tuple[World, list[Question]]) -> None:
    world, questions = bilingual
    result = calibrate(world.embedder("minilm"), world.passages, questions, folds=2)
    assert result.model_id == ModelId("sentence-transformers/all-MiniLM-L6-v2", 5)


def test_gold_outside_the_corpus_is_an_error(bilingual: tuple[World, list[Question]]) -> None:
    world, questions = bilingual
    bad = Question("x", "en", questions[0].question, ("nope",), "nope")
    with pytest.raises(ValueError, match="not in the corpus"):
        calibrate(world.embedder(), world.passages, [*questions, bad])


def test_batched_embedder_batches() -> None:
    calls: list[int] = []

    def embed(texts: list[str]) -> list[list[float]]:
        calls.append(len(texts))
        return [[1.0, 0.0]] * len(texts)

    emb = BatchedEmbedder("m", embed, embed, batch_size=3, progress=False)
    assert emb.embed_documents(["a"] * 7).shape == (7, 2)
    assert calls == [3, 3, 1]


# Files and the simple form ----------------------------------------------------------------


def test_loaders_check_their_input(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"pid": "a", "lang": "en", "text": "x"}\n{"pid": "a"', encoding="utf-8")
    with pytest.raises(ValueError, match=r"corpus.jsonl:2: not valid JSON"):
        load_corpus(corpus)
    corpus.write_text('{"pid": "a", "lang": "en", "text": "x"}\n' * 2, encoding="utf-8")
    with pytest.raises(ValueError, match="duplicate pid"):
        load_corpus(corpus)
    queries = tmp_path / "set" / "queries_dev.jsonl"
    queries.parent.mkdir()
    queries.write_text(
        '{"qid": "1", "lang": "en", "question": "q?", "gold_group": null, "gold_pids": []}\n',
        encoding="utf-8",
    )
    (q,) = load_questions(queries)
    assert (q.answerable, q.origin, q.article) == (False, "set", "set:1")
    with pytest.raises(FileNotFoundError):
        load_questions(tmp_path / "missing.jsonl")


def test_simple_form(tmp_path: Path) -> None:
    world = World([passage("A:0:en", "en"), passage("B:0:en", "en", "B")])
    match = [world.ask("reset password?", {"A:0:en": 0.6}), world.ask("refund?", {"B:0:en": 0.5})]
    junk = [world.ask("weather?", {"A:0:en": 0.2}), world.ask("joke?", {"B:0:en": 0.3})]
    path = tmp_path / "form.yaml"
    path.write_text(
        "should_match:\n"
        + "".join(f"  - {q}\n" for q in match)
        + "should_not_match:\n"
        + "".join(f"  - {q}\n" for q in junk),
        encoding="utf-8",
    )
    form = load_simple_form(path)
    assert form == SimpleForm(tuple(match), tuple(junk))
    result = calibrate_simple(world.embedder(), world.passages, form, mode="separate")
    assert result.lowest_good == pytest.approx(0.5)
    assert result.highest_junk == pytest.approx(0.3)
    assert result.threshold == pytest.approx(0.4)
    assert {r.question: round(r.top, 3) for r in result.rows}["refund?"] == 0.5
    text = result.to_text()
    assert "They separate: a gate at 0.400" in text
    assert result.suggestions["never-lose"].threshold == 0.48
    near = world.ask("a near miss", {"A:0:en": 0.55})
    overlap = calibrate_simple(
        world.embedder(), world.passages, SimpleForm(tuple(match), (near,)), mode="separate"
    )
    assert overlap.threshold is None
    assert "overlap by 0.050" in overlap.to_text()
    with pytest.raises(ThresholdedError, match="suggests no threshold"):
        overlap.to_profile()


def test_simple_form_errors(tmp_path: Path) -> None:
    path = tmp_path / "form.yml"
    path.write_text("should_match: []\n", encoding="utf-8")
    with pytest.raises(ValueError, match="at least one"):
        load_simple_form(path)
    path.write_text("should_match: [a]\nmaybe: [b]\n", encoding="utf-8")
    with pytest.raises(ValueError, match="unknown keys"):
        load_simple_form(path)
    path.write_text("should_match: [a, 3]\n", encoding="utf-8")
    with pytest.raises(ValueError, match="list of non-empty strings"):
        load_simple_form(path)


def test_a_question_both_answerable_and_unrelated_is_an_error(
    tmp_path: Path, bilingual: tuple[World, list[Question]]
) -> None:
    # one question measured on both sides: the gate had to keep it and empty it at once
    path = tmp_path / "form.yaml"
    path.write_text(
        "should_match: ['Can I get a refund?', 'Do you charge VAT?']\n"
        "should_not_match: ['Weather in Mumbai?', '  Can I get   a refund? ']\n",
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match=r"'Can I get a refund\?' is in should_match and in sho"):
        load_simple_form(path)
    with pytest.raises(ValueError, match="'refund' is in should_match and in should_not_match"):
        SimpleForm(("refund",), ("refund",))
    world, questions = bilingual
    answerable = next(q for q in questions if q.answerable and q.lang == "en")
    unrelated = Question("dup", "en", answerable.question)
    with pytest.raises(ValueError, match=rf"{answerable.qid}.* and unrelated as dup"):
        calibrate(world.embedder(), world.passages, [*questions, unrelated])


# The command: profile writing ---------------------------------------------------------------


@pytest.fixture
def cli_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, FakeEmbedder]:
    """Corpus and queries on disk, and the command's model replaced by the fake world."""
    world, questions = _articles_world()
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"pid": p.pid, "lang": p.lang, "text": p.text, "title": p.title}) + "\n"
            for p in world.passages
        ),
        encoding="utf-8",
    )
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        "".join(
            json.dumps(
                {
                    "qid": q.qid,
                    "lang": q.lang,
                    "question": q.question,
                    "gold_group": q.gold_group,
                    "gold_pids": list(q.gold_pids),
                    "title": q.title,
                }
            )
            + "\n"
            for q in questions
        ),
        encoding="utf-8",
    )
    embedder = world.embedder("fake-model")
    monkeypatch.setattr(calibrate_command, "load_embedder", lambda *a, **k: embedder)
    return corpus, queries, embedder


def _args(corpus: Path, queries: Path, out: Path, *extra: str) -> list[str]:
    return [
        "calibrate",
        "--corpus",
        str(corpus),
        "--queries",
        str(queries),
        "--model",
        "fake",
        "--passages",
        "en",
        "--out",
        str(out),
        "--no-progress",
        *extra,
    ]


def test_cli_writes_a_profile(
    cli_files: tuple[Path, Path, FakeEmbedder],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    corpus, queries, _ = cli_files
    out = tmp_path / "profiles" / "kb.json"
    assert main(_args(corpus, queries, out, "--collection", "kb", "--folds", "2")) == 0
    printed = capsys.readouterr().out
    assert "leaves a margin of 0.020 under the lowest answering passage" in printed
    profile = CalibrationProfile.load(out)
    assert profile.version == 2
    assert profile.min_similarity == 0.03
    assert (profile.min_top_similarity, profile.gate_margin) == (0.03, 0.02)
    assert profile.embedding_model == "fake-model@5"
    assert (profile.metric, profile.mode, profile.margin, profile.max_loss) == (
        "IP",
        "never-lose",
        0.02,
        None,
    )
    assert profile.collection == "kb" and profile.corpus == str(corpus)
    assert profile.measurements["pairs"]["en->en"]["n_answerable"] == 40
    assert profile.measurements["queries"] == [str(queries)]
    policy = RetrievalPolicy.from_profile(out, collection="kb")
    assert policy.min_similarity == 0.03
    assert policy.min_top_similarity == profile.min_top_similarity
    assert [p.name for p in out.parent.iterdir()] == ["kb.json"]  # no temporary file left


def test_cli_loss_budget_and_separate(
    cli_files: tuple[Path, Path, FakeEmbedder], tmp_path: Path
) -> None:
    corpus, queries, _ = cli_files
    out = tmp_path / "budget.json"
    assert main(_args(corpus, queries, out, "--mode", "loss-budget", "--max-loss", "0.05")) == 0
    profile = CalibrationProfile.load(out)
    assert (profile.mode, profile.min_similarity, profile.max_loss) == ("loss-budget", 0.4, 0.05)
    sep = tmp_path / "separate.json"
    assert main(_args(corpus, queries, sep, "--mode", "separate")) == 2  # outlier 0.05 < junk
    assert not sep.exists()


def test_cli_without_answerable_questions_says_what_is_missing(
    cli_files: tuple[Path, Path, FakeEmbedder],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # it advised "Use --mode never-lose or --mode loss-budget" to a never-lose run; and it
    # embedded every passage and question before it said so
    corpus, queries, embedder = cli_files
    rows = [json.loads(line) for line in queries.read_text(encoding="utf-8").splitlines()]
    unrelated = tmp_path / "unrelated.jsonl"
    unrelated.write_text(
        "".join(json.dumps(r) + "\n" for r in rows if not r["gold_pids"]), encoding="utf-8"
    )
    out = tmp_path / "p.json"
    for mode in ("never-lose", "loss-budget"):
        assert main(_args(corpus, unrelated, out, "--mode", mode)) == 2
        err = capsys.readouterr().err
        assert "no answerable questions" in err
        assert "--mode" not in err.split("no answerable questions")[1]
        assert "give questions with their gold passages" in err
    assert not out.exists()
    assert embedder.calls == 0


def test_cli_refuses_to_overwrite_without_force(
    cli_files: tuple[Path, Path, FakeEmbedder],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    corpus, queries, embedder = cli_files
    out = tmp_path / "p.json"
    assert main(_args(corpus, queries, out)) == 0
    before = out.read_bytes()
    calls = embedder.calls
    assert main(_args(corpus, queries, out, "--mode", "loss-budget")) == 2
    assert "exists; pass --force" in capsys.readouterr().err
    assert out.read_bytes() == before
    assert embedder.calls == calls  # refused before embedding anything
    assert main(_args(corpus, queries, out, "--mode", "loss-budget", "--force")) == 0
    assert CalibrationProfile.load(out).mode == "loss-budget"


@pytest.mark.parametrize("force", [False, True])
def test_cli_keeps_a_corrupt_profile(
    cli_files: tuple[Path, Path, FakeEmbedder],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    force: bool,
) -> None:
    corpus, queries, _ = cli_files
    out = tmp_path / "p.json"
    out.write_text('{"version": 1, "min_simil', encoding="utf-8")
    assert main(_args(corpus, queries, out, *(["--force"] if force else []))) == 2
    err = capsys.readouterr().err
    assert "is not valid JSON" in err and "left untouched" in err
    assert out.read_text(encoding="utf-8") == '{"version": 1, "min_simil'


def test_profile_write_is_atomic(
    cli_files: tuple[Path, Path, FakeEmbedder],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    corpus, queries, _ = cli_files
    out = tmp_path / "p.json"
    assert main(_args(corpus, queries, out)) == 0
    before = out.read_bytes()

    def crash(src: str, dst: str) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(files.os, "replace", crash)
    with pytest.raises(OSError, match="disk gone"):
        main(_args(corpus, queries, out, "--force"))
    assert out.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["corpus.jsonl", "p.json", "queries.jsonl"]


def test_plot_is_a_png(cli_files: tuple[Path, Path, FakeEmbedder], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    corpus, queries, _ = cli_files
    png = tmp_path / "plot.png"
    assert main(_args(corpus, queries, tmp_path / "p.json", "--plot", str(png))) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_core_imports_no_framework() -> None:
    code = (
        "import sys, thresholded.calibration, thresholded.calibration.report, "
        "thresholded.commands.calibrate\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('llama_index', 'langchain', "
        "'langchain_core', 'matplotlib')]\n"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[3])


class _Untouched:
    """A Milvus client that must not be read: the arguments are refused first."""

    model_id = "m@3"

    def __getattr__(self, name: str):
        raise AssertionError(f"the collection was read ({name}) before the arguments were checked")


@pytest.mark.parametrize(
    ("questions", "options", "refused"),
    [
        ("questions.yaml", {}, r"questions must be .*load_simple_form.* got str"),
        (["How do I get my money back?"], {}, r"questions must be .* got a list of str"),
        ([], {"gate_margn": 0.1}, r"'gate_margn' \(did you mean 'gate_margin'\?\)"),
        (SimpleForm(("a",), ("b",)), {"mode": "never_lose"}, "unknown mode 'never_lose'"),
        (SimpleForm(("a",), ("b",)), {"folds": 4}, r"'folds'"),
        (SimpleForm(("a",), ("b",)), {"margin": "0.02"}, r"margin must be a number .* '0.02'"),
        (SimpleForm(("a",), ("b",)), {"gate_margin": True}, r"gate_margin must be a number"),
        (SimpleForm(("a",), ("b",)), {"max_loss": "1%"}, r"max_loss must be a number .* '1%'"),
    ],
)
def test_calibrating_a_collection_checks_its_arguments_before_reading_it(
    questions, options, refused
):
    """A list of strings or a path failed with "'str' object has no attribute 'answerable'",
    a misspelt option with "calibrate_simple() got an unexpected keyword argument", both
    after the whole collection was read (minutes, on a large one)."""
    from thresholded.calibration import calibrate_collection

    with pytest.raises((TypeError, ValueError), match=refused):
        calibrate_collection(_Untouched(), None, "kb", questions, client=_Untouched(), **options)
