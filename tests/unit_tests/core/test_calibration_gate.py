"""Calibration of the answer gate beside the floor: suggestions, cross-validation, inputs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from thresholded import CalibrationProfile, RetrievalPolicy
from thresholded.calibration import (
    PairScores,
    Passage,
    SimpleForm,
    assign_folds,
    calibrate_simple,
    cross_validate,
    load_corpus,
    load_simple_form,
    passage_texts,
    suggest,
    suggest_gate,
    summarise,
)
from thresholded.calibration.gate import budget_gate, joint_lost
from thresholded.calibration.modes import in_force
from thresholded.models import ModelId


def pair(
    gold: list[float],
    top: list[float],
    junk: list[float],
    *,
    articles: list[str] | None = None,
    origins: list[str] | None = None,
) -> PairScores:
    """One pair from answering scores, answerable top scores and unrelated top scores."""
    n, m = len(gold), len(junk)
    tops = np.array([*top, *junk], dtype=float)
    return PairScores(
        pair="en->en",
        question_lang="en",
        passage_lang="en",
        qids=tuple(f"q{i}" for i in range(n + m)),
        articles=tuple(articles or [f"A{i % 4}" for i in range(n)])
        + tuple(f"junk:{i}" for i in range(m)),
        origins=tuple(["dev"] * n) + tuple(origins or ["clinc"] * m),
        answerable=np.array([True] * n + [False] * m),
        top=tops,
        gold=np.array([*gold, *[math.nan] * m], dtype=float),
        gold_rank=np.ones(n + m, dtype=int),
        candidates=tops[:, None],
    )


# Suggestions -----------------------------------------------------------------------------


def test_never_lose_gate_is_lowest_top_minus_margin_rounded_down() -> None:
    top = {"en->en": np.array([0.191, 0.5, 0.7])}
    junk = {"en->en": np.array([0.1, 0.3])}
    gate = suggest_gate("never-lose", top, junk)
    assert gate.threshold == 0.17
    assert gate.margin == 0.02
    assert "under the lowest answerable top score" in gate.note
    assert suggest_gate("never-lose", top, junk, margin=0.0).threshold == 0.19


def test_gate_sits_above_the_floor_when_tops_exceed_answers() -> None:
    s = pair(gold=[0.104, 0.4, 0.6], top=[0.191, 0.5, 0.7], junk=[0.15, 0.3])
    result = summarise([s], model_id=ModelId("fake", 3), passages="en", folds=2)
    assert (result.threshold, result.gate) == (0.08, 0.17)
    profile = result.to_profile(collection="c")
    assert (profile.version, profile.min_similarity, profile.min_top_similarity) == (2, 0.08, 0.17)
    assert "Gate 0.17" in profile.provenance


def test_loss_budget_gate_shares_the_budget_with_the_floor() -> None:
    gold = np.linspace(0.3, 0.8, 200)
    top = gold + 0.1
    top[0] = 0.31  # the floor's loss already spends the one allowed answer
    floor = 0.301
    gate = budget_gate(gold, top, floor, max_loss=0.005)
    assert joint_lost(gold, top, floor, gate).sum() == 1
    assert gate == pytest.approx(top[1:].min())


@given(
    st.lists(st.tuples(st.floats(-1, 1), st.floats(0, 1)), min_size=1, max_size=60),
    st.floats(-1, 1),
    st.sampled_from([0.0, 0.005, 0.05, 0.2]),
)
def test_budget_gate_is_the_highest_within_budget(
    rows: list[tuple[float, float]], floor: float, max_loss: float
) -> None:
    gold = np.array([g for g, _ in rows])
    top = np.minimum(gold + np.array([d for _, d in rows]), 1.0)  # a top is at least its answer
    allowed = math.floor(max_loss * gold.size + 1e-9)
    gate = budget_gate(gold, top, floor, max_loss)
    by_floor = int((gold < in_force(floor)).sum())  # a floor of 0 is off
    if by_floor > allowed:
        assert gate == top.min()
        return
    assert joint_lost(gold, top, floor, gate).sum() <= allowed
    higher = [t for t in top if t > gate and t != 0.0]  # a gate of 0 is off, not higher
    assert all(joint_lost(gold, top, floor, t).sum() > allowed for t in higher)


def test_separate_gate_only_without_overlap() -> None:
    top = {"p": np.array([0.5, 0.6])}
    assert suggest_gate("separate", top, {"p": np.array([0.3])}).threshold == 0.4
    overlap = suggest_gate("separate", top, {"p": np.array([0.55])})
    assert overlap.threshold is None
    assert "overlap" in overlap.note


# Cross-validation of both together -------------------------------------------------------


def test_cross_validation_counts_a_question_the_held_out_gate_empties() -> None:
    # article A's questions have the lowest tops; chosen without A, the gate empties them
    gold = [0.30] * 6
    top = [0.35, 0.36, 0.60, 0.60, 0.60, 0.60]
    junk = [0.30, 0.50, 0.45]
    s = pair(gold, top, junk=junk, articles=["A", "A", "B", "B", "C", "C"])
    cv = cross_validate([s], "never-lose", folds=3)
    pc = cv.pairs["en->en"]
    assert cv.fold_thresholds == (0.28, 0.28, 0.28)
    assert sorted(cv.fold_gates) == [0.33, 0.33, 0.58]
    assert (pc.lost, pc.lost_floor, pc.answerable_emptied) == (2, 0, 2)
    assert pc.emptied_floor_share == 0.0
    fold_of = assign_folds([s], 3)
    gates = [cv.fold_gates[fold_of[f"junk:{i}"]] for i in range(3)]
    expected = sum(t < g for t, g in zip(junk, gates, strict=True)) / 3
    assert pc.emptied_share == pytest.approx(expected)
    assert pc.emptied_by_origin == {"clinc": pytest.approx(expected)}


def test_cross_validation_floor_figures_stay_beside_the_gate() -> None:
    s = pair(
        gold=[0.3, 0.4, 0.5, 0.6],
        top=[0.6, 0.6, 0.7, 0.7],
        junk=[0.25, 0.45, 0.55],
        origins=["clinc", "near-miss", "near-miss"],
    )
    cv = cross_validate([s], "never-lose", folds=4)
    pc = cv.pairs["en->en"]
    assert pc.emptied_floor_share <= pc.emptied_share
    assert set(pc.emptied_by_origin) == {"clinc", "near-miss"}
    assert all(
        pc.emptied_floor_by_origin[o] <= pc.emptied_by_origin[o] for o in pc.emptied_by_origin
    )
    assert pc.lost >= pc.lost_floor


# Inputs ----------------------------------------------------------------------------------


def test_a_corpus_of_one_language_needs_no_lang(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"pid": "a", "text": "x"}\n{"pid": "b", "text": "y"}\n', encoding="utf-8")
    assert [p.lang for p in load_corpus(path)] == ["und", "und"]
    path.write_text('{"pid": "a", "text": "x", "lang": "de"}\n{"pid": "b", "text": "y"}\n')
    assert [p.lang for p in load_corpus(path)] == ["de", "de"]
    path.write_text(
        '{"pid": "a", "text": "x", "lang": "de"}\n{"pid": "b", "text": "y", "lang": "en"}\n'
        '{"pid": "c", "text": "z"}\n'
    )
    with pytest.raises(ValueError, match=r"c.jsonl:3: 'lang' is missing .* several languages"):
        load_corpus(path)


def test_a_passage_language_asked_of_a_corpus_that_names_none_says_so(tmp_path: Path) -> None:
    """The documented simple-form command (``--passages en``) over a corpus without ``lang``
    said "no passages in language 'en' (the corpus has ['und'] and all)"."""
    from thresholded.calibration.scores import allowed_passages

    path = tmp_path / "c.jsonl"
    path.write_text('{"pid": "a", "text": "x"}\n{"pid": "b", "text": "y"}\n', encoding="utf-8")
    corpus = load_corpus(path)
    with pytest.raises(ValueError, match=r"names no language.*'lang'.*passages all") as raised:
        allowed_passages(corpus, "en")
    assert "und" not in str(raised.value)
    assert allowed_passages(corpus, "all") == corpus


def test_a_folder_or_plain_text_as_corpus_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is a folder: expected a JSON Lines file of passages"):
        load_corpus(tmp_path)
    text = tmp_path / "notes.md"
    text.write_text("# Refunds\n\nWe refund within 14 days.\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"is not JSON Lines .* not plain text"):
        load_corpus(text)


def test_passage_text_as_each_adapter_indexes_it() -> None:
    p = Passage(pid="A:0:en", lang="en", text="Body.", group="A:0", title="A", source="A")
    assert passage_texts([p], "text") == ["Body."]
    assert passage_texts([p], "langchain") == ["Body."]
    (embedded,) = passage_texts([p], "llama-index")
    assert embedded.endswith("Body.")
    assert "source: A" in embedded and "lang: en" in embedded
    with pytest.raises(ValueError, match="unknown index_as"):
        passage_texts([p], "haystack")  # type: ignore[arg-type]


# The simple form -------------------------------------------------------------------------


class Unit:
    """Passages are basis vectors; a question's vector is given by its cosines."""

    def __init__(self, passages: list[Passage], questions: dict[str, dict[str, float]]) -> None:
        self.model_id = "fake@4"
        index = {p.pid: i for i, p in enumerate(passages, start=1)}
        self.vectors: dict[str, np.ndarray] = {}
        for p in passages:
            self.vectors[p.text] = np.eye(4)[index[p.pid]]
        for text, cosines in questions.items():
            v = np.zeros(4)
            for pid, c in cosines.items():
                v[index[pid]] = c
            v[0] = math.sqrt(1 - v @ v)
            self.vectors[text] = v

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return np.array([self.vectors[t] for t in texts])

    embed_queries = embed_documents


def test_simple_form_gold_measures_the_floor_and_tops_the_gate(tmp_path: Path) -> None:
    passages = [
        Passage("refund#0", "en", "refunds", source="refund-policy"),
        Passage("billing#0", "en", "invoices", source="billing-faq"),
        Passage("security#0", "en", "2fa", source="account-security"),
    ]
    unit = Unit(
        passages,
        {
            "money back?": {"refund#0": 0.6, "billing#0": 0.3},
            "charged twice": {"billing#0": 0.7, "refund#0": 0.45},
            "weather?": {"security#0": 0.2},
        },
    )
    form_path = tmp_path / "form.yaml"
    form_path.write_text(
        "should_match:\n"
        "  - question: money back?\n"
        "    gold: refund-policy\n"
        "  - charged twice\n"
        "should_not_match:\n"
        "  - weather?\n",
        encoding="utf-8",
    )
    form = load_simple_form(form_path)
    assert form == SimpleForm(
        ("money back?", "charged twice"), ("weather?",), ("refund-policy", None)
    )
    result = calibrate_simple(unit, passages, form)
    assert result.has_gold
    assert (result.threshold, result.gate) == (0.58, 0.58)
    rows = {r.question: r for r in result.rows}
    assert rows["money back?"].gold_score == pytest.approx(0.6)
    assert "The floor comes from the gold passages" in result.to_text()
    profile = result.to_profile()
    assert (profile.version, profile.min_top_similarity) == (2, 0.58)
    assert profile.measurements["floor_from"] == "gold"


def test_a_should_match_question_without_gold_keeps_its_top_above_the_floor() -> None:
    # "charged twice" names no gold: its best section (0.4) is all the form says answers it.
    # The floor came from the gold scores alone (0.58), dropped every section it has, and
    # it came back empty though the gate (0.38) let it through
    passages = [
        Passage("refund#0", "en", "refunds", source="refund-policy"),
        Passage("billing#0", "en", "invoices", source="billing-faq"),
        Passage("security#0", "en", "2fa", source="account-security"),
    ]
    unit = Unit(
        passages,
        {
            "money back?": {"refund#0": 0.6},
            "charged twice": {"billing#0": 0.4, "refund#0": 0.3},
            "weather?": {"security#0": 0.2},
        },
    )
    form = SimpleForm(("money back?", "charged twice"), ("weather?",), ("refund-policy", None))
    for mode in ("never-lose", "loss-budget"):
        result = calibrate_simple(unit, passages, form, mode=mode)
        assert result.threshold is not None and result.threshold <= 0.4, mode
        assert result.gate is not None and result.threshold <= result.gate, mode
        lost = next(p.lost for p in result.curve if p.threshold == 0.45)
        assert lost == 1, mode  # at 0.45 the floor empties "charged twice"
    assert calibrate_simple(unit, passages, form).threshold == 0.38


def test_simple_form_without_gold_gives_floor_and_gate_from_tops(tmp_path: Path) -> None:
    passages = [Passage("a", "en", "a"), Passage("b", "en", "b"), Passage("c", "en", "c")]
    unit = Unit(passages, {"q1": {"a": 0.5}, "q2": {"b": 0.7}, "junk": {"c": 0.1}})
    result = calibrate_simple(unit, passages, SimpleForm(("q1", "q2"), ("junk",)))
    assert not result.has_gold
    assert (result.threshold, result.gate) == (0.48, 0.48)
    assert "Name the answering section" in result.to_text()


def test_simple_form_gold_must_name_a_passage(tmp_path: Path) -> None:
    """A misspelt gold said only "names no allowed passage": it says what gold may name and
    which sources there are."""
    passages = [
        Passage("a", "en", "a", source="billing"),
        Passage("b", "en", "b", source="refunds"),
        Passage("c", "en", "c"),
    ]
    unit = Unit(passages, {"q1": {"a": 0.5}})
    with pytest.raises(
        ValueError,
        match=r"gold 'billing-faq' of 'q1' names no allowed passage: no passage id or "
        r"source is 'billing-faq' \(sources: 'billing', 'refunds'\)",
    ):
        calibrate_simple(unit, passages, SimpleForm(("q1",), (), ("billing-faq",)))


def test_simple_form_entries_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "form.yaml"
    path.write_text("should_match:\n  - question: q\n    source: x\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"non-empty strings or \{question, gold\}"):
        load_simple_form(path)
    path.write_text("should_match: [a]\nshould_not_match:\n  - question: q\n    gold: x\n")
    with pytest.raises(ValueError, match="'should_not_match' must be a list of non-empty strings"):
        load_simple_form(path)


def test_profile_from_the_gate_loads_into_a_policy(tmp_path: Path) -> None:
    s = pair(gold=[0.2, 0.4], top=[0.3, 0.5], junk=[0.1])
    result = summarise([s], model_id=ModelId("fake", 3), passages="en", folds=2)
    path = result.to_profile().save(tmp_path / "p.json")
    policy = RetrievalPolicy.from_profile(path)
    assert (policy.min_similarity, policy.min_top_similarity) == (0.18, 0.28)
    stored = json.loads(path.read_text(encoding="utf-8"))
    assert stored["version"] == 2 and stored["gate_margin"] == 0.02
    assert CalibrationProfile.load(path).measurements["gate_suggestions"]["never-lose"]["threshold"]


def test_floor_and_gate_rules_agree_with_suggest_on_tops() -> None:
    top = {"p": np.array([0.3, 0.5])}
    junk = {"p": np.array([0.1])}
    for mode in ("never-lose", "separate"):
        assert suggest_gate(mode, top, junk).threshold == suggest(mode, top, junk).threshold


# The command -----------------------------------------------------------------------------


@pytest.fixture
def small_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Three passages and four questions on disk; the command's model is the Unit world."""
    from thresholded.commands import calibrate as calibrate_command

    passages = [Passage(p, "en", f"text {p}", title=p) for p in ("a", "b", "c")]
    cosines = {
        "qa": {"a": 0.5, "b": 0.2},
        "qb": {"b": 0.6},
        "qc": {"c": 0.3, "a": 0.45},
        "junk": {"a": 0.1},
    }
    unit = Unit(passages, cosines)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"pid": p.pid, "text": p.text, "title": p.title}) + "\n" for p in passages
        )
    )
    gold = {"qa": "a", "qb": "b", "qc": "c"}
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        "".join(
            json.dumps(
                {
                    "qid": q,
                    "lang": "en",
                    "question": q,
                    "gold_pids": [gold[q]] if q in gold else [],
                    "title": gold.get(q),
                }
            )
            + "\n"
            for q in cosines
        )
    )
    monkeypatch.setattr(calibrate_command, "load_embedder", lambda *a, **k: unit)
    return corpus, queries


def test_cli_gate_margin_and_the_report(
    small_files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from thresholded.cli import main

    corpus, queries = small_files
    out = tmp_path / "p.json"
    argv = ["calibrate", "--corpus", str(corpus), "--queries", str(queries), "--model", "x"]
    argv += ["--out", str(out), "--folds", "3", "--gate-margin", "0.05", "--no-progress"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    profile = CalibrationProfile.load(out)
    # answers 0.5, 0.6, 0.3: floor 0.28; tops 0.5, 0.6, 0.45: gate 0.45 - 0.05
    assert (profile.min_similarity, profile.min_top_similarity) == (0.28, 0.4)
    assert (profile.margin, profile.gate_margin) == (0.02, 0.05)
    assert "Suggested gate (never-lose): **0.40**" in printed
    assert "## Suggested gates" in printed and "## Trade-off of the gate" in printed
    assert "min_top_similarity 0.40" in printed


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--uri", "kb.db"], "not allowed with argument"),
        (["--filter", "a == 1"], "--milvus-collection, --id-field and --filter go with --uri"),
        (["--id-field", "pid"], "--milvus-collection, --id-field and --filter go with --uri"),
    ],
)
def test_cli_source_options_are_checked(
    small_files: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    from thresholded.cli import main

    corpus, queries = small_files
    argv = ["calibrate", "--corpus", str(corpus), "--queries", str(queries), "--model", "x"]
    argv += ["--out", str(tmp_path / "p.json"), *extra]
    try:
        code = main(argv)
    except SystemExit as stop:  # argparse refuses exclusive options itself
        code = stop.code
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "p.json").exists()


def test_cli_collection_options_are_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from thresholded.cli import main

    base = ["calibrate", "--queries", "q.jsonl", "--model", "x", "--out", str(tmp_path / "p")]
    assert main([*base, "--uri", "kb.db"]) == 2
    assert "--uri needs --milvus-collection" in capsys.readouterr().err
    assert main([*base, "--uri", "kb.db", "--milvus-collection", "c", "--as", "langchain"]) == 2
    assert "--as goes with --corpus" in capsys.readouterr().err


def test_cli_question_lang_is_refused_for_the_simple_form(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # it was dropped without a word: every question of the form was calibrated
    from thresholded.cli import main

    form = tmp_path / "form.yaml"
    form.write_text("should_match:\n  - Wie bekomme ich mein Geld?\n", encoding="utf-8")
    argv = ["calibrate", "--corpus", "c.jsonl", "--queries", str(form), "--model", "x"]
    assert main([*argv, "--out", str(tmp_path / "p.json"), "--question-lang", "de"]) == 2
    assert "--question-lang selects JSON Lines questions" in capsys.readouterr().err
    assert not (tmp_path / "p.json").exists()


def test_simple_form_plot_is_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    passages = [Passage("a", "en", "a"), Passage("b", "en", "b"), Passage("c", "en", "c")]
    unit = Unit(passages, {"q1": {"a": 0.5}, "q2": {"b": 0.7}, "junk": {"c": 0.1}})
    result = calibrate_simple(unit, passages, SimpleForm(("q1", "q2"), ("junk",), ("a", None)))
    png = result.plot(tmp_path / "simple.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# Collections -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "layout"),
    [
        (["id", "doc_id", "text", "embedding"], "llama-index"),
        (["text", "pk", "vector", "source"], "langchain"),
    ],
)
def test_both_adapters_layouts_are_recognised(fields: list[str], layout: str) -> None:
    from thresholded.calibration.collection import detect_layout

    assert detect_layout({"fields": [{"name": f} for f in fields]}).name == layout


def test_an_unknown_layout_names_its_fields() -> None:
    from thresholded.calibration.collection import detect_layout

    with pytest.raises(ValueError, match=r"\['key', 'vec'\] match neither"):
        detect_layout({"fields": [{"name": "key"}, {"name": "vec"}]})


def test_gold_ids_resolve_to_every_section_with_that_key() -> None:
    from dataclasses import replace as with_gold

    from thresholded.calibration import Question
    from thresholded.calibration.collection import LAYOUTS, StoredCorpus, resolve_gold

    stored = StoredCorpus(
        passages=(),
        vectors=np.empty((0, 3)),
        layout=LAYOUTS[0],
        dimension=3,
        keys={"row-1": "refund-policy", "row-2": "refund-policy", "row-3": "billing-faq"},
    )
    asked = Question("q1", "en", "money back?", ("refund-policy",))
    missing = with_gold(asked, qid="q2", gold_pids=("nowhere",))
    unrelated = Question("q3", "en", "weather?")
    resolved = resolve_gold([asked, missing, unrelated], stored)
    assert [q.qid for q in resolved] == ["q1", "q3"]
    assert resolved[0].gold_pids == ("row-1", "row-2")


def test_a_simple_form_none_of_whose_gold_is_read_is_refused() -> None:
    from thresholded.calibration.simple import reachable_form

    sections = [Passage("a", "en", "a", source="faq")]
    form = SimpleForm(("q1", "q2"), ("junk",), ("refunds", "refunds"))
    with pytest.raises(ValueError, match="no should-match question's gold is a section"):
        reachable_form(form, sections)
    kept = reachable_form(SimpleForm(("q1", "q2"), ("junk",), ("faq", "refunds")), sections)
    assert (kept.should_match, kept.gold) == (("q1",), ("faq",))
