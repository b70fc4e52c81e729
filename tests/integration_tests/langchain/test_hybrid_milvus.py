"""A langchain-milvus hybrid store (dense + built-in BM25) inside ThresholdedRetriever.

Real Milvus Lite; hand-made dense vectors, so each cosine with the question is
known: apple 0.9, banana 0.6, engine 0.2. "apple" and "recipe" are the BM25 words.
RRF(k=60): apple is first in both lists (2/61), banana second in both (2/62),
engine only in the dense list, third (1/63 = 0.0159).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_thresholded import ScoreKind, ThresholdedRetriever
from langchain_thresholded.milvus import _ensure_orm_connection, connection_args, orm_calls
from thresholded import NonCosineScoreError, RetrievalPolicy
from thresholded.milvus_lite import wait_for_milvus_lite

langchain_milvus = pytest.importorskip("langchain_milvus")

pytestmark = pytest.mark.integration

QUESTION = "apple recipe"
TEXTS = {
    "apple": "apple pie recipe with cinnamon",
    "banana": "banana bread recipe for a quick breakfast",
    "engine": "how to repair a diesel engine",
}
VECTORS = {
    QUESTION: [1.0, 0.0, 0.0, 0.0],
    TEXTS["apple"]: [0.9, math.sqrt(1 - 0.81), 0.0, 0.0],
    TEXTS["banana"]: [0.6, 0.0, 0.8, 0.0],
    TEXTS["engine"]: [0.2, 0.0, 0.0, math.sqrt(1 - 0.04)],
}
POLICY = RetrievalPolicy(min_similarity=0.5, top_k=10, max_per_source=None, max_chars=None)


class HandEmbeddings(Embeddings):
    def __init__(self) -> None:
        self.document_calls: list[list[str]] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.document_calls.append(list(texts))
        return [VECTORS[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return VECTORS[text]


@pytest.fixture
def hybrid(tmp_path: Path) -> tuple[Any, HandEmbeddings]:
    embeddings = HandEmbeddings()
    wait_for_milvus_lite(str(tmp_path / "hybrid.db"))
    store = langchain_milvus.Milvus(
        embedding_function=embeddings,
        builtin_function=langchain_milvus.BM25BuiltInFunction(),
        vector_field=["dense", "sparse"],
        connection_args=connection_args(str(tmp_path / "hybrid.db")),
        consistency_level="Strong",
        drop_old=True,
        auto_id=False,
        index_params=[
            {"metric_type": "IP", "index_type": "FLAT"},
            {"metric_type": "BM25", "index_type": "SPARSE_INVERTED_INDEX"},
        ],
    )
    _ensure_orm_connection(store)  # a hybrid store is built with langchain-milvus's constructor
    with orm_calls():  # langchain-milvus reads its index through the ORM
        store.add_documents(
            [Document(page_content=t, metadata={"source": k}) for k, t in TEXTS.items()],
            ids=list(TEXTS),
        )
    embeddings.document_calls.clear()
    return store, embeddings


def names(docs: Any) -> list[str]:
    return [d.metadata["source"] for d in docs]


def test_rrf_hybrid_scores_are_never_cut_by_the_floor(hybrid: Any) -> None:
    store, embeddings = hybrid
    retriever = ThresholdedRetriever(
        vectorstore=store,
        policy=POLICY,
        score_kind="rrf",
        search_kwargs={"ranker_type": "rrf", "ranker_params": {"k": 60}},
    )
    report = retriever.retrieve_with_report(QUESTION)
    assert names(report.kept) == ["apple", "banana", "engine"]
    kept_scores = [c.score for c in report.selection.kept]
    assert kept_scores == pytest.approx([2 / 61, 2 / 62, 1 / 63], abs=1e-6)
    assert {d.metadata["score_kind"] for d in report.kept} == {"rrf"}
    assert report.passed_through == (ScoreKind.RRF,)
    assert embeddings.document_calls == []


def test_strict_mode_refuses_the_hybrid_scores(hybrid: Any) -> None:
    store, _ = hybrid
    retriever = ThresholdedRetriever(
        vectorstore=store,
        policy=POLICY.model_copy(update={"strict_score_kind": True}),
        score_kind="rrf",
        search_kwargs={"ranker_type": "rrf"},
    )
    with pytest.raises(NonCosineScoreError):
        retriever.invoke(QUESTION)


@pytest.mark.parametrize(
    ("kind", "search_kwargs"),
    [
        ("rrf", {"ranker_type": "rrf"}),
        ("weighted", {"ranker_type": "weighted", "ranker_params": {"weights": [0.5, 0.5]}}),
    ],
)
async def test_rescore_cuts_hybrid_results_by_their_dense_cosine(
    hybrid: Any, kind: str, search_kwargs: dict[str, Any]
) -> None:
    store, _ = hybrid
    passing = ThresholdedRetriever(
        vectorstore=store, policy=POLICY, score_kind=kind, search_kwargs=search_kwargs
    )
    hybrid_order = names(passing.invoke(QUESTION))
    assert sorted(hybrid_order) == ["apple", "banana", "engine"]
    retriever = ThresholdedRetriever(
        vectorstore=store,
        policy=POLICY.model_copy(update={"hybrid_policy": "rescore"}),
        score_kind=kind,
        search_kwargs=search_kwargs,
    )
    report = retriever.retrieve_with_report(QUESTION)
    assert names(report.kept) == [n for n in hybrid_order if n != "engine"]  # hybrid order
    sims = {d.metadata["source"]: d.metadata["similarity"] for d in report.kept}
    assert sims == pytest.approx({"apple": 0.9, "banana": 0.6})
    assert {d.metadata["score_kind"] for d in report.kept} == {kind}
    assert [d.reason.value for d in report.dropped] == ["below_threshold"]
    docs = await retriever.ainvoke(QUESTION)
    assert names(docs) == names(report.kept)
