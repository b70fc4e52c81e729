"""thresholded.Report and MultiCollectionReport, over hand-made candidates.

Items are plain dicts standing for a framework's objects: ``output`` marks a kept or
attached one as returned, ``as_dropped`` gives a dropped one as the store had it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from thresholded import DroppedItem, DropReason, MultiCollectionReport, Report, RetrievalPolicy
from thresholded.core import AttachedRole, Candidate, Question, Result, attach, select
from thresholded.fanout import CollectionStatus
from thresholded.scores import ScoreKind

POLICY = RetrievalPolicy(min_similarity=0.5, top_k=2, max_per_source=None, max_chars=None)


def section(id: str, score: float, *, source: str | None = None, collection: str = "") -> Any:
    item = {"id": id, "text": f"the text of {id}"}
    return Candidate(item, id, score, source=source or id, chars=10, collection=collection)


def neighbour(id: str, of: str, *, collection: str = "") -> Candidate[Any]:
    return Candidate(
        {"id": id, "text": f"next to {of}"},
        id,
        None,
        ScoreKind.UNKNOWN,
        source=id,
        chars=10,
        is_attachment=True,
        attached_to=of,
        attached_role=AttachedRole.NEIGHBOUR,
        collection=collection,
    )


def output(candidate: Candidate[Any]) -> dict[str, Any]:
    return {**candidate.item, "returned": True, "score": candidate.score}


def as_dropped(candidate: Candidate[Any]) -> dict[str, Any]:
    return {**candidate.item, "score": candidate.score}


def describe(item: dict[str, Any]) -> str:
    return str(item["text"])


def selection(gate: float | None = None) -> Any:
    """``a`` and ``b`` kept, ``c`` beyond top_k, ``d`` below the floor; ``a`` has a neighbour
    ``a+1``; ``c+1`` is the neighbour of a dropped section."""
    policy = POLICY if gate is None else POLICY.with_overrides(min_top_similarity=gate)
    candidates = [section("c", 0.6), section("a", 0.9), section("d", 0.25), section("b", 0.7)]
    selected = select(candidates, policy, POLICY.min_similarity)
    return attach(selected, [neighbour("a+1", "a"), neighbour("c+1", "c")], policy)


def report(**kwargs: Any) -> Report[dict[str, Any]]:
    chosen = kwargs.pop("selection", None) or selection()
    kwargs.setdefault("describe", describe)
    return Report.build("the question", chosen, output=output, as_dropped=as_dropped, **kwargs)


def ids(items: Any) -> list[str]:
    return [i["id"] for i in items]


# What was found --------------------------------------------------------------------------------
def test_kept_and_attached_are_the_output_items_and_items_are_both_in_that_order() -> None:
    r = report()
    assert ids(r.kept) == ["a", "b"]
    assert ids(r.attached) == ["a+1"]
    assert isinstance(r.kept, tuple) and isinstance(r.attached, tuple)
    assert r.items == [*r.kept, *r.attached]
    assert isinstance(r.items, list)
    assert all(i["returned"] for i in r.items)
    assert r.query == "the question"
    assert not r.nothing_matched and r.emptied_by is None


def test_the_figures_are_the_selections() -> None:
    r = report(selection=selection(gate=0.3))
    assert r.min_similarity == 0.5
    assert r.best_similarity == 0.9
    assert r.gate == 0.3
    assert r.passed_through == ()
    assert report().gate is None


def test_a_non_cosine_score_over_an_active_floor_is_passed_through() -> None:
    rrf = Candidate({"id": "r", "text": "rrf"}, "r", 0.016, ScoreKind.RRF, source="r")
    r = report(selection=select([rrf], POLICY, 0.5))
    assert ids(r.kept) == ["r"]
    assert r.passed_through == (ScoreKind.RRF,)


# What was dropped ------------------------------------------------------------------------------
def test_every_drop_is_a_dropped_item_as_the_store_had_it() -> None:
    r = report()
    assert all(isinstance(d, DroppedItem) for d in r.dropped)
    by_id = {d.id: d for d in r.dropped}
    assert {i: d.reason for i, d in by_id.items()} == {
        "c": DropReason.BEYOND_TOP_K,
        "d": DropReason.BELOW_THRESHOLD,
        "c+1": DropReason.ANCHOR_DROPPED,
    }
    assert by_id["d"].item == {"id": "d", "text": "the text of d", "score": 0.25}
    assert "returned" not in by_id["d"].item
    assert by_id["d"].similarity == 0.25
    assert by_id["c+1"].similarity is None  # an attachment has no cosine of its own
    assert all(d.collection == "" for d in r.dropped)


def test_drop_counts_and_dropped_for_by_reason_or_by_name() -> None:
    r = report()
    assert r.drop_counts() == {"beyond_top_k": 1, "below_threshold": 1, "anchor_dropped": 1}
    assert ids(r.dropped_for(DropReason.BELOW_THRESHOLD)) == ["d"]
    assert ids(r.dropped_for("beyond_top_k")) == ["c"]
    assert r.dropped_for(DropReason.BUDGET) == []
    with pytest.raises(ValueError):
        r.dropped_for("no_such_reason")


def test_nothing_matched_says_why() -> None:
    below = select([section("x", 0.2)], POLICY, 0.5)
    r = report(selection=below)
    assert r.nothing_matched and r.items == []
    assert r.emptied_by == "floor"
    gated = select([section("x", 0.6)], POLICY.with_overrides(min_top_similarity=0.8), 0.5)
    assert report(selection=gated).emptied_by == "gate"
    assert report(selection=select([], POLICY, 0.5)).emptied_by == "filters"
    assert report(selection=below, emptied_by="floor").emptied_by == "floor"


# Telling ---------------------------------------------------------------------------------------
def test_explain_has_one_line_per_item_with_scores_sources_and_reasons() -> None:
    lines = report(selection=selection(gate=0.3)).explain().splitlines()
    assert lines[0] == "query: 'the question'  (floor 0.5, gate 0.3)"
    kept = [line for line in lines if line.lstrip().startswith("kept")]
    assert len(kept) == 2
    assert " 0.900  a  the text of a" in kept[0]
    neighbour = [line for line in lines if line.lstrip().startswith("+ neighbour")]
    assert len(neighbour) == 1 and "next to a" in neighbour[0]
    assert neighbour[0].endswith("  (of 'a')")  # the kept section it was attached to
    dropped = [line for line in lines if line.lstrip().startswith("dropped")]
    assert len(dropped) == 3
    assert any(" 0.250  below_threshold" in line and "the text of d" in line for line in dropped)
    assert any("  -     anchor_dropped" in line for line in dropped)
    assert "nothing matched" not in "\n".join(lines)


def test_explain_shortens_long_texts_and_says_when_nothing_matched() -> None:
    long = Candidate({"id": "x", "text": "word " * 50}, "x", 0.2, source="x")
    text = report(selection=select([long], POLICY, 0.5)).explain(width=20)
    (dropped,) = [line for line in text.splitlines() if "below_threshold" in line]
    assert dropped.endswith("…")
    assert len(dropped.split("x  ", 1)[1]) == 10  # half the width for a dropped item
    assert text.splitlines()[-1] == "  nothing matched (floor)"


def test_explain_uses_repr_without_describe() -> None:
    r = Report.build("q", selection(), output=output, as_dropped=as_dropped)
    assert "{'id': 'a'" in r.explain(width=200)


def test_summary_is_one_line_with_the_counts() -> None:
    assert report(selection=selection(gate=0.3)).summary() == (
        "thresholded selection (floor 0.5, gate 0.3): kept 2, attached 1, dropped 3 "
        "(anchor_dropped=1, below_threshold=1, beyond_top_k=1)"
    )
    assert report(selection=select([], POLICY, 0.5)).summary().endswith("dropped 0 (none)")


def test_to_event_data_is_json_ready() -> None:
    data = report(selection=selection(gate=0.3)).to_event_data("retriever")
    assert json.loads(json.dumps(data)) == data
    assert data["stage"] == "retriever"
    assert data["query"] == "the question"
    assert (data["min_similarity"], data["best_similarity"], data["gate"]) == (0.5, 0.9, 0.3)
    assert (data["nothing_matched"], data["emptied_by"]) == (False, None)
    assert data["kept"] == [
        {"id": "a", "similarity": 0.9, "score_kind": "cosine"},
        {"id": "b", "similarity": 0.7, "score_kind": "cosine"},
    ]
    assert data["attached"] == [{"id": "a+1", "attached_to": "a", "role": "neighbour"}]
    assert {d["id"]: (d["reason"], d["similarity"]) for d in data["dropped"]} == {
        "c": ("beyond_top_k", 0.6),
        "d": ("below_threshold", 0.25),
        "c+1": ("anchor_dropped", None),
    }
    assert all("collection" not in d for d in data["dropped"])
    assert data["drop_counts"] == {"beyond_top_k": 1, "below_threshold": 1, "anchor_dropped": 1}
    assert data["passed_through"] == []


def test_event_data_says_which_dropped_section_came_back_attached() -> None:
    """``c`` is beyond top_k and also ``b``'s neighbour: the event says so, as ``explain``."""
    candidates = [section("c", 0.6), section("a", 0.9), section("b", 0.7)]
    chosen = attach(select(candidates, POLICY, 0.5), [neighbour("c", "b")], POLICY)
    data = report(selection=chosen).to_event_data("retriever")
    (c,) = [d for d in data["dropped"] if d["id"] == "c"]
    assert c["attached_as"] == "neighbour"
    assert json.loads(json.dumps(data)) == data
    assert all("attached_as" not in d for d in report().to_event_data("r")["dropped"])


# An engine result, over several collections ---------------------------------------------------
def statuses() -> tuple[CollectionStatus, ...]:
    return (
        CollectionStatus("kb", "ok", 0.5, 3.0, returned=3, cleared_floor=2, kept=2, attached=1),
        CollectionStatus("extra", "timeout", 0.4, 100.0, error="timed out"),
    )


def multi_result() -> Result[Any]:
    candidates = [
        section("a", 0.9, collection="kb"),
        section("b", 0.7, collection="kb"),
        section("c", 0.6, collection="kb"),
    ]
    selected = select(candidates, POLICY, 0.4)
    selected = attach(selected, [neighbour("a+1", "a", collection="kb")], POLICY)
    return Result(Question("the question"), selected, statuses())


def multi() -> MultiCollectionReport[dict[str, Any]]:
    return MultiCollectionReport.from_result(
        multi_result(), output=output, as_dropped=as_dropped, describe=describe
    )


def test_from_result_reads_the_question_and_the_selection() -> None:
    single = Report.from_result(
        Result(Question("q"), selection()), output=output, as_dropped=as_dropped
    )
    assert type(single) is Report
    assert single.query == "q"
    assert ids(single.kept) == ["a", "b"]


def test_a_multi_collection_report_has_each_collections_status() -> None:
    r = multi()
    assert isinstance(r, Report)
    assert ids(r.kept) == ["a", "b"] and ids(r.attached) == ["a+1"]
    assert [s.name for s in r.collections] == ["kb", "extra"]
    assert r.partial
    assert [s.name for s in r.failed] == ["extra"]
    assert r.status("extra").status == "timeout"
    with pytest.raises(KeyError):
        r.status("nowhere")
    (dropped,) = r.dropped
    assert (dropped.id, dropped.collection, dropped.reason) == ("c", "kb", "beyond_top_k")
    assert ids(r.dropped_for("beyond_top_k")) == ["c"]


def test_a_multi_collection_report_tells_of_its_collections() -> None:
    r = multi()
    text = r.explain()
    assert text.splitlines()[-2:] == [f"  collection {s.describe()}" for s in statuses()]
    assert r.summary().split("; ")[1:] == [s.describe() for s in statuses()]
    data = r.to_event_data("multi_collection")
    assert json.loads(json.dumps(data)) == data
    assert data["collections"] == [s.describe() for s in statuses()]
    assert data["partial"] is True
    assert data["dropped"] == [
        {"id": "c", "collection": "kb", "reason": "beyond_top_k", "similarity": 0.6}
    ]


def test_the_sections_outside_the_filters_are_counted_and_never_named() -> None:
    """They are what the filters keep from this call: neither the report (which an
    application may show or hand to an agent) nor an event (which may be streamed to the
    end user) names them, gives their cosines or their text. Both count them."""
    r = report(selection=replace(selection(), outside_filters=2))
    data = r.to_event_data("retriever")
    assert {d["id"] for d in data["dropped"]} == {"c", "d", "c+1"}
    assert data["drop_counts"]["outside_filters"] == 2
    assert r.outside_filters == 2
    assert r.drop_counts()["outside_filters"] == 2
    assert r.dropped_for("outside_filters") == []
    assert "outside_filters" not in {d.reason.value for d in r.dropped}


def test_a_report_is_frozen_and_compares_by_value() -> None:
    r = report()
    with pytest.raises(AttributeError):
        r.query = "another"  # type: ignore[misc]
    assert report(describe=str) == r  # describe is not part of the value


def test_a_collection_whose_attachments_failed_makes_the_report_partial() -> None:
    """Its kept sections are returned without the neighbours and summaries asked for: the
    result lacks part of what the call returns, as the engine's warning says ("partial")."""
    ok = CollectionStatus("kb", "ok", 0.5, 1.0, returned=1, cleared_floor=1, kept=1)
    unattached = replace(ok, name="extra", attachment_error="OSError: docstore unreachable")
    result = replace(multi_result(), collections=(ok, unattached))
    r = MultiCollectionReport.from_result(result, output=output, as_dropped=as_dropped)
    assert r.partial
    assert r.to_event_data()["partial"] is True
    assert r.failed == ()  # every collection was searched
    whole = replace(multi_result(), collections=(ok,))
    report = MultiCollectionReport.from_result(whole, output=output, as_dropped=as_dropped)
    assert not report.partial
