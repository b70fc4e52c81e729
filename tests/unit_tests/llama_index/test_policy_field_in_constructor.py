"""A LlamaIndex retriever given a policy field, or a misspelt keyword, says what to pass, as
the LangChain retrievers and both collection specs do: Python's bare "unexpected keyword
argument 'min_similarity'" said neither that it belongs in the policy nor what is accepted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import TextNode

from llama_index_thresholded import CollectionSpec, MultiCollectionRetriever, ThresholdedRetriever
from thresholded import RetrievalPolicy

POLICY = RetrievalPolicy(min_similarity=0.3)


@pytest.fixture(scope="module")
def index() -> VectorStoreIndex:
    return VectorStoreIndex(
        [TextNode(id_="a", text="Refunds are paid within 14 days.")],
        embed_model=MockEmbedding(embed_dim=4),
    )


BUILDERS: dict[str, Callable[[VectorStoreIndex, dict[str, Any]], Any]] = {
    "ThresholdedRetriever": lambda index, kw: ThresholdedRetriever(index, POLICY, **kw),
    "ThresholdedRetriever.from_retriever": lambda index, kw: ThresholdedRetriever.from_retriever(
        index.as_retriever(), POLICY, **kw
    ),
    "MultiCollectionRetriever": lambda index, kw: MultiCollectionRetriever(
        [CollectionSpec(index)], POLICY, **kw
    ),
}


@pytest.mark.parametrize("build", sorted(BUILDERS))
@pytest.mark.parametrize(
    ("given", "field"),
    [
        ("min_similarity", "min_similarity"),
        ("max_chars", "max_chars"),
        ("top_k", "top_k"),
        ("similarity_top_k", "top_k"),  # LlamaIndex's own name for it
    ],
)
def test_a_policy_field_names_the_policy(index, build, given, field):
    with pytest.raises(TypeError, match=rf"RetrievalPolicy\({field}=\.\.\.\)") as info:
        BUILDERS[build](index, {given: 1})
    assert "did you mean" not in str(info.value)
    assert "it accepts: " in str(info.value)


@pytest.mark.parametrize("build", sorted(BUILDERS))
def test_a_misspelt_keyword_names_the_one_meant(index, build):
    with pytest.raises(TypeError, match=r"'neighbors' \(did you mean 'neighbours'\?\)"):
        BUILDERS[build](index, {"neighbors": 1})


def test_the_signature_is_still_the_constructor_s():
    import inspect

    parameters = inspect.signature(ThresholdedRetriever).parameters
    assert {"index", "policy", "neighbours", "filters"} <= set(parameters)
