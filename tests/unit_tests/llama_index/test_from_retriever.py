"""ThresholdedRetriever.from_retriever: wrap an existing VectorIndexRetriever."""

from __future__ import annotations

import pytest
from llama_index.core.callbacks import CallbackManager, CBEventType, LlamaDebugHandler
from llama_index.core.retrievers import VectorIndexRetriever
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

from llama_index_thresholded import ThresholdedRetriever
from thresholded.errors import UnsafeFilterError

ENGLISH = MetadataFilters(filters=[MetadataFilter(key="lang", value="en")])


def spy_index(kit):
    nodes = [
        kit.section(
            f"{lang}{i}",
            0.9 - 0.1 * i - (0.05 if lang == "de" else 0.0),
            axis=1 + i,
            source=f"{lang}{i}",
            lang=lang,
        )
        for lang in ("en", "de")
        for i in range(5)
    ]
    store = kit.SpyStore()
    return kit.build_index(nodes, kit.embedding(), store=store), store


def test_from_retriever_keeps_the_filters_and_fetches_policy_fetch_k(kit):
    index, store = spy_index(kit)
    base = index.as_retriever(similarity_top_k=2, filters=ENGLISH)
    policy = kit.policy(min_similarity=0.55, top_k=3, over_fetch=2)
    retriever = ThresholdedRetriever.from_retriever(base, policy=policy, metric="COSINE")

    report = retriever.retrieve_with_report(kit.QUESTION)
    query = store.queries[-1]
    assert query.similarity_top_k == policy.fetch_k == 6
    assert query.filters == ENGLISH
    # only English sections were candidates: the filter ran in the store
    candidates = [*report.selection.kept, *(d.candidate for d in report.selection.dropped)]
    assert {c.id[:2] for c in candidates} == {"en"}
    assert len(candidates) == 5  # all English ones: fewer than fetch_k exist
    assert [n.node.node_id for n in report.kept] == ["en0", "en1", "en2"]
    # en3 (0.6) clears the floor but is beyond top_k; en4 (0.5) is below it
    assert report.drop_counts() == {"beyond_top_k": 1, "below_threshold": 1}
    # the wrapped retriever is left as it was
    assert base.similarity_top_k == 2
    base.retrieve(kit.QUESTION)
    assert store.queries[-1].similarity_top_k == 2


def test_from_retriever_per_call_filters_narrow_the_inherited_ones(kit):
    index, _ = spy_index(kit)
    base = index.as_retriever(similarity_top_k=2, filters=ENGLISH)
    retriever = ThresholdedRetriever.from_retriever(
        base, policy=kit.policy(min_similarity=0.0, top_k=2), metric="COSINE"
    )
    german = MetadataFilters(filters=[MetadataFilter(key="lang", value="de")])
    report = retriever.retrieve_with_report(kit.QUESTION, filters=german)
    assert report.kept == ()  # English and German: nothing is both
    english = retriever.retrieve_with_report(kit.QUESTION, filters=ENGLISH)
    assert [n.node.node_id for n in english.kept] == ["en0", "en1"]
    assert [n.node.node_id for n in retriever.retrieve(kit.QUESTION)] == ["en0", "en1"]
    empty = retriever.retrieve_with_report(kit.QUESTION, filters=MetadataFilters(filters=[]))
    assert [n.node.node_id for n in empty.kept] == ["en0", "en1"]


def test_from_retriever_inherits_the_callback_manager_and_embed_model(kit):
    index, _ = spy_index(kit)
    debug = LlamaDebugHandler()
    other = kit.embedding({kit.QUESTION: kit.vec(0.9, axis=2)})  # the index's model, another object
    base = VectorIndexRetriever(
        index, similarity_top_k=2, embed_model=other, callback_manager=CallbackManager([debug])
    )
    retriever = ThresholdedRetriever.from_retriever(
        base, policy=kit.policy(min_similarity=0.0), metric="COSINE", neighbours=0
    )
    assert retriever.callback_manager is base.callback_manager
    retriever.retrieve(kit.QUESTION)
    assert other._calls == [kit.QUESTION]  # the question was embedded by the inherited model
    assert debug.get_event_pairs(CBEventType.RETRIEVE)


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"doc_ids": ["de0"]}, "doc_ids"),
        ({"node_ids": ["de0"]}, "node_ids"),
        ({"vector_store_kwargs": {"where": {"lang": "de"}}, "neighbours": 0}, "where"),
    ],
)
def test_from_retriever_refuses_a_restriction_that_would_replace_the_wrapped_one(kit, given, named):
    """A restriction given both by the wrapped retriever and here: one would replace the
    other (the wrapped retriever's used to be dropped)."""
    index, _ = spy_index(kit)
    base = VectorIndexRetriever(
        index, doc_ids=["en0"], node_ids=["en0"], vector_store_kwargs={"where": {"lang": "en"}}
    )
    with pytest.raises(ValueError, match=rf"{named}.*would replace the other"):
        ThresholdedRetriever.from_retriever(base, metric="COSINE", **given)


def documents_index(kit):
    """en0..en2 of document "en", de0..de2 of document "de"."""
    nodes = []
    for lang in ("en", "de"):
        for i in range(3):
            node = kit.section(f"{lang}{i}", 0.9 - 0.1 * i, axis=1 + i, lang=lang)
            node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=lang)
            nodes.append(node)
    return kit.build_index(nodes, kit.embedding(), store=kit.SpyStore())


@pytest.mark.parametrize(("restriction", "value"), [("doc_ids", ["en"]), ("node_ids", ["en0"])])
def test_from_retriever_given_none_keeps_the_wrapped_restriction(kit, restriction, value):
    """None is the default, "no restriction": it never removes the wrapped one (it used to
    replace it, and every document came back)."""
    base = VectorIndexRetriever(documents_index(kit), **{restriction: value})
    retriever = ThresholdedRetriever.from_retriever(
        base, kit.policy(min_similarity=0.0), metric="COSINE", neighbours=0, **{restriction: None}
    )
    kept = {n.node.node_id for n in retriever.retrieve(kit.QUESTION)}
    assert kept and all(i.startswith("en") for i in kept)
    assert "en0" in kept and ("en1" in kept) == (restriction == "doc_ids")


@pytest.mark.parametrize("restriction", ["doc_ids", "node_ids"])
def test_from_retriever_refuses_an_empty_list_beside_the_wrapped_one(kit, restriction):
    base = VectorIndexRetriever(documents_index(kit), **{restriction: ["en"]})
    with pytest.raises(ValueError, match=rf"{restriction}.*would replace the other"):
        ThresholdedRetriever.from_retriever(base, metric="COSINE", **{restriction: []})


@pytest.mark.parametrize(
    ("restriction", "ids"), [("doc_ids", ["de", "en"]), ("node_ids", ["de0", "en0"])]
)
def test_from_retriever_takes_the_wrapped_ids_given_again_in_another_order(kit, restriction, ids):
    """The same ids in another order restrict to the same sections: nothing is replaced."""
    base = VectorIndexRetriever(documents_index(kit), **{restriction: ids})
    retriever = ThresholdedRetriever.from_retriever(
        base,
        kit.policy(min_similarity=0.0),
        metric="COSINE",
        neighbours=0,
        **{restriction: ids[::-1]},
    )
    kept = {n.node.node_id for n in retriever.retrieve(kit.QUESTION)}
    assert {"de0", "en0"} <= kept and all(i[:2] in ("de", "en") for i in kept)
    with pytest.raises(ValueError, match=rf"{restriction}.*would replace the other"):
        ThresholdedRetriever.from_retriever(base, metric="COSINE", **{restriction: ids[:1]})


@pytest.mark.parametrize("restriction", ["doc_ids", "node_ids"])
def test_an_empty_id_list_admits_nothing(kit, restriction):
    """An empty list names no document or section: nothing is returned (a store reads an
    empty list as no restriction at all)."""
    retriever = ThresholdedRetriever(
        documents_index(kit), kit.policy(min_similarity=0.0), metric="COSINE", **{restriction: []}
    )
    report = retriever.retrieve_with_report(kit.QUESTION)
    assert report.items == [] and report.nothing_matched


@pytest.mark.parametrize("restriction", ["doc_ids", "node_ids"])
def test_an_id_given_as_a_string_is_refused(kit, restriction):
    """``doc_ids="en"`` would be a substring test: "e" and "en" in "en" both admitted."""
    with pytest.raises(TypeError, match=rf"{restriction} takes a list of ids.*write \['en'\]"):
        ThresholdedRetriever(
            documents_index(kit), kit.policy(), metric="COSINE", **{restriction: "en"}
        )
    base = VectorIndexRetriever(documents_index(kit), **{restriction: "en"})
    with pytest.raises(TypeError, match=rf"{restriction} takes a list of ids"):
        ThresholdedRetriever.from_retriever(base, metric="COSINE")
    with pytest.raises(TypeError, match=r"strings\), got values of type \['int'\]"):
        ThresholdedRetriever(
            documents_index(kit), kit.policy(), metric="COSINE", **{restriction: [1]}
        )


def test_a_wrapped_empty_doc_ids_is_refused(kit):
    """A store that keeps the text reads ``doc_ids=[]`` as every document, and wrapping it
    used to keep that reading: a list of the documents a caller may read that came out empty
    returned all of them. ``index.as_retriever()`` never sets ``doc_ids``."""
    base = VectorIndexRetriever(documents_index(kit), doc_ids=[])
    with pytest.raises(UnsafeFilterError, match=r"doc_ids=\[\] names no document.*doc_ids=None"):
        ThresholdedRetriever.from_retriever(base, kit.policy(min_similarity=0.0), metric="COSINE")


def test_a_wrapped_as_retriever_still_searches_every_node(kit):
    """``index.as_retriever()`` passes ``node_ids=[]`` to mean every node."""
    base = documents_index(kit).as_retriever()
    retriever = ThresholdedRetriever.from_retriever(
        base, kit.policy(min_similarity=0.0), metric="COSINE", neighbours=0
    )
    assert {n.node.metadata["lang"] for n in retriever.retrieve(kit.QUESTION)} == {"en", "de"}
