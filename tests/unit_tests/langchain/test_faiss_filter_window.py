"""A filtered FAISS search finds the sections within the filters however far they lie.

FAISS applies a filter to the ``fetch_k`` nearest rows only. Over an index of more than
:data:`FAISS_FILTER_ROWS` rows, those within a selective filter (one tenant's) may all lie
beyond them: the search returned none, and the call said that nothing matched, though every
one of them clears the floor. Scaled down here: a window of 100 rows over an index of 300.
"""

from __future__ import annotations

import asyncio
import math
import warnings

import pytest
from langchain_core.embeddings import Embeddings

import langchain_thresholded.faiss_window as faiss_window
from langchain_thresholded import ThresholdedRetriever
from thresholded import RetrievalPolicy

faiss_module = pytest.importorskip("langchain_community.vectorstores")
POLICY = RetrievalPolicy(min_similarity=0.5, top_k=3, max_per_source=None, max_chars=None)


def unit(cosine: float) -> list[float]:
    return [cosine, math.sqrt(1 - cosine * cosine)]


class AtCosine(Embeddings):
    """A text ``"<tenant> <cosine>"`` at that cosine with every question."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [unit(float(t.split()[1])) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0]


@pytest.fixture
def tenants(monkeypatch: pytest.MonkeyPatch):
    """290 rows of another tenant nearest (0.95 down to 0.92), then 10 of ours (0.8)."""
    monkeypatch.setattr(faiss_window, "FAISS_FILTER_ROWS", 100)
    texts = [f"other {0.95 - i * 0.0001:.6f}" for i in range(290)]
    texts += [f"mine {0.8 - i * 0.001:.6f}" for i in range(10)]
    metadatas = [{"tenant": t.split()[0]} for t in texts]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_community.vectorstores.utils import DistanceStrategy

    return faiss_module.FAISS.from_texts(
        texts,
        AtCosine(),
        metadatas=metadatas,
        distance_strategy=DistanceStrategy.MAX_INNER_PRODUCT,
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_sections_within_the_filters_beyond_the_window_are_found(tenants, mode):
    retriever = ThresholdedRetriever(
        vectorstore=tenants, embeddings=AtCosine(), filters={"tenant": "mine"}, policy=POLICY
    )
    report = report_of(retriever, mode)
    assert [d.page_content for d in report.kept] == [
        "mine 0.800000",
        "mine 0.799000",
        "mine 0.798000",
    ]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_mmr_search_s_own_filter_finds_the_sections_beyond_its_window(tenants, mode):
    """FAISS's MMR search filters the ``2 * fetch_k`` nearest rows only: a wrapped MMR
    retriever's ``search_kwargs={"filter": ...}`` found none of ours (all 40 were the other
    tenant's), and the call said nothing matched. The engine holds the filter, as it holds
    ``filters=``, and widens the search until it reaches them."""
    wrapped = tenants.as_retriever(search_type="mmr", search_kwargs={"filter": {"tenant": "mine"}})
    report = wrapping_report(wrapped, mode)
    assert sorted(d.page_content for d in report.kept) == [
        "mine 0.798000",
        "mine 0.799000",
        "mine 0.800000",
    ]
    assert not report.nothing_matched


@pytest.mark.parametrize("search_type", ["similarity", "mmr"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_ensemble_member_s_own_filter_finds_the_sections_beyond_its_window(
    tenants, search_type, mode
):
    """An ensemble member over FAISS searches with its own filter, which FAISS applied to its
    ``fetch_k`` nearest rows (an MMR search: ``2 * fetch_k``) only: the member returned none
    of ours, and the call said nothing matched. Its window is widened as a FAISS search's."""
    classic = pytest.importorskip("langchain_classic.retrievers")
    member = tenants.as_retriever(
        search_type=search_type, search_kwargs={"k": 3, "filter": {"tenant": "mine"}}
    )
    wrapped = classic.EnsembleRetriever(retrievers=[member], weights=[1.0])
    report = wrapping_report(wrapped, mode)
    kept = [d.page_content for d in report.kept]
    assert len(kept) == 3
    assert all(text.startswith("mine ") for text in kept)
    if search_type == "similarity":
        assert kept == ["mine 0.800000", "mine 0.799000", "mine 0.798000"]


def wrapping_report(wrapped, mode):
    """The report of a call, sync or async, of a retriever around ``wrapped``."""
    rescored = POLICY.model_copy(update={"hybrid_policy": "rescore"})
    retriever = ThresholdedRetriever.from_retriever(wrapped, embeddings=AtCosine(), policy=rescored)
    return report_of(retriever, mode)


def report_of(retriever, mode):
    if mode == "sync":
        return retriever.retrieve_with_report("q")
    return asyncio.run(retriever.aretrieve_with_report("q"))
