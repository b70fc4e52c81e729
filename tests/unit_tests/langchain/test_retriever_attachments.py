"""Neighbours and parent summaries: only for kept documents, one batch per hop, never duplicated."""

from __future__ import annotations

import copy
from collections.abc import Sequence

from langchain_core.documents import Document
from langchain_core.stores import InMemoryStore

from langchain_thresholded import ThresholdedRetriever
from thresholded import RetrievalPolicy

Q = "the question"
POLICY = RetrievalPolicy(min_similarity=0.5, top_k=10, max_per_source=None, max_chars=None)
CHAIN = ["s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8"]


class CountingStore(InMemoryStore):
    """Records every batch asked of it."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []
        self.async_batches: list[list[str]] = []

    def mget(self, keys: Sequence[str]) -> list[Document | None]:
        self.batches.append(list(keys))
        return super().mget(keys)

    async def amget(self, keys: Sequence[str]) -> list[Document | None]:
        self.async_batches.append(list(keys))
        return super().mget(keys)


def linked(doc_id: str, **extra: object) -> dict[str, object]:
    i = CHAIN.index(doc_id)
    meta: dict[str, object] = {"source": "chain", **extra}
    if i > 0:
        meta["prev_id"] = CHAIN[i - 1]
    if i + 1 < len(CHAIN):
        meta["next_id"] = CHAIN[i + 1]
    return meta


def counting_docstore(ids: Sequence[str] = CHAIN, **parent: str) -> CountingStore:
    store = CountingStore()
    for doc_id in ids:
        meta = linked(doc_id, **({"parent_id": parent["parent"]} if parent else {}))
        store.mset([(doc_id, Document(id=doc_id, page_content=f"text of {doc_id}", metadata=meta))])
    return store


def roles(docs: Sequence[Document]) -> list[tuple[str | None, str | None, str | None]]:
    return [(d.id, d.metadata.get("attached_role"), d.metadata.get("attached_to")) for d in docs]


def test_neighbours_are_attached_for_kept_documents_only(corpus):
    c = corpus([("s4", 0.75, linked("s4")), ("s1", 0.25, linked("s1"))])
    docstore = counting_docstore()
    retriever = ThresholdedRetriever(vectorstore=c.store, policy=POLICY, docstore=docstore)
    report = retriever.retrieve_with_report(Q)
    assert [d.id for d in report.kept] == ["s4"]
    assert roles(report.attached) == [("s3", "neighbour", "s4"), ("s5", "neighbour", "s4")]
    fetched = {k for batch in docstore.batches for k in batch}
    assert fetched == {"s3", "s5"}  # nothing for the dropped s1


def test_attachments_have_no_score_and_follow_their_section(corpus):
    c = corpus([("s4", 0.75, linked("s4"))])
    docs = ThresholdedRetriever(
        vectorstore=c.store, policy=POLICY, docstore=counting_docstore()
    ).invoke(Q)
    assert [d.id for d in docs] == ["s4", "s3", "s5"]
    for attached in docs[1:]:
        assert "similarity" not in attached.metadata
        assert "score_kind" not in attached.metadata


def test_window_walks_one_batch_per_hop(corpus):
    c = corpus([("s4", 0.75, linked("s4"))])
    docstore = counting_docstore()
    retriever = ThresholdedRetriever(
        vectorstore=c.store, policy=POLICY, docstore=docstore, neighbours=2, parent_summaries=False
    )
    docs = retriever.invoke(Q)
    assert [d.id for d in docs] == ["s4", "s2", "s3", "s5", "s6"]  # reading order around s4
    assert docstore.batches == [["s3", "s5"], ["s2", "s6"]]


def test_parent_summary_is_fetched_in_the_first_hop(corpus):
    c = corpus([("s4", 0.75, linked("s4", parent_id="summary")), ("s7", 0.625, linked("s7"))])
    docstore = counting_docstore()
    docstore.mset([("summary", Document(page_content="what the section says"))])
    retriever = ThresholdedRetriever(vectorstore=c.store, policy=POLICY, docstore=docstore)
    report = retriever.retrieve_with_report(Q)
    assert roles(report.attached) == [
        ("summary", "parent_summary", "s4"),
        ("s3", "neighbour", "s4"),
        ("s5", "neighbour", "s4"),
        ("s6", "neighbour", "s7"),
        ("s8", "neighbour", "s7"),
    ]
    assert len(docstore.batches) == 1
    assert sorted(docstore.batches[0]) == ["s3", "s5", "s6", "s8", "summary"]


def test_a_shared_parent_is_attached_once(corpus):
    c = corpus(
        [("s2", 0.75, linked("s2", parent_id="p")), ("s6", 0.625, linked("s6", parent_id="p"))]
    )
    docstore = counting_docstore()
    docstore.mset([("p", Document(page_content="summary"))])
    retriever = ThresholdedRetriever(
        vectorstore=c.store, policy=POLICY, docstore=docstore, neighbours=0
    )
    report = retriever.retrieve_with_report(Q)
    assert roles(report.attached) == [("p", "parent_summary", "s2")]
    assert docstore.batches == [["p"]]


def test_neighbours_never_duplicate_kept_or_attached_documents(corpus):
    c = corpus(
        [("s3", 0.75, linked("s3")), ("s4", 0.6875, linked("s4")), ("s6", 0.625, linked("s6"))]
    )
    docs = ThresholdedRetriever(
        vectorstore=c.store, policy=POLICY, docstore=counting_docstore()
    ).invoke(Q)
    ids = [d.id for d in docs]
    assert len(ids) == len(set(ids))
    assert ids == ["s3", "s4", "s6", "s2", "s5", "s7"]
    assert roles(docs[3:]) == [
        ("s2", "neighbour", "s3"),
        ("s5", "neighbour", "s4"),
        ("s7", "neighbour", "s6"),
    ]


def test_a_dropped_candidate_can_come_back_as_a_neighbour_without_a_score(corpus):
    c = corpus([("s4", 0.75, linked("s4")), ("s5", 0.25, linked("s5"))])
    report = ThresholdedRetriever(
        vectorstore=c.store, policy=POLICY, docstore=counting_docstore()
    ).retrieve_with_report(Q)
    assert [d.id for d in report.kept] == ["s4"]
    assert ("s5", "neighbour", "s4") in roles(report.attached)
    assert {d.id: d.reason.value for d in report.dropped} == {"s5": "below_threshold"}


def test_missing_ids_in_the_docstore_are_skipped(corpus):
    c = corpus([("s4", 0.75, linked("s4"))])
    docstore = counting_docstore(ids=["s3"])
    docs = ThresholdedRetriever(vectorstore=c.store, policy=POLICY, docstore=docstore).invoke(Q)
    assert [d.id for d in docs] == ["s4", "s3"]


def test_attachment_budget_applies_to_attachments_only(corpus):
    c = corpus([("s4", 0.75, linked("s4"))])
    policy = POLICY.model_copy(update={"max_attachment_chars": 15, "max_chars": 2})
    report = ThresholdedRetriever(
        vectorstore=c.store, policy=policy, docstore=counting_docstore()
    ).retrieve_with_report(Q)
    assert [d.id for d in report.kept] == ["s4"]  # 2 characters: within max_chars
    assert [d.id for d in report.attached] == ["s3"]  # 10 characters; s5 would make 20
    assert report.drop_counts() == {"attachment_budget": 1}


def test_no_docstore_means_no_attachments(corpus):
    c = corpus([("s4", 0.75, linked("s4"))])
    assert [d.id for d in ThresholdedRetriever(vectorstore=c.store, policy=POLICY).invoke(Q)] == [
        "s4"
    ]


def test_nothing_kept_means_no_docstore_call(corpus):
    c = corpus([("s4", 0.25, linked("s4"))])
    docstore = counting_docstore()
    docs = ThresholdedRetriever(vectorstore=c.store, policy=POLICY, docstore=docstore).invoke(Q)
    assert docs == [] and docstore.batches == []


def test_docstore_documents_are_never_mutated(corpus):
    c = corpus([("s4", 0.75, linked("s4"))])
    docstore = counting_docstore()
    before = copy.deepcopy(docstore.store)
    docs = ThresholdedRetriever(vectorstore=c.store, policy=POLICY, docstore=docstore).invoke(Q)
    assert docs[1].metadata["attached_to"] == "s4"
    assert docstore.store == before
    assert all("attached_to" not in d.metadata for d in docstore.store.values())


def test_custom_link_keys(corpus):
    c = corpus([("x", 0.75, {"before": "w", "up": "top"})])
    docstore = InMemoryStore()
    docstore.mset(
        [
            ("w", Document(id="w", page_content="previous")),
            ("top", Document(id="top", page_content="summary")),
        ]
    )
    retriever = ThresholdedRetriever(
        vectorstore=c.store,
        policy=POLICY,
        docstore=docstore,
        prev_id_key="before",
        next_id_key="after",
        parent_id_key="up",
    )
    assert roles(retriever.invoke(Q)[1:]) == [
        ("top", "parent_summary", "x"),
        ("w", "neighbour", "x"),
    ]


async def test_async_uses_amget_once_per_hop(corpus):
    c = corpus([("s4", 0.75, linked("s4"))])
    docstore = counting_docstore()
    retriever = ThresholdedRetriever(
        vectorstore=c.store, policy=POLICY, docstore=docstore, neighbours=2
    )
    docs = await retriever.ainvoke(Q)
    assert [d.id for d in docs] == ["s4", "s2", "s3", "s5", "s6"]
    assert docstore.batches == []
    assert docstore.async_batches == [["s3", "s5"], ["s2", "s6"]]
