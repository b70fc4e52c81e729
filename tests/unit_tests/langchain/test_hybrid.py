"""Hybrid results in the LangChain adapter: RRF, weighted and BM25 scores never meet the floor.

Two sources of hybrid results: an ``EnsembleRetriever`` (dense + keyword, fused by
weighted reciprocal rank) given to ``ThresholdedRetriever.from_retriever``, and a
store whose scores are hybrid (declared with ``score_kind``). Every cosine is a
multiple of 1/16, so exact; every RRF score is ``sum(weight / (rank + 60))``.

Dense ranking (cosine): apple 0.875 > banana 0.5 > cherry 0.375 (> date 0.0625)
Keyword ranking:        date > cherry > apple
Weighted RRF (0.5 each): apple 0.5/61 + 0.5/63, cherry 0.5/63 + 0.5/62, date 0.5/61,
banana 0.5/62: the order apple, cherry, date, banana, every score under 0.02.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore

from langchain_thresholded import RetrieverSource, ScoreKind, ThresholdedRetriever
from thresholded import NonCosineScoreError, RetrievalPolicy

ensemble_module = pytest.importorskip("langchain_classic.retrievers")
EnsembleRetriever = ensemble_module.EnsembleRetriever

Q = "the question"
POLICY = RetrievalPolicy(min_similarity=0.5, top_k=10, max_per_source=None, max_chars=None)
RESCORE = POLICY.model_copy(update={"hybrid_policy": "rescore"})
SPECS = [("apple", 0.875), ("banana", 0.5), ("cherry", 0.375), ("date", 0.0625)]
RRF = {
    "apple": 0.5 / 61 + 0.5 / 63,
    "cherry": 0.5 / 63 + 0.5 / 62,
    "date": 0.5 / 61,
    "banana": 0.5 / 62,
}
ENSEMBLE_ORDER = ["apple", "cherry", "date", "banana"]


class FixedRetriever(BaseRetriever):
    """A keyword retriever stand-in: returns its documents, in order, for any query."""

    docs: list[Document]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return list(self.docs)


class FixedScoreStore(VectorStore):
    """A hybrid store stand-in: answers every query with ``pairs`` (document, score)."""

    def __init__(self, pairs: list[tuple[Document, float]], embeddings: Any) -> None:
        self.pairs = pairs
        self._embeddings = embeddings

    @property
    def embeddings(self) -> Any:
        return self._embeddings

    def add_texts(self, texts: Any, metadatas: Any = None, **kwargs: Any) -> list[str]:
        raise NotImplementedError

    @classmethod
    def from_texts(cls, texts: Any, embedding: Any, metadatas: Any = None, **kwargs: Any) -> Any:
        raise NotImplementedError

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        return [d for d, _ in self.similarity_search_with_score(query, k)]

    def similarity_search_with_score(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        return self.pairs[:k]


def ensemble_of(c: Any) -> Any:
    dense = c.store.as_retriever(search_kwargs={"k": 3})
    keyword = FixedRetriever(docs=[c.documents[i] for i in ("date", "cherry", "apple")])
    return EnsembleRetriever(retrievers=[dense, keyword], weights=[0.5, 0.5])


def ids(docs: Any) -> list[str | None]:
    return [d.id for d in docs]


def scores(report: Any) -> dict[str, float | None]:
    return {c.id: c.score for c in report.selection.kept}


# An EnsembleRetriever inside ThresholdedRetriever -------------------------------------------------


def test_ensemble_results_keep_the_ensemble_order_and_get_their_rrf_scores(corpus: Any) -> None:
    c = corpus(SPECS)
    ensemble = ensemble_of(c)
    retriever = ThresholdedRetriever.from_retriever(ensemble, policy=POLICY)
    report = retriever.retrieve_with_report(Q)
    assert ids(ensemble.invoke(Q)) == ENSEMBLE_ORDER
    assert ids(report.kept) == ENSEMBLE_ORDER  # every one under the 0.5 floor, all kept
    assert scores(report) == pytest.approx(RRF, abs=1e-15)
    assert {d.metadata["score_kind"] for d in report.kept} == {"rrf"}
    assert all("similarity" not in d.metadata for d in report.kept)
    assert report.passed_through == (ScoreKind.RRF,)
    assert report.dropped == ()
    assert c.embeddings.document_calls == []  # nothing re-scored: no candidate embedded


def test_an_rrf_score_of_0_008_is_kept_under_a_floor_of_0_99(corpus: Any) -> None:
    c = corpus(SPECS)
    retriever = ThresholdedRetriever.from_retriever(
        ensemble_of(c), policy=POLICY.model_copy(update={"min_similarity": 0.99})
    )
    report = retriever.retrieve_with_report(Q)
    assert ids(report.kept) == ENSEMBLE_ORDER
    assert scores(report)["banana"] == pytest.approx(0.5 / 62)


def test_strict_mode_refuses_ensemble_scores_under_a_floor(corpus: Any) -> None:
    strict = POLICY.model_copy(update={"strict_score_kind": True})
    retriever = ThresholdedRetriever.from_retriever(ensemble_of(corpus(SPECS)), policy=strict)
    with pytest.raises(NonCosineScoreError, match="rrf"):
        retriever.invoke(Q)


def check_rescored(report: Any) -> None:
    # cosines apple 0.875, cherry 0.375, date 0.0625, banana 0.5: floor 0.5 keeps apple, banana
    assert ids(report.kept) == ["apple", "banana"]  # the ensemble order, not the cosine order
    assert scores(report) == pytest.approx({"apple": RRF["apple"], "banana": RRF["banana"]})
    assert {d.id: d.metadata["similarity"] for d in report.kept} == {
        "apple": 0.875,
        "banana": 0.5,
    }
    assert {d.metadata["score_kind"] for d in report.kept} == {"rrf"}
    assert {d.id: (d.reason.value, d.similarity) for d in report.dropped} == {
        "cherry": ("below_threshold", 0.375),
        "date": ("below_threshold", 0.0625),
    }
    assert report.passed_through == ()


async def test_rescore_applies_the_floor_to_the_dense_cosine_of_ensemble_results(
    corpus: Any,
) -> None:
    c = corpus(SPECS)
    retriever = ThresholdedRetriever.from_retriever(
        ensemble_of(c), embeddings=c.embeddings, policy=RESCORE
    )
    check_rescored(retriever.retrieve_with_report(Q))
    assert c.embeddings.document_calls == [ENSEMBLE_ORDER]  # the candidates, in one batch
    check_rescored(await retriever.aretrieve_with_report(Q))
    assert len(c.embeddings.document_calls) == 2


def test_rescore_needs_embeddings(corpus: Any) -> None:
    with pytest.raises(ValueError, match="embeddings"):
        ThresholdedRetriever.from_retriever(ensemble_of(corpus(SPECS)), policy=RESCORE)


def test_rescored_strict_mode_does_not_raise(corpus: Any) -> None:
    c = corpus(SPECS)
    strict = RESCORE.model_copy(update={"strict_score_kind": True})
    retriever = ThresholdedRetriever.from_retriever(
        ensemble_of(c), embeddings=c.embeddings, policy=strict
    )
    check_rescored(retriever.retrieve_with_report(Q))


def test_the_fused_list_is_cut_at_fetch_k(corpus: Any) -> None:
    c = corpus(SPECS)
    few = POLICY.model_copy(update={"top_k": 1, "over_fetch": 2})  # fetch_k 2
    report = ThresholdedRetriever.from_retriever(ensemble_of(c), policy=few).retrieve_with_report(Q)
    assert ids(report.kept) == ["apple"]
    assert {d.id: d.reason.value for d in report.dropped} == {"cherry": "beyond_top_k"}


def test_a_plain_retriever_keeps_its_order_and_reads_a_named_score(corpus: Any) -> None:
    c = corpus(SPECS)
    docs = [
        Document(id=d.id, page_content=d.page_content, metadata={"bm25": s})
        for d, s in ((c.documents["date"], 7.5), (c.documents["apple"], 0.25))
    ]
    source = FixedRetriever(docs=docs)
    with pytest.raises(NonCosineScoreError, match=r"kind 'unknown'.*every result would pass"):
        ThresholdedRetriever.from_retriever(source, policy=POLICY, score_key="bm25")
    # the retriever given is named, not the package's wrapper around it (RetrieverSource)
    with pytest.raises(NonCosineScoreError, match=r"the scores of FixedRetriever are"):
        ThresholdedRetriever.from_retriever(source, policy=POLICY, score_key="bm25")
    with pytest.raises(ValueError, match=r"^FixedRetriever exposes no embeddings"):
        ThresholdedRetriever.from_retriever(
            source, policy=RESCORE, score_key="bm25", score_kind="bm25"
        )
    retriever = ThresholdedRetriever.from_retriever(
        source, policy=POLICY, score_key="bm25", score_kind="bm25"
    )
    report = retriever.retrieve_with_report(Q)
    assert ids(report.kept) == ["date", "apple"]
    assert scores(report) == {"date": 7.5, "apple": 0.25}
    assert {d.metadata["score_kind"] for d in report.kept} == {"bm25"}
    rescoring = ThresholdedRetriever.from_retriever(
        source, embeddings=c.embeddings, policy=RESCORE, score_key="bm25", score_kind="bm25"
    )
    kept = rescoring.retrieve_with_report(Q).kept
    assert ids(kept) == ["apple"]
    assert kept[0].metadata["score_kind"] == "bm25"


def test_a_retriever_source_is_filtered_by_the_engine(corpus: Any) -> None:
    c = corpus(SPECS)
    retriever = ThresholdedRetriever.from_retriever(ensemble_of(c), policy=POLICY)
    everything = ids(retriever.invoke(Q))
    assert everything
    assert ids(retriever.invoke(Q, filters={"kind": {"$ne": "x"}})) == everything  # no key
    assert retriever.invoke(Q, filters={"kind": "x"}) == []
    with pytest.raises(TypeError, match="no store arguments"):
        retriever.invoke(Q, search_kwargs={"param": 1})


def test_fusion_matches_the_ensemble_with_an_id_key(corpus: Any) -> None:
    c = corpus(SPECS)
    keyed = {
        i: Document(id=i, page_content=f"{i} text", metadata={"key": i.upper()})
        for i in c.documents
    }
    first = FixedRetriever(docs=[keyed["banana"], keyed["apple"]])
    second = FixedRetriever(docs=[keyed["apple"], keyed["date"], keyed["banana"]])
    ensemble = EnsembleRetriever(retrievers=[first, second], weights=[0.3, 0.7], id_key="key", c=10)
    fused = RetrieverSource(ensemble).similarity_search_with_score(Q, k=10)
    assert [d.id for d, _ in fused] == ids(ensemble.invoke(Q))
    assert dict((d.id, s) for d, s in fused) == pytest.approx(
        {"apple": 0.3 / 12 + 0.7 / 11, "banana": 0.3 / 11 + 0.7 / 13, "date": 0.7 / 12}
    )


# A store whose scores are hybrid -------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "values"),
    [("rrf", [0.0328, 0.016, 0.0159]), ("weighted", [0.3, 0.1, 0.0]), ("bm25", [12.5, 0.2, 0.01])],
)
def test_hybrid_store_scores_are_never_compared_with_the_floor(
    corpus: Any, kind: str, values: list[float]
) -> None:
    c = corpus(SPECS)
    pairs = [(c.documents[i], s) for i, s in zip(["date", "cherry", "apple"], values, strict=True)]
    store = FixedScoreStore(pairs, c.embeddings)
    report = ThresholdedRetriever(
        vectorstore=store, policy=POLICY, score_kind=kind
    ).retrieve_with_report(Q)
    assert ids(report.kept) == ["date", "cherry", "apple"]
    assert [c_.score for c_ in report.selection.kept] == values
    assert {d.metadata["score_kind"] for d in report.kept} == {kind}
    rescored = ThresholdedRetriever(
        vectorstore=store, policy=RESCORE, score_kind=kind
    ).retrieve_with_report(Q)
    assert ids(rescored.kept) == ["apple"]  # date 0.0625 and cherry 0.375 are under 0.5
    assert rescored.kept[0].metadata["similarity"] == 0.875
    assert [c_.score for c_ in rescored.selection.kept] == [values[2]]


def test_cosine_declared_for_an_ensemble_or_an_mmr_search_is_refused(corpus: Any) -> None:
    """RRF or MMR scores read as cosines would be cut by the floor with wrong numbers."""
    c = corpus(SPECS)
    with pytest.raises(ValueError, match=r"score_kind='cosine' contradicts .* 'rrf'"):
        ThresholdedRetriever.from_retriever(ensemble_of(c), policy=POLICY, score_kind="cosine")
    mmr = c.store.as_retriever(search_type="mmr")
    with pytest.raises(ValueError, match=r"score_kind='cosine' contradicts .* 'mmr'"):
        ThresholdedRetriever.from_retriever(mmr, policy=POLICY, score_kind="cosine")


async def test_inner_retrievers_send_no_events_of_sections_outside_the_filters(
    corpus: Any,
) -> None:
    """Inside a chain, LangChain gives a retriever invoked without a config the chain's own:
    the inner retrievers' ``on_retriever_end`` (every document they found) would reach the
    caller's handlers and ``astream_events``, the sections outside the filters included."""
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.runnables import RunnableLambda

    secret = Document(id="secret", page_content="the secret text", metadata={"kind": "x"})
    public = Document(id="public", page_content="the public text", metadata={"kind": "y"})
    ensemble = EnsembleRetriever(
        retrievers=[FixedRetriever(docs=[secret, public]), FixedRetriever(docs=[public])],
        weights=[0.5, 0.5],
    )
    plain = FixedRetriever(docs=[secret, public])
    for inner, kind in ((ensemble, None), (plain, "bm25")):
        retriever = ThresholdedRetriever.from_retriever(
            inner, policy=POLICY, filters={"kind": "y"}, **({"score_kind": kind} if kind else {})
        )
        chain = RunnableLambda(lambda q: q) | retriever
        streamed = [str(e.get("data")) async for e in chain.astream_events(Q, version="v2")]
        assert streamed and not any("secret" in s for s in streamed)

        class Seen(BaseCallbackHandler):
            def __init__(self) -> None:
                self.texts: list[str] = []

            def on_retriever_end(self, documents: Any, **kwargs: Any) -> None:
                self.texts.extend(d.page_content for d in documents)

        seen = Seen()
        assert ids(chain.invoke(Q, {"callbacks": [seen]})) == ["public"]
        assert seen.texts and "the secret text" not in seen.texts


async def test_inner_retrievers_are_not_traced() -> None:
    """With tracing on (``LANGSMITH_TRACING``, ``tracing_v2_enabled()``) or runs collected
    (``collect_runs()``), LangChain adds a tracer to every run whatever its config: the inner
    retrievers' runs, every document they found, would be recorded and sent."""
    from langchain_core.tracers.context import collect_runs, tracing_v2_enabled
    from langchain_core.tracers.langchain import wait_for_all_tracers
    from langsmith import Client

    sent: list[str] = []

    class Recording(Client):
        def create_run(self, *args: Any, **kwargs: Any) -> None:
            sent.append(repr((args, kwargs)))

        def update_run(self, *args: Any, **kwargs: Any) -> None:
            sent.append(repr((args, kwargs)))

    client = Recording(api_key="k", api_url="http://127.0.0.1:9", auto_batch_tracing=False)
    secret = Document(id="secret", page_content="the secret text", metadata={"kind": "x"})
    public = Document(id="public", page_content="the public text", metadata={"kind": "y"})
    ensemble = EnsembleRetriever(
        retrievers=[FixedRetriever(docs=[secret, public]), FixedRetriever(docs=[public])],
        weights=[0.5, 0.5],
    )
    retriever = ThresholdedRetriever.from_retriever(ensemble, policy=POLICY, filters={"kind": "y"})
    with collect_runs() as collected, tracing_v2_enabled(client=client):
        assert ids(retriever.invoke(Q)) == ["public"]
        assert ids(await retriever.ainvoke(Q)) == ["public"]
    wait_for_all_tracers()
    runs = [repr(run.outputs) for run in collected.traced_runs]
    assert runs and sent
    assert not any("secret" in text for text in runs + sent)
