"""A filter written in the other framework's form is refused saying so, and how to write it.

A list of LlamaIndex ``MetadataFilter`` was told to write a dict as ``MetadataFilters``;
LlamaIndex ``MetadataFilters`` given to the LangChain adapter were refused as a type
it does not take, without saying whose form they are.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core.vector_stores import SimpleVectorStore
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

import langchain_thresholded as lc
import llama_index_thresholded as li

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contract_tests"))

from contract_data import POLICY, QUESTION, FixedEmbeddings, llama_index

INTERNAL = MetadataFilter(key="doc_type", value="internal", operator=FilterOperator.NE)


def test_llama_index_says_to_wrap_a_list_of_metadata_filter():
    said = r"got a list of MetadataFilter: wrap it, MetadataFilters\(filters=\[\.\.\.\]\)"
    with pytest.raises(TypeError, match=said):
        li.ThresholdedRetriever(llama_index(SimpleVectorStore()), policy=POLICY, filters=[INTERNAL])
    retriever = li.ThresholdedRetriever(llama_index(SimpleVectorStore()), policy=POLICY)
    with pytest.raises(TypeError, match=said):
        retriever.retrieve_with_report(QUESTION, filters=[INTERNAL])


@pytest.mark.parametrize(
    "filters",
    [MetadataFilters(filters=[INTERNAL]), INTERNAL, [INTERNAL]],
    ids=["all", "one", "list"],
)
def test_langchain_says_llama_index_filters_are_llama_indexs(filters):
    said = r"LlamaIndex's filter form: .*write it as a dict, such as \{'doc_type': \{'\$ne'"
    store = InMemoryVectorStore(FixedEmbeddings())
    with pytest.raises(TypeError, match=said):
        lc.ThresholdedRetriever(vectorstore=store, policy=POLICY, filters=filters)
    retriever = lc.ThresholdedRetriever(vectorstore=store, policy=POLICY)
    with pytest.raises(TypeError, match=said):
        retriever.invoke(QUESTION, filters=filters)
