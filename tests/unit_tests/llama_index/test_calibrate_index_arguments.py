"""``calibrate_index`` reads a Milvus collection through its store: anything else is a
``TypeError`` that says what to pass (it used to fail on a missing attribute)."""

from __future__ import annotations

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.vector_stores import SimpleVectorStore

from llama_index_thresholded.calibration import calibrate_index
from thresholded.calibration import SimpleForm

FORM = SimpleForm(should_match=("a question",), should_not_match=("the weather",))
MODEL = MockEmbedding(embed_dim=4)


def test_an_index_is_refused_naming_its_vector_store() -> None:
    index = VectorStoreIndex([], embed_model=MODEL)
    with pytest.raises(TypeError, match=r"got VectorStoreIndex \(pass index\.vector_store\)"):
        calibrate_index(index, MODEL, FORM)


def test_a_store_that_is_not_milvus_is_refused_saying_how_to_calibrate_it() -> None:
    """The refusal named the store only: a SimpleVectorStore's user was left without a way
    to calibrate at all."""
    with pytest.raises(TypeError, match=r"MilvusVectorStore, got SimpleVectorStore") as info:
        calibrate_index(SimpleVectorStore(), MODEL, FORM)
    assert "thresholded calibrate --corpus" in str(info.value)
    assert "calibrate_simple" in str(info.value)
