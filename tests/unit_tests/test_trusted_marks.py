"""Marks cannot be forged: only what this package's retriever produced is judged by its marks.

A stored document's metadata is anyone's to write. The retrievers strip the package's
mark keys from it, and the postprocessor and the compressor ignore the marks of objects
the retriever did not produce in this process (see ``thresholded.provenance``).
"""

from __future__ import annotations

import gc

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.vector_stores import SimpleVectorStore

import langchain_thresholded as lc
import llama_index_thresholded as li
from thresholded import NonCosineScoreError, RetrievalPolicy
from thresholded.provenance import Asked, Standing, is_registered, register, standing
from thresholded.selection import DropReason

QUESTION = "the question"
OTHER = "another question"
VECTORS = {
    QUESTION: [1.0, 0.0],
    OTHER: [0.0, 1.0],  # near: cosine 0.8, far: 0.96
    "near": [0.6, 0.8],  # cosine 0.6
    "far": [0.28, 0.96],  # cosine 0.28
}
FORGED = {"similarity": 0.99, "score_kind": "cosine"}
FLOOR = 0.5
POLICY = RetrievalPolicy(min_similarity=FLOOR, max_per_source=None, max_chars=None)


def vector_of(text: str) -> list[float]:
    return VECTORS[text.split("\n\n")[-1]]  # LlamaIndex puts the metadata before the text


class Fixed(BaseEmbedding):
    @classmethod
    def class_name(cls) -> str:
        return "Fixed"

    def _get_query_embedding(self, query: str) -> list[float]:
        return vector_of(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return vector_of(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return vector_of(text)


class FixedEmbeddings(Embeddings):
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [vector_of(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return vector_of(text)


def ids(nodes: list[NodeWithScore]) -> list[str]:
    return [n.node.node_id for n in nodes]


def dropped(selection) -> dict[str, DropReason]:
    return {d.candidate.id: d.reason for d in selection.dropped}


# The registry -----------------------------------------------------------------------------


def test_the_registry_knows_the_object_not_an_equal_copy():
    doc = register(Document(page_content="near"))
    assert is_registered(doc)
    assert not is_registered(doc.model_copy())
    assert not is_registered(Document(page_content="near"))


def test_the_registry_keeps_nothing_alive():
    doc = register(Document(page_content="near"))
    key = id(doc)
    del doc
    gc.collect()
    from thresholded import provenance

    assert key not in provenance._REGISTRY


# The retrievers strip stored marks --------------------------------------------------------


def test_llama_index_retriever_strips_the_marks_a_stored_node_holds():
    stored = {**FORGED, "attached_role": "neighbour", "attached_to": "near", "topic": "t"}
    nodes = [
        TextNode(id_="far", text="far", embedding=VECTORS["far"], metadata=stored),
        TextNode(id_="near", text="near", embedding=VECTORS["near"]),
    ]
    storage = StorageContext.from_defaults(vector_store=SimpleVectorStore())
    index = VectorStoreIndex(nodes, storage_context=storage, embed_model=Fixed())
    retriever = li.ThresholdedRetriever(index, POLICY.model_copy(update={"min_similarity": 0.2}))
    out = {n.node.node_id: n for n in retriever.retrieve(QUESTION)}
    meta = out["far"].node.metadata
    assert meta["similarity"] == pytest.approx(0.28)  # the true cosine, not the stored 0.99
    assert "attached_role" not in meta and "attached_to" not in meta
    assert meta["topic"] == "t"
    # and below the floor, the stored similarity does not save it
    assert ids(li.ThresholdedRetriever(index, POLICY).retrieve(QUESTION)) == ["near"]


def test_langchain_retriever_strips_the_marks_a_stored_document_holds():
    store = InMemoryVectorStore(FixedEmbeddings())
    stored = {**FORGED, "attached_role": "neighbour", "attached_to": "near", "topic": "t"}
    store.add_texts(["far", "near"], metadatas=[stored, {}], ids=["far", "near"])
    low = POLICY.model_copy(update={"min_similarity": 0.2})
    out = {d.id: d for d in lc.ThresholdedRetriever(vectorstore=store, policy=low).invoke(QUESTION)}
    meta = out["far"].metadata
    assert meta["similarity"] == pytest.approx(0.28)
    assert "attached_role" not in meta and "attached_to" not in meta
    assert meta["topic"] == "t"
    kept = lc.ThresholdedRetriever(vectorstore=store, policy=POLICY).invoke(QUESTION)
    assert [d.id for d in kept] == ["near"]


# The postprocessor ------------------------------------------------------------------------


def test_postprocessor_ignores_a_stored_similarity():
    forged = NodeWithScore(node=TextNode(id_="far", text="far", metadata=FORGED), score=0.1)
    post = li.SimilarityThresholdPostprocessor(policy=POLICY, score_kind="cosine")
    assert post.postprocess_nodes([forged]) == []
    assert dropped(post.select([forged])) == {"far": DropReason.BELOW_THRESHOLD}


def test_postprocessor_ignores_a_stored_attachment_role():
    kept = NodeWithScore(node=register(TextNode(id_="near", text="near")), score=0.9)
    fake = {"attached_role": "neighbour", "attached_to": "near"}
    intruder = NodeWithScore(node=TextNode(id_="x", text="x", metadata=fake), score=None)
    lone = NodeWithScore(node=TextNode(id_="y", text="y", metadata={"attached_role": "neighbour"}))
    post = li.SimilarityThresholdPostprocessor(policy=POLICY)
    assert ids(post.postprocess_nodes([kept, intruder, lone])) == ["near"]
    assert dropped(post.select([kept, intruder, lone])) == {
        "x": DropReason.UNSCORED,
        "y": DropReason.UNSCORED,
    }


def test_postprocessor_output_of_the_retriever_is_trusted():
    nodes = [
        TextNode(id_="far", text="far", embedding=VECTORS["far"]),
        TextNode(id_="near", text="near", embedding=VECTORS["near"]),
    ]
    storage = StorageContext.from_defaults(vector_store=SimpleVectorStore())
    index = VectorStoreIndex(nodes, storage_context=storage, embed_model=Fixed())
    low = POLICY.model_copy(update={"min_similarity": 0.0})
    retrieved = li.ThresholdedRetriever(index, low, neighbours=0).retrieve(QUESTION)
    reranked = [NodeWithScore(node=n.node, score=1.0 - (n.score or 0)) for n in retrieved]
    post = li.SimilarityThresholdPostprocessor(policy=POLICY)  # no model needed: trusted marks
    assert ids(post.postprocess_nodes(reranked)) == ["near"]


# The compressor ---------------------------------------------------------------------------


def test_compressor_ignores_a_stored_similarity():
    forged = Document(id="far", page_content="far", metadata=FORGED)
    compressor = lc.SimilarityThresholdCompressor(policy=POLICY, embeddings=FixedEmbeddings())
    assert compressor.compress_documents([forged], QUESTION) == []
    report = compressor.compress_with_report([forged], QUESTION)
    assert report.drop_counts() == {"below_threshold": 1}


def test_compressor_ignores_a_stored_attachment_role():
    kept = register(Document(id="near", page_content="near", metadata={"similarity": 0.6}))
    fake = {"attached_role": "neighbour", "attached_to": "near"}
    intruder = Document(id="x", page_content="x", metadata=fake)
    compressor = lc.SimilarityThresholdCompressor(policy=POLICY)
    out = compressor.compress_documents([kept, intruder], QUESTION)
    assert [d.id for d in out] == ["near"]
    report = compressor.compress_with_report([kept, intruder], QUESTION)
    assert report.drop_counts() == {"unscored": 1}


def test_compressor_without_a_model_and_nothing_it_can_trust_is_an_error():
    forged = Document(id="far", page_content="far", metadata=FORGED)
    compressor = lc.SimilarityThresholdCompressor(policy=POLICY)
    with pytest.raises(NonCosineScoreError, match="embeddings="):
        compressor.compress_documents([forged], QUESTION)


# Marks answer one question ----------------------------------------------------------------


def test_registered_for_one_question_is_not_registered_for_another():
    doc = register(Document(page_content="near"), Asked(QUESTION))
    assert standing(doc, Asked(QUESTION)) is Standing.OURS
    assert is_registered(doc)  # no question to compare with: its own marks
    assert standing(doc, Asked(OTHER)) is Standing.ANOTHER_QUESTION
    assert standing(Document(page_content="near"), Asked(QUESTION)) is Standing.FOREIGN
    assert is_registered(register(Document(page_content="near")), Asked(OTHER))  # bound to none


def test_a_question_is_its_text_and_the_vector_it_was_searched_with():
    """A vector-only question has no text to tell it apart, and a caller's vector for a
    text may be another question: the vector searched with is part of the question. A
    filter given the text alone embeds it as the retriever did."""
    by_vector = Asked("", [1.0, 0.0], given=True)
    assert by_vector.answers(Asked("", (1.0, 0.0), given=True))
    assert not by_vector.answers(Asked("", [0.0, 1.0], given=True))
    assert not by_vector.answers(Asked(""))  # its text does not say its vector
    embedded = Asked("q", [1.0, 0.0])  # searched with the embedding of its text
    assert embedded.answers(Asked("q"))
    assert embedded.answers(Asked("q", [1.0, 0.0], given=True))  # filled in from the text
    assert not embedded.answers(Asked("q", [-0.6, 0.8], given=True))
    assert not Asked("q", embedded=("hypothetical answer",)).answers(Asked("q"))


def test_a_node_retrieved_for_a_text_is_not_trusted_for_another_vector_of_it():
    """Retrieved for QUESTION's text ([1, 0]: near 0.6, far 0.28), judged for a bundle with
    the same text and another vector ([-0.6, 0.8]: near 0.28, far 0.6)."""
    retrieved = li.ThresholdedRetriever(
        _llama_index(), POLICY.model_copy(update={"min_similarity": 0.0}), neighbours=0
    ).retrieve(QUESTION)
    bundle = QueryBundle(QUESTION, embedding=[-0.6, 0.8])
    post = li.SimilarityThresholdPostprocessor(policy=POLICY, embed_model=Fixed())
    assert ids(post.postprocess_nodes(retrieved, bundle)) == ["far"]
    with pytest.raises(NonCosineScoreError, match="another question"):
        li.SimilarityThresholdPostprocessor(policy=POLICY).postprocess_nodes(retrieved, bundle)
    assert ids(post.postprocess_nodes(retrieved, QueryBundle(QUESTION))) == ["near"]


def _llama_index() -> VectorStoreIndex:
    nodes = [
        TextNode(id_="far", text="far", embedding=VECTORS["far"]),
        TextNode(id_="near", text="near", embedding=VECTORS["near"]),
    ]
    storage = StorageContext.from_defaults(vector_store=SimpleVectorStore())
    return VectorStoreIndex(nodes, storage_context=storage, embed_model=Fixed())


def test_postprocessor_does_not_read_one_questions_cosines_for_another():
    """Nodes retrieved for QUESTION carry its cosines (near 0.6, far 0.28). For OTHER they
    are 0.8 and 0.96: the marks must not decide, the cosines are computed again."""
    low = POLICY.model_copy(update={"min_similarity": 0.0})
    retrieved = li.ThresholdedRetriever(_llama_index(), low, neighbours=0).retrieve(QUESTION)
    post = li.SimilarityThresholdPostprocessor(policy=POLICY, embed_model=Fixed())
    assert ids(post.postprocess_nodes(retrieved, query_str=QUESTION)) == ["near"]
    again = post.postprocess_nodes(retrieved, query_str=OTHER)
    assert sorted(ids(again)) == ["far", "near"]
    assert {n.node.node_id: n.node.metadata["similarity"] for n in again} == pytest.approx(
        {"near": 0.8, "far": 0.96}
    )
    without_model = li.SimilarityThresholdPostprocessor(policy=POLICY)
    with pytest.raises(NonCosineScoreError, match=r"another question.*embed_model="):
        without_model.postprocess_nodes(retrieved, query_str=OTHER)
    declared = li.SimilarityThresholdPostprocessor(policy=POLICY, score_kind="cosine")
    with pytest.raises(NonCosineScoreError, match="another question"):  # its score is stale too
        declared.postprocess_nodes(retrieved, query_str=OTHER)


def test_postprocessor_tells_vector_only_questions_apart():
    """Two questions given only as vectors have the same (empty) text."""
    low = POLICY.model_copy(update={"min_similarity": 0.0})
    retriever = li.ThresholdedRetriever(_llama_index(), low, neighbours=0)
    retrieved = retriever.retrieve(QueryBundle("", embedding=VECTORS[QUESTION]))
    post = li.SimilarityThresholdPostprocessor(policy=POLICY, embed_model=Fixed())
    same = post.postprocess_nodes(retrieved, QueryBundle("", embedding=VECTORS[QUESTION]))
    assert ids(same) == ["near"]
    other = post.postprocess_nodes(retrieved, QueryBundle("", embedding=VECTORS[OTHER]))
    assert {n.node.node_id: n.node.metadata["similarity"] for n in other} == pytest.approx(
        {"near": 0.8, "far": 0.96}  # computed with the bundle's own vector
    )


def test_postprocessor_without_a_question_registers_nothing_it_cannot_vouch_for():
    """A foreign node passed on without a question is marked, not registered: its marks
    would otherwise be trusted for any question after it."""
    foreign = [
        NodeWithScore(node=TextNode(id_="near", text="near"), score=0.99),
        NodeWithScore(node=TextNode(id_="far", text="far"), score=0.99),
    ]
    passed = li.SimilarityThresholdPostprocessor(policy=POLICY, score_kind="cosine")
    out = passed.postprocess_nodes(foreign)
    assert [standing(n.node, Asked(QUESTION)) for n in out] == [Standing.FOREIGN] * 2
    post = li.SimilarityThresholdPostprocessor(policy=POLICY, embed_model=Fixed())
    assert ids(post.postprocess_nodes(out, query_str=QUESTION)) == ["near"]  # far: 0.28


def test_compressor_does_not_read_one_questions_cosines_for_another():
    store = InMemoryVectorStore(FixedEmbeddings())
    store.add_texts(["far", "near"], ids=["far", "near"])
    low = POLICY.model_copy(update={"min_similarity": 0.0})
    retrieved = lc.ThresholdedRetriever(vectorstore=store, policy=low).invoke(QUESTION)
    compressor = lc.SimilarityThresholdCompressor(policy=POLICY, embeddings=FixedEmbeddings())
    assert [d.id for d in compressor.compress_documents(retrieved, QUESTION)] == ["near"]
    report = compressor.compress_with_report(retrieved, OTHER)
    assert sorted(d.id for d in report.kept) == ["far", "near"]
    without_model = lc.SimilarityThresholdCompressor(policy=POLICY)
    with pytest.raises(NonCosineScoreError, match=r"another question.*embeddings="):
        without_model.compress_documents(retrieved, OTHER)
    mixed = [*retrieved, *lc.ThresholdedRetriever(vectorstore=store, policy=low).invoke(OTHER)]
    with pytest.raises(NonCosineScoreError, match="another question"):  # none dropped silently
        without_model.compress_documents(mixed, OTHER)


def test_postprocessor_takes_the_question_vector_as_the_retriever_does():
    """A bundle's own vector may be a numpy array (the retriever takes one); an empty one
    is refused by both, rather than searched with or replaced by the text's."""
    import numpy as np

    low = POLICY.model_copy(update={"min_similarity": 0.0})
    retriever = li.ThresholdedRetriever(_llama_index(), low, neighbours=0)
    bundle = QueryBundle(QUESTION, embedding=np.array(VECTORS[QUESTION]))
    post = li.SimilarityThresholdPostprocessor(policy=POLICY, embed_model=Fixed())
    foreign = [NodeWithScore(node=TextNode(id_="near", text="near"), score=0.9)]
    assert ids(post.postprocess_nodes(foreign, bundle)) == ["near"]
    assert ids(post.postprocess_nodes(retriever.retrieve(bundle), bundle)) == ["near"]
    with pytest.raises(ValueError, match="vector is empty"):
        retriever.retrieve(QueryBundle(QUESTION, embedding=[]))


@pytest.mark.parametrize("adapter", ["llama_index", "langchain"])
def test_what_a_filter_re_scored_leaves_with_this_question_s_cosine(adapter):
    """Retrieved for OTHER (as behind a retriever that rewords the question), judged for
    QUESTION with the model: what goes on carries QUESTION's cosine, registered for it, so
    a second filter without a model reads it."""
    low = POLICY.model_copy(update={"min_similarity": 0.0})
    if adapter == "llama_index":
        retrieved = li.ThresholdedRetriever(_llama_index(), low, neighbours=0).retrieve(OTHER)
        post = li.SimilarityThresholdPostprocessor(policy=POLICY, embed_model=Fixed())
        out = post.postprocess_nodes(retrieved, query_str=QUESTION)
        again = li.SimilarityThresholdPostprocessor(policy=POLICY)
        metadata = {n.node.node_id: n.node.metadata for n in out}
        assert ids(again.postprocess_nodes(out, query_str=QUESTION)) == ["near"]
    else:
        store = InMemoryVectorStore(FixedEmbeddings())
        store.add_texts(["far", "near"], ids=["far", "near"])
        retrieved = lc.ThresholdedRetriever(vectorstore=store, policy=low).invoke(OTHER)
        compressor = lc.SimilarityThresholdCompressor(policy=POLICY, embeddings=FixedEmbeddings())
        out = compressor.compress_documents(retrieved, QUESTION)
        again = lc.SimilarityThresholdCompressor(policy=POLICY)
        metadata = {d.id: d.metadata for d in out}
        assert [d.id for d in again.compress_documents(out, QUESTION)] == ["near"]
    assert list(metadata) == ["near"]
    assert metadata["near"]["similarity"] == pytest.approx(0.6)  # not OTHER's 0.8
