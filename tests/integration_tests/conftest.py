"""Fixtures shared by the integration tests on every engine (Milvus Lite and the server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the test modules import store_matrix_data

REOPEN_PROCESS = Path(__file__).parent / "langchain" / "reopen_process.py"


class LangChainProcess:
    """``langchain/reopen_process.py``, each run a process of its own, and its results."""

    @staticmethod
    def run(mode: str, uri: str, collection: str, db_name: str = "") -> dict[str, Any]:
        """Create (``"create"``) or reopen (``"reopen"``) the collection; each question's
        kept ``[id, cosine]`` pairs."""
        done = subprocess.run(
            [sys.executable, str(REOPEN_PROCESS), mode, uri, collection]
            + ([db_name] if db_name else []),
            capture_output=True,
            text=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    @staticmethod
    def assert_same(created: dict[str, Any], reopened: dict[str, Any]) -> None:
        """The same ids, in the same order, with the same cosines, for every question."""
        assert created.keys() == reopened.keys()
        for question, kept in created.items():
            assert [doc_id for doc_id, _ in reopened[question]] == [doc_id for doc_id, _ in kept]
            assert [cos for _, cos in reopened[question]] == pytest.approx(
                [cos for _, cos in kept], abs=1e-6
            )


@pytest.fixture(scope="session")
def langchain_process() -> type[LangChainProcess]:
    return LangChainProcess
