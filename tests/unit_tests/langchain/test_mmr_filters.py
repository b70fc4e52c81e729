"""An MMR search wrapped by ``from_retriever`` finds the sections within the filters.

The MMR search runs without the filters (a store's MMR takes its own), and the engine holds
its documents to them afterwards. When too few of them lie within the filters, the engine
widens the search, as it does for every store that cannot apply them exactly: the wrapped
retriever is asked for as many documents as the search asks for.
"""

from __future__ import annotations

import pytest

from langchain_thresholded import ThresholdedRetriever
from thresholded import RetrievalPolicy

from .conftest import inexact_filter_message

QUERY = "the question"
FAQ = {"doc_type": "faq"}
POLICY = RetrievalPolicy(
    min_similarity=0.5,
    top_k=3,
    over_fetch=2,
    max_per_source=None,
    max_chars=None,
    hybrid_policy="rescore",
)


@pytest.fixture
def wrapped(corpus):
    """24 internal sections nearer the question than the 3 FAQ sections: the nearest 20 rows
    (the MMR's default candidates) hold no FAQ section."""
    internal = [
        (f"internal-{i}", 15 / 16 if i % 2 else 14 / 16, {"doc_type": "internal"})
        for i in range(24)
    ]
    faq = [(f"faq-{i}", 12 / 16, FAQ) for i in range(3)]
    return corpus([*internal, *faq]).store.as_retriever(search_type="mmr")


def test_the_retriever_s_filters_find_the_sections_an_mmr_search_reaches_last(wrapped):
    """The MMR search ran once, at its own k and fetch_k: its 6 documents all internal, the
    answer was empty (emptied by "filters") though three FAQ sections cleared the floor."""
    retriever = ThresholdedRetriever.from_retriever(wrapped, policy=POLICY, filters=FAQ)
    report = retriever.retrieve_with_report(QUERY)
    assert sorted(d.id for d in report.kept) == ["faq-0", "faq-1", "faq-2"]
    assert all(d.metadata["doc_type"] == "faq" for d in report.items)


async def test_a_call_s_filters_find_them_too(wrapped):
    retriever = ThresholdedRetriever.from_retriever(wrapped, policy=POLICY)
    found = retriever.invoke(QUERY, filters=FAQ)
    assert sorted(d.id for d in found) == ["faq-0", "faq-1", "faq-2"]
    found = await retriever.ainvoke(QUERY, filters=FAQ)
    assert sorted(d.id for d in found) == ["faq-0", "faq-1", "faq-2"]


def test_a_call_s_k_beyond_the_first_is_searched(wrapped):
    """The wrapped retriever's k was set once, from the policy: a call asking for more
    sections got no more than that many candidates."""
    retriever = ThresholdedRetriever.from_retriever(wrapped, policy=POLICY)
    assert len(retriever.invoke(QUERY, k=12)) == 12


def test_a_widened_mmr_search_stops_at_its_row_limit(monkeypatch):
    """MMR compares each document it picks with every one picked before: a widened search
    asked for 3,072 documents took minutes. It stops at ``MMR_MAX_ROWS`` with an error."""
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    from langchain_thresholded import ensemble

    monkeypatch.setattr(ensemble, "MMR_MAX_ROWS", 48)
    embeddings = DeterministicFakeEmbedding(size=8)
    store = InMemoryVectorStore(embeddings)
    kinds = ["internal"] * 199 + ["faq"]
    store.add_documents(
        [Document(f"text {i}", id=f"s-{i}", metadata={"doc_type": t}) for i, t in enumerate(kinds)]
    )
    asked: list[int] = []
    search = store.max_marginal_relevance_search

    def counted(query, k=4, **kwargs):
        asked.append(k)
        return [d for d in search(query, k=k, **kwargs) if d.metadata["doc_type"] == "internal"]

    monkeypatch.setattr(store, "max_marginal_relevance_search", counted)
    retriever = ThresholdedRetriever.from_retriever(
        store.as_retriever(search_type="mmr"), embeddings=embeddings, policy=POLICY
    )
    assert "48 nearest rows" in inexact_filter_message(retriever, filters=FAQ)
    assert max(asked) == 48


def test_the_mmr_row_limit_error_says_it_is_mmr_s_and_what_to_do(wrapped, monkeypatch):
    """Past the MMR search's row limit the error read as any store's ("Write the filter in a
    form the store applies"), though the limit was MMR's own: it names MMR, its limit, and
    the searches that reach farther."""
    from langchain_thresholded import ensemble

    monkeypatch.setattr(ensemble, "MMR_MAX_ROWS", 12)
    retriever = ThresholdedRetriever.from_retriever(wrapped, policy=POLICY, filters=FAQ)
    message = inexact_filter_message(retriever)
    assert "its 12 nearest rows hold only 0 of the 6" in message
    assert "MMR search (search_type='mmr')" in message
    assert "MMR_MAX_ROWS = 12 rows" in message
    assert "search_type='similarity'" in message and "broader filters" in message
    assert "Milvus Lite" not in message


def test_an_ensemble_with_an_mmr_member_stops_at_the_mmr_row_limit(corpus, monkeypatch):
    """An ensemble's MMR member was widened to 16,384 rows, its cost growing with the cube of
    them: it stops at ``MMR_MAX_ROWS`` too, and the error names that member."""
    classic = pytest.importorskip("langchain_classic.retrievers")
    from langchain_thresholded import ensemble

    monkeypatch.setattr(ensemble, "MMR_MAX_ROWS", 12)
    internal = [(f"internal-{i}", 15 / 16, {"doc_type": "internal"}) for i in range(30)]
    sections = corpus([*internal, ("faq-0", 12 / 16, FAQ)])
    members = [sections.store.as_retriever(search_kwargs={"k": 4})]
    members.append(sections.store.as_retriever(search_type="mmr"))
    retriever = ThresholdedRetriever.from_retriever(
        classic.EnsembleRetriever(retrievers=members, weights=[1.0, 1.0]),
        embeddings=sections.embeddings,
        policy=POLICY,
    )
    message = inexact_filter_message(retriever, filters=FAQ)
    assert "its 12 nearest rows" in message
    assert "member 1 (VectorStoreRetriever) is an MMR search" in message
    assert "MMR_MAX_ROWS = 12 rows" in message
