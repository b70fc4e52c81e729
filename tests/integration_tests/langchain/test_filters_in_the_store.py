"""Filters are sent to the store, so that its search returns the nearest sections inside them.

Twenty internal sections lie nearer the question than the one FAQ section: searched without
the filter, the over-fetched candidates are all internal, and the engine's check drops them
all. Sent to the store (InMemory, FAISS, Chroma, Milvus), the filter finds the FAQ section.
A differential test then holds Chroma's ``where`` clauses, and the retriever on Chroma and
FAISS, to the reference evaluator; a condition Chroma cannot express stays client-side and
still never lets a section outside the filter through.
"""

from __future__ import annotations

import math
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore

from langchain_thresholded import ThresholdedRetriever
from thresholded import RetrievalPolicy
from thresholded.filters import Combine, Condition, Filter, Group, Op, matches
from thresholded.filters.chroma import to_chroma

pytestmark = pytest.mark.integration

QUESTION = "How long does a refund take?"
FAQ = {"doc_type": "faq"}
POLICY = RetrievalPolicy(min_similarity=0.3, top_k=4, over_fetch=3)


class Precomputed(Embeddings):
    """Internal sections at cosine 0.9 with the question, the FAQ section at 0.6."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [_vector(0.6 if t.startswith("FAQ") else 0.9) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0, 0.0, 0.0]


def _vector(cos: float) -> list[float]:
    return [cos, math.sqrt(1.0 - cos * cos), 0.0, 0.0]


def _documents() -> list[Document]:
    internal = [
        Document(
            id=f"i{i}",
            page_content=f"Staff only: refund procedure step {i}",
            metadata={"doc_type": "internal", "source": f"int{i}"},
        )
        for i in range(20)
    ]
    faq = Document(
        id="pub",
        page_content="FAQ: refunds are paid within 14 days of the request.",
        metadata={"doc_type": "faq", "source": "refunds"},
    )
    return [*internal, faq]


def _faiss_class() -> Any:
    pytest.importorskip("faiss")
    with warnings.catch_warnings():  # LangChain's FAISS store lives only there
        warnings.filterwarnings("ignore", "`langchain-community` is being sunset")
        from langchain_community.vectorstores import FAISS
    return FAISS


def in_memory(docs: list[Document], embeddings: Embeddings, _: Path) -> VectorStore:
    store = InMemoryVectorStore(embeddings)
    store.add_documents(docs)
    return store


def faiss(docs: list[Document], embeddings: Embeddings, _: Path) -> VectorStore:
    return _faiss_class().from_documents(docs, embeddings, ids=[d.id for d in docs])


def chroma(docs: list[Document], embeddings: Embeddings, path: Path) -> VectorStore:
    pytest.importorskip("langchain_chroma")
    import chromadb
    from langchain_chroma import Chroma

    return Chroma.from_documents(
        docs,
        embeddings,
        ids=[d.id for d in docs],
        client=chromadb.PersistentClient(path=str(path / "chroma")),
        collection_name=f"push_{uuid.uuid4().hex[:8]}",
        collection_metadata={"hnsw:space": "cosine"},
    )


def milvus(docs: list[Document], embeddings: Embeddings, path: Path) -> VectorStore:
    pytest.importorskip("langchain_milvus")
    from langchain_thresholded.milvus import milvus_from_documents

    return milvus_from_documents(
        docs,
        embeddings,
        uri=str(path / "push.db"),
        collection_name="push",
        metric="COSINE",
        overwrite=True,
    )


STORES: dict[str, Callable[[list[Document], Embeddings, Path], VectorStore]] = {
    "in-memory": in_memory,
    "faiss": faiss,
    "chroma": chroma,
    "milvus": milvus,
}


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, VectorStore]:
    return {
        name: make(_documents(), Precomputed(), tmp_path_factory.mktemp(name))
        for name, make in STORES.items()
    }


def _kept(report: Any) -> list[str]:
    return [c.id for c in report.kept]


@pytest.mark.parametrize("name", list(STORES))
def test_the_filter_finds_the_section_beyond_the_over_fetched_candidates(stores, name):
    """Without the filter in the store, the 12 nearest candidates are all internal and all
    dropped: the application said "I don't know" though the store held the answer."""
    report = ThresholdedRetriever(
        vectorstore=stores[name], policy=POLICY, filters=FAQ
    ).retrieve_with_report(QUESTION)
    assert _kept(report) == ["pub"]
    assert not report.nothing_matched
    assert report.drop_counts() == {}


@pytest.mark.parametrize("name", ["faiss", "chroma"])
def test_a_wrapped_retrievers_filter_is_sent_to_the_store(stores, name):
    wrapped = stores[name].as_retriever(search_kwargs={"k": 3, "filter": FAQ})
    retriever = ThresholdedRetriever.from_retriever(wrapped, policy=POLICY)
    assert _kept(retriever.retrieve_with_report(QUESTION)) == ["pub"]


@pytest.mark.parametrize("name", ["faiss", "chroma"])
async def test_async_calls_send_the_filter_too(stores, name):
    retriever = ThresholdedRetriever(vectorstore=stores[name], policy=POLICY, filters=FAQ)
    assert [d.id for d in await retriever.ainvoke(QUESTION)] == ["pub"]


def test_chroma_and_the_filter_of_its_retriever_are_combined(stores):
    """A Chroma ``where`` in ``search_kwargs`` (a raw store filter) holds with the filters."""
    retriever = ThresholdedRetriever(
        vectorstore=stores["chroma"],
        policy=POLICY,
        filters={"doc_type": {"$in": ["faq", "internal"]}},
        search_kwargs={"filter": {"source": "refunds"}},
    )
    assert _kept(retriever.retrieve_with_report(QUESTION)) == ["pub"]


def test_faiss_and_the_filter_of_its_retriever_are_combined(stores):
    """A FAISS ``filter`` in ``search_kwargs`` (a dict or a function) holds with the filters."""
    for own in ({"source": "refunds"}, lambda meta: meta["source"] == "refunds"):
        retriever = ThresholdedRetriever(
            vectorstore=stores["faiss"],
            policy=POLICY,
            filters={"doc_type": {"$in": ["faq", "internal"]}},
            search_kwargs={"filter": own},
        )
        assert _kept(retriever.retrieve_with_report(QUESTION)) == ["pub"]
    retriever = ThresholdedRetriever(
        vectorstore=stores["faiss"],
        policy=POLICY,
        filters={"doc_type": "internal"},
        search_kwargs={"filter": {"source": "refunds"}},
    )
    assert _kept(retriever.retrieve_with_report(QUESTION)) == []


# The differential test -------------------------------------------------------------------------
ROWS: dict[str, dict[str, Any]] = {
    "r0": {"a": "x", "b": 1},
    "r1": {"a": "y", "b": 2.5},
    "r2": {"a": "", "b": True},
    "r3": {"a": 1, "b": "1"},
    "r4": {"a": 1.0},
    "r5": {"b": -1},
    "r6": {"a": True, "b": False},
    "r7": {"a": "xy", "b": 0},
    "r8": {},
    "r9": {"a": [1, 2], "b": ["x"]},
    "r10": {"a": 2, "b": "y"},
}
SCALARS = ("x", "y", "", "1", 0, 1, 2, 2.5, -1, True, False)
DIFF_POLICY = RetrievalPolicy(
    min_similarity=0.1, top_k=len(ROWS), over_fetch=1, max_per_source=None, max_chars=None
)


class Same(Embeddings):
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0, 0.0, 0.0] for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0, 0.0, 0.0]


@st.composite
def conditions(draw: st.DrawFn) -> Condition:
    key = draw(st.sampled_from(("a", "b")))
    op = draw(st.sampled_from([Op.EQ, Op.NE, Op.GT, Op.GTE, Op.LT, Op.LTE, Op.IN, Op.NIN]))
    if op in (Op.IN, Op.NIN):
        kind = draw(st.sampled_from((str, int, bool)))
        values = [v for v in SCALARS if type(v) is kind or (kind is int and type(v) is float)]
        return Condition(key, op, tuple(draw(st.lists(st.sampled_from(values), max_size=3))))
    ordered = op in (Op.GT, Op.GTE, Op.LT, Op.LTE)
    scalars = [v for v in SCALARS if not (ordered and isinstance(v, bool))]  # refused by the model
    if draw(st.integers(0, 9)) == 0:  # a condition Chroma cannot express stays client-side
        return Condition(key, Op.TEXT_MATCH, draw(st.sampled_from(("x", "y"))))
    return Condition(key, op, draw(st.sampled_from(scalars)))


trees = st.recursive(
    conditions(),
    lambda children: st.builds(
        lambda combine, kids: Group(combine, tuple(kids)),
        st.sampled_from(list(Combine)),
        st.lists(children, min_size=1, max_size=3),
    ),
    max_leaves=5,
)


@pytest.fixture(scope="module")
def differential(tmp_path_factory: pytest.TempPathFactory) -> dict[str, VectorStore]:
    docs = [Document(id=i, page_content=f"{i} text", metadata=row) for i, row in ROWS.items()]
    path = tmp_path_factory.mktemp("differential")
    return {"faiss": faiss(docs, Same(), path), "chroma": chroma(docs, Same(), path)}


def _reference(f: Filter) -> set[str]:
    return {i for i, row in ROWS.items() if matches(f, row)}


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(tree=trees)
def test_chroma_where_and_both_retrievers_agree_with_the_reference(differential, tree):
    expected = _reference(tree)
    written = to_chroma(tree)
    collection = differential["chroma"]._collection
    if written.where is not None:
        selected = set(collection.get(where=written.where)["ids"])
        if written.exact:
            assert selected == expected, (tree, written.where)
        else:
            assert selected >= expected, (tree, written.where)
    for name, store in differential.items():
        retriever = ThresholdedRetriever(
            vectorstore=store, policy=DIFF_POLICY, filters=tree, neighbours=0
        )
        kept = {d.id for d in retriever.invoke("q")}
        assert kept == expected, (name, tree)


def test_a_condition_chroma_cannot_express_stays_client_side():
    tree = Group(Combine.AND, (Condition("a", Op.EQ, "x"), Condition("a", Op.TEXT_MATCH, "x")))
    written = to_chroma(tree)
    assert written.where == {"a": {"$eq": "x"}}
    assert not written.exact
    assert to_chroma(Group(Combine.NOT, (Condition("b", Op.GT, 1),))).where is None
    assert to_chroma(Condition("a", Op.GT, "x")).where is None  # Chroma orders numbers only
    assert to_chroma(Condition("a", Op.EQ, 2.5)).where is None  # a stored 2 would match
    negated = to_chroma(Group(Combine.NOT, (Condition("a", Op.EQ, 1), Condition("b", Op.IN, (1,)))))
    assert negated.where == {"$and": [{"a": {"$ne": 1}}, {"b": {"$nin": [1]}}]}
    assert negated.exact


@pytest.mark.parametrize(
    ("name", "own"),
    [
        ("faiss", {"doc_type": "faq"}),
        ("faiss", lambda meta: meta.get("doc_type") == "faq"),
        ("chroma", lambda meta: meta.get("doc_type") == "faq"),
    ],
    ids=["faiss-dict", "faiss-fn", "chroma-fn"],
)
def test_a_store_filter_in_search_kwargs_with_a_docstore_is_refused(stores, name, own):
    """It would hold for the search, not for the neighbours fetched from the docstore (a
    Chroma ``where`` dict is held by id: see test_chroma_restrictions_hold_by_id)."""
    from langchain_core.stores import InMemoryStore

    with pytest.raises(ValueError, match=r"not for the neighbours.*give it as filters="):
        ThresholdedRetriever(
            vectorstore=stores[name],
            policy=POLICY,
            docstore=InMemoryStore(),
            search_kwargs={"filter": own},
        )
