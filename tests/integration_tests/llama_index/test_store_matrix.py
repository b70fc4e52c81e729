"""The same unit vectors in every LlamaIndex store we support: the same true cosines.

Six sections, hand-made 8-dimensional unit vectors whose cosines with the on-topic
question are chosen (0.9 down to -0.2), and an off-topic question whose cosines
are all below the floor. Each store returns its own kind of score (a cosine, an
inner product, a squared L2 distance, Chroma's exp(-distance) of 1 - cos, 1 - ip
or squared L2); the retriever reads each one from the store's own metric, so the
similarities are the same cosines everywhere, the ranking is the same, and the
off-topic question is emptied.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores import SimpleVectorStore
from store_matrix_data import (
    COSINES,
    DIM,
    OFF_TOPIC,
    ON_TOPIC,
    POLICY,
    QUESTIONS,
    VECTORS,
    numpy_cosines,
)

from llama_index_thresholded import ThresholdedRetriever
from llama_index_thresholded.scoring import store_metric
from thresholded import Metric, ScoreRangeError, UnsupportedMetricError

pytestmark = pytest.mark.integration


class Precomputed(BaseEmbedding):
    """The precomputed vectors of the sections and the two questions; nothing else."""

    scale: float = 1.0

    def _vector(self, text: str) -> list[float]:
        section = text.splitlines()[-1]  # LlamaIndex puts the metadata above the text
        return [self.scale * x for x in VECTORS[section]]

    def _get_query_embedding(self, query: str) -> list[float]:
        return list(QUESTIONS[query])

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return list(QUESTIONS[query])

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)


def _index(store: Any, embed_model: BaseEmbedding | None = None) -> VectorStoreIndex:
    nodes = [TextNode(id_=key, text=f"text of {key}", metadata={"source": key}) for key in COSINES]
    storage = StorageContext.from_defaults(vector_store=store)
    return VectorStoreIndex(
        nodes, storage_context=storage, embed_model=embed_model or Precomputed()
    )


# The stores -------------------------------------------------------------------------------
def simple(_: Path) -> VectorStoreIndex:
    return _index(SimpleVectorStore())


def faiss(index_class: str) -> Callable[[Path], VectorStoreIndex]:
    def make(_: Path) -> VectorStoreIndex:
        faiss_ = pytest.importorskip("faiss")
        from llama_index.vector_stores.faiss import FaissVectorStore

        return _index(FaissVectorStore(faiss_index=getattr(faiss_, index_class)(DIM)))

    return make


def chroma(space: str) -> Callable[[Path], VectorStoreIndex]:
    def make(path: Path) -> VectorStoreIndex:
        chromadb = pytest.importorskip("chromadb")
        from llama_index.vector_stores.chroma import ChromaVectorStore

        client = chromadb.PersistentClient(path=str(path / "chroma"))
        collection = client.create_collection(
            f"matrix_{uuid.uuid4().hex[:8]}", metadata={"hnsw:space": space}
        )
        return _index(ChromaVectorStore(chroma_collection=collection))

    return make


def milvus(metric: str) -> Callable[[Path], VectorStoreIndex]:
    def make(path: Path) -> VectorStoreIndex:
        pytest.importorskip("llama_index.vector_stores.milvus")
        from llama_index_thresholded.milvus import milvus_store

        store = milvus_store(str(path / "matrix.db"), "matrix", dim=DIM, metric=metric)
        return _index(store)

    return make


STORES: dict[str, tuple[Callable[[Path], VectorStoreIndex], Metric]] = {
    "simple": (simple, Metric.COSINE),
    "faiss-ip": (faiss("IndexFlatIP"), Metric.IP),
    "faiss-l2": (faiss("IndexFlatL2"), Metric.L2),
    "chroma-l2": (chroma("l2"), Metric.L2),
    "chroma-ip": (chroma("ip"), Metric.IP_DISTANCE),
    "chroma-cosine": (chroma("cosine"), Metric.COSINE_DISTANCE),
    "milvus-ip": (milvus("IP"), Metric.IP),
    "milvus-cosine": (milvus("COSINE"), Metric.COSINE),
    "milvus-l2": (milvus("L2"), Metric.L2),
}


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, VectorStoreIndex]:
    """Every store, built once for the module (Milvus Lite takes seconds to start)."""
    return {name: make(tmp_path_factory.mktemp(name)) for name, (make, _) in STORES.items()}


def _retriever(index: VectorStoreIndex, **kwargs: Any) -> ThresholdedRetriever:
    return ThresholdedRetriever(index, POLICY, neighbours=0, **kwargs)


def marks(index: VectorStoreIndex, question: str) -> tuple[list[str], dict[str, float]]:
    """The kept sections in order, and every section's similarity (kept and dropped): the
    floor is not pushed into Milvus, which would leave the sections below it unseen."""
    report = _retriever(index, pushdown=False).retrieve_with_report(question)
    similarities = {n.node.node_id: n.score for n in report.kept}
    similarities.update({d.id: d.similarity for d in report.dropped if d.similarity is not None})
    return [n.node.node_id for n in report.kept], similarities


# The matrix -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", STORES)
def test_the_metric_is_read_from_the_store(indexes, name):
    assert store_metric(indexes[name].vector_store) is STORES[name][1]
    assert _retriever(indexes[name]).metric is STORES[name][1]


@pytest.mark.parametrize("name", STORES)
def test_every_store_gives_the_true_cosines_and_the_same_ranking(indexes, name):
    kept, similarities = marks(indexes[name], ON_TOPIC)
    assert similarities == pytest.approx(numpy_cosines(ON_TOPIC), abs=1e-5)
    assert kept == ["s0", "s1", "s2"]


@pytest.mark.parametrize("name", STORES)
def test_the_off_topic_question_is_emptied_in_every_store(indexes, name):
    report = _retriever(indexes[name]).retrieve_with_report(OFF_TOPIC)
    assert report.kept == ()
    assert report.nothing_matched
    similarities = {d.id: d.similarity for d in report.dropped}
    expected = numpy_cosines(OFF_TOPIC)
    assert similarities == pytest.approx({k: expected[k] for k in similarities}, abs=1e-5)


@pytest.mark.parametrize("name", ["faiss-l2", "chroma-cosine", "milvus-l2"])
async def test_async_calls_give_the_same_cosines(indexes, name):
    kept = await _retriever(indexes[name]).aretrieve(ON_TOPIC)
    assert [n.node.node_id for n in kept] == ["s0", "s1", "s2"]
    expected = numpy_cosines(ON_TOPIC)
    assert {n.node.node_id: n.score for n in kept} == pytest.approx(
        {k: expected[k] for k in ("s0", "s1", "s2")}, abs=1e-5
    )


def test_the_stores_agree_with_each_other(indexes):
    first = None
    for name in STORES:
        kept, similarities = marks(indexes[name], ON_TOPIC)
        if first is None:
            first = (kept, similarities)
        assert kept == first[0], name
        assert similarities == pytest.approx(first[1], abs=1e-5), name


# The cases that were wrong ---------------------------------------------------------------
def test_chroma_cosine_space_with_metric_cosine_is_refused(indexes):
    """LlamaIndex's Chroma store reports exp(-(1 - cos)): read as a cosine, every section
    scored between 0.25 and 1 and the off-topic question kept them all."""
    with pytest.raises(UnsupportedMetricError, match=r"COSINE.*COSINE_DISTANCE"):
        _retriever(indexes["chroma-cosine"], metric="COSINE")


def test_chroma_cosine_space_detected_keeps_nothing_for_the_off_topic_question(indexes):
    report = _retriever(indexes["chroma-cosine"]).retrieve_with_report(OFF_TOPIC)
    assert report.kept == ()
    assert all(d.similarity is not None and d.similarity <= 1.0 for d in report.dropped)


@pytest.mark.parametrize(("name", "wrong"), [("faiss-l2", "IP"), ("chroma-ip", "IP")])
def test_a_metric_the_store_contradicts_is_an_error_naming_both(indexes, name, wrong):
    reported = STORES[name][1].value
    with pytest.raises(UnsupportedMetricError) as info:
        _retriever(indexes[name], metric=wrong)
    assert f"metric={wrong!r}" in str(info.value)
    assert reported in str(info.value)


def test_the_metric_the_store_reports_may_be_given(indexes):
    retriever = _retriever(indexes["chroma-cosine"], metric="cosine_distance")
    assert [n.node.node_id for n in retriever.retrieve(ON_TOPIC)] == ["s0", "s1", "s2"]


def test_a_score_beyond_a_cosine_is_an_error_naming_the_store_and_the_fix():
    """Vectors that are not unit length under L2: the distance reads as a cosine below -1."""
    faiss_ = pytest.importorskip("faiss")
    from llama_index.vector_stores.faiss import FaissVectorStore

    store = FaissVectorStore(faiss_index=faiss_.IndexFlatL2(DIM))
    index = _index(store, Precomputed(scale=3.0))
    with pytest.raises(ScoreRangeError) as info:
        _retriever(index).retrieve(ON_TOPIC)
    message = str(info.value)
    assert "FaissVectorStore" in message and "L2" in message
    assert "Normalise" in message and "COSINE" in message and "metric=" in message
