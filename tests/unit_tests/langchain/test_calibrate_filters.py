"""``calibrate_vectorstore`` takes ``filters`` as the LangChain retriever does, and as the
LlamaIndex ``calibrate_index`` names them: a structured filter or its dict form, or a raw
Milvus expression. It was ``filter=``, a Milvus expression only."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.structured_query import Comparator, Comparison

from langchain_thresholded.calibration import calibrate_vectorstore
from langchain_thresholded.milvus import milvus_from_documents
from thresholded.calibration import SimpleForm

ASKED = "when are refunds paid?"
UNRELATED = "weather in Mumbai?"


class HandEmbeddings(Embeddings):
    """The internal section is nearer the question than the public one."""

    model_id = "test/hand-made@4"
    vectors: ClassVar[dict[str, list[float]]] = {
        ASKED: [1.0, 0.0, 0.0, 0.0],
        UNRELATED: [0.0, 0.0, 0.0, 1.0],
        "public": [0.6, 0.8, 0.0, 0.0],
        "internal": [0.8, 0.0, 0.6, 0.0],
    }

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(self.vectors[t]) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return list(self.vectors[text])


@pytest.fixture
def store(tmp_path: Path) -> Any:
    docs = [
        Document(id=kind, page_content=kind, metadata={"doc_type": kind})
        for kind in ("public", "internal")
    ]
    uri = str(tmp_path / "calibrate.db")
    return milvus_from_documents(docs, HandEmbeddings(), uri=uri, collection_name="kb")


FORM = SimpleForm(should_match=(ASKED,), should_not_match=(UNRELATED,))


def top(result: Any) -> str:
    return next(row.top_pid for row in result.rows if row.question == ASKED)


@pytest.mark.parametrize(
    "filters",
    [
        {"doc_type": "public"},
        Comparison(comparator=Comparator.EQ, attribute="doc_type", value="public"),
        'doc_type == "public"',
    ],
)
def test_calibration_under_filters(store, filters):
    assert top(calibrate_vectorstore(store, FORM, progress=False)) == "internal"
    result = calibrate_vectorstore(store, FORM, filters=filters, progress=False)
    assert top(result) == "public"


def test_the_old_name_is_refused(store):
    with pytest.raises(TypeError, match="filter"):
        calibrate_vectorstore(store, FORM, filter='doc_type == "public"', progress=False)


def test_filters_that_match_nothing_are_refused(store):
    with pytest.raises(ValueError, match="match no section"):
        calibrate_vectorstore(store, FORM, filters={"doc_type": {"$in": []}}, progress=False)


def test_a_store_that_is_not_milvus_is_a_type_error() -> None:
    """It used to fail on a missing attribute, far from the mistake."""
    from langchain_core.vectorstores import InMemoryVectorStore

    with pytest.raises(TypeError, match=r"langchain_milvus\.Milvus store, got InMemoryVectorStore"):
        calibrate_vectorstore(InMemoryVectorStore(HandEmbeddings()), FORM)


def test_a_store_that_is_not_milvus_is_refused_saying_how_to_calibrate_it() -> None:
    """The refusal named the store only: an InMemoryVectorStore's user was left without a
    way to calibrate at all."""
    from langchain_core.vectorstores import InMemoryVectorStore

    form = SimpleForm(should_match=(ASKED,), should_not_match=(UNRELATED,))
    with pytest.raises(TypeError, match=r"Milvus store, got InMemoryVectorStore") as info:
        calibrate_vectorstore(InMemoryVectorStore(HandEmbeddings()), form)
    assert "thresholded calibrate --corpus" in str(info.value)
    assert "calibrate_simple" in str(info.value)


def json_store(tmp_path: Path, metadata: Any) -> Any:
    """A store that keeps each section's ``metadata(kind)`` in one JSON field."""
    docs = [
        Document(id=kind, page_content=kind, metadata=metadata(kind))
        for kind in ("public", "internal")
    ]
    return milvus_from_documents(
        docs,
        HandEmbeddings(),
        uri=str(tmp_path / "json.db"),
        collection_name="kb",
        metadata_field="metadata",
        enable_dynamic_field=False,
    )


def test_calibration_under_filters_of_a_json_metadata_field(tmp_path: Path) -> None:
    """A store that keeps its metadata in one JSON field: the filters were written as
    top-level fields, and Milvus refused them (``Invalid expr``)."""
    store = json_store(tmp_path, lambda kind: {"doc_type": kind})
    result = calibrate_vectorstore(store, FORM, filters={"doc_type": "public"}, progress=False)
    assert top(result) == "public"


def test_an_id_field_and_sources_inside_a_json_metadata_field(tmp_path: Path) -> None:
    """A store that keeps its metadata in one JSON field: ``id_field`` and the sections'
    sources were looked for among the collection's top-level fields: every section was
    refused as having no such metadata key, and a gold naming a source named none."""
    store = json_store(tmp_path, lambda kind: {"source": f"{kind}.md", "pid": f"p-{kind}"})
    result = calibrate_vectorstore(store, FORM, id_field="pid", progress=False)
    assert top(result) == "internal"
    gold = SimpleForm(should_match=(ASKED,), should_not_match=(UNRELATED,), gold=("public.md",))
    assert calibrate_vectorstore(store, gold, progress=False).rows
