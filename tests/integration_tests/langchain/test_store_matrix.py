"""The same unit vectors in every LangChain store we support: the same true cosines.

Six sections, hand-made 8-dimensional unit vectors whose cosines with the on-topic
question are chosen (0.9 down to -0.2), and an off-topic question whose cosines
are all below the floor. Each store returns its own kind of score (a cosine, an
inner product, a squared L2 distance, Chroma's 1 - cos or 1 - ip); the retriever
reads each one from the store's own metric, so the similarity marks are the same
cosines everywhere, the ranking is the same, and the off-topic question is emptied.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore
from store_matrix_data import (
    COSINES,
    OFF_TOPIC,
    ON_TOPIC,
    POLICY,
    QUESTIONS,
    VECTORS,
    numpy_cosines,
)

from langchain_thresholded import Metric, ThresholdedRetriever, store_metric
from thresholded import ScoreRangeError, UnsupportedMetricError

pytestmark = pytest.mark.integration


class Precomputed(Embeddings):
    """The precomputed vectors of the sections and the two questions; nothing else."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(VECTORS[t]) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return list(QUESTIONS[text])


def _documents() -> list[Document]:
    return [
        Document(id=key, page_content=f"text of {key}", metadata={"source": key}) for key in COSINES
    ]


# The stores -------------------------------------------------------------------------------
def in_memory(_: Path) -> VectorStore:
    store = InMemoryVectorStore(Precomputed())
    store.add_documents(_documents())
    return store


def faiss(strategy: str) -> Callable[[Path], VectorStore]:
    def make(_: Path) -> VectorStore:
        pytest.importorskip("faiss")
        with warnings.catch_warnings():  # LangChain's FAISS store lives only there
            warnings.filterwarnings("ignore", "`langchain-community` is being sunset")
            from langchain_community.vectorstores import FAISS
            from langchain_community.vectorstores.utils import DistanceStrategy

        docs = _documents()
        return FAISS.from_documents(
            docs,
            Precomputed(),
            ids=[d.id for d in docs],
            distance_strategy=DistanceStrategy[strategy],
        )

    return make


def chroma(space: str) -> Callable[[Path], VectorStore]:
    def make(path: Path) -> VectorStore:
        pytest.importorskip("langchain_chroma")
        import chromadb
        from langchain_chroma import Chroma

        docs = _documents()
        return Chroma.from_documents(
            docs,
            Precomputed(),
            ids=[d.id for d in docs],
            client=chromadb.PersistentClient(path=str(path / "chroma")),
            collection_name=f"matrix_{uuid.uuid4().hex[:8]}",
            collection_metadata={"hnsw:space": space},
        )

    return make


def milvus(metric: str) -> Callable[[Path], VectorStore]:
    def make(path: Path) -> VectorStore:
        pytest.importorskip("langchain_milvus")
        from langchain_thresholded.milvus import milvus_from_documents

        return milvus_from_documents(
            _documents(),
            Precomputed(),
            uri=str(path / "matrix.db"),
            collection_name="matrix",
            metric=metric,
            overwrite=True,
        )

    return make


STORES: dict[str, tuple[Callable[[Path], VectorStore], Metric]] = {
    "in-memory": (in_memory, Metric.COSINE),
    "faiss-euclidean": (faiss("EUCLIDEAN_DISTANCE"), Metric.L2),
    "faiss-max-inner-product": (faiss("MAX_INNER_PRODUCT"), Metric.IP),
    "faiss-dot-product": (faiss("DOT_PRODUCT"), Metric.L2),  # LangChain builds an L2 index
    "faiss-cosine": (faiss("COSINE"), Metric.L2),  # LangChain builds an L2 index
    "faiss-jaccard": (faiss("JACCARD"), Metric.L2),  # LangChain builds an L2 index
    "chroma-l2": (chroma("l2"), Metric.L2),
    "chroma-ip": (chroma("ip"), Metric.IP_DISTANCE),
    "chroma-cosine": (chroma("cosine"), Metric.COSINE_DISTANCE),
    "milvus-ip": (milvus("IP"), Metric.IP),
    "milvus-cosine": (milvus("COSINE"), Metric.COSINE),
    "milvus-l2": (milvus("L2"), Metric.L2),
}


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, VectorStore]:
    """Every store, built once for the module (Milvus Lite takes seconds to start)."""
    return {name: make(tmp_path_factory.mktemp(name)) for name, (make, _) in STORES.items()}


def marks(store: VectorStore, question: str) -> tuple[list[str], dict[str, float]]:
    """The kept sections in order, and every section's similarity (kept and dropped)."""
    report = ThresholdedRetriever(vectorstore=store, policy=POLICY).retrieve_with_report(question)
    similarities = {d.id: d.metadata["similarity"] for d in report.kept}
    similarities.update({d.id: d.similarity for d in report.dropped if d.similarity is not None})
    return [d.id for d in report.kept], similarities


# The matrix -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", STORES)
def test_the_metric_is_read_from_the_store(stores, name):
    assert store_metric(stores[name]) is STORES[name][1]


@pytest.mark.parametrize("name", STORES)
def test_every_store_gives_the_true_cosines_and_the_same_ranking(stores, name):
    kept, similarities = marks(stores[name], ON_TOPIC)
    assert similarities == pytest.approx(numpy_cosines(ON_TOPIC), abs=1e-5)
    assert kept == ["s0", "s1", "s2"]


@pytest.mark.parametrize("name", STORES)
def test_the_off_topic_question_is_emptied_in_every_store(stores, name):
    report = ThresholdedRetriever(vectorstore=stores[name], policy=POLICY).retrieve_with_report(
        OFF_TOPIC
    )
    assert report.kept == ()
    assert report.nothing_matched
    similarities = {d.id: d.similarity for d in report.dropped}
    expected = numpy_cosines(OFF_TOPIC)
    assert similarities == pytest.approx({k: expected[k] for k in similarities}, abs=1e-5)


@pytest.mark.parametrize("name", ["faiss-euclidean", "chroma-cosine", "milvus-l2"])
async def test_async_calls_give_the_same_cosines(stores, name):
    retriever = ThresholdedRetriever(vectorstore=stores[name], policy=POLICY)
    docs = await retriever.ainvoke(ON_TOPIC)
    assert [d.id for d in docs] == ["s0", "s1", "s2"]
    expected = numpy_cosines(ON_TOPIC)
    assert {d.id: d.metadata["similarity"] for d in docs} == pytest.approx(
        {k: expected[k] for k in ("s0", "s1", "s2")}, abs=1e-5
    )


def test_the_stores_agree_with_each_other(stores):
    first = None
    for name in STORES:
        kept, similarities = marks(stores[name], ON_TOPIC)
        if first is None:
            first = (kept, similarities)
        assert kept == first[0], name
        assert similarities == pytest.approx(first[1], abs=1e-5), name


# The cases that were wrong ---------------------------------------------------------------
def test_chroma_cosine_space_with_metric_cosine_is_refused(stores):
    """Chroma's cosine space returns 1 - cos: read as a cosine, the ranking came out
    inverted and an off-topic question kept sections at 'similarity' 1.07."""
    store = stores["chroma-cosine"]
    with pytest.raises(UnsupportedMetricError, match=r"COSINE.*COSINE_DISTANCE"):
        ThresholdedRetriever(vectorstore=store, policy=POLICY, metric="COSINE")


def test_chroma_cosine_space_detected_keeps_nothing_for_the_off_topic_question(stores):
    store = stores["chroma-cosine"]
    report = ThresholdedRetriever(vectorstore=store, policy=POLICY).retrieve_with_report(OFF_TOPIC)
    assert report.kept == ()
    assert all(d.similarity is not None and d.similarity <= 1.0 for d in report.dropped)


@pytest.mark.parametrize(("name", "wrong"), [("faiss-cosine", "COSINE"), ("chroma-ip", "IP")])
def test_a_metric_the_store_contradicts_is_an_error_naming_both(stores, name, wrong):
    reported = STORES[name][1].value
    with pytest.raises(UnsupportedMetricError) as info:
        ThresholdedRetriever(vectorstore=stores[name], policy=POLICY, metric=wrong)
    assert f"metric={wrong!r}" in str(info.value)
    assert reported in str(info.value)


def test_the_metric_the_store_reports_may_be_given(stores):
    retriever = ThresholdedRetriever(
        vectorstore=stores["chroma-cosine"], policy=POLICY, metric="cosine_distance"
    )
    assert [d.id for d in retriever.invoke(ON_TOPIC)] == ["s0", "s1", "s2"]


def test_a_score_beyond_a_cosine_is_an_error_naming_the_store_and_the_fix(tmp_path):
    """Vectors that are not unit length under L2: the distance reads as a cosine below -1."""
    pytest.importorskip("faiss")
    from langchain_community.vectorstores import FAISS

    class Loud(Precomputed):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[3.0 * x for x in v] for v in super().embed_documents(texts)]

    store = FAISS.from_documents(_documents(), Loud())
    retriever = ThresholdedRetriever(vectorstore=store, policy=POLICY, embeddings=Precomputed())
    with pytest.raises(ScoreRangeError) as info:
        retriever.invoke(ON_TOPIC)
    message = str(info.value)
    assert "FAISS" in message and "L2" in message
    assert "Normalise" in message and "COSINE" in message and "metric=" in message


class Scaled(Precomputed):
    """The same directions, three times as long: a model that does not normalise."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[3.0 * x for x in v] for v in super().embed_documents(texts)]

    def embed_query(self, text: str) -> list[float]:
        return [3.0 * x for x in super().embed_query(text)]


@pytest.mark.parametrize("strategy", ["MAX_INNER_PRODUCT", "EUCLIDEAN_DISTANCE"])
def test_a_faiss_store_that_normalises_gives_true_cosines_from_a_model_that_does_not(strategy):
    """FAISS's normalize_L2 normalises the vectors and every query: the question is searched
    as the store searches it, and the stored vectors it reads back are unit length."""
    pytest.importorskip("faiss")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "`langchain-community` is being sunset")
        from langchain_community.vectorstores import FAISS
        from langchain_community.vectorstores.utils import DistanceStrategy

    docs = _documents()
    with warnings.catch_warnings():  # it normalises under inner product too, warning it won't
        warnings.filterwarnings("ignore", "Normalizing L2 is not applicable")
        store = FAISS.from_documents(
            docs,
            Scaled(),
            ids=[d.id for d in docs],
            distance_strategy=DistanceStrategy[strategy],
            normalize_L2=True,
        )
    kept, similarities = marks(store, ON_TOPIC)
    assert kept == ["s0", "s1", "s2"]
    expected = numpy_cosines(ON_TOPIC)
    assert similarities == pytest.approx(expected, abs=1e-5)
    assert marks(store, OFF_TOPIC)[0] == []
