"""A setting of the postprocessor or the compressor assigned after it was built is checked
as the constructor checks it: a bad value never waits for the first call, nor is used."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import NodeWithScore, TextNode
from pydantic import ValidationError

from langchain_thresholded import SimilarityThresholdCompressor
from llama_index_thresholded import SimilarityThresholdPostprocessor
from thresholded import RetrievalPolicy
from thresholded.errors import ModelMismatchError

CLASSES = [SimilarityThresholdPostprocessor, SimilarityThresholdCompressor]
MINILM = "sentence-transformers/all-MiniLM-L6-v2@384"


def unnamed_model(cls: type) -> Any:
    """A model that names no model: a floor measured for MiniLM refuses it."""
    if cls is SimilarityThresholdPostprocessor:
        return MockEmbedding(embed_dim=384)
    return DeterministicFakeEmbedding(size=384)


def model_field(cls: type) -> str:
    return "embed_model" if cls is SimilarityThresholdPostprocessor else "embeddings"


@pytest.mark.parametrize("cls", CLASSES)
def test_a_score_kind_that_is_not_one_is_refused_when_set(cls):
    built = cls(min_similarity=0.3)
    with pytest.raises(ValidationError, match="score_kind"):
        built.score_kind = "similarity"
    assert built.score_kind is None


@pytest.mark.parametrize("cls", CLASSES)
def test_a_switch_that_is_not_a_bool_is_refused_when_set(cls):
    built = cls(min_similarity=0.3)
    with pytest.raises(ValidationError, match="allow_model_mismatch"):
        built.allow_model_mismatch = "false"  # a non-empty string: true
    assert built.allow_model_mismatch is False


@pytest.mark.parametrize("cls", CLASSES)
def test_a_model_the_floor_refuses_is_refused_when_set(cls):
    policy = RetrievalPolicy(min_similarity=0.3, embedding_model=MINILM)
    with pytest.raises(ModelMismatchError):
        cls(policy=policy, **{model_field(cls): unnamed_model(cls)})
    built = cls(policy=policy)
    with pytest.raises(ModelMismatchError):
        setattr(built, model_field(cls), unnamed_model(cls))
    assert getattr(built, model_field(cls)) is None


def test_a_score_kind_set_afterwards_is_read_as_the_constructors():
    postprocessor = SimilarityThresholdPostprocessor(min_similarity=0.3)
    postprocessor.score_kind = "cosine"
    nodes = [
        NodeWithScore(node=TextNode(id_="low", text="low"), score=0.1),
        NodeWithScore(node=TextNode(id_="high", text="high"), score=0.9),
    ]
    kept = postprocessor.postprocess_nodes(nodes, query_str="the question")
    assert [n.node.node_id for n in kept] == ["high"]
