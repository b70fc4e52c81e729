"""The answer gate where the adapters meet users: query engines, compressors, postprocessors,
and LangChain's configurable fields."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.core.vector_stores import SimpleVectorStore

import langchain_thresholded as lc
import llama_index_thresholded as li
from thresholded import RetrievalPolicy
from thresholded.metadata_keys import SIMILARITY
from thresholded.provenance import register

QUESTION = "the question"
VECTORS = {
    QUESTION: [1.0, 0.0],
    "near": [0.6, 0.8],  # cosine 0.6
    "far": [0.28, 0.96],  # cosine 0.28
}


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


POLICY = RetrievalPolicy(min_similarity=0.2, max_per_source=None, max_chars=None)


@pytest.fixture
def index():
    nodes = [TextNode(id_=t, text=t, embedding=VECTORS[t]) for t in ("near", "far")]
    storage = StorageContext.from_defaults(vector_store=SimpleVectorStore())
    return VectorStoreIndex(nodes, storage_context=storage, embed_model=Fixed())


@pytest.mark.parametrize(
    ("gate", "floor", "why"), [(0.7, 0.2, "gate"), (None, 0.9, "floor")], ids=["gate", "floor"]
)
def test_the_query_engine_says_what_made_it_abstain(index, gate, floor, why):
    policy = POLICY.model_copy(update={"min_top_similarity": gate, "min_similarity": floor})
    retriever = li.ThresholdedRetriever(index, policy, neighbours=0)
    engine = li.AbstainingQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query(QUESTION)
    assert response.metadata == {li.NOTHING_MATCHED: True, "abstained_by": why}
    answered = li.AbstainingQueryEngine.from_args(
        li.ThresholdedRetriever(index, POLICY, neighbours=0), llm=MockLLM()
    ).query(QUESTION)
    assert not (answered.metadata or {}).get(li.NOTHING_MATCHED)


def test_the_postprocessor_applies_the_gate():
    nodes = [NodeWithScore(node=TextNode(id_=t, text=t), score=s) for t, s in [("a", 0.6)]]
    gated = li.SimilarityThresholdPostprocessor(
        policy=POLICY.model_copy(update={"min_top_similarity": 0.7}), score_kind="cosine"
    )
    assert gated.postprocess_nodes(nodes) == []
    ungated = li.SimilarityThresholdPostprocessor(policy=POLICY, score_kind="cosine")
    assert len(ungated.postprocess_nodes(nodes)) == 1


def test_the_compressor_applies_the_gate():
    docs = [register(Document(page_content="a", metadata={SIMILARITY: 0.6}))]  # a retriever's
    gated = lc.SimilarityThresholdCompressor(min_similarity=0.2, min_top_similarity=0.7)
    assert gated.compress_documents(docs, QUESTION) == []
    assert lc.SimilarityThresholdCompressor(min_similarity=0.2).compress_documents(docs, QUESTION)


def test_langchain_reaches_the_gate_per_call_and_through_configurable_fields():
    from langchain_core.runnables import ConfigurableField

    store = InMemoryVectorStore(FixedEmbeddings())
    store.add_texts(["near", "far"])
    retriever = lc.ThresholdedRetriever(vectorstore=store, policy=POLICY)
    assert [d.page_content for d in retriever.invoke(QUESTION)] == ["near", "far"]
    assert retriever.invoke(QUESTION, min_top_similarity=0.7) == []
    configurable = retriever.configurable_fields(
        policy=ConfigurableField(id="policy", name="retrieval policy")
    )

    def gated(gate: float) -> dict:
        return {"configurable": {"policy": POLICY.with_overrides(min_top_similarity=gate)}}

    assert configurable.invoke(QUESTION, config=gated(0.7)) == []
    assert len(configurable.invoke(QUESTION, config=gated(0.5))) == 2
