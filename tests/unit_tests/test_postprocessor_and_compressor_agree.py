"""The postprocessor and the compressor take the same arguments and mean the same by them."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document
from llama_index.core.schema import NodeWithScore, TextNode
from pydantic import ValidationError

from langchain_thresholded import SimilarityThresholdCompressor
from llama_index_thresholded import SimilarityThresholdPostprocessor
from thresholded import RetrievalPolicy, UncalibratedModelError
from thresholded.provenance import register

# 8 items from 3 sources; every cosine clears the floor of 0.3.
TABLE = [
    ("a1", "A", 0.91),
    ("a2", "A", 0.85),
    ("a3", "A", 0.80),
    ("a4", "A", 0.40),
    ("b1", "B", 0.88),
    ("b2", "B", 0.70),
    ("b3", "B", 0.34),
    ("c1", "C", 0.60),
]
FLOOR = 0.3
POLICY = RetrievalPolicy(min_similarity=FLOOR, max_per_source=2, top_k=4)
# The cap drops a3, a4 and b3; top_k then keeps the best 4 of a1, a2, b1, b2, c1.
KEPT_BY_POLICY = ["a1", "a2", "b1", "b2"]
KEPT_BY_FLOOR = sorted(item_id for item_id, _, _ in TABLE)

CLASSES = [SimilarityThresholdPostprocessor, SimilarityThresholdCompressor]


def nodes() -> list[NodeWithScore]:
    return [
        NodeWithScore(
            node=register(TextNode(id_=i, text=f"text of {i}", metadata={"source": s})), score=c
        )
        for i, s, c in TABLE
    ]


def documents() -> list[Document]:
    return [
        register(
            Document(id=i, page_content=f"text of {i}", metadata={"source": s, "similarity": c})
        )
        for i, s, c in TABLE
    ]


def kept_ids(cls: type, **arguments: Any) -> list[str]:
    """The ids the filter keeps from TABLE, sorted (the compressor keeps the input order)."""
    if cls is SimilarityThresholdPostprocessor:
        out = cls(**arguments).postprocess_nodes(nodes())
        return sorted(n.node.node_id for n in out)
    docs = cls(**arguments).compress_documents(documents(), "the question")
    return sorted(str(d.id) for d in docs)


@pytest.mark.parametrize("cls", CLASSES)
def test_policy_applies_every_rule(cls):
    assert kept_ids(cls, policy=POLICY) == KEPT_BY_POLICY


@pytest.mark.parametrize("cls", CLASSES)
def test_min_similarity_alone_applies_the_floor_only(cls):
    assert len(KEPT_BY_FLOOR) == 8
    assert kept_ids(cls, min_similarity=FLOOR) == KEPT_BY_FLOOR
    assert kept_ids(cls, min_similarity=0.75) == ["a1", "a2", "a3", "b1"]  # no cap of 2


@pytest.mark.parametrize("cls", CLASSES)
def test_the_gate_goes_with_min_similarity(cls):
    assert kept_ids(cls, min_similarity=FLOOR, min_top_similarity=0.95) == []
    assert kept_ids(cls, min_similarity=FLOOR, min_top_similarity=0.9) == KEPT_BY_FLOOR


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("other", ["min_similarity", "min_top_similarity"])
def test_policy_and_a_floor_argument_is_an_error_naming_both(cls, other):
    with pytest.raises(TypeError, match=f"policy= or {other}=, not both"):
        cls(policy=POLICY, **{other: FLOOR})


@pytest.mark.parametrize("cls", CLASSES)
def test_neither_is_an_error_that_says_what_to_pass(cls):
    with pytest.raises(TypeError, match=r"min_similarity= .* or policy="):
        cls()
    with pytest.raises(TypeError, match="min_similarity="):
        cls(min_top_similarity=0.5)  # a gate, but no floor


@pytest.mark.parametrize("cls", CLASSES)
def test_neither_with_a_calibrated_model_is_its_floor_only(cls):
    made = cls(embedding_model="BAAI/bge-m3@1024")
    assert made.min_similarity == 0.35
    assert made.policy.max_per_source is None and made.policy.max_chars is None
    assert made.policy.embedding_model == "BAAI/bge-m3@1024"
    above_its_floor = [i for i in KEPT_BY_FLOOR if i != "b3"]  # b3: 0.34, no cap: a3, a4 stay
    assert kept_ids(cls, embedding_model="BAAI/bge-m3@1024") == above_its_floor
    with pytest.raises(UncalibratedModelError):
        cls(embedding_model="acme/encoder-v1@384")


@pytest.mark.parametrize("cls", CLASSES)
def test_the_policy_in_force_and_its_floor(cls):
    floor_only = cls(min_similarity=FLOOR, min_top_similarity=0.2)
    assert floor_only.min_similarity == FLOOR
    assert floor_only.min_top_similarity == 0.2
    assert floor_only.policy.max_per_source is None and floor_only.policy.max_chars is None
    # the policy in force describes the filter: given back as policy=, it keeps the same
    assert kept_ids(cls, policy=floor_only.policy) == KEPT_BY_FLOOR

    from_the_model = cls(policy=RetrievalPolicy(), embedding_model="BAAI/bge-m3@1024")
    assert from_the_model.min_similarity == from_the_model.policy.min_similarity == 0.35
    assert cls(policy=POLICY).policy == POLICY


@pytest.mark.parametrize("cls", CLASSES)
def test_policy_and_min_similarity_are_read_only(cls):
    made = cls(min_similarity=FLOOR)
    with pytest.raises(ValidationError, match="frozen"):
        made.policy = POLICY
    with pytest.raises(AttributeError):
        made.min_similarity = 0.9
    assert made.policy.min_similarity == made.min_similarity == FLOOR


@pytest.mark.parametrize("cls", CLASSES)
def test_the_same_field_names(cls):
    assert {"policy", "score_kind", "embedding_model"} <= set(cls.model_fields)
    made = cls(min_similarity=0.5, score_kind="rrf")
    assert made.score_kind.value == "rrf"


@pytest.mark.parametrize("cls", CLASSES)
def test_a_misspelt_argument_is_an_error_before_the_others(cls):
    with pytest.raises(TypeError, match="'min_similarty' \\(did you mean 'min_similarity'\\?\\)"):
        cls(min_similarty=0.3, policy=POLICY)


def test_the_postprocessor_round_trips_through_its_dict():
    for made in (
        SimilarityThresholdPostprocessor(min_similarity=FLOOR),
        SimilarityThresholdPostprocessor(policy=POLICY, score_kind="rrf"),
        SimilarityThresholdPostprocessor(embedding_model="BAAI/bge-m3@1024"),
    ):
        restored = SimilarityThresholdPostprocessor.from_dict(made.to_dict())
        assert restored.policy == made.policy
        assert restored.score_kind == made.score_kind
        assert restored.embedding_model == made.embedding_model
