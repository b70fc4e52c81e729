"""``vector_store_kwargs`` that restrict a search hold for its attachments too, or are refused.

The scenario: one document of three sections linked prev/next, ``pub-a`` (public,
cosine 0.9), ``int-b`` (internal, 0.2) and ``pub-c`` (public, 0.3), under a parent
summary ``int-summary`` (internal). The floor is 0.5, so only ``pub-a`` is kept; its
next neighbour and its parent are internal. A store restriction that keeps internal
sections out of the search must keep them out of the attachments as well.
"""

from __future__ import annotations

import pytest
from llama_index.core.retrievers import VectorIndexRetriever
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from llama_index_thresholded import ThresholdedRetriever
from thresholded.errors import UnsafeFilterError

PUBLIC = {"pub-a", "pub-c"}


def sections(kit):
    """The three linked sections and their parent summary, in the store's collection."""
    summary = kit.section("int-summary", 0.1, axis=4, doc_type="internal", text="Internal summary.")
    linked = [
        kit.section("pub-a", 0.9, axis=1, doc_type="public", text="Public section a."),
        kit.section("int-b", 0.2, axis=2, doc_type="internal", text="Internal section b."),
        kit.section("pub-c", 0.3, axis=3, doc_type="public", text="Public section c."),
    ]
    kit.link_chain(linked, parent=summary)
    return linked, summary


def only(key, value):
    return MetadataFilters(filters=[MetadataFilter(key=key, value=value)])


def ids(report):
    return {n.node.node_id for n in report.items}


def retriever(kit, index, **settings):
    settings.setdefault("neighbours", 1)
    return ThresholdedRetriever(index, kit.policy(min_similarity=0.5), pushdown=False, **settings)


# Chroma -----------------------------------------------------------------------------------------
@pytest.fixture
def chroma_index(kit):
    chromadb = pytest.importorskip("chromadb")
    module = pytest.importorskip("llama_index.vector_stores.chroma")
    client = chromadb.EphemeralClient()
    name = "store-kwargs"
    if name in [c.name for c in client.list_collections()]:
        client.delete_collection(name)
    collection = client.create_collection(name, metadata={"hnsw:space": "cosine"})
    linked, summary = sections(kit)
    store = module.ChromaVectorStore(chroma_collection=collection)
    return kit.build_index([*linked, summary], kit.embedding(), store=store)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"where": {"doc_type": "public"}},
        {"where_document": {"$not_contains": "Internal"}},
        {"ids": ["pub-a", "pub-c"]},
    ],
    ids=["where", "where_document", "ids"],
)
def test_chroma_attachments_are_held_to_the_stores_own_restriction(kit, chroma_index, kwargs):
    report = retriever(kit, chroma_index, vector_store_kwargs=kwargs).retrieve_with_report(
        kit.QUESTION
    )
    assert {n.node.node_id for n in report.kept} == {"pub-a"}
    assert ids(report) <= PUBLIC


def test_chroma_attachments_inside_the_restriction_are_attached(kit, chroma_index):
    where = {"doc_type": {"$in": ["public", "internal"]}}
    report = retriever(
        kit, chroma_index, vector_store_kwargs={"where": where}
    ).retrieve_with_report(kit.QUESTION)
    assert ids(report) == {"pub-a", "int-b", "int-summary"}


async def test_chroma_attachments_are_held_to_it_in_async_calls_too(kit, chroma_index):
    kwargs = {"where": {"doc_type": "public"}}
    report = await retriever(kit, chroma_index, vector_store_kwargs=kwargs).aretrieve_with_report(
        kit.QUESTION
    )
    assert ids(report) == {"pub-a"}


def test_an_unknown_chroma_keyword_is_refused(kit, chroma_index):
    with pytest.raises(ValueError, match=r"'filter'.*ChromaVectorStore.*filters="):
        retriever(kit, chroma_index, vector_store_kwargs={"filter": {"doc_type": "public"}})


# Milvus -----------------------------------------------------------------------------------------
@pytest.fixture
def milvus_index(kit, milvus_uri):
    linked, summary = sections(kit)
    store = kit.milvus_store(milvus_uri, "kwargs", dim=kit.DIM)
    return kit.build_index([*linked, summary], kit.embedding(), store=store)


def test_a_keyword_milvus_does_not_read_is_refused(kit, milvus_index):
    """LlamaIndex's Milvus store ignores ``partition_names``: the search would not be
    restricted at all."""
    with pytest.raises(ValueError, match=r"'partition_names'.*milvus_partition_names"):
        retriever(kit, milvus_index, vector_store_kwargs={"partition_names": ["public"]})


def test_milvus_tuning_keywords_pass(kit, milvus_index):
    kwargs = {"milvus_search_config": {"params": {}}, "mmr_threshold": None}
    report = retriever(kit, milvus_index, vector_store_kwargs=kwargs).retrieve_with_report(
        kit.QUESTION
    )
    assert ids(report) == {"pub-a", "int-b", "int-summary"}


# Other stores -----------------------------------------------------------------------------------
def test_keywords_of_another_store_are_refused_with_attachments(kit):
    linked, summary = sections(kit)
    index = kit.build_index(linked, kit.embedding(), docstore_nodes=[summary])
    with pytest.raises(ValueError, match=r"'tenant'.*SimpleVectorStore.*filters="):
        retriever(kit, index, vector_store_kwargs={"tenant": "public"})


def test_keywords_of_another_store_pass_without_attachments(kit):
    """Its query may read them (a store of your own): only the store knows."""
    linked, summary = sections(kit)
    index = kit.build_index(linked, kit.embedding(), store=kit.SpyStore(), docstore_nodes=[summary])
    report = retriever(
        kit,
        index,
        vector_store_kwargs={"tenant": "public"},
        neighbours=0,
        parent_summaries=False,
        metric="COSINE",
    ).retrieve_with_report(kit.QUESTION)
    assert ids(report) == {"pub-a"}


@pytest.mark.parametrize("attach", [True, False])
def test_keywords_a_simple_vector_store_ignores_are_refused(kit, attach):
    """Its query reads none: a restriction given so would silently not hold."""
    linked, summary = sections(kit)
    index = kit.build_index(linked, kit.embedding(), docstore_nodes=[summary])
    with pytest.raises(ValueError, match=r"\['tenant'\].*SimpleVectorStore's query reads"):
        retriever(
            kit,
            index,
            vector_store_kwargs={"tenant": "public"},
            neighbours=int(attach),
            parent_summaries=attach,
        )


def test_chroma_where_holds_with_the_retrievers_filters_and_a_calls(kit, chroma_index):
    where = {"doc_type": {"$in": ["public", "internal"]}}
    restricted = retriever(
        kit, chroma_index, vector_store_kwargs={"where": where}, filters=only("doc_type", "public")
    )
    assert ids(restricted.retrieve_with_report(kit.QUESTION)) == {"pub-a"}
    internal = restricted.retrieve_with_report(kit.QUESTION, filters=only("doc_type", "internal"))
    assert ids(internal) == set()


NONE_INTERNAL = MetadataFilters(
    filters=[MetadataFilter(key="doc_type", value="internal")], condition=FilterCondition.NOT
)
PUBLIC_NO_OWNER = MetadataFilters(
    filters=[
        MetadataFilter(key="owner", value=None, operator=FilterOperator.IS_EMPTY),
        MetadataFilter(key="doc_type", value="public"),
    ]
)


@pytest.mark.parametrize("filters", [NONE_INTERNAL, PUBLIC_NO_OWNER], ids=["not", "is_empty"])
@pytest.mark.parametrize("own", [None, {"doc_type": {"$in": ["public", "internal"]}}])
def test_chroma_takes_every_filter_with_or_without_a_where_of_its_own(
    kit, chroma_index, filters, own
):
    """LlamaIndex's Chroma store writes no NOT and no IS_EMPTY (a ValueError of its own): the
    filters are written as a Chroma ``where`` whether or not the retriever has one."""
    kwargs = {} if own is None else {"vector_store_kwargs": {"where": own}}
    found = retriever(kit, chroma_index, filters=filters, **kwargs)
    assert ids(found.retrieve_with_report(kit.QUESTION)) == {"pub-a"}


@pytest.mark.parametrize("empty", ["", "  ", None])
def test_from_retriever_keeps_the_wrapped_string_expr_beside_an_empty_one(kit, milvus_index, empty):
    """A keyword given empty or None restricts nothing: the wrapped retriever's restriction
    stays, for the search and the attachments (it used to be replaced by the empty one)."""
    public = {"string_expr": 'doc_type == "public"'}
    wrapped = VectorIndexRetriever(milvus_index, vector_store_kwargs=public)
    restricted = ThresholdedRetriever.from_retriever(
        wrapped,
        kit.policy(min_similarity=0.0),
        pushdown=False,
        vector_store_kwargs={"string_expr": empty, "milvus_partition_names": None},
    )
    assert ids(restricted.retrieve_with_report(kit.QUESTION)) == PUBLIC


@pytest.mark.parametrize("empty", ["", "  "])
def test_from_retriever_takes_a_string_expr_beside_a_wrapped_empty_one(kit, milvus_index, empty):
    """The wrapped retriever's empty ``string_expr`` restricts nothing: the one given is the
    restriction (they were ANDed into ``() and (...)``, which Milvus cannot read)."""
    wrapped = VectorIndexRetriever(milvus_index, vector_store_kwargs={"string_expr": empty})
    restricted = ThresholdedRetriever.from_retriever(
        wrapped,
        kit.policy(min_similarity=0.0),
        pushdown=False,
        vector_store_kwargs={"string_expr": 'doc_type == "public"'},
    )
    assert ids(restricted.retrieve_with_report(kit.QUESTION)) == PUBLIC


def test_from_retriever_given_ids_that_name_none_admits_none(kit, chroma_index):
    """An empty id list names no section, as on a retriever built over the index: given to
    ``from_retriever`` it was dropped as restricting nothing, and every section came back."""
    built = retriever(kit, chroma_index, vector_store_kwargs={"ids": []})
    wrapped = ThresholdedRetriever.from_retriever(
        VectorIndexRetriever(chroma_index),
        kit.policy(min_similarity=0.0),
        vector_store_kwargs={"ids": []},
    )
    assert ids(built.retrieve_with_report(kit.QUESTION)) == set()
    assert ids(wrapped.retrieve_with_report(kit.QUESTION)) == set()


def test_partition_names_that_name_no_partition_are_refused(kit, milvus_index):
    """Milvus searches every partition for an empty list: a list of the partitions a caller
    may read that came out empty would have opened all of them."""
    with pytest.raises(UnsafeFilterError, match=r"milvus_partition_names=\[\] names no partition"):
        retriever(kit, milvus_index, vector_store_kwargs={"milvus_partition_names": []})
    wrapped = VectorIndexRetriever(milvus_index)
    with pytest.raises(UnsafeFilterError, match=r"names no partition"):
        ThresholdedRetriever.from_retriever(
            wrapped, kit.policy(), vector_store_kwargs={"milvus_partition_names": []}
        )
    with pytest.raises(TypeError, match=r"got the string 'public': write \['public'\]"):
        retriever(kit, milvus_index, vector_store_kwargs={"milvus_partition_names": "public"})


@pytest.mark.parametrize("where", [[], "", 0])
def test_a_chroma_where_that_is_no_clause_is_refused(kit, chroma_index, where):
    """LlamaIndex's Chroma store drops a false ``where``: every section came back."""
    with pytest.raises(TypeError, match=r"vector_store_kwargs\['where'\] must be a Chroma where"):
        retriever(kit, chroma_index, vector_store_kwargs={"where": where})


@pytest.mark.parametrize("expr", [0, False, ["doc_type == 'public'"]])
def test_a_milvus_string_expr_that_is_no_string_is_refused(kit, milvus_index, expr):
    """A false ``string_expr`` was dropped (every section came back); a list failed in
    Milvus."""
    with pytest.raises(TypeError, match=r"vector_store_kwargs\['string_expr'\] must be a Milvus"):
        retriever(kit, milvus_index, vector_store_kwargs={"string_expr": expr})
    wrapped = VectorIndexRetriever(milvus_index, vector_store_kwargs={"string_expr": expr})
    with pytest.raises(TypeError, match=r"string_expr"):
        ThresholdedRetriever.from_retriever(wrapped, kit.policy(), pushdown=False)


def test_partition_names_read_as_patterns_are_refused(kit, milvus_index):
    """A server that reads partition names as patterns would search every partition."""
    with pytest.raises(UnsafeFilterError, match=r"'\.\*', which no Milvus partition"):
        retriever(kit, milvus_index, vector_store_kwargs={"milvus_partition_names": [".*"]})
