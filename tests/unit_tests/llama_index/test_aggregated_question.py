"""A question embedded from several texts is searched as a cosine in every metric.

LlamaIndex embeds a ``QueryBundle`` with several ``custom_embedding_strs`` (HyDE's
hypothetical answer and the question, from ``HyDEQueryTransform``) as the mean of their
vectors, which is shorter than the unit vectors it averages. Under IP and L2, the metric
``milvus_store`` uses by default, the retriever refused it with ``NotUnitVectorError``,
whose advice (normalise the embeddings) the embeddings already followed; a store that
ranks by cosine (``SimpleVectorStore``, Milvus COSINE) answered it.

The question is on e0 and the hypothetical answer on e2, so their mean is
(e0 + e2) / 2, of norm 1/sqrt(2); section ``a`` (0.8 e0 + 0.6 e1) has the cosine
0.8 / sqrt(2) = 0.566 with it, and ``b`` (0.3 e0 + ...) 0.212.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from llama_index.core.schema import QueryBundle

from llama_index_thresholded import ThresholdedRetriever
from thresholded.errors import NotUnitVectorError

HYPOTHETICAL = "a hypothetical answer"
COSINE_A = 0.8 / math.sqrt(2)


def bundle(kit: Any, *texts: str) -> QueryBundle:
    return QueryBundle(kit.QUESTION, custom_embedding_strs=list(texts))


def retriever(kit: Any, store: Any) -> ThresholdedRetriever:
    embed = kit.embedding({HYPOTHETICAL: [0.0, 0.0, 1.0] + [0.0] * (kit.DIM - 3)})
    nodes = [kit.section("a", 0.8, axis=1), kit.section("b", 0.3, axis=3)]
    index = kit.build_index(nodes, embed, store=store)
    return ThresholdedRetriever(
        index, kit.policy(min_similarity=0.5), neighbours=0, parent_summaries=False
    )


@pytest.mark.parametrize("metric", ["IP", "L2", "COSINE", None])
async def test_a_mean_of_question_vectors_is_searched_by_its_cosine(
    kit: Any, milvus_uri: str, metric: str | None
) -> None:
    store = (
        None if metric is None else kit.milvus_store(milvus_uri, "c", dim=kit.DIM, metric=metric)
    )
    r = retriever(kit, store)
    question = bundle(kit, kit.QUESTION, HYPOTHETICAL)
    for nodes in (r.retrieve(question), await r.aretrieve(question)):
        assert [n.node.node_id for n in nodes] == ["a"]
        assert nodes[0].score == pytest.approx(COSINE_A, abs=1e-5)


def test_a_question_of_one_text_is_still_refused_when_not_unit_length(
    kit: Any, milvus_uri: str
) -> None:
    """A model that does not normalise embeds every section as it embeds the question: the
    vector it gives for one text is taken as it is, and refused under IP."""
    store = kit.milvus_store(milvus_uri, "c", dim=kit.DIM, metric="IP")
    embed = kit.embedding({"long": [2.0] + [0.0] * (kit.DIM - 1)})
    index = kit.build_index([kit.section("a", 0.8)], embed, store=store)
    r = ThresholdedRetriever(index, kit.policy(min_similarity=0.5), neighbours=0)
    with pytest.raises(NotUnitVectorError):
        r.retrieve(QueryBundle("long"))
