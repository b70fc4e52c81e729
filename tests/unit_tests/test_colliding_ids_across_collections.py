"""Behind a multi-collection retriever, a section is its collection and its id.

Two collections that both number their sections "0", "1", ... hold distinct sections
under the same ids. The postprocessor and the compressor must keep all of them, not drop
one of each pair as a ``duplicate``; a true duplicate (the same section twice, from one
collection) is still dropped. The items are marked as the multi-collection retrievers
mark them; each adapter's own tests run its retriever end to end
(``test_postprocessor_collections.py``, ``test_compressor_collections.py``).
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document
from llama_index.core.schema import NodeWithScore, TextNode

import langchain_thresholded as lc
import llama_index_thresholded as li
from thresholded import RetrievalPolicy, metadata_keys
from thresholded.provenance import register
from thresholded.selection import DropReason

POLICY = RetrievalPolicy(min_similarity=0.5, max_per_source=None, max_chars=None)


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


def selected(adapter: str, pairs: list[tuple[NodeWithScore, Document]]) -> Any:
    """The selection of the adapter's filter over the marked items."""
    if adapter == "llama_index":
        postprocessor = li.SimilarityThresholdPostprocessor(policy=POLICY)
        return postprocessor.select([node for node, _ in pairs])
    compressor = lc.SimilarityThresholdCompressor(policy=POLICY)
    return compressor.compress_with_report([doc for _, doc in pairs]).selection


@pytest.mark.parametrize("adapter", ["llama_index", "langchain"])
def test_sections_of_one_id_from_two_collections_are_both_kept(adapter):
    pairs = [marked("alpha", "0", 0.8), marked("beta", "0", 0.7), marked("beta", "1", 0.6)]
    selection = selected(adapter, pairs)
    assert [(c.collection, c.id) for c in selection.kept] == [
        ("alpha", "0"),
        ("beta", "0"),
        ("beta", "1"),
    ]
    assert selection.dropped == ()


@pytest.mark.parametrize("adapter", ["llama_index", "langchain"])
def test_a_true_duplicate_in_one_collection_is_still_dropped(adapter):
    pairs = [marked("alpha", "0", 0.8), marked("beta", "0", 0.7), marked("alpha", "0", 0.8)]
    selection = selected(adapter, pairs)
    assert [(c.collection, c.id) for c in selection.kept] == [("alpha", "0"), ("beta", "0")]
    assert [(d.candidate.collection, d.reason) for d in selection.dropped] == [
        ("alpha", DropReason.DUPLICATE)
    ]
