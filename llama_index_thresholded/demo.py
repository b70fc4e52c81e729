"""The demo behind ``thresholded demo``: the example knowledge base, retrieved with a floor."""

from __future__ import annotations

from pathlib import Path

from llama_index.core.schema import NodeWithScore
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from llama_index_thresholded.embeddings import load_embed_model
from llama_index_thresholded.knowledge_base import index_knowledge_base
from llama_index_thresholded.milvus import milvus_store
from llama_index_thresholded.retriever import ThresholdedRetriever
from thresholded.abstention import DEFAULT_NO_MATCH_MESSAGE
from thresholded.knowledge_base import EXAMPLE_COLLECTION, example_profile, load_knowledge_base
from thresholded.report import Report

CUSTOMER_FILTERS = MetadataFilters(
    filters=[MetadataFilter(key="doc_type", value="internal", operator=FilterOperator.NE)]
)
"""The demo answers customers: sections for support staff (``doc_type: internal``) never
reach them, whatever a call's own filters say."""


def build_demo_retriever(
    uri: str = ".thresholded/demo.db",
    *,
    profile: str | Path | None = None,
    neighbours: int = 1,
) -> ThresholdedRetriever:
    """Index the example knowledge base (MiniLM, Milvus Lite) and wrap it with its profile,
    for customers: no ``doc_type: internal`` section, neighbour or summary."""
    profile = example_profile(profile)
    embed_model = load_embed_model("minilm")
    store = milvus_store(uri, EXAMPLE_COLLECTION, dim=384, overwrite=True)
    index = index_knowledge_base(load_knowledge_base(), store, embed_model)
    # pushdown=False: the demo lists the drops below the floor, so Milvus must return them.
    return ThresholdedRetriever(
        index,
        profile=profile,
        neighbours=neighbours,
        pushdown=False,
        filters=CUSTOMER_FILTERS,
    )


def format_report(report: Report[NodeWithScore]) -> str:
    """The kept context with scores and sources, its attachments, and the drops with reasons."""
    lines = [f"Q: {report.query}"]
    if report.nothing_matched:
        lines.append(f"  {DEFAULT_NO_MATCH_MESSAGE} ({_why_nothing(report)})")
    for node in report.kept:
        meta = node.node.metadata
        lines.append(f"  [{node.score:.3f}] {meta.get('source')} / {meta.get('section')}")
        lines.append(f"          {_snippet(node.node.get_content())}")
    for node in report.attached:
        meta = node.node.metadata
        lines.append(
            f"  + {meta.get('attached_role')} of {meta.get('attached_to')}: "
            f"{meta.get('source')} / {meta.get('section')}"
        )
    counts = report.drop_counts()
    if counts:
        shown = "" if len(report.dropped) <= _SHOWN else f" (the best {_SHOWN} shown)"
        drops = ", ".join(f"{n} {reason}" for reason, n in counts.items())
        lines.append(f"  dropped: {drops}{shown}")
        by_score = sorted(report.dropped, key=lambda d: -(d.item.score or 0.0))
        for drop in by_score[:_SHOWN]:
            node = drop.item
            meta = node.node.metadata
            score = "   -  " if node.score is None else f"{node.score:6.3f}"
            lines.append(
                f"    {score} {drop.reason.value:<16}{meta.get('source')} / {meta.get('section')}"
                f"{report.attached_note(drop)}"
            )
    return "\n".join(lines)


_SHOWN = 6
"""Drops listed per question, the best scores first."""


def _why_nothing(report: Report[NodeWithScore]) -> str:
    """What emptied the answer, in the report's own figures."""
    best = report.best_similarity
    if report.emptied_by == "gate" and best is not None and report.gate is not None:
        return f"the best section scored {best:.3f}, under the answer gate {report.gate:g}"
    if report.emptied_by == "floor":
        return f"every section scored under the floor {report.min_similarity:g}"
    if report.emptied_by == "filters":
        return "no section lies within the filters"
    return f"emptied by {report.emptied_by}"


def run_demo(
    questions: list[str],
    *,
    doc_type: str | None = None,
    uri: str = ".thresholded/demo.db",
    profile: str | None = None,
    min_similarity: float | None = None,
    top_k: int | None = None,
    neighbours: int = 1,
) -> list[Report[NodeWithScore]]:
    _check_doc_type(doc_type)
    if "://" not in uri:
        Path(uri).parent.mkdir(parents=True, exist_ok=True)
    retriever = build_demo_retriever(uri, profile=profile, neighbours=neighbours)
    filters = (
        MetadataFilters(filters=[MetadataFilter(key="doc_type", value=doc_type)])
        if doc_type
        else None
    )
    floor = retriever.min_similarity if min_similarity is None else min_similarity
    print(
        f"Example knowledge base indexed in {uri}; floor {floor:g}, "
        f"gate {retriever.policy.min_top_similarity or 0:g} "
        f"({retriever.policy.embedding_model}), top_k {top_k or retriever.policy.top_k}"
        + (f", doc_type={doc_type}" if doc_type else "")
        + "\n"
    )
    reports = []
    for question in questions:
        report = retriever.retrieve_with_report(
            question, min_similarity=min_similarity, top_k=top_k, filters=filters
        )
        print(format_report(report) + "\n")
        reports.append(report)
    return reports


def _check_doc_type(doc_type: str | None) -> None:
    """Refuse a doc_type no section shown to customers has: every question would come back
    empty, and read as "No relevant information found."."""
    if not doc_type:
        return
    shown = {d.metadata.get("doc_type") for d in load_knowledge_base()} - {"internal"}
    if doc_type not in shown:
        raise ValueError(
            f"no section the demo shows customers has doc_type {doc_type!r} (internal "
            f"sections are never shown): use one of {', '.join(sorted(map(str, shown)))}"
        )


def _snippet(text: str, width: int = 110) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
