"""A store filter the store's search does not read is refused, not dropped.

An ``InMemoryVectorStore`` (or FAISS, or Milvus) drops the search arguments it does not
know without a word: ``search_kwargs={"where": {"doc_type": "public"}}`` (Chroma's
spelling) restricted nothing, and the internal document came back.
"""

from __future__ import annotations

import re

import pytest
from langchain_core.stores import InMemoryStore

from langchain_thresholded import ThresholdedRetriever
from thresholded import RetrievalPolicy

QUERY = "the question"
POLICY = RetrievalPolicy(min_similarity=0.5, top_k=10, max_per_source=None, max_chars=None)
UNREAD = [
    {"where": {"doc_type": "public"}},
    {"where_document": {"$contains": "pub"}},
    {"expr": 'doc_type == "public"'},
    {"partition_names": ["public"]},
]


def two(corpus):
    return corpus([("pub", 0.75, {"doc_type": "public"}), ("int", 0.75, {"doc_type": "internal"})])


@pytest.mark.parametrize("search_kwargs", UNREAD, ids=lambda kw: next(iter(kw)))
def test_a_filter_an_in_memory_store_does_not_read_is_refused(corpus, search_kwargs):
    key = next(iter(search_kwargs))
    with pytest.raises(ValueError, match=rf"\['{key}'\] are not filters InMemoryVectorStore"):
        ThresholdedRetriever(
            vectorstore=two(corpus).store, policy=POLICY, search_kwargs=search_kwargs
        )


def test_a_filter_it_reads_is_kept(corpus):
    public = {"filter": lambda doc: doc.metadata["doc_type"] == "public", "ids": ["pub", "int"]}
    retriever = ThresholdedRetriever(
        vectorstore=two(corpus).store, policy=POLICY, search_kwargs=public
    )
    assert [d.id for d in retriever.invoke(QUERY)] == ["pub"]


def test_a_filter_given_as_none_restricts_nothing_and_passes(corpus):
    retriever = ThresholdedRetriever(
        vectorstore=two(corpus).store, policy=POLICY, search_kwargs={"where": None}
    )
    assert sorted(d.id for d in retriever.invoke(QUERY)) == ["int", "pub"]


def test_a_filter_set_after_construction_is_refused_at_the_next_call(corpus):
    retriever = ThresholdedRetriever(
        vectorstore=two(corpus).store, policy=POLICY, docstore=InMemoryStore()
    )
    retriever.search_kwargs["where"] = {"doc_type": "public"}
    with pytest.raises(ValueError, match=r"\['where'\] are not filters"):
        retriever.invoke(QUERY)


MEMBER_FILTERS = {
    "unread": ({"where": {"doc_type": "public"}}, r"a member's search_kwargs \['where'\]"),
    # the store calls its filter: a dict failed at the search, "'dict' object is not callable"
    "not a function": ({"filter": {"doc_type": "public"}}, r"a member's search_kwargs\['filter'\]"),
}


@pytest.mark.parametrize("search_kwargs, message", MEMBER_FILTERS.values(), ids=MEMBER_FILTERS)
def test_an_ensemble_members_unusable_filter_is_refused(corpus, search_kwargs, message):
    classic = pytest.importorskip("langchain_classic.retrievers")
    member = two(corpus).store.as_retriever(search_kwargs=search_kwargs)
    wrapped = classic.EnsembleRetriever(retrievers=[member], weights=[1.0])
    with pytest.raises(ValueError, match=message):
        ThresholdedRetriever.from_retriever(wrapped, policy=POLICY)


@pytest.mark.parametrize("wrap", ["with_retry", "with_config", "with_fallbacks"])
def test_a_wrapped_ensemble_members_unread_filter_is_refused(corpus, wrap):
    classic = pytest.importorskip("langchain_classic.retrievers")
    store = two(corpus).store
    member = store.as_retriever(search_kwargs={"where": {"doc_type": "public"}})
    wrapped_member = {
        "with_retry": lambda: member.with_retry(),
        "with_config": lambda: member.with_config(tags=["dense"]),
        "with_fallbacks": lambda: store.as_retriever().with_fallbacks([member]),
    }[wrap]()
    wrapped = classic.EnsembleRetriever(retrievers=[wrapped_member], weights=[1.0])
    with pytest.raises(ValueError, match=r"a member's search_kwargs \['where'\]"):
        ThresholdedRetriever.from_retriever(wrapped, policy=POLICY)


def test_an_ensemble_members_ids_an_in_memory_store_ignores_are_refused(corpus):
    """The retriever's own ids are held by the engine; a member's are its store's alone, and
    an ``InMemoryVectorStore`` ignores them: the member returned "int" too."""
    classic = pytest.importorskip("langchain_classic.retrievers")
    member = two(corpus).store.as_retriever(search_kwargs={"ids": ["pub"]})
    wrapped = classic.EnsembleRetriever(retrievers=[member], weights=[1.0])
    with pytest.raises(ValueError, match=r"a member's search_kwargs \['ids'\]"):
        ThresholdedRetriever.from_retriever(wrapped, policy=POLICY)


def test_a_wrapped_retrievers_unread_filter_is_refused(corpus):
    wrapped = two(corpus).store.as_retriever(search_kwargs={"where": {"doc_type": "public"}})
    with pytest.raises(ValueError, match=r"\['where'\] are not filters"):
        ThresholdedRetriever.from_retriever(wrapped, policy=POLICY)
    mmr = two(corpus).store.as_retriever(
        search_type="mmr", search_kwargs={"where": {"doc_type": "public"}}
    )
    with pytest.raises(ValueError, match=r"\['where'\] are not filters"):
        ThresholdedRetriever.from_retriever(mmr, policy=POLICY)


BOUND = {
    "a member": lambda store: store.as_retriever().bind(where={"doc_type": "public"}),
    "behind fallbacks": lambda store: (
        store.as_retriever().with_fallbacks([store.as_retriever()]).bind(where={"doc_type": "x"})
    ),
    "a bound member's ids": lambda store: store.as_retriever().bind(ids=["pub"]),
}


@pytest.mark.parametrize("how", BOUND)
def test_an_unread_filter_bound_to_an_ensemble_member_is_refused(corpus, how):
    """A binding passes its arguments to every search of the member (``search_kwargs`` and
    they, merged), and the store dropped them: "int" came back."""
    classic = pytest.importorskip("langchain_classic.retrievers")
    member = BOUND[how](two(corpus).store)
    wrapped = classic.EnsembleRetriever(retrievers=[member], weights=[1.0])
    assert sorted(d.id for d in wrapped.invoke(QUERY)) == ["int", "pub"]
    with pytest.raises(ValueError, match=r"a member's search_kwargs \['(where|ids)'\]"):
        ThresholdedRetriever.from_retriever(wrapped, policy=POLICY)


def test_an_unread_filter_bound_to_a_wrapped_retriever_is_refused(corpus):
    member = two(corpus).store.as_retriever().bind(where={"doc_type": "public"})
    with pytest.raises(ValueError, match=r"search_kwargs \['where'\] are not filters"):
        ThresholdedRetriever.from_retriever(member, policy=POLICY, score_kind="unknown")


def test_arguments_bound_outside_an_ensemble_do_not_reach_its_members(corpus):
    """An ensemble calls its members without the arguments it was called with."""
    classic = pytest.importorskip("langchain_classic.retrievers")
    store = two(corpus).store
    ensemble = classic.EnsembleRetriever(retrievers=[store.as_retriever()], weights=[1.0])
    bound = ensemble.bind(where={"doc_type": "public"})
    ThresholdedRetriever.from_retriever(bound, policy=POLICY)


NOT_A_FUNCTION = [{"doc_type": "public"}, 'doc_type == "public"']


@pytest.mark.parametrize("raw", NOT_A_FUNCTION, ids=["dict", "expression"])
def test_an_in_memory_filter_that_is_not_a_function_is_refused_when_built(corpus, raw):
    """An ``InMemoryVectorStore`` calls its ``filter`` on each document: a dict (as Chroma or
    FAISS read it) failed at the first search with "'dict' object is not callable"."""
    with pytest.raises(ValueError, match=r"search_kwargs\['filter'\] .* filters=") as caught:
        ThresholdedRetriever(
            vectorstore=two(corpus).store, policy=POLICY, search_kwargs={"filter": raw}
        )
    assert "InMemoryVectorStore" in str(caught.value)


@pytest.mark.parametrize("search_type", ["similarity", "mmr"])
def test_a_wrapped_in_memory_retrievers_dict_filter_holds(corpus, search_type):
    """``from_retriever`` takes the dict as the retriever's filters whatever the search type:
    under MMR the search failed with "'dict' object is not callable"."""
    wrapped = two(corpus).store.as_retriever(
        search_type=search_type, search_kwargs={"filter": {"doc_type": "public"}}
    )
    retriever = ThresholdedRetriever.from_retriever(wrapped, policy=POLICY)
    assert [d.id for d in retriever.invoke(QUERY)] == ["pub"]


MISSPELT = [("filtr", "filter"), ("filters", "filter"), ("partition_name", "partition_names")]


@pytest.mark.parametrize(("given", "meant"), MISSPELT)
def test_a_misspelt_store_filter_is_refused_naming_the_one_meant(corpus, given, meant):
    """``search_kwargs={"filtr": ...}`` was dropped by the store: the internal document came
    back, as if no restriction had been asked for."""
    public = {given: lambda doc: doc.metadata["doc_type"] == "public"}
    with pytest.raises(TypeError, match=rf"'{given}'.*did you mean '{meant}'"):
        ThresholdedRetriever(vectorstore=two(corpus).store, policy=POLICY, search_kwargs=public)
    retriever = ThresholdedRetriever(vectorstore=two(corpus).store, policy=POLICY)
    with pytest.raises(TypeError, match=rf"'{given}'.*did you mean '{meant}'"):
        retriever.invoke(QUERY, search_kwargs=public)


def test_a_search_argument_near_no_store_filter_passes(corpus):
    retriever = ThresholdedRetriever(
        vectorstore=two(corpus).store, policy=POLICY, search_kwargs={"range_filter": None}
    )
    assert sorted(d.id for d in retriever.invoke(QUERY)) == ["int", "pub"]


def faiss_of(corpus):
    community = pytest.importorskip("langchain_community.vectorstores")
    built = two(corpus)
    docs = list(built.documents.values())
    return community.FAISS.from_documents(
        docs, built.embeddings, ids=[d.id for d in docs], normalize_L2=True
    )


STORES = {
    "in-memory": (lambda corpus: two(corpus).store, "InMemoryVectorStore", "['filter']"),
    "faiss": (faiss_of, "FAISS", "['fetch_k', 'filter']"),
}


@pytest.mark.parametrize(("store_of", "name", "read"), STORES.values(), ids=STORES)
def test_an_argument_the_store_does_not_read_is_refused(corpus, store_of, name, read):
    """``search_kwargs={"tenant": "a"}`` (a restriction, as the writer meant it) was dropped by
    the store: every tenant's documents came back."""
    store = store_of(corpus)
    with pytest.raises(TypeError, match=rf"\['tenant'\].*{name}.*{re.escape(read)}"):
        ThresholdedRetriever(vectorstore=store, policy=POLICY, search_kwargs={"tenant": "a"})
    retriever = ThresholdedRetriever(vectorstore=store, policy=POLICY)
    with pytest.raises(TypeError, match=r"\['tenant'\]"):
        retriever.invoke(QUERY, search_kwargs={"tenant": "a"})
    with pytest.raises(TypeError, match=r"\['tenant'\]"):
        wrapped = store.as_retriever(search_kwargs={"k": 2, "tenant": "a"})
        ThresholdedRetriever.from_retriever(wrapped, policy=POLICY)


@pytest.mark.parametrize(("store_of", "name", "read"), STORES.values(), ids=STORES)
def test_the_arguments_of_the_wrapped_search_type_pass(corpus, store_of, name, read):
    store = store_of(corpus)
    mmr = store.as_retriever(
        search_type="mmr", search_kwargs={"k": 2, "fetch_k": 4, "lambda_mult": 0.5}
    )
    retriever = ThresholdedRetriever.from_retriever(mmr, policy=POLICY)
    assert sorted(d.id for d in retriever.invoke(QUERY)) == ["int", "pub"]
    with pytest.raises(TypeError, match=r"\['lambda_mult'\]"):
        ThresholdedRetriever(vectorstore=store, policy=POLICY, search_kwargs={"lambda_mult": 0.5})


def reads_no_filter(corpus, transform_store):
    """A store of unknown kind whose search drops a ``filter`` argument."""

    class ReadsNoFilter(transform_store):
        def similarity_search_with_score_by_vector(self, embedding, k=4, **kwargs):
            kwargs.pop("filter", None)
            return self.inner.similarity_search_with_score_by_vector(embedding, k=k, **kwargs)

        def similarity_search(self, query, k=4, **kwargs):
            kwargs.pop("filter", None)
            return self.inner.similarity_search(query, k=k, **kwargs)

    return ReadsNoFilter(two(corpus).store, lambda score: score)


def test_a_filter_function_a_store_may_not_read_is_refused(corpus, transform_store):
    """A store of unknown kind whose search drops the retriever's ``filter`` function (its
    search reads no such argument, or reads a dict there): the internal document came back,
    though the retriever was built to return public ones only."""
    store = reads_no_filter(corpus, transform_store)
    public = {"filter": lambda doc: doc.metadata["doc_type"] == "public"}
    with pytest.raises(ValueError, match=r"ReadsNoFilter's search is not known to read one"):
        ThresholdedRetriever(
            vectorstore=store, policy=POLICY, metric="cosine", search_kwargs=public
        )
    retriever = ThresholdedRetriever(
        vectorstore=store, policy=POLICY, metric="cosine", filters={"doc_type": "public"}
    )
    assert [d.id for d in retriever.invoke(QUERY)] == ["pub"]


def test_an_ensemble_members_filter_function_its_store_may_not_read_is_refused(
    corpus, transform_store
):
    """The member searched its store with the function, which the store dropped: the
    ensemble returned the internal document."""
    classic = pytest.importorskip("langchain_classic.retrievers")
    store = reads_no_filter(corpus, transform_store)
    public = {"filter": lambda doc: doc.metadata["doc_type"] == "public"}
    ensemble = classic.EnsembleRetriever(
        retrievers=[store.as_retriever(search_kwargs=public)], weights=[1.0]
    )
    with pytest.raises(ValueError, match=r"a member's search_kwargs\['filter'\] is a function"):
        ThresholdedRetriever.from_retriever(ensemble, policy=POLICY, embeddings=store.embeddings)


def test_a_filter_function_for_an_in_memory_store_subclass_keeping_its_search_passes(corpus):
    """A subclass of ``InMemoryVectorStore`` that overrides none of its searches reads the
    function as it does: it was refused as a store not known to read one (and worked before
    that refusal). One that overrides a search may drop it, and is refused."""
    from langchain_core.vectorstores import InMemoryVectorStore

    class Named(InMemoryVectorStore):
        label = "mine"

    class Searching(InMemoryVectorStore):
        def similarity_search_with_score_by_vector(self, embedding, k=4, **kwargs):
            kwargs.pop("filter", None)
            return super().similarity_search_with_score_by_vector(embedding, k=k, **kwargs)

    c = two(corpus)
    public = {"filter": lambda doc: doc.metadata["doc_type"] == "public"}
    store = Named(c.embeddings)
    store.store = c.store.store
    retriever = ThresholdedRetriever(vectorstore=store, policy=POLICY, search_kwargs=public)
    assert [d.id for d in retriever.invoke(QUERY)] == ["pub"]
    searching = Searching(c.embeddings)
    searching.store = c.store.store
    with pytest.raises(ValueError, match=r"Searching's search is not known to read one"):
        ThresholdedRetriever(vectorstore=searching, policy=POLICY, search_kwargs=public)
