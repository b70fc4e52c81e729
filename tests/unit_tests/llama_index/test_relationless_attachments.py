"""Attachments asked for on sections without relationships: one INFO line says none were found.

The walk is the core's (``thresholded.attachments``), so is the line, in both adapters.

Neighbours and parent summaries follow the PREVIOUS, NEXT and PARENT relationships the
sections carry. Sections without any give nothing to attach, which the retriever says
once, at INFO, instead of silently attaching nothing.
"""

from __future__ import annotations

import logging


def llama_index_retriever(kit, *, linked: bool):
    from llama_index_thresholded import ThresholdedRetriever

    nodes = [kit.section("a", 0.9), kit.section("b", 0.8)]
    if linked:
        kit.link_chain(nodes)
    index = kit.build_index(nodes, kit.embedding())
    return ThresholdedRetriever(
        index, policy=kit.policy(min_similarity=0.5), neighbours=1, parent_summaries=True
    )


def test_llama_index_says_once_that_no_relationships_were_found(kit, caplog, none_found) -> None:
    retriever = llama_index_retriever(kit, linked=False)
    with caplog.at_level(logging.INFO, logger="thresholded"):
        for _ in range(2):
            assert len(retriever.retrieve(kit.QUESTION)) == 2
    assert len(none_found("thresholded")) == 1


def test_llama_index_says_nothing_when_sections_are_linked(kit, caplog, none_found) -> None:
    retriever = llama_index_retriever(kit, linked=True)
    with caplog.at_level(logging.INFO, logger="thresholded"):
        retriever.retrieve(kit.QUESTION)
    assert none_found("thresholded") == []


def missing_links(caplog) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "were not found" in r.getMessage()
    ]


def test_links_to_sections_that_are_nowhere_are_said_once(kit, caplog) -> None:
    """A PARENT summary kept in a docstore that was not persisted: an index reopened from its
    vector store links to it and finds it nowhere. Nothing said so, and the summaries were
    gone from every answer."""
    from llama_index_thresholded import ThresholdedRetriever

    nodes = [kit.section("a", 0.9), kit.section("b", 0.8)]
    kit.link_chain(nodes, parent=kit.section("summary-of-a-and-b", 0.1))  # never indexed
    index = kit.build_index(nodes, kit.embedding())
    retriever = ThresholdedRetriever(index, policy=kit.policy(min_similarity=0.5))
    with caplog.at_level(logging.INFO, logger="thresholded"):
        for _ in range(2):
            assert len(retriever.retrieve(kit.QUESTION)) == 2
    said = missing_links(caplog)
    assert len(said) == 1 and "summary-of-a-and-b" in said[0]


def test_links_that_are_all_found_are_not_warned_about(kit, caplog) -> None:
    retriever = llama_index_retriever(kit, linked=True)
    with caplog.at_level(logging.INFO, logger="thresholded"):
        retriever.retrieve(kit.QUESTION)
    assert missing_links(caplog) == []
