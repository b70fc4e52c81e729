"""Every rule of the policy, through ThresholdedRetriever over InMemoryVectorStore."""

from __future__ import annotations

import copy

import pytest
from langchain_core.documents import Document

from langchain_thresholded import DropReason, Report, ThresholdedRetriever
from thresholded import RetrievalPolicy, UncalibratedModelError, metadata_keys

Q = "the question"

NO_LIMITS = {"max_per_source": None, "max_chars": None}


def policy(**fields: object) -> RetrievalPolicy:
    return RetrievalPolicy(**{"min_similarity": 0.5, "top_k": 10, **NO_LIMITS, **fields})


def ids(docs: list[Document] | tuple[Document, ...]) -> list[str | None]:
    return [d.id for d in docs]


def reasons(report: Report[Document]) -> dict[str, str]:
    return {d.id: d.reason.value for d in report.dropped}


def test_floor_drops_below_and_keeps_equal(corpus):
    c = corpus([("high", 0.75), ("equal", 0.5), ("below", 0.4375), ("low", 0.125)])
    report = ThresholdedRetriever(vectorstore=c.store, policy=policy()).retrieve_with_report(Q)
    assert ids(report.kept) == ["high", "equal"]
    assert [d.metadata["similarity"] for d in report.kept] == [0.75, 0.5]
    assert reasons(report) == {"below": "below_threshold", "low": "below_threshold"}
    assert {d.id: d.similarity for d in report.dropped} == {"below": 0.4375, "low": 0.125}
    assert not report.nothing_matched


def test_results_are_in_score_order_with_cosine_marks(corpus):
    c = corpus([("c", 0.5), ("a", 0.875), ("b", 0.625)])
    docs = ThresholdedRetriever(vectorstore=c.store, policy=policy()).invoke(Q)
    assert ids(docs) == ["a", "b", "c"]
    for doc in docs:
        assert doc.metadata[metadata_keys.SCORE_KIND] == "cosine"
        assert metadata_keys.ATTACHED_TO not in doc.metadata


def test_nothing_matched_when_everything_is_below_the_floor(corpus):
    c = corpus([("a", 0.25), ("b", 0.125)])
    report = ThresholdedRetriever(vectorstore=c.store, policy=policy()).retrieve_with_report(Q)
    assert report.kept == () and report.items == []
    assert report.nothing_matched
    assert report.drop_counts() == {"below_threshold": 2}


def test_floor_zero_keeps_everything(corpus):
    c = corpus([("a", 0.25), ("b", -0.5)])
    docs = ThresholdedRetriever(vectorstore=c.store, policy=policy(min_similarity=0)).invoke(Q)
    assert ids(docs) == ["a", "b"]
    assert docs[1].metadata["similarity"] == -0.5


def test_source_cap_uses_the_source_key(corpus):
    c = corpus(
        [
            ("a1", 0.875, {"source": "A"}),
            ("a2", 0.75, {"source": "A"}),
            ("a3", 0.6875, {"source": "A"}),
            ("b1", 0.625, {"source": "B"}),
        ]
    )
    report = ThresholdedRetriever(
        vectorstore=c.store, policy=policy(max_per_source=2)
    ).retrieve_with_report(Q)
    assert ids(report.kept) == ["a1", "a2", "b1"]
    assert reasons(report) == {"a3": "source_cap"}


def test_source_cap_with_another_source_key(corpus):
    c = corpus([("a1", 0.875, {"file": "A"}), ("a2", 0.75, {"file": "A"}), ("b", 0.625)])
    retriever = ThresholdedRetriever(
        vectorstore=c.store, policy=policy(max_per_source=1, source_key="file")
    )
    assert ids(retriever.invoke(Q)) == ["a1", "b"]


def test_without_a_source_each_document_is_its_own_source(corpus):
    c = corpus([("a", 0.875), ("b", 0.75), ("c", 0.625)])
    docs = ThresholdedRetriever(vectorstore=c.store, policy=policy(max_per_source=1)).invoke(Q)
    assert ids(docs) == ["a", "b", "c"]


def test_budget_skips_what_overflows_and_keeps_looking(corpus):
    c = corpus(
        [
            ("a", 0.875, {}, "a" * 40),
            ("b", 0.75, {}, "b" * 40),
            ("c", 0.625, {}, "c" * 40),
            ("short", 0.5625, {}, "tiny"),
        ]
    )
    report = ThresholdedRetriever(
        vectorstore=c.store, policy=policy(max_chars=85)
    ).retrieve_with_report(Q)
    # a (40) + b (40) = 80; c (40) would overflow; "tiny" (4) still fits
    assert ids(report.kept) == ["a", "b", "short"]
    assert reasons(report) == {"c": "budget"}


def test_budget_counts_page_content_characters(corpus):
    c = corpus([("a", 0.875, {}, "x" * 50), ("b", 0.75, {}, "y" * 50)])
    retriever = ThresholdedRetriever(vectorstore=c.store, policy=policy(max_chars=100))
    assert ids(retriever.invoke(Q)) == ["a", "b"]
    assert ids(retriever.invoke(Q, max_chars=99)) == ["a"]


def test_top_k_is_applied_last(corpus):
    c = corpus([("a", 0.875), ("b", 0.75), ("c", 0.625), ("d", 0.25)])
    report = ThresholdedRetriever(vectorstore=c.store, policy=policy(top_k=2)).retrieve_with_report(
        Q
    )
    assert ids(report.kept) == ["a", "b"]
    assert reasons(report) == {"c": "beyond_top_k", "d": "below_threshold"}


def test_rules_apply_in_order_floor_cap_budget_top_k(corpus):
    c = corpus(
        [
            ("a1", 0.9375, {"source": "A"}, "a1" * 5),
            ("a2", 0.875, {"source": "A"}, "a2" * 5),
            ("big", 0.8125, {"source": "B"}, "B" * 100),
            ("c", 0.75, {"source": "C"}, "c" * 10),
            ("d", 0.6875, {"source": "D"}, "d" * 10),
            ("low", 0.375, {"source": "E"}, "e" * 10),
        ]
    )
    retriever = ThresholdedRetriever(
        vectorstore=c.store, policy=policy(max_per_source=1, max_chars=50, top_k=2)
    )
    report = retriever.retrieve_with_report(Q)
    assert ids(report.kept) == ["a1", "c"]
    assert reasons(report) == {
        "low": "below_threshold",
        "a2": "source_cap",
        "big": "budget",
        "d": "beyond_top_k",
    }


def test_over_fetch_asks_the_store_for_top_k_times_over_fetch(corpus, monkeypatch):
    c = corpus([(f"d{i}", 0.5 + i / 16) for i in range(8)])
    seen: list[int] = []
    original = type(c.store).similarity_search_with_score_by_vector

    def spy(self, embedding, k=4, **kwargs):
        seen.append(k)
        return original(self, embedding, k=k, **kwargs)

    monkeypatch.setattr(type(c.store), "similarity_search_with_score_by_vector", spy)
    retriever = ThresholdedRetriever(vectorstore=c.store, policy=policy(top_k=2, over_fetch=3))
    report = retriever.retrieve_with_report(Q)
    assert seen == [6]
    assert len(report.kept) == 2
    assert len(report.dropped) == 4


def test_policy_top_k_is_the_default_k_and_a_call_s_k_replaces_it(corpus):
    c = corpus([("a", 0.875), ("b", 0.75), ("c", 0.625)])
    retriever = ThresholdedRetriever(vectorstore=c.store, policy=policy(top_k=1))
    assert ids(retriever.invoke(Q)) == ["a"]
    assert ids(retriever.invoke(Q, k=2)) == ["a", "b"]


def test_the_policy_floor_is_the_floor(corpus):
    c = corpus([("a", 0.875), ("b", 0.625)])
    retriever = ThresholdedRetriever(vectorstore=c.store, policy=policy(min_similarity=0.75))
    assert ids(retriever.invoke(Q)) == ["a"]


@pytest.mark.parametrize(
    "field",
    [{"k": 1}, {"min_similarity": 0.75}, {"min_top_similarity": 0.5}, {"score_mode": "rescore"}],
)
def test_the_policy_s_fields_and_score_mode_are_refused_at_construction(corpus, field):
    c = corpus([("a", 0.875)])
    with pytest.raises(TypeError, match=f"unexpected keyword argument.*{next(iter(field))}"):
        ThresholdedRetriever(vectorstore=c.store, policy=policy(), **field)


def test_an_uncalibrated_floor_is_an_error(corpus):
    c = corpus([("a", 0.875)])
    with pytest.raises(UncalibratedModelError):  # at construction, as in LlamaIndex
        ThresholdedRetriever(vectorstore=c.store, policy=RetrievalPolicy())


def test_the_query_is_embedded_once_and_no_document_is_re_embedded(corpus):
    c = corpus([("a", 0.875), ("b", 0.25)])
    ThresholdedRetriever(vectorstore=c.store, policy=policy()).invoke(Q)
    assert c.embeddings.query_calls == [Q]
    assert c.embeddings.document_calls == []


def test_store_objects_are_never_mutated(corpus):
    c = corpus([("a", 0.875, {"source": "A"}), ("b", 0.25, {"source": "B"})])
    before = copy.deepcopy(c.store.store)
    report = ThresholdedRetriever(vectorstore=c.store, policy=policy()).retrieve_with_report(Q)
    report.kept[0].metadata["written-by-caller"] = True
    assert c.store.store == before
    assert report.kept[0] is not c.documents["a"]


def test_stale_marks_on_stored_documents_are_replaced(corpus):
    stale = {
        "similarity": 0.99,
        "score_kind": "rrf",
        "attached_to": "x",
        "attached_role": "neighbour",
    }
    c = corpus([("a", 0.625, stale)])
    (doc,) = ThresholdedRetriever(vectorstore=c.store, policy=policy()).invoke(Q)
    assert doc.metadata["similarity"] == 0.625
    assert doc.metadata["score_kind"] == "cosine"
    assert "attached_to" not in doc.metadata and "attached_role" not in doc.metadata


def test_report_is_per_call_and_not_stored(corpus):
    c = corpus([("a", 0.875), ("b", 0.25)])
    retriever = ThresholdedRetriever(vectorstore=c.store, policy=policy())
    first = retriever.retrieve_with_report(Q, min_similarity=0.9)
    second = retriever.retrieve_with_report(Q)
    assert first.nothing_matched and not second.nothing_matched
    assert first.min_similarity == 0.9 and second.min_similarity == 0.5
    assert not any(isinstance(v, Report) for v in vars(retriever).values())


def test_report_items_are_what_invoke_returns(corpus):
    c = corpus([("a", 0.875), ("b", 0.625), ("c", 0.25)])
    retriever = ThresholdedRetriever(vectorstore=c.store, policy=policy())
    report = retriever.retrieve_with_report(Q)
    assert report.items == retriever.invoke(Q)
    assert report.dropped_for(DropReason.BELOW_THRESHOLD)[0].id == "c"
    assert report.dropped[0].similarity == 0.25
    assert "similarity" not in report.dropped[0].item.metadata  # the store's, unmarked
    assert "kept 2" in report.summary()
