"""A score kind neither adapter knows is refused when built, naming the kinds, in both."""

from __future__ import annotations

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore

import langchain_thresholded as lc
import llama_index_thresholded as li

KINDS = "one of cosine, rrf, weighted, bm25, mmr, unknown"


def _llama_index() -> object:
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.schema import TextNode

    return VectorStoreIndex([TextNode(text="a")], embed_model=MockEmbedding(embed_dim=4))


@pytest.mark.parametrize(
    "build",
    [
        lambda: li.ThresholdedRetriever(_llama_index(), score_kind="hybrid"),
        lambda: li.SimilarityThresholdPostprocessor(min_similarity=0.3, score_kind="hybrid"),
        lambda: lc.ThresholdedRetriever(
            vectorstore=InMemoryVectorStore(DeterministicFakeEmbedding(size=4)),
            score_kind="hybrid",
        ),
        lambda: lc.SimilarityThresholdCompressor(min_similarity=0.3, score_kind="hybrid"),
    ],
    ids=["llama_index retriever", "postprocessor", "langchain retriever", "compressor"],
)
def test_an_unknown_score_kind_names_the_kinds(build) -> None:
    with pytest.raises(ValueError, match=f"unknown score_kind 'hybrid': {KINDS}"):
        build()


@pytest.mark.parametrize(
    "filter_type", [li.SimilarityThresholdPostprocessor, lc.SimilarityThresholdCompressor]
)
def test_the_postprocessor_and_the_compressor_read_a_kind_in_any_case(filter_type) -> None:
    """The compressor took score_kind="Cosine"; the postprocessor refused it."""
    from thresholded import ScoreKind

    assert filter_type(min_similarity=0.3, score_kind="Cosine").score_kind is ScoreKind.COSINE
