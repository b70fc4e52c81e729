"""An ensemble wrapped by ``from_retriever`` finds the sections within the filters.

The ensemble's members search without the filters, and the engine holds the fused documents
to them afterwards. When too few lie within them, the engine widens the search: each member
that can be asked for more (a store's retriever, a retriever with a ``k`` field such as
``BM25Retriever``) is asked for as many documents as the search asks for.
"""

from __future__ import annotations

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field

from langchain_thresholded import RetrieverSource, ThresholdedRetriever
from thresholded import RetrievalPolicy

from .conftest import inexact_filter_message

classic = pytest.importorskip("langchain_classic.retrievers")

QUERY = "the question"
FAQ = {"doc_type": "faq"}
POLICY = RetrievalPolicy(
    min_similarity=0.5, top_k=3, over_fetch=2, max_per_source=None, max_chars=None
)
FOUND = ["faq-0", "faq-1", "faq-2"]


class Listed(BaseRetriever):
    """A keyword retriever's stand-in: the first ``k`` of its documents, whatever the query."""

    documents: list[Document]
    k: int = 4

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self.documents[: self.k]


@pytest.fixture
def sections(corpus):
    """24 internal sections nearer the question than the 3 FAQ sections."""
    internal = [
        (f"internal-{i}", 15 / 16 if i % 2 else 14 / 16, {"doc_type": "internal"})
        for i in range(24)
    ]
    faq = [(f"faq-{i}", 12 / 16, FAQ) for i in range(3)]
    return corpus([*internal, *faq])


def ensemble(sections, *members):
    dense = sections.store.as_retriever(search_kwargs={"k": 4})
    retrievers = [dense, *members]
    return classic.EnsembleRetriever(retrievers=retrievers, weights=[1.0] * len(retrievers))


def test_the_filters_find_the_sections_the_members_reach_last(sections):
    """Each member ran at its own k (4): the fused documents were all internal, and the
    answer was empty (emptied by "filters") though three FAQ sections cleared the floor."""
    wrapped = ensemble(sections)
    retriever = ThresholdedRetriever.from_retriever(
        wrapped, embeddings=sections.embeddings, policy=POLICY, filters=FAQ
    )
    report = retriever.retrieve_with_report(QUERY)
    assert sorted(d.id for d in report.kept) == FOUND
    assert wrapped.retrievers[0].search_kwargs["k"] == 4  # the user's retriever is unchanged


async def test_a_member_with_a_k_field_is_asked_for_more_too(sections):
    documents = list(sections.documents.values())
    keyword = Listed(documents=documents)  # the internal sections first
    retriever = ThresholdedRetriever.from_retriever(
        ensemble(sections, keyword), embeddings=sections.embeddings, policy=POLICY
    )
    assert sorted(d.id for d in retriever.invoke(QUERY, filters=FAQ)) == FOUND
    assert sorted(d.id for d in await retriever.ainvoke(QUERY, filters=FAQ)) == FOUND
    assert keyword.k == 4


def test_a_retriever_source_keeps_its_members_size_unless_told(sections):
    wrapped = ensemble(sections)
    fixed = RetrieverSource(wrapped)
    assert {d.id for d, _ in fixed.similarity_search_with_score(QUERY, k=20)} <= {
        f"internal-{i}" for i in range(24)
    }
    resized = RetrieverSource(wrapped, resize=True)
    assert len(resized.similarity_search_with_score(QUERY, k=20)) == 20


def test_the_ensemble_s_own_order_stays_when_enough_lie_within_the_filters(sections):
    """Only a widened search asks the members for more: a first search that finds enough
    within the filters is the ensemble's own, in its order and with its RRF scores."""
    wrapped = ensemble(sections)
    retriever = ThresholdedRetriever.from_retriever(
        wrapped, embeddings=sections.embeddings, policy=POLICY, filters={"doc_type": "internal"}
    )
    own = [d.id for d in wrapped.invoke(QUERY)][: POLICY.top_k]
    assert [d.id for d in retriever.invoke(QUERY)] == own


class Counted(BaseRetriever):
    """A retriever that cannot be asked for more: the same documents, counted."""

    documents: list[Document]
    calls: list[str] = Field(default_factory=list)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        self.calls.append(query)
        return self.documents


def test_a_member_that_cannot_be_asked_for_more_is_searched_once_more(sections):
    """The widened search finds no more rows than the first: the search ends there, the
    result empty under the filters, not widened until the row limit is an error."""
    internal = [d for d in sections.documents.values() if d.metadata["doc_type"] == "internal"]
    member = Counted(documents=internal[:6])
    wrapped = classic.EnsembleRetriever(retrievers=[member], weights=[1.0])
    retriever = ThresholdedRetriever.from_retriever(
        wrapped, embeddings=sections.embeddings, policy=POLICY, filters=FAQ
    )
    report = retriever.retrieve_with_report(QUERY)
    assert report.kept == () and report.emptied_by == "filters"
    assert len(member.calls) == 2


def test_a_runnable_member_keeps_its_size_in_a_widened_search(sections):
    """An ensemble takes any runnable that returns documents (a ``RunnableLambda``), which
    has no fields to resize: it runs as it is, and the store's retriever beside it is asked
    for more."""
    from langchain_core.runnables import RunnableLambda

    internal = [d for d in sections.documents.values() if d.metadata["doc_type"] == "internal"]
    relay = RunnableLambda(lambda question: internal[:4])
    retriever = ThresholdedRetriever.from_retriever(
        ensemble(sections, relay), embeddings=sections.embeddings, policy=POLICY
    )
    assert sorted(d.id for d in retriever.invoke(QUERY, filters=FAQ)) == FOUND


def test_past_the_row_limit_the_error_names_the_members_that_kept_their_size(sections, monkeypatch):
    """The error past the widest search read as a store's ("Write the filter in a form the
    store applies"): it says the members search without the filters, names the widest
    search and each member that kept its own size, and what reaches farther."""
    monkeypatch.setattr("thresholded.engine.MAX_FILTERED_SEARCH_ROWS", 12)
    internal = [d for d in sections.documents.values() if d.metadata["doc_type"] == "internal"]
    wrapped = ensemble(sections, Counted(documents=internal[:20]))
    retriever = ThresholdedRetriever.from_retriever(
        wrapped, embeddings=sections.embeddings, policy=POLICY, filters=FAQ
    )
    message = inexact_filter_message(retriever)
    said = [
        "its 12 nearest rows hold only 0 of the 6",
        "ensemble of 2 members searches without the filters",
        "member 1 (Counted) keeps its own size",
        "filter on the members' stores",
        "broader filters",
    ]
    assert [part for part in said if part not in message] == []
    assert "Milvus Lite" not in message
