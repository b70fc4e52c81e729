"""LangChain filters on a Milvus store that keeps its metadata in one JSON field (Milvus Lite).

langchain-milvus stores opened with ``metadata_field="metadata"`` and
``enable_dynamic_field=False`` keep each document's metadata in one JSON field, where a
key is ``metadata["doc_type"]``. Every filtered call failed with pymilvus's
``Invalid expr: (doc_type == "public")``: the filter keys were written as top-level
fields. The documents such a store returns carry no primary key either (langchain-milvus
reads the metadata from the JSON field only), so under IP each section was refused for
a stored vector no id could name.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from leak_data import POLICY, PUBLIC, QUESTION, SameEmbeddings, langchain_docstore
from leak_data import langchain_documents as documents

import langchain_thresholded as lc
from thresholded.errors import UnsafeFilterError

pytestmark = pytest.mark.integration

PUBLIC_SECTIONS = ["f0", "f1", "h0", "h2"]
LAYOUT = {"metadata_field": "metadata", "enable_dynamic_field": False}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("langchain_milvus")
    return Path(tmp_path_factory.mktemp("json_metadata"))


@pytest.fixture(scope="module")
def store(folder: Path) -> Any:
    return lc.milvus_from_documents(
        documents(),
        SameEmbeddings(),
        uri=str(folder / "json.db"),
        collection_name="leaks",
        **LAYOUT,
    )


def ids(found: list[Any]) -> list[str]:
    return sorted(str(d.id) for d in found)


def retriever(store: Any, **kwargs: Any) -> Any:
    return lc.ThresholdedRetriever(vectorstore=store, policy=POLICY, **kwargs)


@pytest.mark.parametrize(
    "filters",
    [
        {"doc_type": "public"},
        {"doc_type": {"$ne": "internal"}},
        {"doc_type": {"$in": ["public", "other"]}},
        {"tags": {"$contains": "public"}},
        {"$not": [{"tags": {"$contains": "internal"}}]},
        {"restricted_to": {"$nin": ["staff"]}},
        {"doc_type": {"$text_match": "ubli"}},
    ],
    ids=["eq", "ne", "in", "contains", "not-contains", "nin-missing", "text"],
)
def test_filters_are_written_inside_the_metadata_field(store: Any, filters: Any) -> None:
    assert ids(retriever(store, filters=filters).invoke(QUESTION)) == PUBLIC_SECTIONS


def test_a_call_filter_async_and_the_store_read_again(store: Any, folder: Path) -> None:
    unfiltered = retriever(store)
    assert ids(unfiltered.invoke(QUESTION, filters={"doc_type": "public"})) == PUBLIC_SECTIONS
    public = retriever(store, filters={"doc_type": "public"})
    assert ids(asyncio.run(public.ainvoke(QUESTION))) == PUBLIC_SECTIONS
    reopened = lc.existing_milvus_store(
        str(folder / "json.db"), "leaks", embeddings=SameEmbeddings(), metadata_field="metadata"
    )
    assert ids(retriever(reopened, filters={"doc_type": "public"}).invoke(QUESTION)) == (
        PUBLIC_SECTIONS
    )


def test_the_store_s_own_expression_holds(store: Any) -> None:
    raw = retriever(store, search_kwargs={"expr": 'metadata["doc_type"] == "public"'})
    assert ids(raw.invoke(QUESTION)) == PUBLIC_SECTIONS
    both = retriever(
        store,
        search_kwargs={"expr": 'metadata["source"] == "handbook"'},
        filters={"doc_type": "public"},
    )
    assert ids(both.invoke(QUESTION)) == ["h0", "h2"]


def test_neighbours_and_summaries_are_read_from_the_metadata_field(store: Any) -> None:
    attached = retriever(
        store, docstore=langchain_docstore(documents()), filters={"doc_type": "public"}
    )
    report = attached.retrieve_with_report(QUESTION)
    found = {str(d.id): d.metadata for d in report.items}
    assert {"h0", "h2", "f0", "f1", "faq#summary"} <= set(found)
    assert set(found) <= PUBLIC
    assert all(meta["doc_type"] == "public" for meta in found.values())


def test_a_neighbour_is_judged_by_the_store_s_copy(store: Any) -> None:
    """h1 is internal in the collection; a stale docstore copy says public. The store's copy,
    its metadata read from the JSON field, is the one held to the filter."""
    stale = langchain_docstore(documents())
    h1 = stale.mget(["h1"])[0]
    stale.mset([("h1", h1.model_copy(update={"metadata": {**h1.metadata, "doc_type": "public"}}))])
    attached = retriever(
        store, docstore=stale, filters={"doc_type": "public", "source": "handbook"}
    )
    report = attached.retrieve_with_report(QUESTION)
    assert sorted(str(d.id) for d in report.items) == ["h0", "h2"]


def test_the_multi_collection_retriever(store: Any) -> None:
    multi = lc.MultiCollectionRetriever(
        collections=[lc.CollectionSpec(retriever=retriever(store), name="kb")], policy=POLICY
    )
    assert ids(multi.invoke(QUESTION, filters={"doc_type": "public"})) == PUBLIC_SECTIONS


def test_the_json_field_itself_is_refused(store: Any) -> None:
    with pytest.raises(UnsafeFilterError, match="'metadata'"):
        retriever(store, filters={"metadata": "x"})


def reopened(folder: Path, db: str, **kwargs: Any) -> Any:
    return lc.existing_milvus_store(
        str(folder / db), "leaks", embeddings=SameEmbeddings(), **kwargs
    )


def test_a_metadata_field_the_collection_does_not_hold_is_refused(store: Any, folder: Path) -> None:
    """Every search failed with langchain-milvus's bare ``KeyError: 'meta'``."""
    with pytest.raises(ValueError, match=r"no JSON field 'meta'.*\['metadata'\]"):
        reopened(folder, "json.db", metadata_field="meta")


def test_a_dynamic_collection_opened_as_one_json_field_is_refused(folder: Path) -> None:
    """Its filters were written inside a field it does not have: every filtered call
    returned nothing, as if nothing matched."""
    lc.milvus_from_documents(
        documents(), SameEmbeddings(), uri=str(folder / "dynamic.db"), collection_name="leaks"
    )
    with pytest.raises(ValueError, match=r"no JSON field 'metadata'.*dynamic field"):
        reopened(folder, "dynamic.db", metadata_field="metadata", enable_dynamic_field=False)


def test_the_json_collection_opened_without_its_field_names_the_fix(
    store: Any, folder: Path
) -> None:
    plain = reopened(folder, "json.db")
    with pytest.raises(UnsafeFilterError, match=r"metadata_field='metadata'"):
        retriever(plain, filters={"doc_type": "public"})


# Metadata keys declared as fields of the collection --------------------------------------------
@pytest.fixture(scope="module")
def declared(folder: Path) -> Any:
    from pymilvus import DataType

    tags = {"element_type": DataType.VARCHAR, "max_capacity": 8, "max_length": 64}
    return lc.milvus_from_documents(
        documents(),
        SameEmbeddings(),
        uri=str(folder / "declared.db"),
        collection_name="leaks",
        enable_dynamic_field=False,
        metadata_schema={"tags": {"dtype": DataType.ARRAY, "kwargs": tags}},
    )


@pytest.mark.parametrize(
    "filters",
    [{"tags": {"$contains": "public"}}, {"tags": {"$any": ["public", "x"]}}],
    ids=["contains", "any"],
)
def test_list_tests_on_a_declared_array_field(declared: Any, filters: Any) -> None:
    """Milvus Lite failed on ``tags like "%public%"`` with an internal assertion
    (``index out of range``): a declared ARRAY field is never a string."""
    assert ids(retriever(declared, filters=filters).invoke(QUESTION)) == PUBLIC_SECTIONS


@pytest.mark.parametrize(
    ("filters", "refused"),
    [
        ({"tags": {"$ne": "x"}}, "!= on 'tags', a declared ARRAY field"),
        ({"doc_type": {"$contains": "ubli"}}, "contains on 'doc_type', a declared scalar field"),
        ({"doc_type": 1}, "== 1 on 'doc_type', a declared field of the collection holding text"),
        ({"doc_type": {"$gt": 1}}, "> 1 on 'doc_type', .* holding texts"),
        ({"doc_type": {"$in": [1, 2]}}, "in 1 on 'doc_type'"),
        ({"tags": {"$contains": 1}}, "contains 1 on 'tags', .* holding texts"),
    ],
    ids=["eq-on-array", "contains-on-scalar", "number-on-text", "gt", "in", "number-in-array"],
)
def test_a_condition_milvus_cannot_run_on_a_declared_field_is_refused(
    declared: Any, filters: Any, refused: str
) -> None:
    """Each failed with pymilvus's raw ``Invalid expr`` (a value of another type than the
    declared field's too)."""
    with pytest.raises(UnsafeFilterError, match=refused):
        retriever(declared, filters=filters)
    with pytest.raises(UnsafeFilterError, match=refused):
        retriever(declared).invoke(QUESTION, filters=filters)


def test_a_new_collection_asked_for_a_metadata_field_keeps_it(folder: Path) -> None:
    """langchain-milvus ignores ``metadata_field`` where dynamic fields are on, which
    ``milvus_from_documents`` turned on for every new collection: the collection asked for
    one JSON field kept its metadata in its dynamic field, which the stores of the apps that
    read it with ``metadata_field`` could not read."""
    made = lc.milvus_from_documents(
        documents(),
        SameEmbeddings(),
        uri=str(folder / "asked.db"),
        collection_name="leaks",
        metadata_field="metadata",
    )
    assert made.client.describe_collection("leaks")["enable_dynamic_field"] is False
    assert ids(retriever(made, filters={"doc_type": "public"}).invoke(QUESTION)) == PUBLIC_SECTIONS
    reread = reopened(folder, "asked.db", metadata_field="metadata")
    assert ids(retriever(reread, filters={"doc_type": "public"}).invoke(QUESTION)) == (
        PUBLIC_SECTIONS
    )


def test_the_json_collection_opened_without_its_field_names_only_the_fix_that_fits(
    store: Any, folder: Path
) -> None:
    """The error first said to open the store with enable_dynamic_field=True, which a
    collection with no dynamic field cannot use."""
    plain = reopened(folder, "json.db")
    with pytest.raises(UnsafeFilterError, match=r"has no dynamic field") as raised:
        retriever(plain, filters={"doc_type": "public"})
    assert "enable_dynamic_field=True" not in str(raised.value)
