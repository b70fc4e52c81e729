"""``allowed_filter_keys`` given as one string is refused by both adapters with the same
message: a string would be read as its characters."""

from __future__ import annotations

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore

import langchain_thresholded as lc
from thresholded import RetrievalPolicy

POLICY = RetrievalPolicy(min_similarity=0.3)
SAID = r"allowed_filter_keys must be a list of keys, got the string 'doc_type'.*"
SAID += r"allowed_filter_keys=\['doc_type'\]"


def test_langchain_refuses_a_string_as_the_llama_index_adapter_does() -> None:
    """LangChain's retrievers failed with pydantic's "Input should be a valid list"."""
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=4))
    with pytest.raises(TypeError, match=SAID):
        lc.ThresholdedRetriever(vectorstore=store, policy=POLICY, allowed_filter_keys="doc_type")
    with pytest.raises(TypeError, match=SAID):
        lc.MultiCollectionRetriever(
            collections=[store], policy=POLICY, allowed_filter_keys="doc_type"
        )
    kept = lc.ThresholdedRetriever(vectorstore=store, policy=POLICY, allowed_filter_keys=["a"])
    assert kept.allowed_filter_keys == ["a"]
