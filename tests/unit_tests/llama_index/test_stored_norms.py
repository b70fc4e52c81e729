"""Under IP and L2 every candidate's stored vector is unit length, or the call is an error.

The question is e0 (unit length, checked before the search). A section stored with
norm 2.5 and a cosine of 0.2 scores 0.5 under inner product and would clear a floor
of 0.35; sections scaled by 0.3 turn an L2 cosine of 0.1 into 1 - (1 + 0.09 - 0.06) / 2
= 0.485. Both are refused, with the section, its norm and the fix.
"""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    VectorStoreQuery,
    VectorStoreQueryResult,
)
from pydantic import Field, PrivateAttr
from pymilvus import MilvusClient

from llama_index_thresholded import CollectionSpec, MultiCollectionRetriever, ThresholdedRetriever
from thresholded import NotUnitVectorError
from thresholded.fanout import CollectionSearchError

FLOOR = 0.35


def scaled(kit: Any, cos: float, scale: float, axis: int = 1) -> list[float]:
    return [x * scale for x in kit.vec(cos, axis)]


def retriever(index: Any, kit: Any, **kwargs: Any) -> ThresholdedRetriever:
    policy = kit.policy(min_similarity=FLOOR, top_k=10, over_fetch=1)
    return ThresholdedRetriever(index, policy, neighbours=0, **kwargs)


def milvus_index(kit: Any, uri: str, metric: str, nodes: list[BaseNode]) -> Any:
    store = kit.milvus_store(uri, f"norms_{metric.lower()}", dim=kit.DIM, metric=metric)
    return kit.build_index(nodes, kit.embedding(), store=store)


def ip_case(kit: Any) -> list[BaseNode]:
    """'long': cosine 0.2 stored with norm 2.5, an inner product of 0.5."""
    return [
        kit.section("ok", 0.6, axis=2),
        kit.section("long", embedding=scaled(kit, 0.2, 2.5)),
    ]


def l2_case(kit: Any) -> list[BaseNode]:
    """Every section scaled by 0.3: 'short' (cosine 0.1) reads as 0.485 under L2."""
    return [
        kit.section("ok", embedding=scaled(kit, 0.9, 0.3, axis=2)),
        kit.section("short", embedding=scaled(kit, 0.1, 0.3)),
    ]


def refused(error: pytest.ExceptionInfo[BaseException], section: str, norm: str) -> None:
    message = str(error.value)
    assert f"section {section!r}" in message
    assert f"norm {norm}" in message
    assert "Normalise the stored vectors" in message and "COSINE" in message


# Milvus Lite: IP and L2 are real ---------------------------------------------------------------
def test_ip_a_section_stored_with_norm_2_5_is_refused(kit, milvus_uri):
    index = milvus_index(kit, milvus_uri, "IP", ip_case(kit))
    with pytest.raises(NotUnitVectorError) as error:
        retriever(index, kit).retrieve(kit.QUESTION)
    refused(error, "long", "2.5000")
    assert "norms_ip" in str(error.value)  # the collection is named


def test_l2_sections_scaled_by_0_3_are_refused(kit, milvus_uri):
    index = milvus_index(kit, milvus_uri, "L2", l2_case(kit))
    with pytest.raises(NotUnitVectorError) as error:
        retriever(index, kit).retrieve(kit.QUESTION)
    refused(error, "ok", "0.3000")
    assert "2 of the 2 candidates" in str(error.value)


@pytest.mark.parametrize(("metric", "case"), [("IP", ip_case), ("L2", l2_case)])
async def test_async_refuses_them_too(kit, milvus_uri, metric, case):
    index = milvus_index(kit, milvus_uri, metric, case(kit))
    with pytest.raises(NotUnitVectorError):
        await retriever(index, kit, pushdown=False).aretrieve(kit.QUESTION)


def test_a_multi_collection_call_refuses_them(kit, milvus_uri):
    index = milvus_index(kit, milvus_uri, "IP", ip_case(kit))
    multi = MultiCollectionRetriever(
        [CollectionSpec(index, name="kb")], kit.policy(min_similarity=FLOOR), neighbours=0
    )
    with pytest.raises((NotUnitVectorError, CollectionSearchError)) as error:
        multi.retrieve(kit.QUESTION)
    assert "'long'" in str(error.value) and "norm 2.5000" in str(error.value)


def test_a_below_floor_section_with_a_short_vector_is_refused_too(kit, milvus_uri):
    """Cosine 0.9 stored with norm 0.3 scores 0.27: it would be dropped though it belongs."""
    nodes = [kit.section("ok", 0.6, axis=2), kit.section("hidden", embedding=scaled(kit, 0.9, 0.3))]
    index = milvus_index(kit, milvus_uri, "IP", nodes)
    with pytest.raises(NotUnitVectorError) as error:
        retriever(index, kit, pushdown=False).retrieve(kit.QUESTION)
    refused(error, "hidden", "0.3000")


def test_unit_vectors_pass_and_come_back_with_the_search(kit, milvus_uri, monkeypatch):
    """The vectors are an output field of the search: no second request reads them."""
    nodes = [kit.section("ok", 0.6, axis=2), kit.section("low", 0.2), kit.section("hi", 0.75)]
    index = milvus_index(kit, milvus_uri, "IP", nodes)
    queries: list[Any] = []
    original = MilvusClient.query
    monkeypatch.setattr(
        MilvusClient, "query", lambda c, *a, **k: queries.append(k) or original(c, *a, **k)
    )
    report = retriever(index, kit, pushdown=False).retrieve_with_report(kit.QUESTION)
    assert [n.node.node_id for n in report.kept] == ["hi", "ok"]
    assert [round(n.score, 6) for n in report.kept] == [0.75, 0.6]
    assert queries == []


def test_cosine_metric_is_not_checked(kit, milvus_uri):
    """The store normalises under COSINE: a long vector scores its true cosine."""
    index = milvus_index(kit, milvus_uri, "COSINE", ip_case(kit))
    kept = retriever(index, kit).retrieve(kit.QUESTION)
    assert [n.node.node_id for n in kept] == ["ok"]


# An in-memory store that scores by inner product: vectors fetched by id -------------------------
class ProductStore(BasePydanticVectorStore):
    """Scores each stored vector by its inner product with the question (``metric="IP"``);
    the hits carry no vector, ``get_nodes`` gives them back."""

    stores_text: bool = True
    dim: int | None = 8
    fetches: list[list[str]] = Field(default_factory=list)
    _nodes: dict[str, BaseNode] = PrivateAttr(default_factory=dict)

    @property
    def client(self) -> Any:
        return None

    def add(self, nodes: list[BaseNode], **kwargs: Any) -> list[str]:
        self._nodes.update((n.node_id, n.model_copy()) for n in nodes)
        return [n.node_id for n in nodes]

    def delete(self, ref_doc_id: str, **kwargs: Any) -> None:
        raise NotImplementedError

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        q = query.query_embedding or []
        scored = sorted(
            (
                (sum(a * b for a, b in zip(q, n.embedding or [], strict=True)), n)
                for n in self._nodes.values()
            ),
            key=lambda pair: -pair[0],
        )[: query.similarity_top_k]
        nodes = []
        for _, node in scored:
            copy = node.model_copy()
            copy.embedding = None
            nodes.append(copy)
        return VectorStoreQueryResult(
            nodes=nodes, similarities=[s for s, _ in scored], ids=[n.node_id for n in nodes]
        )

    def get_nodes(
        self, node_ids: list[str] | None = None, filters: Any = None, **kwargs: Any
    ) -> list[BaseNode]:
        self.fetches.append(list(node_ids or []))
        return [self._nodes[i].model_copy() for i in node_ids or [] if i in self._nodes]


def test_in_memory_ip_store_norm_2_5_is_refused_after_one_fetch(kit):
    store = ProductStore()
    index = kit.build_index(ip_case(kit), kit.embedding(), store=store)
    with pytest.raises(NotUnitVectorError) as error:
        retriever(index, kit, metric="IP").retrieve(kit.QUESTION)
    refused(error, "long", "2.5000")
    assert store.fetches == [["ok", "long"]]  # every candidate, one batch


def test_in_memory_ip_store_with_unit_vectors_keeps_true_cosines(kit):
    store = ProductStore()
    nodes = [kit.section("ok", 0.6, axis=2), kit.section("low", 0.2)]
    index = kit.build_index(nodes, kit.embedding(), store=store)
    kept = retriever(index, kit, metric="IP").retrieve(kit.QUESTION)
    assert [(n.node.node_id, round(n.score, 6)) for n in kept] == [("ok", 0.6)]
    assert store.fetches == [["ok", "low"]]
