"""Events of one retrieval, sent exactly once per call, whichever method was called.

A call opens one span (the retriever method's), sends LlamaIndex's
``RetrievalStartEvent``/``RetrievalEndEvent`` and one RETRIEVE callback event,
whose end payload carries the drops, and one :class:`ThresholdSelectionEvent`. Sections
outside the filters are counted in both, never named: an event may reach the end user.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.instrumentation.event_handlers import NullEventHandler
from llama_index.core.instrumentation.events.base import BaseEvent
from llama_index.core.instrumentation.events.retrieval import (
    RetrievalEndEvent,
    RetrievalStartEvent,
)
from llama_index.core.schema import NodeWithScore, QueryBundle, QueryType

from thresholded.report import MultiCollectionReport, Report

if TYPE_CHECKING:
    from llama_index.core.instrumentation.dispatcher import Dispatcher


class ThresholdSelectionEvent(BaseEvent):
    """Emitted once per retrieval, after the policy and the attachments. Its fields are the
    data of LangChain's ``thresholded_selection`` event (``Report.to_event_data``)."""

    stage: str = "retriever"
    """What made the selection: ``retriever``, ``multi_collection`` (a
    ``MultiCollectionRetriever``) or ``postprocessor`` (a ``SimilarityThresholdPostprocessor``,
    whose event LangChain's compressor sends as ``compressor``)."""
    query: str
    """The question's text."""
    min_similarity: float
    """The floor in force (over several collections, the lowest)."""
    best_similarity: float | None = None
    """The best cosine among the candidates that passed the filters."""
    gate: float | None = None
    """The answer gate in force; None: off."""
    score_kind: str | None = None
    """The kind of the sections' scores (``cosine`` for dense search, ``rrf``...); None
    when the search returned nothing."""
    nothing_matched: bool = False
    """True when no section was kept."""
    emptied_by: str | None = None
    """What emptied the result (``floor``, ``gate``, ``filters``, ``empty``, ``policy``);
    None when something was kept."""
    kept: list[dict[str, Any]]
    """The kept sections in score order: ``id``, ``similarity``, ``score_kind``."""
    attached: list[dict[str, Any]]
    """Their neighbours and summaries: ``id``, ``attached_to``, ``role``."""
    dropped: list[dict[str, Any]]
    """One entry per dropped candidate: ``id``, ``reason`` and ``similarity`` (and
    ``collection`` from a multi-collection retriever, ``attached_as`` for one that is in
    the result all the same, attached to a kept section); not those outside the filters."""
    drop_counts: dict[str, int]
    """How many candidates each reason dropped, those outside a call's filters included
    (``outside_filters``); those outside the retriever's own are held back uncounted."""
    outside_filters: int = 0
    """How many candidates were outside a call's filters: counted, never named, since an
    event may reach the end user."""
    passed_through: list[str]
    """Score kinds that met an active floor without being compared with it."""
    collections: list[str] | None = None
    """From a multi-collection retriever, what each collection did (a line each); None
    otherwise."""
    partial: bool | None = None
    """From a multi-collection retriever, whether a collection failed or timed out."""

    @classmethod
    def class_name(cls) -> str:
        return "ThresholdSelectionEvent"


@contextmanager
def retrieval_events(
    retriever: BaseRetriever, dispatcher: Dispatcher, query: QueryType
) -> Iterator[Callable[[Report[NodeWithScore]], None]]:
    """Wrap one call in its events; the body hands its report to the yielded function."""
    retriever._check_callback_manager()
    heard = is_heard(dispatcher)
    if heard:
        dispatcher.event(RetrievalStartEvent(str_or_query_bundle=query))
    query_str = query.query_str if isinstance(query, QueryBundle) else query
    reports: list[Report[NodeWithScore]] = []
    manager = retriever.callback_manager
    with (
        manager.as_trace("query"),
        manager.event(CBEventType.RETRIEVE, payload={EventPayload.QUERY_STR: query_str}) as event,
    ):
        yield reports.append
        report = reports[0]
        # each drop with its raw score, as the store gave it
        dropped = [
            {**data, "score": d.item.score}
            for data, d in zip(report.dropped_data(), report.dropped, strict=True)
        ]
        outside_filters = report.outside_filters
        collections = (
            {"thresholded_collections": [s.describe() for s in report.collections]}
            if isinstance(report, MultiCollectionReport)
            else {}
        )
        event.on_end(
            payload={
                EventPayload.NODES: report.items,
                "thresholded_dropped": dropped,
                "thresholded_outside_filters": outside_filters,
                "thresholded_min_similarity": report.min_similarity,
                **collections,
            }
        )
    if not heard:
        return
    dispatcher.event(ThresholdSelectionEvent(**report.to_event_data()))
    dispatcher.event(RetrievalEndEvent(str_or_query_bundle=query, nodes=report.items))


def is_heard(dispatcher: Dispatcher) -> bool:
    """Whether an event sent through ``dispatcher`` reaches a handler that does something
    with it (LlamaIndex's root dispatcher holds a ``NullEventHandler``, which does
    nothing): the events of a call nobody listens to are not built."""
    current: Dispatcher | None = dispatcher
    while current is not None:
        if any(type(h) is not NullEventHandler for h in current.event_handlers):
            return True
        current = current.parent if current.propagate else None
    return False
