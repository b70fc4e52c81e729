"""Hand-made vectors for the LlamaIndex adapter: every cosine in these tests is chosen.

The question ``"question"`` embeds to e0. A section made with ``kit.section(id, cos)``
embeds to ``cos * e0 + sqrt(1 - cos²) * e_axis``, so its cosine with the question is
``cos`` (exactly in float64 up to one rounding of the norm, within 1e-7 in Milvus'
float32). ``kit.HALF`` is a dyadic unit vector whose cosine with e0 is exactly 0.5
in any precision, for tests of the floor's boundary.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler
from llama_index.core.schema import BaseNode, NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores import SimpleVectorStore
from llama_index.core.vector_stores.types import (
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from pydantic import Field, PrivateAttr

from llama_index_thresholded.milvus import milvus_store
from thresholded.policy import RetrievalPolicy

DIM = 8
QUESTION = "question"
ORTHOGONAL = "orthogonal question"
E0 = [1.0] + [0.0] * (DIM - 1)
E7 = [0.0] * (DIM - 1) + [1.0]  # no section has a component on e7
HALF = [0.5, 0.5, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0]  # cosine with e0: exactly 0.5


def vec(cos: float, axis: int = 1) -> list[float]:
    """A unit vector whose cosine with e0 is ``cos``; the rest lies on e_axis (1..6)."""
    assert 1 <= axis <= DIM - 2, "e7 is reserved for the orthogonal question"
    v = [0.0] * DIM
    v[0] = cos
    v[axis] = math.sqrt(1.0 - cos * cos)
    return v


class HandEmbedding(BaseEmbedding):
    """Maps known texts to chosen vectors; an unknown text is an error, never a guess."""

    vectors: dict[str, list[float]] = Field(default_factory=dict)
    _calls: list[str] = PrivateAttr(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "HandEmbedding"

    def _lookup(self, text: str) -> list[float]:
        self._calls.append(text)
        return list(self.vectors[text])

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._lookup(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._lookup(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._lookup(text)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return self._lookup(text)


class SpyStore(SimpleVectorStore):
    """An in-memory store that records each query and hands out its own node objects.

    It stores text, so the retriever gets the very objects this store holds: a test
    can see whether anything downstream mutates them. Its class name is unknown to
    the scoring module, so it needs ``metric=`` (its scores are cosines). Hybrid
    queries are answered with the dense ranking, as a stand-in for a hybrid store.
    """

    stores_text: bool = True
    _nodes: dict[str, BaseNode] = PrivateAttr(default_factory=dict)
    _queries: list[VectorStoreQuery] = PrivateAttr(default_factory=list)

    @property
    def queries(self) -> list[VectorStoreQuery]:
        return self._queries

    @property
    def held(self) -> dict[str, BaseNode]:
        return self._nodes

    def add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        ids = super().add(nodes, **kwargs)
        self._nodes.update((n.node_id, n) for n in nodes)
        return ids

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        self._queries.append(query)
        if query.mode is VectorStoreQueryMode.HYBRID:
            query = dataclasses.replace(query, mode=VectorStoreQueryMode.DEFAULT)
        if not query.node_ids:
            # index.as_retriever() passes the index struct's node ids, which is empty when
            # the store keeps the text; like Milvus, read "no ids" as "no restriction"
            query = dataclasses.replace(query, node_ids=None)
        result = super().query(query, **kwargs)
        return VectorStoreQueryResult(
            nodes=[self._nodes[i] for i in result.ids or []],
            similarities=result.similarities,
            ids=result.ids,
        )

    def get_nodes(
        self, node_ids: list[str] | None = None, filters: Any = None, **kwargs: Any
    ) -> list[BaseNode]:
        return [self._nodes[i] for i in node_ids or [] if i in self._nodes]


def policy(**fields: Any) -> RetrievalPolicy:
    """A policy with no cap and no budget unless a test sets them."""
    defaults: dict[str, Any] = {"max_per_source": None, "max_chars": None}
    return RetrievalPolicy(**{**defaults, **fields})


def section(
    node_id: str,
    cos: float | None = None,
    *,
    axis: int = 1,
    embedding: list[float] | None = None,
    text: str | None = None,
    source: str | None = "manual",
    **metadata: Any,
) -> TextNode:
    """A section whose cosine with the question is ``cos`` (or with a given embedding)."""
    if embedding is None:
        assert cos is not None
        embedding = vec(cos, axis)
    meta = dict(metadata)
    if source is not None:
        meta["source"] = source
    return TextNode(
        id_=node_id,
        text=text if text is not None else f"Section {node_id}.",
        metadata=meta,
        embedding=embedding,
    )


def link_chain(nodes: Sequence[TextNode], parent: TextNode | None = None) -> None:
    """Link sections prev/next in order; each gets ``parent`` as PARENT."""
    for i, node in enumerate(nodes):
        if i > 0:
            node.relationships[NodeRelationship.PREVIOUS] = RelatedNodeInfo(
                node_id=nodes[i - 1].node_id
            )
        if i + 1 < len(nodes):
            node.relationships[NodeRelationship.NEXT] = RelatedNodeInfo(
                node_id=nodes[i + 1].node_id
            )
        if parent is not None:
            node.relationships[NodeRelationship.PARENT] = RelatedNodeInfo(node_id=parent.node_id)


def build_index(
    nodes: Sequence[BaseNode],
    embed_model: BaseEmbedding,
    *,
    store: Any = None,
    docstore_nodes: Sequence[BaseNode] = (),
) -> VectorStoreIndex:
    """Index nodes that carry embeddings; ``docstore_nodes`` (summaries) go to the docstore."""
    storage = StorageContext.from_defaults(vector_store=store or SimpleVectorStore())
    if docstore_nodes:
        storage.docstore.add_documents(list(docstore_nodes))
    return VectorStoreIndex(list(nodes), storage_context=storage, embed_model=embed_model)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    a_, b_ = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a_ @ b_ / (np.linalg.norm(a_) * np.linalg.norm(b_)))


class Kit:
    """The helpers above, handed to tests as one fixture (test modules import nothing local)."""

    DIM = DIM
    QUESTION = QUESTION
    ORTHOGONAL = ORTHOGONAL
    E0 = E0
    E7 = E7
    HALF = HALF
    HandEmbedding = HandEmbedding
    SpyStore = SpyStore
    vec = staticmethod(vec)
    policy = staticmethod(policy)
    section = staticmethod(section)
    link_chain = staticmethod(link_chain)
    build_index = staticmethod(build_index)
    cosine = staticmethod(cosine)
    milvus_store = staticmethod(milvus_store)

    @staticmethod
    def embedding(
        extra: dict[str, list[float]] | None = None, model_name: str = "test/hand-made"
    ) -> HandEmbedding:
        """The question on e0, the orthogonal question on e7, and any extra texts."""
        vectors = {QUESTION: E0, ORTHOGONAL: E7, **(extra or {})}
        return HandEmbedding(vectors=vectors, model_name=model_name)


class Recorder(SimpleSpanHandler):
    """Every span's arguments and result, as text (a tracing integration records them
    as the span's input and output)."""

    seen: list[str] = Field(default_factory=list)

    def prepare_to_exit_span(
        self, id_: str, bound_args: Any, instance: Any = None, result: Any = None, **kwargs: Any
    ) -> Any:
        self.seen.append(f"{id_} {bound_args!r} {result!r}")
        return super().prepare_to_exit_span(id_, bound_args, instance, result, **kwargs)


@pytest.fixture
def recorder() -> Any:
    dispatcher = get_dispatcher()
    handler = Recorder()
    dispatcher.add_span_handler(handler)
    yield handler
    dispatcher.span_handlers.remove(handler)


@pytest.fixture
def kit() -> type[Kit]:
    return Kit


@pytest.fixture
def milvus_uri(tmp_path: Any) -> str:
    return str(tmp_path / "x.db")
