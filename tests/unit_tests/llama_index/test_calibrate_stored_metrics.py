"""Calibrating a collection measures the cosines its searches compute, under its own metric.

A COSINE index normalises what it compares, so its sections may be stored at any length:
the retriever reads its scores as cosines, and calibration must measure the same cosines
(it refused the collection, "normalise the embeddings"). An L2 index on unit vectors gives
cosines too, and the retriever serves it (it was refused, "indexed with L2"). IP and L2 on
vectors that are not unit length give no cosines, and stay refused.
"""

from __future__ import annotations

from typing import Any

import pytest

from llama_index_thresholded import ThresholdedRetriever
from llama_index_thresholded.calibration import calibrate_index
from thresholded import NotUnitVectorError
from thresholded.calibration import Question, SimpleForm

FORM = SimpleForm(should_match=("question",), should_not_match=("orthogonal question",))


def store_of(kit: Any, uri: str, metric: str, scale: float) -> tuple[Any, Any]:
    """A collection whose best section for the question has cosine 0.6, stored ``scale`` long."""
    embed_model = kit.embedding()
    nodes = [
        kit.section("best", embedding=[x * scale for x in kit.vec(0.6, 1)]),
        kit.section("other", embedding=[x * scale for x in kit.vec(0.3, 2)]),
    ]
    store = kit.milvus_store(uri, f"cal_{metric.lower()}", dim=kit.DIM, metric=metric)
    return kit.build_index(nodes, embed_model, store=store), embed_model


@pytest.mark.parametrize(("metric", "scale"), [("COSINE", 2.5), ("COSINE", 0.4), ("L2", 1.0)])
def test_calibration_measures_the_cosines_the_retriever_reads(
    kit: Any, milvus_uri: str, metric: str, scale: float
) -> None:
    index, embed_model = store_of(kit, milvus_uri, metric, scale)
    result = calibrate_index(index.vector_store, embed_model, FORM, progress=False)
    top = ThresholdedRetriever(index, kit.policy(min_similarity=0.1), neighbours=0).retrieve(
        kit.QUESTION
    )[0]
    assert top.node.node_id == "best"
    assert result.good_top.tolist() == pytest.approx([top.score], abs=1e-6)
    assert result.good_top.tolist() == pytest.approx([0.6], abs=1e-6)


@pytest.mark.parametrize("metric", ["IP", "COSINE", "L2"])
def test_the_profile_records_the_collection_s_metric(
    kit: Any, milvus_uri: str, metric: str
) -> None:
    index, embed_model = store_of(kit, milvus_uri, metric, 1.0)
    result = calibrate_index(index.vector_store, embed_model, FORM, progress=False)
    assert result.to_profile(collection=f"cal_{metric.lower()}").metric == metric
    questions = [
        Question("q1", "en", "question", ("best",)),
        Question("q2", "en", "orthogonal question"),
    ]
    result = calibrate_index(index.vector_store, embed_model, questions, progress=False, folds=2)
    assert result.to_profile().metric == metric


@pytest.mark.parametrize(("metric", "scale"), [("IP", 2.5), ("L2", 0.4)])
def test_ip_and_l2_on_vectors_that_are_not_unit_length_stay_refused(
    kit: Any, milvus_uri: str, metric: str, scale: float
) -> None:
    index, embed_model = store_of(kit, milvus_uri, metric, scale)
    with pytest.raises(NotUnitVectorError, match="not unit length"):
        calibrate_index(index.vector_store, embed_model, FORM, progress=False)
