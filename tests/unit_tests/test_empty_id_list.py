"""A retriever restricted to an empty list of ids searches nothing, in both adapters.

An empty list names no section (LlamaIndex's ``doc_ids=[]``/``node_ids=[]``, LangChain's
``search_kwargs={"ids": []}``): the answer is known before any search. A store that does not
read the list (``InMemoryVectorStore``) returned its nearest rows, every one outside it, and
the search was widened again and again for sections within it: 12 searches of a store of
20,000 sections, then an ``InexactFilterError`` blaming filters the caller never gave.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core.vector_stores import SimpleVectorStore

import langchain_thresholded as lc
import llama_index_thresholded as li
from thresholded import RetrievalPolicy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contract_tests"))

from contract_data import QUESTION, llama_index

FLOOR_OFF = RetrievalPolicy(min_similarity=0.0, top_k=3, max_per_source=None, max_chars=None)


class Spread(Embeddings):
    """Section ``i`` at cosine ``1 - i / 100`` with every question."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._unit(1 - int(t.split()[-1]) / 100) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0]

    @staticmethod
    def _unit(cosine: float) -> list[float]:
        return [cosine, math.sqrt(1 - cosine * cosine)]


class CountingStore(InMemoryVectorStore):
    """An ``InMemoryVectorStore`` (which ignores ``ids``) that counts its searches."""

    searches = 0

    def similarity_search_with_score_by_vector(self, embedding, k=4, **kwargs):  # type: ignore[override]
        type(self).searches += 1
        return super().similarity_search_with_score_by_vector(embedding, k=k, **kwargs)


def test_langchain_searches_nothing_for_an_empty_list_of_ids():
    store = CountingStore(Spread())
    documents = [Document(id=f"d{i}", page_content=f"section {i}") for i in range(40)]
    store.add_documents(documents, ids=[d.id for d in documents])
    CountingStore.searches = 0
    retriever = lc.ThresholdedRetriever(
        vectorstore=store, policy=FLOOR_OFF, search_kwargs={"ids": []}
    )
    report = retriever.retrieve_with_report(QUESTION)
    assert report.items == [] and report.emptied_by == "filters"
    assert report.outside_filters == 0  # the retriever's own restriction: never counted
    assert CountingStore.searches == 0


@pytest.mark.parametrize("restriction", ["doc_ids", "node_ids"])
def test_llama_index_searches_nothing_for_an_empty_list_of_ids(monkeypatch, restriction):
    index = llama_index(SimpleVectorStore())

    def refuse(*args, **kwargs):
        raise AssertionError("searched")

    monkeypatch.setattr(SimpleVectorStore, "query", refuse)
    retriever = li.ThresholdedRetriever(index, policy=FLOOR_OFF, **{restriction: []})
    report = retriever.retrieve_with_report(QUESTION)
    assert report.items == [] and report.emptied_by == "filters"
