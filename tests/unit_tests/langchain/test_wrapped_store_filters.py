"""A wrapped retriever's own store filter holds for the neighbours and summaries too, or the
retriever is refused.

``from_retriever`` runs a wrapped retriever's search (an ensemble's, an MMR search); the
sections it attaches are read from the docstore by id. A store filter the backend cannot
hold them to (a filter function, an ensemble member's filter) would let sections outside
it be attached, so with a docstore it is refused, naming the filter.
"""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.stores import InMemoryStore
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_thresholded import RetrieverSource, ScoreKind, ThresholdedRetriever
from thresholded import RetrievalPolicy

QUERY = "the question"
POLICY = RetrievalPolicy(min_similarity=0.5, top_k=10, max_per_source=None, max_chars=None)


def public_only(doc) -> bool:
    return doc.metadata.get("doc_type") == "public"


def test_a_wrapped_filter_function_with_a_docstore_is_refused(corpus):
    store = corpus([("a", 0.75, {"doc_type": "public"})]).store
    wrapped = store.as_retriever(search_type="mmr", search_kwargs={"filter": public_only})
    with pytest.raises(ValueError, match=r"VectorStoreRetriever holds store filters \(filter\)"):
        ThresholdedRetriever(
            vectorstore=RetrieverSource(wrapped),
            policy=POLICY,
            score_kind=ScoreKind.MMR,
            docstore=InMemoryStore(),
        )
    without = ThresholdedRetriever(
        vectorstore=RetrieverSource(wrapped), policy=POLICY, score_kind=ScoreKind.MMR
    )
    assert [d.id for d in without.invoke(QUERY)] == ["a"]


def test_a_wrapped_store_filter_and_another_of_the_same_key_are_refused(corpus):
    """Neither may replace the other (a Milvus expression, which can, holds twice)."""
    store = corpus([("a", 0.75, {"doc_type": "public"})]).store
    wrapped = store.as_retriever(search_kwargs={"where_document": {"$contains": "a"}})
    with pytest.raises(
        ValueError, match=r"search_kwargs \['where_document'\].*would replace the other"
    ):
        ThresholdedRetriever.from_retriever(
            wrapped, search_kwargs={"where_document": {"$contains": "b"}}
        )


def test_an_ensemble_members_ids_with_a_docstore_are_refused(corpus):
    """The neighbours and summaries fetched from the docstore would not be held to them."""
    classic = pytest.importorskip("langchain_classic.retrievers")
    store = corpus([("a", 0.75), ("b", 0.75)]).store
    member = store.as_retriever(search_kwargs={"ids": ["a"]})
    wrapped = classic.EnsembleRetriever(retrievers=[member], weights=[1.0])
    with pytest.raises(ValueError, match=r"EnsembleRetriever holds store filters \(ids\)"):
        ThresholdedRetriever.from_retriever(wrapped, policy=POLICY, docstore=InMemoryStore())


def test_a_wrapped_thresholded_retrievers_changed_filters_hold(corpus):
    """What the wrapped retriever's filters are when the call is made holds for attachments."""
    found = corpus([("a", 0.75, {"doc_type": "public", "next_id": "b"})])
    docstore = InMemoryStore()
    docstore.mset([("b", Document(id="b", page_content="b", metadata={"doc_type": "internal"}))])
    inner = ThresholdedRetriever(vectorstore=found.store, policy=POLICY, filters={"doc_type": "x"})
    retriever = ThresholdedRetriever.from_retriever(
        inner,
        policy=POLICY.model_copy(update={"hybrid_policy": "rescore"}),
        embeddings=found.embeddings,
        docstore=docstore,
        neighbours=1,
    )
    inner.filters = {"doc_type": "public"}
    assert [d.id for d in retriever.invoke(QUERY)] == ["a"]
    inner.filters = None
    assert [d.id for d in retriever.invoke(QUERY)] == ["a", "b"]


def test_a_filter_function_set_on_the_wrapped_retriever_after_construction_is_refused(corpus):
    """The wrapped retriever is read again when it changes, as if it had been given so."""
    store = corpus([("a", 0.75, {"doc_type": "public"})]).store
    wrapped = store.as_retriever(search_type="mmr")
    retriever = ThresholdedRetriever(
        vectorstore=RetrieverSource(wrapped),
        policy=POLICY,
        score_kind=ScoreKind.MMR,
        docstore=InMemoryStore(),
    )
    assert [d.id for d in retriever.invoke(QUERY)] == ["a"]
    wrapped.search_kwargs["filter"] = public_only
    with pytest.raises(ValueError, match=r"VectorStoreRetriever holds store filters \(filter\)"):
        retriever.invoke(QUERY)


def test_an_unreadable_member_added_to_an_ensemble_after_construction_is_refused(corpus):
    classic = pytest.importorskip("langchain_classic.retrievers")
    from langchain_core.retrievers import BaseRetriever

    class Relay(BaseRetriever):
        def _get_relevant_documents(self, query, *, run_manager):
            return []

    store = corpus([("a", 0.75, {"doc_type": "public"})]).store
    ensemble = classic.EnsembleRetriever(retrievers=[store.as_retriever()], weights=[1.0])
    retriever = ThresholdedRetriever.from_retriever(
        ensemble, policy=POLICY, docstore=InMemoryStore()
    )
    assert [d.id for d in retriever.invoke(QUERY)] == ["a"]
    ensemble.retrievers.append(Relay())
    ensemble.weights = [0.5, 0.5]
    with pytest.raises(ValueError, match=r"member 1 \(Relay\).*cannot be read"):
        retriever.invoke(QUERY)


def test_from_retriever_refuses_what_is_not_a_retriever(corpus):
    """A store given to ``from_retriever`` was wrapped as a retriever and refused for the
    model its RetrieverSource names, which said nothing of the mistake."""
    store = corpus([("a", 0.75, {"doc_type": "public"})]).store
    with pytest.raises(TypeError, match=r"ThresholdedRetriever\(vectorstore=store"):
        ThresholdedRetriever.from_retriever(store, policy=POLICY)
    with pytest.raises(TypeError, match="wraps a LangChain retriever, got str"):
        ThresholdedRetriever.from_retriever("not a retriever", policy=POLICY)


@pytest.mark.parametrize("asked", [{"neighbours": 3}, {"parent_levels": 2}])
def test_attachments_beyond_the_defaults_without_a_docstore_are_refused(corpus, asked):
    """They come from the docstore: without one, nothing would be attached, silently."""
    store = corpus([("a", 0.75)]).store
    with pytest.raises(ValueError, match=r"attach documents fetched from docstore=\.\.\."):
        ThresholdedRetriever(vectorstore=store, policy=POLICY, **asked)
    ThresholdedRetriever(vectorstore=store, policy=POLICY, docstore=InMemoryStore(), **asked)
    ThresholdedRetriever(vectorstore=store, policy=POLICY, neighbours=1, parent_levels=1)


def test_an_ensemble_with_a_runnable_member_that_is_no_model_still_works(corpus):
    """``EnsembleRetriever`` takes any runnable returning documents (a ``RunnableLambda``),
    which has no pydantic fields: reading its settings for changes was an AttributeError."""
    classic = pytest.importorskip("langchain_classic.retrievers")
    from langchain_core.runnables import RunnableLambda

    store = corpus([("a", 0.75, {"doc_type": "public"})]).store
    plain = store.as_retriever()
    relay = RunnableLambda(lambda question: plain.invoke(question))
    ensemble = classic.EnsembleRetriever(retrievers=[plain, relay], weights=[0.5, 0.5])
    retriever = ThresholdedRetriever.from_retriever(ensemble, policy=POLICY)
    assert [d.id for d in retriever.invoke(QUERY, filters={"doc_type": "public"})] == ["a"]


def test_a_retriever_bound_with_a_config_is_still_wrapped(corpus):
    """``ensemble.with_config(run_name=...)`` is a ``RunnableBinding``, no ``BaseRetriever``:
    it was wrapped, and then refused as what is not a retriever."""
    classic = pytest.importorskip("langchain_classic.retrievers")
    c = corpus([("a", 0.75, {"doc_type": "public"}), ("b", 0.875, {"doc_type": "internal"})])
    ensemble = classic.EnsembleRetriever(retrievers=[c.store.as_retriever()], weights=[1.0])
    bound = ensemble.with_config(run_name="hybrid")
    retriever = ThresholdedRetriever.from_retriever(bound, policy=POLICY)
    assert [d.id for d in retriever.invoke(QUERY, filters={"doc_type": "public"})] == ["a"]
    from langchain_core.runnables import RunnableLambda

    not_a_retriever = RunnableLambda(lambda question: []).with_config(run_name="relay")
    with pytest.raises(TypeError, match="wraps a LangChain retriever, got RunnableBinding"):
        ThresholdedRetriever.from_retriever(not_a_retriever, policy=POLICY)


def test_an_ensemble_members_namespace_with_a_docstore_is_refused(corpus):
    """A member's Milvus namespace limits its search, never the sections read by id."""
    classic = pytest.importorskip("langchain_classic.retrievers")
    store = corpus([("a", 0.75), ("b", 0.75)]).store
    member = store.as_retriever(search_kwargs={"namespace": "tenant_a"})
    wrapped = classic.EnsembleRetriever(retrievers=[member], weights=[1.0])
    with pytest.raises(ValueError, match=r"EnsembleRetriever holds store filters \(namespace\)"):
        ThresholdedRetriever.from_retriever(wrapped, policy=POLICY, docstore=InMemoryStore())


def test_a_wrapped_retrievers_namespace_with_a_docstore_is_refused(corpus):
    store = corpus([("a", 0.75)]).store
    wrapped = store.as_retriever(search_type="mmr", search_kwargs={"namespace": "tenant_a"})
    with pytest.raises(ValueError, match=r"holds store filters \(namespace\)"):
        ThresholdedRetriever(
            vectorstore=RetrieverSource(wrapped),
            policy=POLICY,
            score_kind=ScoreKind.MMR,
            docstore=InMemoryStore(),
        )


def test_a_wrapped_namespace_cannot_be_replaced(corpus):
    """A Milvus namespace limits the search to one tenant's rows, as a partition does: one
    given to ``from_retriever`` replaced the wrapped retriever's, so the search ran over
    another tenant's rows. None leaves the wrapped one in force."""

    class NamespacedStore(InMemoryVectorStore):
        """Stands for a store whose search reads a namespace (an InMemoryVectorStore's does
        not, and is refused one)."""

    built = corpus([("a", 0.75)])
    store = NamespacedStore(built.embeddings)
    store.add_documents(list(built.documents.values()))
    wrapped = store.as_retriever(search_kwargs={"namespace": "tenant_a"})
    with pytest.raises(ValueError, match=r"search_kwargs \['namespace'\].*would replace"):
        ThresholdedRetriever.from_retriever(
            wrapped, policy=POLICY, search_kwargs={"namespace": "tenant_b"}
        )
    kept = ThresholdedRetriever.from_retriever(
        wrapped, policy=POLICY, search_kwargs={"namespace": None}
    )
    assert kept.search_kwargs == {"namespace": "tenant_a"}


def public_child_of_an_internal_parent(corpus):
    """A ``MultiVectorRetriever``: its store holds a public child, its docstore the child's
    internal parent, which it returns in the child's place."""
    multi_vector = pytest.importorskip("langchain_classic.retrievers.multi_vector")
    c = corpus([("child", 0.75, {"doc_type": "public", "doc_id": "parent"})])
    parent = Document(id="parent", page_content="INTERNAL PARENT", metadata={"doc_type": "x"})
    c.embeddings.vectors[parent.page_content] = c.embeddings.vectors["child"]
    parents = InMemoryStore()
    parents.mset([("parent", parent)])
    retriever = multi_vector.MultiVectorRetriever(
        vectorstore=c.store, docstore=parents, search_kwargs={"filter": public_only}
    )
    return c, retriever


RESCORING = RetrievalPolicy(
    min_similarity=0.5, top_k=10, max_per_source=None, max_chars=None, hybrid_policy="rescore"
)


@pytest.mark.parametrize("nesting", [0, 1, 2])
def test_a_retriever_returning_docstore_documents_past_its_filter_is_refused(corpus, nesting):
    """Its filter held for the children it searched, not for the parents it returned from its
    docstore: the internal parent came back (from an ensemble inside an ensemble too, which
    the check did not look into)."""
    c, retriever = public_child_of_an_internal_parent(corpus)
    for _ in range(nesting):
        classic = pytest.importorskip("langchain_classic.retrievers")
        retriever = classic.EnsembleRetriever(retrievers=[retriever], weights=[1.0])
    with pytest.raises(ValueError, match=r"MultiVectorRetriever returns documents from its"):
        ThresholdedRetriever.from_retriever(retriever, policy=RESCORING, embeddings=c.embeddings)


def test_a_fallback_returning_docstore_documents_past_its_filter_is_named(corpus):
    c, retriever = public_child_of_an_internal_parent(corpus)
    classic = pytest.importorskip("langchain_classic.retrievers")
    with_fallback = c.store.as_retriever().with_fallbacks([retriever])
    ensemble = classic.EnsembleRetriever(retrievers=[with_fallback], weights=[1.0])
    with pytest.raises(ValueError, match=r"^MultiVectorRetriever returns documents from its"):
        ThresholdedRetriever.from_retriever(ensemble, policy=RESCORING, embeddings=c.embeddings)


def test_a_retriever_returning_docstore_documents_is_held_to_the_filters_given(corpus):
    c, retriever = public_child_of_an_internal_parent(corpus)
    retriever.search_kwargs = {}
    wrapped = ThresholdedRetriever.from_retriever(
        retriever, policy=RESCORING, embeddings=c.embeddings, filters={"doc_type": "public"}
    )
    assert wrapped.invoke(QUERY) == []
    unfiltered = ThresholdedRetriever.from_retriever(
        retriever, policy=RESCORING, embeddings=c.embeddings
    )
    assert [d.page_content for d in unfiltered.invoke(QUERY)] == ["INTERNAL PARENT"]


def wrapping(kind: str, retriever):
    """``retriever`` inside a retriever that returns its documents: a compression retriever
    (its compressor passes them on), a multi-query retriever, a merger of retrievers."""
    classic = pytest.importorskip("langchain_classic.retrievers")
    from langchain_core.runnables import RunnableLambda

    if kind == "compression":
        pipeline = pytest.importorskip("langchain_classic.retrievers.document_compressors")
        compressor = pipeline.DocumentCompressorPipeline(transformers=[])
        return classic.ContextualCompressionRetriever(
            base_retriever=retriever, base_compressor=compressor
        )
    if kind == "multi_query":
        return classic.MultiQueryRetriever(
            retriever=retriever, llm_chain=RunnableLambda(lambda _: [QUERY])
        )
    return classic.MergerRetriever(retrievers=[retriever])


@pytest.mark.parametrize("kind", ["compression", "multi_query", "merger"])
def test_a_retriever_returning_docstore_documents_inside_a_wrapper_is_refused(corpus, kind):
    """Inside a retriever that returns its documents, the internal parent came back."""
    c, retriever = public_child_of_an_internal_parent(corpus)
    c.embeddings.vectors["INTERNAL PARENT"] = c.embeddings.vectors["child"]
    with pytest.raises(ValueError, match=r"MultiVectorRetriever returns documents from its"):
        ThresholdedRetriever.from_retriever(
            wrapping(kind, retriever), policy=RESCORING, embeddings=c.embeddings
        )


def test_a_retriever_returning_its_memory_stream_past_its_filter_is_refused(corpus):
    """A ``TimeWeightedVectorStoreRetriever`` returns its most recent documents whatever its
    filter says: an internal memo added last came back."""
    classic = pytest.importorskip("langchain_classic.retrievers")
    c = corpus([("public", 0.75, {"doc_type": "public"})])
    recent = classic.TimeWeightedVectorStoreRetriever(
        vectorstore=c.store, search_kwargs={"filter": public_only}, k=2
    )
    recent.memory_stream = [Document(page_content="MEMO", metadata={"doc_type": "internal"})]
    with pytest.raises(ValueError, match=r"TimeWeightedVectorStoreRetriever returns documents"):
        ThresholdedRetriever.from_retriever(recent, policy=RESCORING, embeddings=c.embeddings)


def test_a_self_query_retriever_whose_filter_its_llm_replaces_is_refused(corpus, self_querying):
    """A ``SelfQueryRetriever`` searches with the filter its LLM writes from the question in
    place of its ``search_kwargs`` one: a question asking for internal documents got them."""
    c = corpus([("internal", 0.75, {"doc_type": "internal"})])
    asked = self_querying(c.store, {"doc_type": "internal"}, filter=public_only)
    assert [d.id for d in asked.invoke(QUERY)] == ["internal"]
    with pytest.raises(ValueError, match=r"SelfQueryRetriever replaces its search_kwargs"):
        ThresholdedRetriever.from_retriever(asked, policy=RESCORING, embeddings=c.embeddings)
    unfiltered = self_querying(c.store, {"doc_type": "internal"})
    wrapped = ThresholdedRetriever.from_retriever(
        unfiltered, policy=RESCORING, embeddings=c.embeddings, filters={"doc_type": "public"}
    )
    assert wrapped.invoke(QUERY) == []
