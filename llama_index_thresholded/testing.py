"""Synthetic collections for load tests and benchmarks: exact, reproducible, no model.

Sections are random unit vectors chained prev/next in documents of ten;
questions are precomputed vectors, most near one section, every fifth a random
direction, so some match and some do not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import (
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)
from llama_index.core.vector_stores.types import BasePydanticVectorStore

from thresholded.report import Report


@dataclass(frozen=True)
class SyntheticCorpus:
    index: VectorStoreIndex
    questions: list[QueryBundle]


def unit_vectors(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.normal(size=(n, dim))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def synthetic_corpus(
    store: BasePydanticVectorStore,
    *,
    sections: int = 300,
    questions: int = 40,
    dim: int = 64,
    seed: int = 7,
) -> SyntheticCorpus:
    """Index ``sections`` synthetic sections into ``store`` and make ``questions`` queries."""
    rng = np.random.default_rng(seed)
    vectors = unit_vectors(rng, sections, dim)
    nodes = [
        TextNode(
            id_=f"s{i}",
            text=f"section {i} " + "x" * int(rng.integers(50, 900)),
            metadata={"source": f"doc{i // 10}"},
            embedding=vectors[i].tolist(),
        )
        for i in range(sections)
    ]
    for i, node in enumerate(nodes):
        if i % 10:
            node.relationships[NodeRelationship.PREVIOUS] = RelatedNodeInfo(node_id=f"s{i - 1}")
        if (i + 1) % 10 and i + 1 < sections:
            node.relationships[NodeRelationship.NEXT] = RelatedNodeInfo(node_id=f"s{i + 1}")
    index = VectorStoreIndex(
        nodes,
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=MockEmbedding(embed_dim=dim),
    )
    near = vectors[rng.integers(0, sections, questions)]
    queries = unit_vectors(rng, questions, dim) * 0.6 + near * 0.8
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    queries[::5] = unit_vectors(rng, len(queries[::5]), dim)
    bundles = [QueryBundle(f"q{i}", embedding=q.tolist()) for i, q in enumerate(queries)]
    return SyntheticCorpus(index=index, questions=bundles)


def report_fingerprint(report: Report[NodeWithScore]) -> tuple:
    """Everything a query's answer consists of: kept, attached and every drop with its reason."""
    return (
        report.query,
        tuple((n.node.node_id, round(n.score or 0.0, 6)) for n in report.kept),
        tuple((n.node.node_id, n.node.metadata["attached_to"]) for n in report.attached),
        tuple(sorted((d.id, d.reason.value) for d in report.dropped)),
    )
