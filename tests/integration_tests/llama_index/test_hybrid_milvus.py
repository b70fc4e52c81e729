"""Hybrid, sparse and full-text search on a real Milvus Lite with its built-in BM25.

Dense vectors are hand-made, so every cosine is known: the question embeds to e0
and a section stored with ``vec(c)`` has cosine ``c`` with it (within float32).
The texts are chosen for BM25: "apple" and "recipe" match the question's words.

Ranking for the question "apple recipe":
dense  apple (0.9) > banana (0.6) > engine (0.2)
BM25   apple (both words) > banana ("recipe"); engine has neither word
so RRF(k=60) gives apple 2/61, banana 2/62 and engine 1/63 = 0.0159: an RRF score
far below any cosine floor, that must never be cut by one.
"""

from __future__ import annotations

import json
import math
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery
from llama_index.vector_stores.milvus.utils import BM25BuiltInFunction
from processes import result_of
from pydantic import Field, PrivateAttr

from llama_index_thresholded import ThresholdedRetriever
from llama_index_thresholded.milvus import CompatibleMilvusVectorStore, milvus_store
from thresholded import metadata_keys
from thresholded.errors import NonCosineScoreError
from thresholded.policy import RetrievalPolicy
from thresholded.scores import ScoreKind
from thresholded.selection import DropReason

pytestmark = pytest.mark.integration

DIM = 8
QUESTION = "apple recipe"
TEXTS = {
    "apple": "apple pie recipe with cinnamon",
    "banana": "banana bread recipe for a quick breakfast",
    "engine": "how to repair a diesel engine",
}
COSINES = {"apple": 0.9, "banana": 0.6, "engine": 0.2}
RRF = {"apple": 2 / 61, "banana": 2 / 62, "engine": 1 / 63}
ML322 = Path(
    os.environ.get("THRESHOLDED_MILVUS_LITE_3")
    or Path(__file__).resolve().parents[3] / ".bench" / "milvus-lite-3.2.2"
)
"""Milvus Lite 3.x, installed apart from the venv's 2.5.1 by ``make``."""


def vec(cos: float, axis: int) -> list[float]:
    v = [0.0] * DIM
    v[0] = cos
    v[axis] = math.sqrt(1.0 - cos * cos)
    return v


E0 = vec(1.0, 1)
VECTORS = {node_id: vec(c, i + 1) for i, (node_id, c) in enumerate(COSINES.items())}


class HandEmbedding(BaseEmbedding):
    """Known texts to chosen vectors; counts the texts it embeds."""

    vectors: dict[str, list[float]] = Field(default_factory=dict)
    _texts: list[str] = PrivateAttr(default_factory=list)

    @property
    def texts(self) -> list[str]:
        return self._texts

    def _get_query_embedding(self, query: str) -> list[float]:
        return list(self.vectors[query])

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        self._texts.append(text)
        return list(self.vectors[text])


def embed_model() -> HandEmbedding:
    return HandEmbedding(
        vectors={QUESTION: E0, **{TEXTS[i]: v for i, v in VECTORS.items()}},
        model_name="test/hand-made",
    )


def build(tmp_path: Path, **store_kwargs: Any) -> tuple[VectorStoreIndex, HandEmbedding]:
    store = milvus_store(
        str(tmp_path / "hybrid.db"),
        "sections",
        dim=DIM,
        overwrite=True,
        enable_sparse=True,
        sparse_embedding_function=BM25BuiltInFunction(),
        **store_kwargs,
    )
    model = embed_model()
    nodes = [
        TextNode(id_=node_id, text=TEXTS[node_id], embedding=VECTORS[node_id]) for node_id in TEXTS
    ]
    index = VectorStoreIndex(
        nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=model
    )
    model.texts.clear()
    return index, model


def retriever(index: VectorStoreIndex, mode: str, **fields: Any) -> ThresholdedRetriever:
    defaults: dict[str, Any] = {"max_per_source": None, "max_chars": None, "top_k": 10}
    return ThresholdedRetriever(
        index,
        RetrievalPolicy(**{**defaults, **fields}),
        vector_store_query_mode=mode,
        neighbours=0,
        parent_summaries=False,
    )


def ids(nodes: list[NodeWithScore]) -> list[str]:
    return [n.node.node_id for n in nodes]


def kinds(nodes: list[NodeWithScore]) -> set[Any]:
    return {n.node.metadata.get(metadata_keys.SCORE_KIND) for n in nodes}


# Sparse and full-text search --------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sparse", "text_search"])
async def test_bm25_search_works_and_passes_the_floor(tmp_path: Path, mode: str) -> None:
    index, model = build(tmp_path)
    r = retriever(index, mode, min_similarity=0.95)
    report = r.retrieve_with_report(QUESTION)
    # engine has neither word; banana's BM25 score is far below 0.95 and still kept
    assert ids(report.kept) == ["apple", "banana"]
    assert kinds(report.kept) == {"bm25"}
    scores = [n.score for n in report.kept]
    assert scores[0] > scores[1] > 0  # BM25 scores: positive, best first
    assert report.selection.passed_through == (ScoreKind.BM25,)
    assert model.texts == []  # nothing embedded
    anodes = await r.aretrieve(QUESTION)
    assert ids(anodes) == ["apple", "banana"]
    assert [n.score for n in anodes] == pytest.approx(scores)


def test_bm25_scores_are_the_engine_scores(tmp_path: Path) -> None:
    index, _ = build(tmp_path)
    store = index.vector_store
    raw = store.client.search(
        "sections", data=[QUESTION], anns_field="sparse_embedding", limit=3, search_params={}
    )[0]
    result = store.query(VectorStoreQuery(query_str=QUESTION, similarity_top_k=3, mode="sparse"))
    assert result.ids == [hit["id"] for hit in raw]
    assert result.similarities == pytest.approx([abs(hit["distance"]) for hit in raw])


def test_sparse_search_params_can_be_set(tmp_path: Path) -> None:
    index, _ = build(tmp_path, sparse_search_config={"params": {"drop_ratio_search": 0.0}})
    assert index.vector_store.sparse_search_config == {"params": {"drop_ratio_search": 0.0}}
    nodes = retriever(index, "sparse", min_similarity=0.5).retrieve(QUESTION)
    assert ids(nodes) == ["apple", "banana"]


def test_strict_mode_refuses_bm25_under_a_floor(tmp_path: Path) -> None:
    index, _ = build(tmp_path)
    with pytest.raises(NonCosineScoreError, match="bm25"):
        retriever(index, "sparse", min_similarity=0.5, strict_score_kind=True).retrieve(QUESTION)


# Hybrid search: RRF and weighted -------------------------------------------------------------


def test_rrf_scores_are_rank_sums_and_never_meet_the_floor(tmp_path: Path) -> None:
    index, _ = build(tmp_path)
    report = retriever(index, "hybrid", min_similarity=0.5).retrieve_with_report(QUESTION)
    assert ids(report.kept) == ["apple", "banana", "engine"]
    assert [n.score for n in report.kept] == pytest.approx(
        [RRF["apple"], RRF["banana"], RRF["engine"]], abs=1e-6
    )
    assert report.kept[-1].score == pytest.approx(0.0159, abs=1e-4)  # kept under a 0.5 floor
    assert kinds(report.kept) == {"rrf"}
    assert {c.score_kind for c in report.selection.kept} == {ScoreKind.RRF}
    assert report.dropped == ()


def test_strict_mode_refuses_rrf_under_a_floor(tmp_path: Path) -> None:
    index, _ = build(tmp_path)
    r = retriever(index, "hybrid", min_similarity=0.5, strict_score_kind=True)
    with pytest.raises(NonCosineScoreError, match="rrf"):
        r.retrieve(QUESTION)


def test_weighted_scores_are_never_compared_with_the_floor(tmp_path: Path) -> None:
    index, _ = build(
        tmp_path, hybrid_ranker="WeightedRanker", hybrid_ranker_params={"weights": [0.7, 0.3]}
    )
    store = index.vector_store
    raw = store.query(
        VectorStoreQuery(query_embedding=E0, query_str=QUESTION, similarity_top_k=9, mode="hybrid")
    )
    report = retriever(index, "hybrid", min_similarity=0.95).retrieve_with_report(QUESTION)
    assert set(ids(report.kept)) == {"apple", "banana", "engine"}
    assert kinds(report.kept) == {"weighted"}
    assert {c.score_kind for c in report.selection.kept} == {ScoreKind.WEIGHTED}
    by_id = dict(zip(raw.ids, raw.similarities, strict=True))
    assert [n.score for n in report.kept] == [by_id[i] for i in ids(report.kept)]
    assert all(0.0 < n.score < 0.95 for n in report.kept)  # every one below the floor, kept


# Re-scoring with the dense model --------------------------------------------------------------


def check_rescored(report: Any) -> None:
    assert ids(report.kept) == ["apple", "banana"]
    assert [n.score for n in report.kept] == pytest.approx(
        [RRF["apple"], RRF["banana"]], abs=1e-6
    )  # the RRF score stays the score
    assert kinds(report.kept) == {"rrf"}
    sims = [n.node.metadata[metadata_keys.SIMILARITY] for n in report.kept]
    assert sims == pytest.approx([0.9, 0.6], abs=1e-6)  # the cosine, from float32 vectors
    assert [(d.item.node.node_id, d.reason) for d in report.dropped] == [
        ("engine", DropReason.BELOW_THRESHOLD)
    ]


async def test_rescore_cuts_hybrid_results_by_their_stored_dense_vector(tmp_path: Path) -> None:
    index, model = build(tmp_path)
    r = retriever(index, "hybrid", min_similarity=0.5, hybrid_policy="rescore")
    check_rescored(r.retrieve_with_report(QUESTION))
    check_rescored(await r.aretrieve_with_report(QUESTION))
    assert model.texts == []  # Milvus returned the stored vectors: nothing re-embedded


@pytest.mark.parametrize("mode", ["sparse", "text_search"])
def test_rescore_applies_the_floor_to_sparse_results(tmp_path: Path, mode: str) -> None:
    index, _ = build(tmp_path)
    r = retriever(index, mode, min_similarity=0.7, hybrid_policy="rescore")
    report = r.retrieve_with_report(QUESTION)
    assert ids(report.kept) == ["apple"]
    assert report.kept[0].node.metadata[metadata_keys.SIMILARITY] == pytest.approx(0.9, abs=1e-6)
    assert kinds(report.kept) == {"bm25"}
    assert [(d.item.node.node_id, d.reason) for d in report.dropped] == [
        ("banana", DropReason.BELOW_THRESHOLD)
    ]


def test_rescore_embeds_the_texts_of_a_sparse_only_collection(tmp_path: Path) -> None:
    store = CompatibleMilvusVectorStore(
        uri=str(tmp_path / "sparse.db"),
        collection_name="sections",
        overwrite=True,
        enable_dense=False,
        enable_sparse=True,
        sparse_embedding_function=BM25BuiltInFunction(),
    )
    model = embed_model()
    nodes = [TextNode(id_=i, text=TEXTS[i], embedding=VECTORS[i]) for i in TEXTS]
    index = VectorStoreIndex(
        nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=model
    )
    model.texts.clear()
    r = retriever(index, "sparse", min_similarity=0.7, hybrid_policy="rescore")
    report = r.retrieve_with_report(QUESTION)
    assert ids(report.kept) == ["apple"]
    assert sorted(model.texts) == sorted([TEXTS["apple"], TEXTS["banana"]])  # no stored vectors


def test_weighted_hybrid_with_rescore_keeps_the_hybrid_order(tmp_path: Path) -> None:
    index, _ = build(
        tmp_path, hybrid_ranker="WeightedRanker", hybrid_ranker_params={"weights": [0.5, 0.5]}
    )
    passed = retriever(index, "hybrid", min_similarity=0.0).retrieve(QUESTION)
    rescored = retriever(index, "hybrid", min_similarity=0.5, hybrid_policy="rescore").retrieve(
        QUESTION
    )
    assert ids(rescored) == [i for i in ids(passed) if i != "engine"]
    assert [n.score for n in rescored] == [n.score for n in passed if n.node.node_id != "engine"]


# The other engine: milvus-lite 3.x -------------------------------------------------------------

ENGINE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from importlib.metadata import version
    from llama_index.core.schema import TextNode
    from llama_index.core.vector_stores.types import VectorStoreQuery
    from llama_index.vector_stores.milvus import MilvusVectorStore
    from llama_index.vector_stores.milvus.utils import BM25BuiltInFunction
    from llama_index_thresholded.milvus import CompatibleMilvusVectorStore

    folder, texts = sys.argv[1], json.loads(sys.argv[2])
    out = {"engine": version("milvus-lite")}
    for name, cls in (("plain", MilvusVectorStore), ("compatible", CompatibleMilvusVectorStore)):
        store = cls(uri=f"{folder}/{name}.db", collection_name="c", dim=2, overwrite=True,
                    enable_sparse=True, sparse_embedding_function=BM25BuiltInFunction())
        store.add([TextNode(id_=k, text=t, embedding=[1.0, 0.0]) for k, t in texts.items()])
        rows = {}
        for mode in ("sparse", "text_search"):
            try:
                r = store.query(VectorStoreQuery(query_str="apple recipe", similarity_top_k=3,
                                                 mode=mode))
                rows[mode] = {"ids": r.ids, "scores": r.similarities}
            except Exception as e:
                rows[mode] = {"error": str(e)}
        out[name] = rows
    print("RESULT " + json.dumps(out))
    """
)


@pytest.mark.skipif(not (ML322 / "milvus_lite").is_dir(), reason=f"no milvus-lite 3.x in {ML322}")
def test_sparse_and_text_search_work_on_milvus_lite_3(tmp_path: Path) -> None:
    args = ["-c", ENGINE_SCRIPT, str(tmp_path), json.dumps(TEXTS)]
    out = result_of(args, path=[ML322, Path.cwd()], timeout=300)
    assert out["engine"].startswith("3.")
    for mode in ("sparse", "text_search"):
        # LlamaIndex's store sends drop_ratio_search=0.2, which this engine refuses
        assert "drop_ratio_search" in out["plain"][mode]["error"]
        ours = out["compatible"][mode]
        assert ours["ids"] == ["apple", "banana"]
        # this engine returns BM25 negated; the store hands it back positive, best first
        assert ours["scores"][0] > ours["scores"][1] > 0
