"""The compressor behind ``MultiCollectionRetriever``: collections that number their
sections alike ("0", "1", ...) keep all their sections; none is taken for a duplicate."""

from __future__ import annotations

from langchain_thresholded import (
    CollectionSpec,
    MultiCollectionRetriever,
    RetrievalPolicy,
    SimilarityThresholdCompressor,
)
from thresholded.fanout import COLLECTION_KEY

QUERY = "the question"
POLICY = RetrievalPolicy(min_similarity=0.5, max_per_source=None, max_chars=None)
KEPT = [("beta", "0"), ("alpha", "0"), ("alpha", "1")]


def labelled(docs) -> list[tuple[str, str]]:
    return [(d.metadata[COLLECTION_KEY], str(d.id)) for d in docs]


def test_sections_of_one_id_from_two_collections_pass_the_compressor(corpus):
    alpha = corpus([("0", 0.8125, {}, "alpha zero"), ("1", 0.625, {}, "alpha one")])
    beta = corpus([("0", 0.9375, {}, "beta zero"), ("1", 0.25, {}, "beta one")])
    specs = [CollectionSpec(alpha.store, name="alpha"), CollectionSpec(beta.store, name="beta")]
    docs = MultiCollectionRetriever(collections=specs, policy=POLICY).invoke(QUERY)
    assert labelled(docs) == KEPT

    compressor = SimilarityThresholdCompressor(policy=POLICY)
    report = compressor.compress_with_report(docs, QUERY)
    assert report.selection.dropped == ()
    assert [(c.collection, c.id) for c in report.selection.kept] == KEPT
    assert labelled(compressor.compress_documents(docs, QUERY)) == KEPT
