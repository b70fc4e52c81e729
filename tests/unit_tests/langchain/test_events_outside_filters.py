"""The ``thresholded_selection`` event, streamed by ``astream_events`` to whoever consumes it
(often the end user), counts the sections outside the call's filters and never names them:
their ids and cosines would tell of documents the filters exclude. Nor does the report. The
sections the retriever's own filters hold back are not even counted."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.documents import Document
from langchain_core.stores import InMemoryStore

from langchain_thresholded import ThresholdedRetriever
from langchain_thresholded.events import EVENT_NAME
from thresholded import RetrievalPolicy

QUERY = "the question"
POLICY = RetrievalPolicy(min_similarity=0.5, top_k=5, max_per_source=None, max_chars=None)
PUBLIC = {"doc_type": "public"}


def retriever(corpus, filters: Any = PUBLIC) -> ThresholdedRetriever:
    found = corpus(
        [
            ("pub", 0.875, {"doc_type": "public", "next_id": "secret"}),
            ("secret", 0.75, {"doc_type": "internal", "prev_id": "pub"}),
        ]
    )
    docstore = InMemoryStore()
    docstore.mset(
        [
            (i, Document(id=i, page_content=d.page_content, metadata=d.metadata))
            for i, d in found.documents.items()
        ]
    )
    return ThresholdedRetriever(
        vectorstore=found.store,
        policy=POLICY,
        docstore=docstore,
        neighbours=1,
        filters=filters,
    )


async def test_the_streamed_event_counts_the_sections_outside_the_filters(corpus):
    """Of the sections the call's filters exclude; those the retriever's own hold back are
    not counted at all."""
    chosen = retriever(corpus, filters=None)
    events = [
        e["data"]
        async for e in chosen.astream_events(QUERY, version="v2", filters=PUBLIC)
        if e["event"] == "on_custom_event" and e["name"] == EVENT_NAME
    ]
    (data,) = events
    assert [k["id"] for k in data["kept"]] == ["pub"]
    assert "secret" not in json.dumps(data)
    assert data["drop_counts"] == {"outside_filters": 1}
    report = chosen.retrieve_with_report(QUERY, filters=PUBLIC)
    assert (report.dropped, report.outside_filters) == ((), 1)
    assert "secret" not in report.explain()
    assert retriever(corpus).retrieve_with_report(QUERY).outside_filters == 0  # held back


def test_the_not_found_warning_names_no_link_of_a_section_outside_the_filters(corpus, caplog):
    """Past the first hop, the walk reads the links of sections it fetched, before the
    filters judge them: an internal section's link to a missing id is its metadata."""
    found = corpus(
        [
            ("pub", 0.875, {"doc_type": "public", "next_id": "secret"}),
            ("secret", 0.25, {"doc_type": "internal", "prev_id": "pub", "next_id": "ghost-42"}),
        ]
    )
    docstore = InMemoryStore()
    docstore.mset(
        [
            (i, Document(id=i, page_content=d.page_content, metadata=d.metadata))
            for i, d in found.documents.items()
        ]
    )
    chosen = ThresholdedRetriever(
        vectorstore=found.store,
        policy=POLICY,
        docstore=docstore,
        neighbours=2,
        filters={"doc_type": "public"},
    )
    with caplog.at_level("WARNING", logger="thresholded.attachments"):
        report = chosen.retrieve_with_report(QUERY)
    assert (report.outside_filters, report.dropped) == (0, ())  # held back: not counted
    assert "ghost-42" not in caplog.text
