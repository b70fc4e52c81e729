"""Behind a multi-collection retriever, a section is its collection and its id.

Two collections that both number their sections "0", "1", ... hold distinct sections
under the same ids. The retrievers keep all of them; the postprocessor and the compressor
after them must too, not drop one of each pair as a ``duplicate``. A true duplicate (the
same section twice, in one collection) is still dropped.
"""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.core.vector_stores import SimpleVectorStore

import langchain_thresholded as lc
import llama_index_thresholded as li
from thresholded import RetrievalPolicy, metadata_keys
from thresholded.provenance import register
from thresholded.selection import DropReason

QUESTION = "the question"
VECTORS = {
    QUESTION: [1.0, 0.0],
    "alpha zero": [0.8, 0.6],  # cosine 0.8
    "alpha one": [0.6, 0.8],  # cosine 0.6
    "beta zero": [0.96, 0.28],  # cosine 0.96
    "beta one": [0.28, 0.96],  # cosine 0.28: below the floor
}
COLLECTIONS = {"alpha": ["alpha zero", "alpha one"], "beta": ["beta zero", "beta one"]}
POLICY = RetrievalPolicy(min_similarity=0.5, max_per_source=None, max_chars=None)
KEPT = [("beta", "0"), ("alpha", "0"), ("alpha", "1")]


class Fixed(BaseEmbedding):
    @classmethod
    def class_name(cls) -> str:
        return "Fixed"

    def _get_query_embedding(self, query: str) -> list[float]:
        return VECTORS[query]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return VECTORS[query]

    def _get_text_embedding(self, text: str) -> list[float]:
        return VECTORS[text]


class FixedEmbeddings(Embeddings):
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [VECTORS[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return VECTORS[text]


def llama_retriever() -> li.MultiCollectionRetriever:
    specs = []
    for name, texts in COLLECTIONS.items():
        nodes = [TextNode(id_=str(i), text=t, embedding=VECTORS[t]) for i, t in enumerate(texts)]
        storage = StorageContext.from_defaults(vector_store=SimpleVectorStore())
        index = VectorStoreIndex(nodes, storage_context=storage, embed_model=Fixed())
        specs.append(li.CollectionSpec(index, name=name))
    return li.MultiCollectionRetriever(specs, POLICY, neighbours=0, parent_summaries=False)


def langchain_retriever() -> lc.MultiCollectionRetriever:
    specs = []
    for name, texts in COLLECTIONS.items():
        store = InMemoryVectorStore(FixedEmbeddings())
        store.add_texts(texts, ids=[str(i) for i in range(len(texts))])
        specs.append(lc.CollectionSpec(store, name=name))
    return lc.MultiCollectionRetriever(collections=specs, policy=POLICY)


def labelled_nodes(nodes: list[NodeWithScore]) -> list[tuple[str, str]]:
    return [(n.node.metadata[metadata_keys.COLLECTION], n.node.node_id) for n in nodes]


def labelled_documents(docs: list[Document]) -> list[tuple[str, str]]:
    return [(d.metadata[metadata_keys.COLLECTION], str(d.id)) for d in docs]


def test_the_postprocessor_keeps_sections_of_one_id_from_two_collections():
    nodes = llama_retriever().retrieve(QUESTION)
    assert labelled_nodes(nodes) == KEPT
    postprocessor = li.SimilarityThresholdPostprocessor(policy=POLICY)
    selection = postprocessor.select(nodes, QUESTION)
    assert [d.reason for d in selection.dropped] == []
    assert labelled_nodes(postprocessor.postprocess_nodes(nodes, query_str=QUESTION)) == KEPT


def test_the_compressor_keeps_sections_of_one_id_from_two_collections():
    docs = langchain_retriever().invoke(QUESTION)
    assert labelled_documents(docs) == KEPT
    compressor = lc.SimilarityThresholdCompressor(policy=POLICY)
    report = compressor.compress_with_report(docs, QUESTION)
    assert [d.reason for d in report.dropped] == []
    assert labelled_documents(compressor.compress_documents(docs, QUESTION)) == KEPT


def test_the_report_names_each_sections_collection():
    docs = langchain_retriever().invoke(QUESTION)
    report = lc.SimilarityThresholdCompressor(policy=POLICY).compress_with_report(docs, QUESTION)
    assert [(c.collection, c.id) for c in report.selection.kept] == KEPT


def marked(collection: str, item_id: str, cosine: float) -> tuple[NodeWithScore, Document]:
    """A section as a multi-collection retriever returns it, in each adapter's form."""
    marks = {
        metadata_keys.SIMILARITY: cosine,
        metadata_keys.SCORE_KIND: "cosine",
        metadata_keys.COLLECTION: collection,
    }
    node = register(TextNode(id_=item_id, text=f"{collection} {item_id}", metadata=marks))
    doc = register(Document(id=item_id, page_content=f"{collection} {item_id}", metadata=marks))
    return NodeWithScore(node=node, score=cosine), doc


@pytest.mark.parametrize("adapter", ["llama_index", "langchain"])
def test_a_true_duplicate_in_one_collection_is_still_dropped(adapter):
    pairs = [marked("alpha", "0", 0.8), marked("beta", "0", 0.7), marked("alpha", "0", 0.8)]
    if adapter == "llama_index":
        postprocessor = li.SimilarityThresholdPostprocessor(policy=POLICY)
        selection = postprocessor.select([node for node, _ in pairs])
    else:
        compressor = lc.SimilarityThresholdCompressor(policy=POLICY)
        selection = compressor.compress_with_report([doc for _, doc in pairs]).selection
    assert [(c.collection, c.id) for c in selection.kept] == [("alpha", "0"), ("beta", "0")]
    assert [(d.candidate.collection, d.reason) for d in selection.dropped] == [
        ("alpha", DropReason.DUPLICATE)
    ]
