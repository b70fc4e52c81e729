"""On Milvus Lite 2.5, NOT over a list test has no expression: the store searches unfiltered.

Its nearest rows are then the internal ones, all outside the call's filters; the public
sections clear the floor but lie beyond the candidates asked for. The search is widened
until they are found, as under a filter the store applies (``doc_type != internal``).
"""

from __future__ import annotations

import math

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_thresholded import ThresholdedRetriever
from thresholded import RetrievalPolicy

pytest.importorskip("langchain_milvus")

POLICY = RetrievalPolicy(
    min_similarity=0.5, top_k=3, over_fetch=3, max_per_source=None, max_chars=None
)
NOT_INTERNAL = {"$not": [{"tags": {"$contains": "internal"}}]}
NOT_INTERNAL_TYPE = {"doc_type": {"$ne": "internal"}}


def unit(cosine: float) -> list[float]:
    return [cosine, math.sqrt(1 - cosine * cosine), 0.0, 0.0]


class Near(Embeddings):
    """Internal texts at cosine 0.95 with every question, public ones at 0.8."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [unit(0.95 if t.startswith("int") else 0.8) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return unit(1.0)


def document(name: str, kind: str) -> Document:
    return Document(id=name, page_content=name, metadata={"tags": [kind], "doc_type": kind})


@pytest.mark.parametrize("filters", [NOT_INTERNAL, NOT_INTERNAL_TYPE])
def test_public_sections_beyond_the_unfiltered_nearest_rows_are_found(tmp_path, filters):
    from langchain_thresholded.milvus import milvus_from_documents

    documents = [document(f"int{i}", "internal") for i in range(12)]
    documents += [document(f"pub{i}", "public") for i in range(3)]
    store = milvus_from_documents(
        documents, Near(), uri=str(tmp_path / "kb.db"), collection_name="inexact"
    )
    report = ThresholdedRetriever(vectorstore=store, policy=POLICY).retrieve_with_report(
        "q", filters=filters
    )
    assert sorted(d.metadata["pk"] for d in report.kept) == ["pub0", "pub1", "pub2"]
    assert not report.nothing_matched
