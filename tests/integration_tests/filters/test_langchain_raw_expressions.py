"""Every raw Milvus expression a LangChain retriever is given holds, attachments included.

A raw expression reaches the store by several paths: ``search_kwargs["expr"]`` and
``search_kwargs["filter"]`` (both may be given), the ``expr`` field, a wrapped
``store.as_retriever(search_kwargs=...)``, and the MMR search such a retriever runs.
Whatever the path, each expression narrows the search and the neighbours and summaries
fetched from the docstore, on Milvus Lite.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain_core.retrievers import BaseRetriever
from leak_data import POLICY, QUESTION, SameEmbeddings, langchain_docstore, langchain_documents

import langchain_thresholded as lc
from thresholded.errors import UnsafeFilterError
from thresholded.milvus_expr import membership

pytestmark = pytest.mark.integration

PUBLIC = 'doc_type == "public"'
HANDBOOK = 'source == "handbook"'
PUBLIC_SECTIONS = {"h0", "h2", "f0", "f1"}
PUBLIC_HANDBOOK = {"h0", "h2"}


def ids(documents: list[Any]) -> list[str]:
    return [d.id for d in documents]


def doc_types(documents: list[Any]) -> set[str]:
    return {d.metadata["doc_type"] for d in documents}


def over_store(leaky: Any, **settings: Any) -> lc.ThresholdedRetriever:
    return lc.ThresholdedRetriever(
        vectorstore=leaky.langchain_store,
        policy=POLICY,
        docstore=leaky.langchain_docstore,
        neighbours=1,
        **settings,
    )


# expr and filter, both given ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "search_kwargs",
    [{"expr": HANDBOOK, "filter": PUBLIC}, {"expr": PUBLIC, "filter": HANDBOOK}],
    ids=["filter-public", "expr-public"],
)
def test_expr_and_filter_in_search_kwargs_both_hold(leaky, search_kwargs) -> None:
    report = over_store(leaky, search_kwargs=search_kwargs).retrieve_with_report(QUESTION)
    assert set(ids(report.kept)) == PUBLIC_HANDBOOK
    assert doc_types(report.items) == {"public"}  # h1 and h3 are not attached


def test_the_expr_field_holds_with_both_in_search_kwargs(leaky) -> None:
    retriever = over_store(
        leaky, search_kwargs={"expr": 'source != "ops"', "filter": HANDBOOK}, expr=PUBLIC
    )
    report = retriever.retrieve_with_report(QUESTION)
    assert set(ids(report.kept)) == PUBLIC_HANDBOOK
    assert doc_types(report.items) == {"public"}


async def test_expr_and_filter_both_hold_async(leaky) -> None:
    retriever = over_store(leaky, search_kwargs={"expr": HANDBOOK, "filter": PUBLIC})
    report = await retriever.aretrieve_with_report(QUESTION)
    assert set(ids(report.kept)) == PUBLIC_HANDBOOK
    assert doc_types(report.items) == {"public"}


def test_a_wrapped_filter_holds_beside_an_expr_given_to_from_retriever(leaky) -> None:
    wrapped = leaky.langchain_store.as_retriever(search_kwargs={"filter": PUBLIC})
    retriever = lc.ThresholdedRetriever.from_retriever(
        wrapped,
        policy=POLICY,
        docstore=leaky.langchain_docstore,
        neighbours=1,
        search_kwargs={"expr": HANDBOOK},
    )
    report = retriever.retrieve_with_report(QUESTION)
    assert set(ids(report.kept)) == PUBLIC_HANDBOOK
    assert doc_types(report.items) == {"public"}


@pytest.mark.parametrize("key", ["filter", "expr"])
def test_a_wrapped_expression_holds_beside_one_of_the_same_key(leaky, key) -> None:
    """The expression given to ``from_retriever`` used to replace the wrapped one."""
    wrapped = leaky.langchain_store.as_retriever(search_kwargs={key: PUBLIC})
    retriever = lc.ThresholdedRetriever.from_retriever(
        wrapped,
        policy=POLICY,
        docstore=leaky.langchain_docstore,
        neighbours=1,
        search_kwargs={key: 'source != "nowhere"'},
    )
    report = retriever.retrieve_with_report(QUESTION)
    assert set(ids(report.kept)) <= PUBLIC_SECTIONS
    assert report.kept
    assert doc_types(report.items) == {"public"}


def test_a_filter_that_is_not_an_expression_is_refused_on_milvus(leaky) -> None:
    """It used to be left out of the search beside an ``expr``."""
    with pytest.raises(TypeError, match=r"search_kwargs\['filter'\].*Milvus boolean expression"):
        over_store(leaky, search_kwargs={"expr": PUBLIC, "filter": {"doc_type": "internal"}})


# The MMR search of a wrapped Milvus retriever ----------------------------------------------------
def mmr(leaky: Any, search_kwargs: dict[str, Any]) -> lc.ThresholdedRetriever:
    wrapped = leaky.langchain_store.as_retriever(search_type="mmr", search_kwargs=search_kwargs)
    return lc.ThresholdedRetriever.from_retriever(
        wrapped, policy=POLICY, docstore=leaky.langchain_docstore, neighbours=1
    )


def test_mmr_attachments_are_held_to_the_wrapped_expr(leaky) -> None:
    report = mmr(leaky, {"expr": PUBLIC}).retrieve_with_report(QUESTION)
    assert set(ids(report.kept)) == PUBLIC_SECTIONS
    assert doc_types(report.items) == {"public"}  # h1 and h3 are neighbours of h0 and h2


async def test_mmr_attachments_are_held_to_the_wrapped_expr_async(leaky) -> None:
    report = await mmr(leaky, {"expr": PUBLIC}).aretrieve_with_report(QUESTION)
    assert doc_types(report.items) == {"public"}


def test_mmr_sections_are_known_by_their_primary_key(leaky) -> None:
    """f0 and f1 are each other's neighbours: kept, they are not attached again."""
    items = mmr(leaky, {"expr": PUBLIC}).invoke(QUESTION)
    assert sorted(ids(items)) == sorted(PUBLIC_SECTIONS)


def test_mmr_ids_are_primary_keys_whatever_the_metadata_holds(leaky) -> None:
    """A document whose metadata has an ``id`` is still known by its primary key."""
    wrapped = leaky.langchain_store.as_retriever(search_type="mmr", search_kwargs={"expr": PUBLIC})
    retriever = lc.ThresholdedRetriever.from_retriever(
        wrapped, policy=POLICY, docstore=leaky.langchain_docstore, neighbours=1
    )
    assert retriever._id_key() == leaky.langchain_store._primary_field


@pytest.mark.parametrize("key", ["where", "where_document"])
def test_a_chroma_filter_on_milvus_is_refused(leaky, key) -> None:
    """langchain-milvus drops search arguments it does not know: Chroma's ``where`` held
    nothing, and the internal sections came back."""
    with pytest.raises(ValueError, match=rf"\['{key}'\] are not filters Milvus's search"):
        over_store(leaky, search_kwargs={key: {"doc_type": "public"}})
    wrapped = leaky.langchain_store.as_retriever(search_kwargs={key: {"doc_type": "public"}})
    with pytest.raises(ValueError, match=r"are not filters Milvus's search"):
        lc.ThresholdedRetriever.from_retriever(wrapped, policy=POLICY)


# The store filters of wrapped retrievers the docstore's sections cannot be held to ---------------
def ensemble(leaky: Any, search_kwargs: dict[str, Any]) -> Any:
    classic = pytest.importorskip("langchain_classic.retrievers")
    dense = leaky.langchain_store.as_retriever(search_kwargs=search_kwargs)
    return classic.EnsembleRetriever(retrievers=[dense], weights=[1.0])


def test_an_ensemble_members_filter_with_a_docstore_is_refused(leaky) -> None:
    """Its neighbours and summaries would not be held to it: h1 and h3 were attached."""
    wrapped = ensemble(leaky, {"expr": PUBLIC})
    with pytest.raises(ValueError, match=r"EnsembleRetriever.*\(expr\).*filters="):
        lc.ThresholdedRetriever.from_retriever(
            wrapped, policy=POLICY, docstore=leaky.langchain_docstore, neighbours=1
        )
    report = lc.ThresholdedRetriever.from_retriever(
        ensemble(leaky, {}),
        policy=POLICY,
        docstore=leaky.langchain_docstore,
        filters={"doc_type": "public"},
    ).retrieve_with_report(QUESTION)
    assert doc_types(report.items) == {"public"}


@pytest.mark.parametrize("partitions", [[], [".*"]])
def test_an_ensemble_members_partitions_that_name_none_are_refused(leaky, partitions) -> None:
    """The member searches with its own search_kwargs: Milvus searches every partition for
    an empty list (every section came back), and a server that reads names as patterns
    for ".*"."""
    wrapped = ensemble(leaky, {"partition_names": partitions})
    with pytest.raises(UnsafeFilterError, match=r"a member's partition_names"):
        lc.ThresholdedRetriever.from_retriever(wrapped, policy=POLICY)
    classic = pytest.importorskip("langchain_classic.retrievers")
    nested = classic.EnsembleRetriever(retrievers=[wrapped], weights=[1.0])
    with pytest.raises(UnsafeFilterError, match=r"a member's partition_names"):
        lc.ThresholdedRetriever.from_retriever(nested, policy=POLICY)
    changed = ensemble(leaky, {})
    retriever = lc.ThresholdedRetriever.from_retriever(changed, policy=POLICY)
    changed.retrievers[0].search_kwargs["partition_names"] = partitions
    with pytest.raises(UnsafeFilterError, match=r"a member's partition_names"):
        retriever.invoke(QUESTION)


def test_an_ensemble_members_filter_without_a_docstore_holds(leaky) -> None:
    retriever = lc.ThresholdedRetriever.from_retriever(
        ensemble(leaky, {"expr": PUBLIC}), policy=POLICY
    )
    assert doc_types(retriever.invoke(QUESTION)) == {"public"}


# Wrapped retrievers whose restrictions cannot be read, with a docstore ---------------------------
class Relayed(BaseRetriever):
    """Another retriever's documents: a retriever whose restrictions cannot be read."""

    inner: Any

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Any]:
        return self.inner.invoke(query)


def public_retriever(leaky: Any) -> lc.ThresholdedRetriever:
    store = leaky.langchain_store
    return lc.ThresholdedRetriever(vectorstore=store, policy=POLICY, filters={"doc_type": "public"})


def test_an_ensemble_of_a_filtered_thresholded_retriever_holds_its_filters(leaky) -> None:
    """The ensemble runs a retriever of public sections: h1, h3 and the handbook's summary
    were attached from the docstore."""
    classic = pytest.importorskip("langchain_classic.retrievers")
    wrapped = classic.EnsembleRetriever(retrievers=[public_retriever(leaky)], weights=[1.0])
    retriever = lc.ThresholdedRetriever.from_retriever(
        wrapped,
        policy=POLICY,
        embeddings=leaky.langchain_store.embeddings,
        docstore=leaky.langchain_docstore,
        neighbours=1,
    )
    report = retriever.retrieve_with_report(QUESTION)
    assert set(ids(report.kept)) == PUBLIC_SECTIONS
    assert doc_types(report.items) == {"public"}


def test_a_wrapped_retriever_whose_restrictions_cannot_be_read_is_refused_with_a_docstore(
    leaky,
) -> None:
    wrapped = Relayed(inner=leaky.langchain_store.as_retriever(search_kwargs={"expr": PUBLIC}))
    with pytest.raises(ValueError, match=r"restrictions of the wrapped Relayed cannot be read"):
        lc.ThresholdedRetriever.from_retriever(
            wrapped, policy=POLICY, docstore=leaky.langchain_docstore, neighbours=1
        )
    without = lc.ThresholdedRetriever.from_retriever(
        wrapped,
        policy=POLICY.model_copy(update={"hybrid_policy": "rescore"}),
        embeddings=leaky.langchain_store.embeddings,
    )
    assert doc_types(without.invoke(QUESTION)) == {"public"}


def test_an_ensemble_member_whose_restrictions_cannot_be_read_is_named(leaky) -> None:
    classic = pytest.importorskip("langchain_classic.retrievers")
    members = [leaky.langchain_store.as_retriever(), Relayed(inner=public_retriever(leaky))]
    wrapped = classic.EnsembleRetriever(retrievers=members, weights=[0.5, 0.5])
    with pytest.raises(ValueError, match=r"EnsembleRetriever's member 1 \(Relayed\)"):
        lc.ThresholdedRetriever.from_retriever(
            wrapped, policy=POLICY, docstore=leaky.langchain_docstore, neighbours=1
        )


# Partitions --------------------------------------------------------------------------------------
PARTITIONS = {"public": sorted(PUBLIC_SECTIONS)}
"""Milvus Lite 2.5 has no partitions: a partition is played by a list of primary keys."""


@pytest.fixture
def partitioned(leaky, monkeypatch) -> Any:
    """The leaky store, its client's searches and queries limited to the partitions named."""
    client, pk = leaky.langchain_store.client, leaky.langchain_store._primary_field
    seen: list[Any] = []

    def in_partitions(call: Any) -> Any:
        def limited(*args: Any, **kwargs: Any) -> Any:
            names = kwargs.pop("partition_names", None)
            seen.append(names)
            if names:
                rows = [i for name in names for i in PARTITIONS[name]]
                own = kwargs.get("filter")
                kwargs["filter"] = " and ".join(f"({e})" for e in (own, membership(pk, rows)) if e)
            return call(*args, **kwargs)

        return limited

    monkeypatch.setattr(client, "search", in_partitions(client.search))
    monkeypatch.setattr(client, "query", in_partitions(client.query))
    return seen


def test_partition_names_hold_for_attachments(leaky, partitioned) -> None:
    """The search is limited to the public partition: h1, h3 and the handbook's summary
    were attached from the docstore."""
    retriever = over_store(leaky, search_kwargs={"partition_names": ["public"]})
    report = retriever.retrieve_with_report(QUESTION)
    assert set(ids(report.kept)) == PUBLIC_SECTIONS
    assert doc_types(report.items) == {"public"}
    assert ["public"] in partitioned  # the attachments were looked up in the partition


def test_a_calls_partition_names_are_refused(leaky) -> None:
    """They would replace the retriever's."""
    retriever = lc.ThresholdedRetriever(vectorstore=leaky.langchain_store, policy=POLICY)
    with pytest.raises(TypeError, match=r"search_kwargs hold a store filter \(partition_names\)"):
        retriever.invoke(QUESTION, search_kwargs={"partition_names": ["_default"]})


def test_partition_names_given_to_from_retriever_cannot_replace_the_wrapped_ones(leaky) -> None:
    wrapped = leaky.langchain_store.as_retriever(search_kwargs={"partition_names": ["public"]})
    with pytest.raises(
        ValueError, match=r"search_kwargs \['partition_names'\].*would replace the other"
    ):
        lc.ThresholdedRetriever.from_retriever(
            wrapped, policy=POLICY, search_kwargs={"partition_names": ["_default"]}
        )


def test_partition_names_that_name_no_partition_are_refused(leaky) -> None:
    """Milvus searches every partition for an empty list, the internal ones included."""
    with pytest.raises(UnsafeFilterError, match=r"partition_names=\[\] names no partition"):
        over_store(leaky, search_kwargs={"partition_names": []})
    wrapped = leaky.langchain_store.as_retriever(search_kwargs={"partition_names": []})
    with pytest.raises(UnsafeFilterError, match=r"names no partition"):
        lc.ThresholdedRetriever.from_retriever(wrapped, policy=POLICY)


def test_partition_names_given_to_from_retriever_that_name_none_are_refused(leaky) -> None:
    """An empty list given to ``from_retriever`` was dropped as restricting nothing: the
    search ran over every partition, the internal ones included."""
    wrapped = leaky.langchain_store.as_retriever()
    with pytest.raises(UnsafeFilterError, match=r"partition_names=\[\] names no partition"):
        lc.ThresholdedRetriever.from_retriever(
            wrapped, policy=POLICY, search_kwargs={"partition_names": []}
        )


def test_partition_names_read_as_patterns_are_refused(leaky) -> None:
    """A server that reads partition names as patterns (Milvus before 2.3.4) would search
    every partition whose name matches: ``".*"`` all of them."""
    with pytest.raises(UnsafeFilterError, match=r"'\.\*', which no Milvus partition"):
        over_store(leaky, search_kwargs={"partition_names": ["public", ".*"]})
    wrapped = leaky.langchain_store.as_retriever(search_kwargs={"partition_names": ["pub.*"]})
    with pytest.raises(UnsafeFilterError, match=r"which no Milvus partition"):
        lc.ThresholdedRetriever.from_retriever(wrapped, policy=POLICY)


# Filters on the collection's own fields ----------------------------------------------------------
@pytest.mark.parametrize(
    "where",
    [{"$not": [{"text": {"$text_match": "h1"}}]}, {"vector": {"$is_empty": True}}],
    ids=["text", "vector"],
)
def test_a_filter_on_a_field_outside_the_metadata_is_refused(leaky, where) -> None:
    """Milvus tests the row's text, the engine the metadata (which has none): h1 came back."""
    with pytest.raises(UnsafeFilterError, match=r"not in the documents' metadata"):
        over_store(leaky).invoke(QUESTION, filters=where)
    with pytest.raises(UnsafeFilterError, match=r"not in the documents' metadata"):
        over_store(leaky, filters=where)


def test_a_filter_on_the_primary_key_holds(leaky) -> None:
    """langchain-milvus puts the primary key in every document's metadata."""
    retriever = lc.ThresholdedRetriever(
        vectorstore=leaky.langchain_store, policy=POLICY, filters={"pk": {"$in": ["h0", "f1"]}}
    )
    assert sorted(ids(retriever.invoke(QUESTION))) == ["f1", "h0"]


# Chroma ids --------------------------------------------------------------------------------------
@pytest.fixture
def chroma() -> Any:
    """The leaky sections in a Chroma collection of their own."""
    chromadb = pytest.importorskip("chromadb")
    langchain_chroma = pytest.importorskip("langchain_chroma")
    documents = langchain_documents()
    store = langchain_chroma.Chroma(
        collection_name=f"leaks-{uuid.uuid4().hex}",
        embedding_function=SameEmbeddings(),
        client=chromadb.EphemeralClient(),
    )
    store.add_documents(documents, ids=[d.id for d in documents])
    return store


PUBLIC_IDS = sorted(PUBLIC_SECTIONS)
EVERY_ID = [d.id for d in langchain_documents()]


async def test_a_calls_ids_cannot_replace_the_retrievers(chroma) -> None:
    """The call's ids replaced the retriever's: h1, h3, o0 and o1 came back."""
    retriever = lc.ThresholdedRetriever(
        vectorstore=chroma, policy=POLICY, search_kwargs={"ids": PUBLIC_IDS}
    )
    with pytest.raises(TypeError, match=r"search_kwargs hold a store filter \(ids\)"):
        retriever.invoke(QUESTION, search_kwargs={"ids": EVERY_ID})
    with pytest.raises(TypeError, match=r"search_kwargs hold a store filter \(ids\)"):
        await retriever.ainvoke(QUESTION, search_kwargs={"ids": EVERY_ID})
    assert sorted(ids(retriever.invoke(QUESTION))) == PUBLIC_IDS


def test_chroma_ids_hold_for_attachments(chroma) -> None:
    """h1, h3 and the handbook's summary were attached from the docstore."""
    retriever = lc.ThresholdedRetriever(
        vectorstore=chroma,
        policy=POLICY,
        search_kwargs={"ids": PUBLIC_IDS},
        docstore=langchain_docstore(langchain_documents()),
        neighbours=1,
    )
    report = retriever.retrieve_with_report(QUESTION)
    assert sorted(ids(report.kept)) == PUBLIC_IDS
    assert doc_types(report.items) == {"public"}
    assert not report.attached or set(ids(report.attached)) <= PUBLIC_SECTIONS


def test_ids_given_to_from_retriever_cannot_replace_the_wrapped_ones(chroma) -> None:
    wrapped = chroma.as_retriever(search_kwargs={"ids": PUBLIC_IDS})
    with pytest.raises(ValueError, match=r"search_kwargs \['ids'\].*would replace the other"):
        lc.ThresholdedRetriever.from_retriever(
            wrapped, policy=POLICY, search_kwargs={"ids": EVERY_ID}
        )
    inherited = lc.ThresholdedRetriever.from_retriever(wrapped, policy=POLICY)
    assert sorted(ids(inherited.invoke(QUESTION))) == PUBLIC_IDS


def test_ids_given_to_from_retriever_that_name_none_admit_none(chroma) -> None:
    """An empty id list names no section, as it does on a retriever built over the store:
    given to ``from_retriever`` it was dropped as restricting nothing, and every section
    came back."""
    built = lc.ThresholdedRetriever(vectorstore=chroma, policy=POLICY, search_kwargs={"ids": []})
    wrapped = lc.ThresholdedRetriever.from_retriever(
        chroma.as_retriever(), policy=POLICY, search_kwargs={"ids": []}
    )
    assert ids(built.invoke(QUESTION)) == ids(wrapped.invoke(QUESTION)) == []
