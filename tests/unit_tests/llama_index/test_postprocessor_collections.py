"""The postprocessor behind ``MultiCollectionRetriever``: collections that number their
sections alike ("0", "1", ...) keep all their sections; none is taken for a duplicate."""

from __future__ import annotations

from llama_index_thresholded import (
    CollectionSpec,
    MultiCollectionRetriever,
    SimilarityThresholdPostprocessor,
)
from thresholded.fanout import COLLECTION_KEY

KEPT = [("beta", "0"), ("alpha", "0"), ("alpha", "1")]


def labelled(nodes) -> list[tuple[str, str]]:
    return [(n.node.metadata[COLLECTION_KEY], n.node.node_id) for n in nodes]


def test_sections_of_one_id_from_two_collections_pass_the_postprocessor(kit):
    alpha = [kit.section("0", 0.8, text="alpha zero"), kit.section("1", 0.6, text="alpha one")]
    beta = [kit.section("0", 0.95, text="beta zero"), kit.section("1", 0.25, text="beta one")]
    specs = [
        CollectionSpec(kit.build_index(alpha, kit.embedding()), name="alpha"),
        CollectionSpec(kit.build_index(beta, kit.embedding()), name="beta"),
    ]
    policy = kit.policy(min_similarity=0.5)
    nodes = MultiCollectionRetriever(specs, policy, neighbours=0).retrieve(kit.QUESTION)
    assert labelled(nodes) == KEPT

    postprocessor = SimilarityThresholdPostprocessor(policy=policy)
    selection = postprocessor.select(nodes, kit.QUESTION)
    assert selection.dropped == ()
    assert [(c.collection, c.id) for c in selection.kept] == KEPT
    assert labelled(postprocessor.postprocess_nodes(nodes, query_str=kit.QUESTION)) == KEPT
