"""The pipeline is written once: adapters only translate, and drive it through public doors."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MULTI_COLLECTION = [
    ROOT / "llama_index_thresholded" / "multi_collection.py",
    ROOT / "langchain_thresholded" / "multi_collection.py",
]


@pytest.mark.parametrize("path", MULTI_COLLECTION, ids=lambda p: p.parent.name)
def test_a_multi_collection_retriever_reaches_into_nothing_private(path):
    """No ``other._name``: a retriever's own privates only (``self._x``, ``cls._x``)."""
    reach_ins = [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"})
    ]
    assert reach_ins == []


@pytest.mark.parametrize(
    "path",
    [
        *MULTI_COLLECTION,
        ROOT / "llama_index_thresholded" / "retriever.py",
        ROOT / "langchain_thresholded" / "retrievers.py",
    ],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_no_adapter_module_runs_the_selection_or_the_fan_out_itself(path):
    """select, attach, fan_out and the retries belong to the engine, not to an adapter."""
    source = path.read_text()
    for name in ("select(", "attach(", "fan_out(", "call_with_retries(", "merge("):
        assert name not in source, name


def test_the_llama_index_retriever_builds_no_vector_retriever_per_call(monkeypatch):
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.indices.vector_store.retrievers.retriever import VectorIndexRetriever
    from llama_index.core.schema import QueryBundle, TextNode
    from llama_index.core.vector_stores import SimpleVectorStore

    from llama_index_thresholded import ThresholdedRetriever
    from thresholded import RetrievalPolicy

    node = TextNode(id_="a", text="a section", embedding=[1.0, 0.0])
    storage = StorageContext.from_defaults(vector_store=SimpleVectorStore())
    index = VectorStoreIndex(
        [node], storage_context=storage, embed_model=MockEmbedding(embed_dim=2)
    )
    retriever = ThresholdedRetriever(index, RetrievalPolicy(min_similarity=0.0), neighbours=0)

    def refuse(*args, **kwargs):
        raise AssertionError("a VectorIndexRetriever was built for one call")

    monkeypatch.setattr(VectorIndexRetriever, "__init__", refuse)
    nodes = retriever.retrieve(QueryBundle("q", embedding=[1.0, 0.0]))
    assert [n.node.node_id for n in nodes] == ["a"]
