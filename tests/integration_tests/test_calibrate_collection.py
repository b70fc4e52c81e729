"""``thresholded calibrate --uri --milvus-collection``: calibrating what an index holds.

A small slice of data/ is indexed into Milvus Lite by each adapter, as it indexes
passages; calibrating from the collection's stored vectors must measure what
calibrating the corpus file ``--as`` that adapter measures, since both see the
same vectors. The packaged MiniLM embeds everything.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from thresholded import CalibrationProfile
from thresholded.calibration import load_corpus, load_questions
from thresholded.calibration.indexing import llama_index_node, passage_metadata
from thresholded.cli import main

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[2] / "data"
ARTICLES = ("Apollo_program", "Pharmacy", "Warsaw")


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, minilm_embed_model: Any) -> dict[str, Any]:
    """The slice on disk, and indexed by LlamaIndex and by LangChain into one Lite file."""
    from langchain_core.documents import Document
    from llama_index.core import StorageContext, VectorStoreIndex

    from langchain_thresholded.embeddings import minilm_embeddings
    from langchain_thresholded.milvus import milvus_from_documents
    from llama_index_thresholded.milvus import milvus_store

    root = tmp_path_factory.mktemp("collection")
    corpus = [
        r
        for r in _rows(DATA / "xquad-bench" / "corpus.jsonl")
        if r["source"] in ARTICLES and r["lang"] == "en"
    ]
    xquad = _rows(DATA / "xquad-bench" / "queries_dev.jsonl")
    questions = [
        {**q, "gold_pids": [p for p in q["gold_pids"] if p.endswith(":en")]}
        for article in ARTICLES
        for q in [r for r in xquad if r["title"] == article and r["lang"] == "en"][:8]
    ]
    questions += _rows(DATA / "clinc-oos" / "queries_dev.jsonl")[::40][:10]
    files = {
        "corpus": _write(root / "corpus.jsonl", corpus),
        "queries": _write(root / "queries.jsonl", questions),
    }
    passages = load_corpus(files["corpus"])
    store = milvus_store(str(root / "li.db"), "li", dim=384, overwrite=True)
    VectorStoreIndex(
        [llama_index_node(p) for p in passages],
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=minilm_embed_model,
    )
    lc_uri = str(root / "lc.db")
    # primary keys of the store's own, the passage ids as metadata: found with --id-field
    documents = [
        Document(page_content=p.text, metadata={**passage_metadata(p), "pid": p.pid})
        for p in passages
    ]
    lc = milvus_from_documents(
        documents,
        minilm_embeddings(),
        uri=lc_uri,
        collection_name="lc",
        ids=[f"row-{i}" for i in range(len(passages))],
        overwrite=True,
    )
    return {
        **files,
        "li": str(root / "li.db"),
        "lc": lc_uri,
        "root": root,
        "llama_index_store": store,
        "langchain_store": lc,
    }


def _calibrate(indexed: dict[str, Any], name: str, *source: str) -> CalibrationProfile:
    out = indexed["root"] / f"{name}.json"
    argv = ["calibrate", *source, "--queries", str(indexed["queries"]), "--model", "minilm"]
    argv += ["--passages", "en", "--folds", "3", "--out", str(out), "--force", "--no-progress"]
    assert main(argv) == 0
    return CalibrationProfile.load(out)


def _same_measurement(a: CalibrationProfile, b: CalibrationProfile) -> None:
    assert (a.min_similarity, a.min_top_similarity) == (b.min_similarity, b.min_top_similarity)
    ta, tb = a.measurements["pairs"]["en->en"], b.measurements["pairs"]["en->en"]
    for key in ("answer_min", "answer_median", "top_min", "unrelated_max"):
        assert ta[key] == pytest.approx(tb[key], abs=2e-4), key
    assert ta["n_answerable"] == tb["n_answerable"] == 24


def test_a_llama_index_collection_measures_what_as_llama_index_measures(
    indexed: dict[str, Any],
) -> None:
    stored = _calibrate(indexed, "li-stored", "--uri", indexed["li"], "--milvus-collection", "li")
    from_file = _calibrate(
        indexed, "li-file", "--corpus", str(indexed["corpus"]), "--as", "llama-index"
    )
    _same_measurement(stored, from_file)
    assert stored.version == 2 and stored.collection == "li"
    assert stored.measurements["layout"] == "llama-index"
    assert stored.measurements["index_as"] == "stored vectors"
    raw = _calibrate(indexed, "raw-file", "--corpus", str(indexed["corpus"]))
    # the metadata header LlamaIndex embeds moves the scores: the raw text measures another index
    assert raw.measurements["pairs"]["en->en"]["answer_median"] != pytest.approx(
        stored.measurements["pairs"]["en->en"]["answer_median"], abs=1e-3
    )


def test_a_langchain_collection_matches_gold_through_the_id_field(
    indexed: dict[str, Any],
) -> None:
    stored = _calibrate(
        indexed,
        "lc-stored",
        "--uri",
        indexed["lc"],
        "--milvus-collection",
        "lc",
        "--id-field",
        "pid",
    )
    from_file = _calibrate(
        indexed, "lc-file", "--corpus", str(indexed["corpus"]), "--as", "langchain"
    )
    _same_measurement(stored, from_file)
    assert stored.measurements["layout"] == "langchain"


def test_a_filter_calibrates_under_it(indexed: dict[str, Any]) -> None:
    stored = _calibrate(
        indexed,
        "filtered",
        "--uri",
        indexed["li"],
        "--milvus-collection",
        "li",
        "--filter",
        'source == "Warsaw"',
    )
    table = stored.measurements["pairs"]["en->en"]
    assert stored.measurements["n_passages"] == 5
    assert stored.measurements["filter"] == 'source == "Warsaw"'
    assert table["n_answerable"] == 8  # the other articles' questions have no section here


def test_a_simple_form_calibrates_under_a_filter_as_questions_do(
    indexed: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """Under a filter, a should-match question whose gold the filter leaves out stopped the run
    ("gold 'Pharmacy' ... names no allowed passage"), and a profile of the simple form did not
    record the filter: it is left out with a warning, as a JSON Lines question is, and the
    profile names the collection's layout and the filter."""
    form = indexed["root"] / "form.yaml"
    form.write_text(
        "should_match:\n"
        "  - question: What is the population of Warsaw?\n    gold: Warsaw\n"
        "  - question: Which river flows through Warsaw?\n    gold: Warsaw\n"
        "  - question: What does a pharmacist do?\n    gold: Pharmacy\n"
        "should_not_match:\n  - Set an alarm for 7 am tomorrow\n",
        encoding="utf-8",
    )
    out = indexed["root"] / "simple-filtered.json"
    argv = ["calibrate", "--uri", indexed["li"], "--milvus-collection", "li"]
    argv += ["--filter", 'source == "Warsaw"', "--queries", str(form), "--model", "minilm"]
    argv += ["--out", str(out), "--force", "--no-progress"]
    with caplog.at_level("WARNING"):
        assert main(argv) == 0
    stored = CalibrationProfile.load(out)
    asked = [q["question"] for q in stored.measurements["questions"]]
    assert "What does a pharmacist do?" not in asked
    assert "What is the population of Warsaw?" in asked
    assert stored.measurements["filter"] == 'source == "Warsaw"'
    assert stored.measurements["layout"] == "llama-index"
    assert "What does a pharmacist do?" in caplog.text


def test_the_model_must_match_the_vector_field(
    indexed: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["calibrate", "--uri", indexed["li"], "--milvus-collection", "li"]
    argv += ["--queries", str(indexed["queries"]), "--model", "use-multilingual"]
    argv += ["--out", str(indexed["root"] / "use.json"), "--no-progress"]
    assert main(argv) == 2
    assert "384-dimensional" in capsys.readouterr().err


def test_a_missing_collection_or_file_is_named_and_nothing_is_created(
    indexed: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """It said "no collection 'li_typo' at this uri", and a misspelt Milvus Lite path left an
    empty database file behind."""
    missing = Path(indexed["root"]) / "typo.db"
    for uri, collection, said in [
        (indexed["li"], "li_typo", r"'li_typo' does not exist at .*; it has: \[.*'li'"),
        (str(missing), "li", r"no Milvus Lite file at .*typo\.db"),
    ]:
        argv = ["calibrate", "--uri", uri, "--milvus-collection", collection]
        argv += ["--queries", str(indexed["queries"]), "--model", "minilm"]
        argv += ["--out", str(indexed["root"] / "typo.json"), "--no-progress"]
        assert main(argv) == 2
        assert re.search(said, capsys.readouterr().err)
    assert not missing.exists()


def test_corpus_and_collection_are_exclusive(
    indexed: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["calibrate", "--corpus", str(indexed["corpus"]), "--uri", indexed["li"]]
    argv += ["--queries", str(indexed["queries"]), "--model", "minilm", "--out", "x.json"]
    with pytest.raises(SystemExit):
        main(argv)
    assert "not allowed with argument" in capsys.readouterr().err


def test_both_adapters_calibrate_from_python(indexed: dict[str, Any], minilm_embed_model) -> None:
    from langchain_thresholded.calibration import calibrate_vectorstore
    from llama_index_thresholded.calibration import calibrate_index

    questions = load_questions(indexed["queries"])
    ours = calibrate_index(
        indexed["llama_index_store"],
        minilm_embed_model,
        questions,
        passages="en",
        folds=3,
        progress=False,
    )
    theirs = calibrate_vectorstore(
        indexed["langchain_store"],
        questions,
        id_field="pid",
        passages="en",
        folds=3,
        progress=False,
    )
    assert ours.extra["layout"] == "llama-index" and theirs.extra["layout"] == "langchain"
    assert ours.gate is not None and theirs.gate is not None
    assert ours.tables[0].n_answerable == theirs.tables[0].n_answerable == 24


def test_calibrate_index_reads_a_plain_milvus_store_s_own_collection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, minilm_embed_model
) -> None:
    """LlamaIndex's ``MilvusVectorStore`` keeps no uri (its ``uri`` stays at the default
    ``./milvus_llamaindex.db``): the collection of that name there is not the one read."""
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.schema import TextNode
    from llama_index.vector_stores.milvus import MilvusVectorStore

    from llama_index_thresholded.calibration import calibrate_index
    from thresholded.calibration import SimpleForm

    def index(store: Any, texts: dict[str, str]) -> None:
        nodes = [TextNode(id_=i, text=t) for i, t in texts.items()]
        storage = StorageContext.from_defaults(vector_store=store)
        VectorStoreIndex(nodes, storage_context=storage, embed_model=minilm_embed_model)

    monkeypatch.chdir(tmp_path)
    ours = MilvusVectorStore(uri=str(tmp_path / "kb.db"), collection_name="kb", dim=384)
    index(ours, {"refunds": "Refunds are paid within 14 days.", "hours": "We open at nine."})
    other = MilvusVectorStore(uri="./milvus_llamaindex.db", collection_name="kb", dim=384)
    index(other, {"cats": "Cats sleep a lot.", "trains": "Trains run hourly."})
    assert ours.uri == other.uri  # what the store says of itself
    form = SimpleForm(
        should_match=("When are refunds paid?",), should_not_match=("Weather in Mumbai?",)
    )
    result = calibrate_index(ours, minilm_embed_model, form, progress=False)
    assert {row.top_pid for row in result.rows} <= {"refunds", "hours"}


def test_stores_with_fields_of_their_own_calibrate_through_them(
    tmp_path: Path, minilm_embed_model
) -> None:
    """A store built with its own field names (LangChain ``text_field``, ``vector_field``,
    ``primary_field``; LlamaIndex ``embedding_field``) is searched through them, and was
    refused by calibration: "match neither the LlamaIndex layout nor the LangChain one"."""
    from langchain_core.documents import Document
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.schema import TextNode

    from langchain_thresholded.calibration import calibrate_vectorstore
    from langchain_thresholded.embeddings import minilm_embeddings
    from langchain_thresholded.milvus import milvus_from_documents
    from llama_index_thresholded.calibration import calibrate_index
    from llama_index_thresholded.milvus import milvus_store
    from thresholded.calibration import SimpleForm

    texts = {"refunds": "Refunds are paid within 14 days.", "hours": "We open at nine."}
    form = SimpleForm(
        should_match=("When are refunds paid?",), should_not_match=("Weather in Mumbai?",)
    )
    lc = milvus_from_documents(
        [Document(id=i, page_content=t) for i, t in texts.items()],
        minilm_embeddings(),
        uri=str(tmp_path / "lc.db"),
        collection_name="kb",
        text_field="body",
        vector_field="emb",
        primary_field="doc_pk",
    )
    theirs = calibrate_vectorstore(lc, form, progress=False)
    assert [row.top_pid for row in theirs.rows][:1] == ["refunds"]

    store = milvus_store(str(tmp_path / "li.db"), "kb", dim=384, embedding_field="emb")
    VectorStoreIndex(
        [TextNode(id_=i, text=t) for i, t in texts.items()],
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=minilm_embed_model,
    )
    ours = calibrate_index(store, minilm_embed_model, form, progress=False)
    assert [row.top_pid for row in ours.rows][:1] == ["refunds"]
    assert ours.rows[0].top == pytest.approx(theirs.rows[0].top, abs=1e-4)
