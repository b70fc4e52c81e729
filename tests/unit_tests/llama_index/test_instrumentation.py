"""What one retrieval tells the outside: instrumentation events, callbacks and log lines."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from llama_index.core.callbacks import CallbackManager, CBEventType, LlamaDebugHandler
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.base import BaseEvent
from pydantic import PrivateAttr

from llama_index_thresholded import (
    CollectionSpec,
    MultiCollectionRetriever,
    ThresholdedRetriever,
    ThresholdSelectionEvent,
)


class Recorder(BaseEventHandler):
    _events: list[Any] = PrivateAttr(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "Recorder"

    @property
    def selections(self) -> list[ThresholdSelectionEvent]:
        return [e for e in self._events if isinstance(e, ThresholdSelectionEvent)]

    def handle(self, event: Any, **kwargs: Any) -> None:
        self._events.append(event)


def ids(sections: list[dict[str, Any]]) -> list[str]:
    return [section["id"] for section in sections]


@pytest.fixture
def recorder():
    root = get_dispatcher()
    handler = Recorder()
    root.add_event_handler(handler)
    yield handler
    root.event_handlers.remove(handler)


@pytest.fixture
def index(kit):
    nodes = [
        kit.section("a1", 0.9, source="A"),
        kit.section("a2", 0.8, axis=2, source="A"),
        kit.section("a3", 0.7, axis=3, source="A"),
        kit.section("b1", 0.3, axis=4, source="B"),
    ]
    kit.link_chain(nodes[:2])
    return kit.build_index(nodes, kit.embedding())


def policy(kit):
    return kit.policy(min_similarity=0.5, max_per_source=2)


def test_an_event_handler_receives_the_selection_with_drop_reasons(kit, index, recorder):
    retriever = ThresholdedRetriever(index, policy(kit), neighbours=1, parent_summaries=False)
    retriever.retrieve(kit.QUESTION)

    assert len(recorder.selections) == 1
    event = recorder.selections[0]
    assert event.class_name() == "ThresholdSelectionEvent"
    assert event.query == kit.QUESTION
    assert event.min_similarity == 0.5
    assert event.score_kind == "cosine"
    assert ids(event.kept) == ["a1", "a2"]
    assert ids(event.attached) == []  # a1 and a2 are each other's neighbours, both kept
    by_id = {d["id"]: d for d in event.dropped}
    assert {i: d["reason"] for i, d in by_id.items()} == {
        "a3": "source_cap",
        "b1": "below_threshold",
    }
    assert by_id["b1"]["similarity"] == pytest.approx(0.3, abs=1e-9)


@pytest.mark.parametrize("multi", [False, True])
def test_the_event_carries_the_langchain_events_data_key_for_key(kit, index, recorder, multi):
    """Same concept, same name: the event said ``query_str``, ``kept_ids`` and
    ``attached_ids`` where LangChain's ``thresholded_selection`` data says ``query``,
    ``kept`` and ``attached``, and it lacked ``drop_counts`` and ``passed_through``."""
    if multi:
        retriever = MultiCollectionRetriever([CollectionSpec(index, name="kb")], policy(kit))
    else:
        retriever = ThresholdedRetriever(index, policy(kit), neighbours=1)
    data = retriever.retrieve_with_report(kit.QUESTION).to_event_data()
    (event,) = recorder.selections
    own = set(ThresholdSelectionEvent.model_fields) - set(BaseEvent.model_fields)
    fields = {name: getattr(event, name) for name in own}
    assert {k: v for k, v in fields.items() if k in data} == data
    assert set(fields) - set(data) == (set() if multi else {"collections", "partial"})
    assert data["kept"] and data["dropped"] and ("collections" in data) == multi


def test_each_call_emits_its_own_event(kit, index, recorder):
    retriever = ThresholdedRetriever(index, policy(kit), neighbours=0)
    retriever.retrieve_with_report(kit.QUESTION)
    retriever.retrieve_with_report(kit.ORTHOGONAL)
    assert [e.query for e in recorder.selections] == [kit.QUESTION, kit.ORTHOGONAL]
    assert ids(recorder.selections[1].kept) == []
    assert {d["reason"] for d in recorder.selections[1].dropped} == {"below_threshold"}


def test_the_event_says_what_emptied_a_call_and_which_drop_came_back_attached(kit, index, recorder):
    """As the LangChain event's data: ``nothing_matched``, ``emptied_by``, and a dropped
    section in the result as a kept one's neighbour marked ``attached_as``."""
    one_each = kit.policy(min_similarity=0.5, max_per_source=1)
    retriever = ThresholdedRetriever(index, one_each, neighbours=1, parent_summaries=False)
    retriever.retrieve(kit.QUESTION)
    retriever.retrieve(kit.ORTHOGONAL)
    answered, emptied = recorder.selections
    assert (answered.nothing_matched, answered.emptied_by) == (False, None)
    assert ids(answered.kept) == ["a1"] and ids(answered.attached) == ["a2"]
    by_id = {d["id"]: d for d in answered.dropped}
    assert by_id["a2"]["reason"] == "source_cap"
    assert by_id["a2"]["attached_as"] == "neighbour"
    assert "attached_as" not in by_id["a3"]
    assert (emptied.nothing_matched, emptied.emptied_by) == (True, "floor")


def test_the_callback_manager_sees_the_dropped_candidates(kit, index):
    debug = LlamaDebugHandler()
    retriever = ThresholdedRetriever(
        index, policy(kit), neighbours=0, callback_manager=CallbackManager([debug])
    )
    retriever.retrieve(kit.QUESTION)
    payloads = [
        end.payload
        for _, end in debug.get_event_pairs(CBEventType.RETRIEVE)
        if end.payload and "thresholded_dropped" in end.payload
    ]
    assert len(payloads) == 1
    dropped = payloads[0]["thresholded_dropped"]
    assert {d["id"]: d["reason"] for d in dropped} == {
        "a3": "source_cap",
        "b1": "below_threshold",
    }
    assert payloads[0]["thresholded_min_similarity"] == 0.5


def test_a_multi_collection_call_names_its_collections_in_the_callback_payload(kit, index):
    debug = LlamaDebugHandler()
    retriever = MultiCollectionRetriever(
        [CollectionSpec(index, name="kb")],
        policy(kit),
        neighbours=0,
        callback_manager=CallbackManager([debug]),
    )
    report = retriever.retrieve_with_report(kit.QUESTION)
    (payload,) = [
        end.payload
        for _, end in debug.get_event_pairs(CBEventType.RETRIEVE)
        if end.payload and "thresholded_dropped" in end.payload
    ]
    assert payload["thresholded_collections"] == [s.describe() for s in report.collections]
    assert payload["thresholded_collections"][0].startswith("kb: ok")
    assert {(d["collection"], d["id"], d["reason"]) for d in payload["thresholded_dropped"]} == {
        ("kb", "a3", "source_cap"),
        ("kb", "b1", "below_threshold"),
    }
    single = LlamaDebugHandler()
    ThresholdedRetriever(
        index, policy(kit), neighbours=0, callback_manager=CallbackManager([single])
    ).retrieve(kit.QUESTION)
    (_, end), *_ = single.get_event_pairs(CBEventType.RETRIEVE)
    assert "thresholded_collections" not in end.payload
    assert all("collection" not in d for d in end.payload["thresholded_dropped"])


def test_a_debug_line_counts_kept_attached_and_dropped(kit, index, caplog):
    retriever = ThresholdedRetriever(index, policy(kit), neighbours=0)
    with caplog.at_level(logging.DEBUG, logger="thresholded.engine"):
        retriever.retrieve(kit.QUESTION)
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.name == "thresholded.engine" and r.levelno == logging.DEBUG
    ]
    assert len(lines) == 1
    assert lines[0].startswith("kept 2, attached 0, dropped")
    assert "'source_cap': 1" in lines[0]
    assert "'below_threshold': 1" in lines[0]
    assert "floor 0.5" in lines[0]


def test_report_explain_lists_kept_attached_and_dropped(kit, index):
    retriever = ThresholdedRetriever(index, policy(kit), neighbours=0)
    text = retriever.retrieve_with_report(kit.QUESTION).explain()
    assert "floor 0.5" in text
    assert text.count("kept ") == 2
    assert "source_cap" in text
    assert "below_threshold" in text
    nothing = retriever.retrieve_with_report(kit.ORTHOGONAL).explain()
    assert "nothing matched" in nothing


def test_events_count_the_sections_outside_the_filters_and_never_name_them(kit, recorder):
    """An event may reach the end user: the id and cosine of a section the call's filters
    exclude (here a neighbour) would tell of it. The report does not name it either."""
    from llama_index.core.vector_stores import MetadataFilter, MetadataFilters

    nodes = [
        kit.section("public", 0.9, doc_type="public"),
        kit.section("internal", 0.8, axis=2, doc_type="internal"),
    ]
    kit.link_chain(nodes)
    index = kit.build_index(nodes, kit.embedding())
    debug = LlamaDebugHandler()
    retriever = ThresholdedRetriever(
        index,
        policy(kit),
        neighbours=1,
        callback_manager=CallbackManager([debug]),
    )
    public = MetadataFilters(filters=[MetadataFilter(key="doc_type", value="public")])
    report = retriever.retrieve_with_report(kit.QUESTION, filters=public)
    assert (report.dropped, report.outside_filters) == ((), 1)
    assert "internal" not in report.explain()
    (event,) = recorder.selections
    assert ids(event.kept) == ["public"]
    assert (event.dropped, event.outside_filters) == ([], 1)
    (_, end), *_ = debug.get_event_pairs(CBEventType.RETRIEVE)
    assert end.payload["thresholded_dropped"] == []
    assert end.payload["thresholded_outside_filters"] == 1


def test_the_events_of_a_call_nobody_hears_are_not_built(kit, index, monkeypatch):
    from llama_index_thresholded import events
    from llama_index_thresholded import retriever as retriever_module

    assert not events.is_heard(retriever_module.dispatcher)

    def unheard(**_: Any) -> None:
        raise AssertionError("an event nobody hears was built")

    monkeypatch.setattr(events, "ThresholdSelectionEvent", unheard)
    monkeypatch.setattr(events, "RetrievalStartEvent", unheard)
    monkeypatch.setattr(events, "RetrievalEndEvent", unheard)
    retriever = ThresholdedRetriever(index, policy(kit), neighbours=0)
    assert [n.node.node_id for n in retriever.retrieve(kit.QUESTION)] == ["a1", "a2"]


def test_a_handler_on_the_retrievers_own_dispatcher_hears_each_event_once(kit, index):
    from llama_index_thresholded import events
    from llama_index_thresholded import retriever as retriever_module

    handler = Recorder()
    own = retriever_module.dispatcher
    own.add_event_handler(handler)
    try:
        assert events.is_heard(own)
        ThresholdedRetriever(index, policy(kit), neighbours=0).retrieve(kit.QUESTION)
    finally:
        own.event_handlers.remove(handler)
    names = [type(e).__name__ for e in handler._events]
    assert names.count("RetrievalStartEvent") == 1
    assert names.count("RetrievalEndEvent") == 1
    assert len(handler.selections) == 1
    assert ids(handler.selections[0].kept) == ["a1", "a2"]


async def test_the_postprocessor_tells_its_selection_once_sync_and_async(recorder):
    """As LangChain's compressor sends a ``compressor`` selection event, the postprocessor
    sends one ``ThresholdSelectionEvent``, stage ``postprocessor``, per call."""
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    from llama_index_thresholded import SimilarityThresholdPostprocessor
    from thresholded.provenance import register

    def scored(node_id, score):
        node = TextNode(id_=node_id, text=f"Section {node_id}.", metadata={"source": node_id})
        return NodeWithScore(node=register(node), score=score)

    nodes = [scored("a", 0.9), scored("b", 0.75), scored("c", 0.3)]
    processor = SimilarityThresholdPostprocessor(min_similarity=0.7)
    processor.postprocess_nodes(nodes, QueryBundle("q"))
    await processor.apostprocess_nodes(nodes, QueryBundle("q"))

    assert len(recorder.selections) == 2
    for event in recorder.selections:
        assert event.stage == "postprocessor"
        assert event.query == "q"
        assert ids(event.kept) == ["a", "b"]
        assert event.drop_counts == {"below_threshold": 1}
        assert [d["id"] for d in event.dropped] == ["c"]
