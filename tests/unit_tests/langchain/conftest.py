"""Exact fakes for the LangChain adapter's unit tests.

Every vector lives on a grid of sixteenths with norm exactly 1, so each cosine
with the query (the first axis) is exactly ``n / 16`` in floating point: a
document at the floor is at the floor, not one ulp below it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import InMemoryStore
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore

QUERY = "the question"
OTHER_QUERY = "another question"
DIM = 6


def unit_vector_with_cosine(cosine: float) -> list[float]:
    """A unit vector whose cosine with the first axis is exactly ``cosine`` (a multiple of 1/16)."""
    n = round(cosine * 16)
    if n / 16 != cosine or not -16 <= n <= 16:
        raise ValueError(f"cosine must be a multiple of 1/16 in [-1, 1], got {cosine}")
    rest = 256 - n * n
    for a in range(16, -1, -1):
        for b in range(a, -1, -1):
            for c in range(b, -1, -1):
                d_squared = rest - a * a - b * b - c * c
                if d_squared < 0:
                    continue
                d = math.isqrt(d_squared)
                if d * d == d_squared and d <= c:
                    return [n / 16, a / 16, b / 16, c / 16, d / 16, 0.0]
    raise AssertionError("every integer is a sum of four squares")


class ExactEmbeddings(Embeddings):
    """Maps known texts to chosen vectors and counts how often it is called."""

    def __init__(self, vectors: dict[str, list[float]] | None = None) -> None:
        self.vectors: dict[str, list[float]] = {
            QUERY: [1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            OTHER_QUERY: [0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
            **(vectors or {}),
        }
        self.query_calls: list[str] = []
        self.document_calls: list[list[str]] = []

    def __eq__(self, other: object) -> bool:
        """One model: every text both know embeds to the same vector (each corpus's fake
        knows its own documents, and the questions alike)."""
        if not isinstance(other, ExactEmbeddings):
            return NotImplemented
        shared = self.vectors.keys() & other.vectors.keys()
        return all(self.vectors[t] == other.vectors[t] for t in shared)

    def __hash__(self) -> int:
        return hash(ExactEmbeddings)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.document_calls.append(list(texts))
        return [list(self.vectors[t]) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.query_calls.append(text)
        return list(self.vectors[text])


@dataclass
class Corpus:
    """An ``InMemoryVectorStore`` whose documents have chosen cosines with ``QUERY``."""

    store: InMemoryVectorStore
    embeddings: ExactEmbeddings
    documents: dict[str, Document] = field(default_factory=dict)


Spec = tuple[Any, ...]


def build_corpus(specs: Iterable[Spec], *, text_len: int | None = None) -> Corpus:
    """Documents ``(id, cosine[, metadata[, text]])``.

    The text defaults to the id, padded with dots to ``text_len``.
    """
    embeddings = ExactEmbeddings()
    store = InMemoryVectorStore(embeddings)
    docs: dict[str, Document] = {}
    for spec in specs:
        doc_id, cosine = spec[0], spec[1]
        metadata = dict(spec[2]) if len(spec) > 2 else {}
        text = doc_id if text_len is None else doc_id.ljust(text_len, ".")
        if len(spec) > 3:
            text = spec[3]
        embeddings.vectors[text] = unit_vector_with_cosine(cosine)
        docs[doc_id] = Document(id=doc_id, page_content=text, metadata=metadata)
    store.add_documents(list(docs.values()))
    embeddings.document_calls.clear()
    return Corpus(store=store, embeddings=embeddings, documents=docs)


@pytest.fixture
def corpus() -> Callable[..., Corpus]:
    return build_corpus


def chain_docstore(ids: Sequence[str], *, parent: str | None = None) -> InMemoryStore:
    """A docstore of ``ids`` linked as one chain of sections (prev_id / next_id)."""
    store = InMemoryStore()
    items = []
    for i, doc_id in enumerate(ids):
        metadata: dict[str, Any] = {"source": "chain"}
        if i > 0:
            metadata["prev_id"] = ids[i - 1]
        if i + 1 < len(ids):
            metadata["next_id"] = ids[i + 1]
        if parent is not None:
            metadata["parent_id"] = parent
        items.append(
            (doc_id, Document(id=doc_id, page_content=f"text of {doc_id}", metadata=metadata))
        )
    store.mset(items)
    return store


class ScoreTransformStore(VectorStore):
    """A store of unknown kind that returns ``transform(cosine)`` as its raw score."""

    def __init__(self, inner: InMemoryVectorStore, transform: Callable[[float], float]) -> None:
        self.inner = inner
        self.transform = transform

    @property
    def embeddings(self) -> Embeddings:
        return self.inner.embeddings

    def add_texts(
        self, texts: Iterable[str], metadatas: list[dict] | None = None, **kwargs: Any
    ) -> list[str]:
        return self.inner.add_texts(texts, metadatas, **kwargs)

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict] | None = None,
        **kwargs: Any,
    ) -> ScoreTransformStore:
        raise NotImplementedError

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        return self.inner.similarity_search(query, k=k, **kwargs)

    def similarity_search_with_score_by_vector(
        self, embedding: list[float], k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        pairs = self.inner.similarity_search_with_score_by_vector(embedding, k=k, **kwargs)
        return [(doc, self.transform(score)) for doc, score in pairs]

    def similarity_search_with_score(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        vector = self.inner.embeddings.embed_query(query)
        return self.similarity_search_with_score_by_vector(vector, k=k, **kwargs)

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, **kwargs: Any
    ) -> list[Document]:
        return self.inner.similarity_search_by_vector(embedding, k=k, **kwargs)


@pytest.fixture
def transform_store() -> type[ScoreTransformStore]:
    return ScoreTransformStore


@pytest.fixture
def docstore() -> Callable[..., InMemoryStore]:
    return chain_docstore


def inexact_filter_message(retriever: Any, **call: Any) -> str:
    """The message of the ``InexactFilterError`` a call (its options ``call``) raises past its
    widest search."""
    from thresholded.errors import InexactFilterError

    with pytest.raises(InexactFilterError) as raised:
        retriever.invoke(QUERY, **call)
    return str(raised.value)


def self_query(store: VectorStore, written: dict[str, Any], **search_kwargs: Any) -> Any:
    """A ``SelfQueryRetriever`` over ``store`` whose LLM writes the filter ``written`` (an
    equality on each key) for every question, as it would from a user's."""
    self_query_module = pytest.importorskip("langchain_classic.retrievers.self_query.base")
    from langchain_core.runnables import RunnableLambda
    from langchain_core.structured_query import (
        Comparator,
        Comparison,
        Operation,
        Operator,
        StructuredQuery,
        Visitor,
    )

    class Functions(Visitor):
        """The written filter as a function of a document, as InMemoryVectorStore reads it."""

        allowed_comparators = (Comparator.EQ,)
        allowed_operators = (Operator.AND,)

        def visit_comparison(self, comparison: Comparison) -> Any:
            return lambda d: d.metadata.get(comparison.attribute) == comparison.value

        def visit_operation(self, operation: Operation) -> Any:
            tests = [argument.accept(self) for argument in operation.arguments]
            return lambda d: all(test(d) for test in tests)

        def visit_structured_query(self, query: StructuredQuery) -> tuple[str, dict]:
            return query.query, {"filter": query.filter.accept(self)} if query.filter else {}

    conditions = [
        Comparison(comparator=Comparator.EQ, attribute=k, value=v) for k, v in written.items()
    ]
    where = Operation(operator=Operator.AND, arguments=conditions)
    llm = RunnableLambda(lambda given: StructuredQuery(query=given["query"], filter=where))
    return self_query_module.SelfQueryRetriever(
        vectorstore=store,
        query_constructor=llm,
        structured_query_translator=Functions(),
        search_kwargs=search_kwargs,
    )


@pytest.fixture
def self_querying() -> Callable[..., Any]:
    return self_query
