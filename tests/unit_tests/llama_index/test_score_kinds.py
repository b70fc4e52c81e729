"""Score kinds in the LlamaIndex adapter: a hybrid, sparse or MMR score never meets the floor.

The store here answers every query with scores chosen by the test (an RRF rank sum
of 0.016, a weighted sum of 0.3, a BM25 score of 12.5...), whatever the mode, so
each assertion is about what the retriever does with exactly that number. Dense
vectors are hand-made: the question embeds to e0 and a section stored with
``kit.vec(c)`` has cosine ``c`` with it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import BaseNode, NodeWithScore, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from pydantic import Field, PrivateAttr

from llama_index_thresholded import SimilarityThresholdPostprocessor, ThresholdedRetriever
from thresholded import metadata_keys
from thresholded.errors import NonCosineScoreError
from thresholded.policy import RetrievalPolicy
from thresholded.provenance import register
from thresholded.scores import ScoreKind
from thresholded.selection import DropReason

QUESTION = "question"

# mode, hybrid ranker, the kind every result must say it has
MODES = [
    ("default", "RRFRanker", ScoreKind.COSINE),
    ("hybrid", "RRFRanker", ScoreKind.RRF),
    ("hybrid", "WeightedRanker", ScoreKind.WEIGHTED),
    ("sparse", "RRFRanker", ScoreKind.BM25),
    ("text_search", "RRFRanker", ScoreKind.BM25),
    ("mmr", "RRFRanker", ScoreKind.MMR),
]
NON_COSINE_MODES = [m for m in MODES if m[2] is not ScoreKind.COSINE]


class FixedScoreStore(BasePydanticVectorStore):
    """Answers every query with ``hits`` (id, score), in that order, whatever the mode.

    It stores text and the dense vectors; ``get_nodes`` hands the vectors back as
    ``node.embedding`` (as Milvus does) unless ``returns_vectors`` is off. Search
    results never carry a vector.
    """

    stores_text: bool = True
    is_embedding_query: bool = True
    hybrid_ranker: str = "RRFRanker"
    dim: int | None = 8
    returns_vectors: bool = True
    hits: list[tuple[str, float]] = Field(default_factory=list)
    _nodes: dict[str, BaseNode] = PrivateAttr(default_factory=dict)
    _queries: list[VectorStoreQuery] = PrivateAttr(default_factory=list)
    _fetches: list[list[str]] = PrivateAttr(default_factory=list)

    @property
    def client(self) -> Any:
        return None

    @property
    def queries(self) -> list[VectorStoreQuery]:
        return self._queries

    @property
    def fetches(self) -> list[list[str]]:
        return self._fetches

    def add(self, nodes: list[BaseNode], **kwargs: Any) -> list[str]:
        self._nodes.update((n.node_id, n.model_copy()) for n in nodes)
        return [n.node_id for n in nodes]

    def delete(self, ref_doc_id: str, **kwargs: Any) -> None:
        raise NotImplementedError

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        self._queries.append(query)
        hits = self.hits[: query.similarity_top_k]
        nodes = []
        for node_id, _ in hits:
            node = self._nodes[node_id].model_copy()
            node.embedding = None
            nodes.append(node)
        return VectorStoreQueryResult(
            nodes=nodes, similarities=[s for _, s in hits], ids=[i for i, _ in hits]
        )

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        return self.query(query, **kwargs)

    def get_nodes(
        self, node_ids: list[str] | None = None, filters: Any = None, **kwargs: Any
    ) -> list[BaseNode]:
        self._fetches.append(list(node_ids or []))
        found = []
        for node_id in node_ids or []:
            node = self._nodes[node_id].model_copy()
            if not self.returns_vectors:
                node.embedding = None
            found.append(node)
        return found

    async def aget_nodes(
        self, node_ids: list[str] | None = None, filters: Any = None, **kwargs: Any
    ) -> list[BaseNode]:
        return self.get_nodes(node_ids, filters, **kwargs)


class BatchEmbedding(BaseEmbedding):
    """Known texts to chosen vectors; records every query and every text batch."""

    vectors: dict[str, list[float]] = Field(default_factory=dict)
    _queries: list[str] = PrivateAttr(default_factory=list)
    _batches: list[list[str]] = PrivateAttr(default_factory=list)

    @property
    def queries(self) -> list[str]:
        return self._queries

    @property
    def batches(self) -> list[list[str]]:
        return self._batches

    def _get_query_embedding(self, query: str) -> list[float]:
        self._queries.append(query)
        return list(self.vectors[query])

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        self._batches.append(list(texts))
        return [list(self.vectors[t]) for t in texts]

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._get_text_embeddings(texts)


def text_of(node_id: str) -> str:
    return f"Section {node_id}."


def setup(
    kit: Any,
    cosines: dict[str, float],
    hits: list[tuple[str, float]],
    *,
    ranker: str = "RRFRanker",
    returns_vectors: bool = True,
) -> tuple[VectorStoreIndex, FixedScoreStore, BatchEmbedding]:
    """An index of sections with the given cosines, whose store answers with ``hits``."""
    axes = {node_id: 1 + i % 6 for i, node_id in enumerate(cosines)}
    vectors = {node_id: kit.vec(c, axes[node_id]) for node_id, c in cosines.items()}
    embed = BatchEmbedding(
        vectors={QUESTION: kit.E0, **{text_of(i): v for i, v in vectors.items()}},
        model_name="test/hand-made",
    )
    store = FixedScoreStore(hybrid_ranker=ranker, returns_vectors=returns_vectors)
    nodes = [
        TextNode(id_=node_id, text=text_of(node_id), embedding=vectors[node_id])
        for node_id in cosines
    ]
    index = VectorStoreIndex(
        nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed
    )
    store.hits = hits
    embed.batches.clear()
    return index, store, embed


def retriever(index: VectorStoreIndex, mode: str, **policy_fields: Any) -> ThresholdedRetriever:
    fields: dict[str, Any] = {"max_per_source": None, "max_chars": None, "top_k": 10}
    return ThresholdedRetriever(
        index,
        RetrievalPolicy(**{**fields, **policy_fields}),
        vector_store_query_mode=mode,
        metric="IP",
        neighbours=0,
        parent_summaries=False,
    )


def ids(nodes: list[NodeWithScore]) -> list[str]:
    return [n.node.node_id for n in nodes]


def kinds(nodes: list[NodeWithScore]) -> list[Any]:
    return [n.node.metadata.get(metadata_keys.SCORE_KIND) for n in nodes]


async def every_path(r: ThresholdedRetriever) -> dict[str, list[NodeWithScore]]:
    """The same question through each entry point of the retriever."""
    return {
        "retrieve": r.retrieve(QUESTION),
        "aretrieve": await r.aretrieve(QUESTION),
        "retrieve_with_report": r.retrieve_with_report(QUESTION).items,
        "aretrieve_with_report": (await r.aretrieve_with_report(QUESTION)).items,
    }


# Every result says what its score is ----------------------------------------------------------


@pytest.mark.parametrize(("mode", "ranker", "kind"), MODES)
@pytest.mark.parametrize("hybrid_policy", ["pass", "rescore"])
async def test_every_kept_node_carries_its_score_kind_on_every_path(
    kit: Any, mode: str, ranker: str, kind: ScoreKind, hybrid_policy: str
) -> None:
    index, _, _ = setup(kit, {"a": 0.9, "b": 0.8}, [("a", 0.9), ("b", 0.8)], ranker=ranker)
    r = retriever(index, mode, min_similarity=0.5, hybrid_policy=hybrid_policy)
    for path, nodes in (await every_path(r)).items():
        assert ids(nodes) == ["a", "b"], path
        assert kinds(nodes) == [kind.value, kind.value], path
    report = r.retrieve_with_report(QUESTION)
    assert [k["score_kind"] for k in report.to_event_data("retriever")["kept"]] == [kind.value] * 2
    assert [c.score_kind for c in report.selection.kept] == [kind, kind]


def test_score_kind_given_explicitly_wins_over_the_mode(kit: Any) -> None:
    index, _, _ = setup(kit, {"a": 0.9}, [("a", 0.016)])
    r = ThresholdedRetriever(
        index,
        RetrievalPolicy(min_similarity=0.5),
        score_kind="rrf",
        neighbours=0,
        parent_summaries=False,
    )
    nodes = r.retrieve(QUESTION)
    assert ids(nodes) == ["a"]
    assert kinds(nodes) == ["rrf"]
    assert nodes[0].score == 0.016


# No non-cosine score is ever compared with the floor ------------------------------------------


def test_an_rrf_score_of_0_016_is_kept_under_a_floor_of_0_5(kit: Any) -> None:
    # the section's real cosine is 0.1: only re-scoring would cut it
    index, store, embed = setup(kit, {"a": 0.1, "b": 0.2}, [("a", 0.0328), ("b", 0.016)])
    report = retriever(index, "hybrid", min_similarity=0.5).retrieve_with_report(QUESTION)
    assert ids(report.kept) == ["a", "b"]
    assert [n.score for n in report.kept] == [0.0328, 0.016]  # exactly the store's scores
    assert report.selection.passed_through == (ScoreKind.RRF,)
    assert report.dropped == ()
    # "pass" never looks for a cosine: no vector fetched, no text embedded
    assert store.fetches == [] and embed.batches == []
    assert all(metadata_keys.SIMILARITY not in n.node.metadata for n in report.kept)


@pytest.mark.parametrize(
    ("mode", "ranker", "scores"),
    [
        ("hybrid", "RRFRanker", [0.0164, 0.0161, 0.0159]),
        ("hybrid", "WeightedRanker", [0.3, 0.1, 0.0]),
        ("sparse", "RRFRanker", [12.5, 0.2, 0.01]),
        ("text_search", "RRFRanker", [3.48, 0.45, 0.22]),
        ("mmr", "RRFRanker", [0.4, -0.2, -0.9]),
    ],
)
def test_non_cosine_scores_below_the_floor_are_all_kept(
    kit: Any, mode: str, ranker: str, scores: list[float]
) -> None:
    hits = list(zip(["a", "b", "c"], scores, strict=True))
    index, _, _ = setup(kit, {"a": 0.1, "b": 0.1, "c": 0.1}, hits, ranker=ranker)
    nodes = retriever(index, mode, min_similarity=0.99).retrieve(QUESTION)
    assert ids(nodes) == ["a", "b", "c"]
    assert [n.score for n in nodes] == scores


def test_the_same_scores_as_cosines_are_cut(kit: Any) -> None:
    """Control: the floor is active, so the non-cosine tests above prove something."""
    index, _, _ = setup(kit, {"a": 0.1, "b": 0.1}, [("a", 0.6), ("b", 0.016)])
    report = retriever(index, "default", min_similarity=0.5).retrieve_with_report(QUESTION)
    assert ids(report.kept) == ["a"]
    assert [(d.item.node.node_id, d.reason) for d in report.dropped] == [
        ("b", DropReason.BELOW_THRESHOLD)
    ]


@pytest.mark.parametrize(("mode", "ranker", "kind"), NON_COSINE_MODES)
async def test_strict_mode_raises_for_every_non_cosine_kind(
    kit: Any, mode: str, ranker: str, kind: ScoreKind
) -> None:
    index, _, _ = setup(kit, {"a": 0.9}, [("a", 0.016)], ranker=ranker)
    r = retriever(index, mode, min_similarity=0.5, strict_score_kind=True)
    with pytest.raises(NonCosineScoreError, match=kind.value):
        r.retrieve(QUESTION)
    with pytest.raises(NonCosineScoreError, match=kind.value):
        await r.aretrieve(QUESTION)


def test_strict_mode_with_the_floor_off_does_not_raise(kit: Any) -> None:
    index, _, _ = setup(kit, {"a": 0.9}, [("a", 0.016)])
    r = retriever(index, "hybrid", min_similarity=0.0, strict_score_kind=True)
    assert ids(r.retrieve(QUESTION)) == ["a"]


# hybrid_policy="rescore": the floor meets the dense cosine ----------------------------------------

# hybrid order: far, near, mid; cosine order: mid (0.9), near (0.6), far (0.2)
RESCORE_COSINES = {"far": 0.2, "near": 0.6, "mid": 0.9}
RESCORE_HITS = [("far", 0.0328), ("near", 0.0323), ("mid", 0.0161)]


def check_rescored(report: Any) -> None:
    assert ids(report.kept) == ["near", "mid"]  # the hybrid order, not the cosine order
    assert [n.score for n in report.kept] == [0.0323, 0.0161]  # the hybrid scores stay
    assert kinds(report.kept) == ["rrf", "rrf"]
    sims = [n.node.metadata[metadata_keys.SIMILARITY] for n in report.kept]
    assert sims == pytest.approx([0.6, 0.9], abs=1e-12)
    assert [(d.item.node.node_id, d.reason) for d in report.dropped] == [
        ("far", DropReason.BELOW_THRESHOLD)
    ]
    assert report.selection.passed_through == ()


async def test_rescore_cuts_by_the_stored_dense_vector(kit: Any) -> None:
    index, store, embed = setup(kit, RESCORE_COSINES, RESCORE_HITS)
    r = retriever(index, "hybrid", min_similarity=0.5, hybrid_policy="rescore")
    check_rescored(r.retrieve_with_report(QUESTION))
    assert store.fetches == [["far", "near", "mid"]]  # one batch lookup
    assert embed.batches == []  # nothing embedded: the store had the vectors
    check_rescored(await r.aretrieve_with_report(QUESTION))
    assert len(store.fetches) == 2 and embed.batches == []


async def test_rescore_embeds_the_texts_in_one_batch_when_the_store_has_no_vectors(
    kit: Any,
) -> None:
    index, _, embed = setup(kit, RESCORE_COSINES, RESCORE_HITS, returns_vectors=False)
    r = retriever(index, "hybrid", min_similarity=0.5, hybrid_policy="rescore")
    check_rescored(r.retrieve_with_report(QUESTION))
    assert embed.batches == [[text_of("far"), text_of("near"), text_of("mid")]]
    check_rescored(await r.aretrieve_with_report(QUESTION))
    assert len(embed.batches) == 2


def test_rescore_ignores_a_stored_vector_of_another_dimension(kit: Any) -> None:
    index, store, embed = setup(kit, RESCORE_COSINES, RESCORE_HITS)
    for node in store._nodes.values():
        node.embedding = [1.0, 0.0, 0.0]  # another model's vector: not comparable
    r = retriever(index, "hybrid", min_similarity=0.5, hybrid_policy="rescore")
    check_rescored(r.retrieve_with_report(QUESTION))
    assert len(embed.batches) == 1


@pytest.mark.parametrize(("mode", "ranker", "kind"), NON_COSINE_MODES)
def test_rescore_applies_to_every_non_cosine_kind(
    kit: Any, mode: str, ranker: str, kind: ScoreKind
) -> None:
    index, _, embed = setup(kit, RESCORE_COSINES, RESCORE_HITS, ranker=ranker)
    r = retriever(index, mode, min_similarity=0.5, hybrid_policy="rescore")
    report = r.retrieve_with_report(QUESTION)
    assert ids(report.kept) == ["near", "mid"]
    assert kinds(report.kept) == [kind.value, kind.value]
    # sparse and text search do not embed the question for the search: rescore does
    assert embed.queries == [QUESTION]


def test_sparse_search_without_rescore_never_embeds_the_question(kit: Any) -> None:
    index, _, embed = setup(kit, RESCORE_COSINES, RESCORE_HITS)
    nodes = retriever(index, "sparse", min_similarity=0.5).retrieve(QUESTION)
    assert ids(nodes) == ["far", "near", "mid"]
    assert embed.queries == []


def test_rescore_leaves_dense_search_alone(kit: Any) -> None:
    index, store, embed = setup(kit, RESCORE_COSINES, [("mid", 0.9), ("near", 0.6), ("far", 0.2)])
    report = retriever(
        index, "default", min_similarity=0.5, hybrid_policy="rescore"
    ).retrieve_with_report(QUESTION)
    assert ids(report.kept) == ["mid", "near"]
    assert [n.node.metadata[metadata_keys.SIMILARITY] for n in report.kept] == [0.9, 0.6]
    # nothing re-scored or embedded; one fetch: the stored norms, checked under IP
    assert store.fetches == [["mid", "near", "far"]] and embed.batches == []


def test_strict_mode_accepts_rescored_results(kit: Any) -> None:
    index, _, _ = setup(kit, RESCORE_COSINES, RESCORE_HITS)
    r = retriever(
        index, "hybrid", min_similarity=0.5, hybrid_policy="rescore", strict_score_kind=True
    )
    check_rescored(r.retrieve_with_report(QUESTION))


def test_rescore_can_be_asked_for_one_call(kit: Any) -> None:
    index, _, _ = setup(kit, RESCORE_COSINES, RESCORE_HITS)
    r = retriever(index, "hybrid", min_similarity=0.5)
    rescoring = r.policy.model_copy(update={"hybrid_policy": "rescore"})
    check_rescored(r.retrieve_with_report(QUESTION, policy=rescoring))
    assert ids(r.retrieve(QUESTION)) == ["far", "near", "mid"]  # the retriever is unchanged


def test_rescored_nodes_keep_their_cosine_through_the_postprocessor(kit: Any) -> None:
    index, _, _ = setup(kit, RESCORE_COSINES, RESCORE_HITS)
    r = retriever(index, "hybrid", min_similarity=0.0, hybrid_policy="rescore")
    nodes = r.retrieve(QUESTION)
    assert ids(nodes) == ["far", "near", "mid"]
    post = SimilarityThresholdPostprocessor(
        policy=RetrievalPolicy(min_similarity=0.7, max_per_source=None, max_chars=None)
    )
    out = post.postprocess_nodes(nodes)
    assert ids(out) == ["mid"]
    assert out[0].score == 0.0161 and kinds(out) == ["rrf"]
    post = SimilarityThresholdPostprocessor(
        policy=RetrievalPolicy(min_similarity=0.5, max_per_source=None, max_chars=None)
    )
    assert ids(post.postprocess_nodes(nodes)) == ["near", "mid"]  # hybrid order kept


# The postprocessor ----------------------------------------------------------------------


def scored(node_id: str, score: float, **metadata: Any) -> NodeWithScore:
    node = TextNode(id_=node_id, text=text_of(node_id), metadata=metadata)
    return NodeWithScore(node=register(node), score=score)  # as the retriever returns it


@pytest.mark.parametrize("kind", [ScoreKind.RRF, ScoreKind.WEIGHTED, ScoreKind.BM25])
def test_postprocessor_passes_non_cosine_scores_and_marks_their_kind(kind: ScoreKind) -> None:
    post = SimilarityThresholdPostprocessor(
        policy=RetrievalPolicy(min_similarity=0.5, max_per_source=None, max_chars=None),
        score_kind=kind,
    )
    nodes = [scored("a", 0.0328), scored("b", 0.016)]
    out = post.postprocess_nodes(nodes)
    assert ids(out) == ["a", "b"]
    assert [n.score for n in out] == [0.0328, 0.016]
    assert kinds(out) == [kind.value, kind.value]
    assert all(metadata_keys.SIMILARITY not in n.node.metadata for n in out)
    assert nodes[0].node.metadata == {}  # the incoming nodes are not written on


def test_postprocessor_reads_a_node_own_score_kind() -> None:
    post = SimilarityThresholdPostprocessor(
        policy=RetrievalPolicy(min_similarity=0.5, max_per_source=None, max_chars=None)
    )
    nodes = [scored("c", 0.4), scored("r", 0.016, score_kind="rrf")]
    out = post.postprocess_nodes(nodes)
    assert ids(out) == ["r"]
    assert kinds(out) == ["rrf"]


def test_postprocessor_marks_cosine_results_with_kind_and_similarity() -> None:
    post = SimilarityThresholdPostprocessor(
        policy=RetrievalPolicy(min_similarity=0.5, max_per_source=None, max_chars=None)
    )
    out = post.postprocess_nodes([scored("a", 0.75), scored("b", 0.25)])
    assert ids(out) == ["a"]
    assert out[0].node.metadata == {"score_kind": "cosine", "similarity": 0.75}
    assert out[0].score == 0.75


def test_postprocessor_strict_mode_raises_for_an_unrescored_rrf_node() -> None:
    post = SimilarityThresholdPostprocessor(
        policy=RetrievalPolicy(min_similarity=0.5, strict_score_kind=True),
        score_kind=ScoreKind.RRF,
    )
    with pytest.raises(NonCosineScoreError, match="rrf"):
        post.postprocess_nodes([scored("a", 0.016)])


def test_search_mode_reaches_the_store(kit: Any) -> None:
    """The mode under test is the mode the store is asked for."""
    index, store, _ = setup(kit, {"a": 0.9}, [("a", 0.016)])
    for mode in ("hybrid", "sparse", "text_search"):
        retriever(index, mode, min_similarity=0.5).retrieve(QUESTION)
    assert [q.mode for q in store.queries] == [
        VectorStoreQueryMode.HYBRID,
        VectorStoreQueryMode.SPARSE,
        VectorStoreQueryMode.TEXT_SEARCH,
    ]


@pytest.mark.parametrize(("mode", "ranker", "kind"), NON_COSINE_MODES)
def test_cosine_declared_for_a_mode_of_other_scores_is_refused(
    kit: Any, mode: str, ranker: str, kind: ScoreKind
) -> None:
    """MMR or fused scores read as cosines would be cut by the floor with wrong numbers."""
    index, _, _ = setup(kit, {"a": 0.9}, [("a", 0.4)], ranker=ranker)
    with pytest.raises(ValueError, match=f"score_kind='cosine' contradicts .* '{kind.value}'"):
        ThresholdedRetriever(
            index,
            RetrievalPolicy(min_similarity=0.5),
            vector_store_query_mode=mode,
            score_kind="cosine",
            metric="IP",
        )


LEARNER_MODES = ["svm", "logistic_regression", "linear_regression", "semantic_hybrid"]


@pytest.mark.parametrize("mode", LEARNER_MODES)
def test_cosine_declared_for_a_learner_or_semantic_hybrid_mode_is_refused(
    kit: Any, mode: str
) -> None:
    """A classifier's decision value (0.09 for a section at cosine 0.9) is no cosine: read
    as one, the floor dropped the answering section."""
    index, _, _ = setup(kit, {"a": 0.9, "b": 0.2}, [("a", 0.09), ("b", -0.1)])
    with pytest.raises(ValueError, match=f"score_kind='cosine' contradicts .*'{mode}'"):
        ThresholdedRetriever(
            index,
            RetrievalPolicy(min_similarity=0.5),
            vector_store_query_mode=mode,
            score_kind="cosine",
            metric="IP",
        )
    # undeclared, they are re-scored to their dense cosine and cut by it
    kept = retriever(index, mode, min_similarity=0.5, hybrid_policy="rescore").retrieve(QUESTION)
    assert ids(kept) == ["a"]
    expected = float(np.dot(kit.vec(0.9, 1), kit.E0))
    assert kept[0].node.metadata[metadata_keys.SIMILARITY] == pytest.approx(expected)
