"""A deep copy of a retriever (``copy.deepcopy``, as of LlamaIndex's own
``VectorIndexRetriever``) searches as the retriever does. It failed: "cannot pickle
'_thread.lock' object", from the lock of its collection's state and of its thread pool."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from llama_index_thresholded import MultiCollectionRetriever, ThresholdedRetriever


def ids(nodes: list[Any]) -> list[str]:
    return sorted(n.node.node_id for n in nodes)


def test_a_deep_copy_searches_alike(kit: Any) -> None:
    embed = kit.embedding()
    index = kit.build_index(
        [kit.section("a", 0.75), kit.section("b", 0.875), kit.section("low", 0.25)], embed
    )
    single = ThresholdedRetriever(index, kit.policy(min_similarity=0.5), neighbours=0)
    multi = MultiCollectionRetriever([index], kit.policy(min_similarity=0.5), neighbours=0)
    for retriever in (single, multi):
        assert ids(retriever.retrieve(kit.QUESTION)) == ["a", "b"]
        copied = copy.deepcopy(retriever)
        assert ids(copied.retrieve(kit.QUESTION)) == ["a", "b"]
        assert ids(asyncio.run(copied.aretrieve(kit.QUESTION))) == ["a", "b"]
    assert copied._pool is not multi._pool  # threads of its own, closed by its own close()
    copied.close()
    multi.close()
