"""Helpers of the retrieval benchmarks: synthetic unit vectors, fixed queries, timing, output.

Nothing here embeds text: every vector is made with numpy, and every query carries
its embedding, so the figures are the retrieval's own.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import NodeRelationship, QueryBundle, RelatedNodeInfo, TextNode

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(os.environ.get("THRESHOLDED_BENCH_RESULTS") or ROOT / "benchmarks" / "results")
"""Where the JSON goes; the smoke test of the scripts points it elsewhere."""
SERVER_CONFTEST = ROOT / "tests" / "integration_tests" / "server" / "conftest.py"


def unit_vectors(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def clustered(
    rng: np.random.Generator, n: int, dim: int, clusters: int, spread: float
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` unit vectors around ``clusters`` random centres; returns (vectors, centres)."""
    centres = unit_vectors(rng, clusters, dim)
    members = centres[rng.integers(0, clusters, size=n)]
    noise = rng.normal(size=(n, dim)).astype(np.float32) * (spread / np.sqrt(dim))
    v = members + noise
    return v / np.linalg.norm(v, axis=1, keepdims=True), centres


def nodes_for(
    vectors: np.ndarray,
    *,
    prefix: str = "s",
    per_document: int = 10,
    text_chars: int = 200,
    link: bool = False,
) -> list[TextNode]:
    """One node per vector; ``per_document`` consecutive nodes share a source (and a chain)."""
    nodes = []
    for i, vector in enumerate(vectors):
        doc = i // per_document
        nodes.append(
            TextNode(
                id_=f"{prefix}{i}",
                text=f"section {i} of document {doc}. " + "x" * text_chars,
                metadata={"source": f"{prefix}doc{doc}"},
                embedding=vector.tolist(),
            )
        )
    if link:
        for i, node in enumerate(nodes):
            doc_start = (i // per_document) * per_document
            if i > doc_start:
                node.relationships[NodeRelationship.PREVIOUS] = RelatedNodeInfo(
                    node_id=nodes[i - 1].node_id
                )
            if i + 1 < len(nodes) and i + 1 < doc_start + per_document:
                node.relationships[NodeRelationship.NEXT] = RelatedNodeInfo(
                    node_id=nodes[i + 1].node_id
                )
    return nodes


def index_nodes(store: Any, nodes: list[TextNode], dim: int) -> VectorStoreIndex:
    """Index nodes that carry their embeddings (the mock model is never asked)."""
    storage = StorageContext.from_defaults(vector_store=store)
    return VectorStoreIndex(nodes, storage_context=storage, embed_model=mock_model(dim))


@functools.cache
def mock_model(dim: int) -> MockEmbedding:
    """One mock model per dimension: indexes built with it are of one model, as a
    multi-collection retriever requires of the collections it searches with one vector."""
    return MockEmbedding(embed_dim=dim)


def bundles(vectors: np.ndarray) -> list[QueryBundle]:
    return [QueryBundle(query_str=f"q{i}", embedding=v.tolist()) for i, v in enumerate(vectors)]


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return 1000 * (time.perf_counter() - start), result


class CpuMeter:
    """CPU seconds spent by this process and every process it started (a Milvus Lite engine,
    a Milvus server), from ``/proc``: whether a latency is waiting or working."""

    def __enter__(self) -> CpuMeter:
        self.start = self.now()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = self.now() - self.start

    @staticmethod
    def now() -> float:
        ticks = os.sysconf("SC_CLK_TCK")
        children: dict[int, list[int]] = {}
        usage: dict[int, float] = {}
        for pid, fields in _server_launcher().process_table().items():
            children.setdefault(int(fields[1]), []).append(pid)
            usage[pid] = (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
        total, stack = time.process_time(), list(children.get(os.getpid(), []))
        while stack:
            pid = stack.pop()
            total += usage.get(pid, 0.0)
            stack += children.get(pid, [])
        return total


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def engine() -> str:
    """The Milvus Lite engine importable here (``lite_322_environment()`` selects 3.2.2)."""
    return f"milvus-lite {version('milvus-lite')}"


LITE_322 = ROOT / ".bench" / "milvus-lite-3.2.2"
"""Milvus Lite 3.2.2 and the two packages it adds, installed apart from the venv's 2.5.1
(``make`` installs it there too, with the same pins)."""
LITE_322_PACKAGES = ("milvus-lite==3.2.2", "faiss-cpu==1.15.1", "pyarrow==26.0.1")


def lite_322_environment() -> dict[str, str]:
    """Environment variables under which ``import milvus_lite`` finds 3.2.2; installs it once.

    Both engines are the PyPI distribution ``milvus-lite``, so one venv holds only one.
    3.2.2 goes to its own folder (without dependencies: numpy and grpcio stay the venv's)
    and is put first on ``PYTHONPATH``.
    """
    if not (LITE_322 / "milvus_lite").is_dir():
        print(f"installing milvus-lite 3.2.2 into {LITE_322.relative_to(ROOT)} ...")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--target",
                str(LITE_322),
                *LITE_322_PACKAGES,
            ],
            check=True,
        )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(LITE_322), *filter(None, [env.get("PYTHONPATH")])])
    return env


def environment() -> dict[str, str]:
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "pymilvus": version("pymilvus"),
        "milvus-lite": version("milvus-lite"),
        "llama-index-core": version("llama-index-core"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }


def write_json(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({**payload, "environment": environment()}, indent=2) + "\n")
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return path


@contextlib.contextmanager
def milvus_server(data: Path) -> Iterator[str]:
    """The test suite's Milvus 2.3.5 standalone launcher (its own ports, 127.0.0.1)."""
    with _server_launcher().milvus_server(data) as uri:
        yield uri


@functools.cache
def _server_launcher() -> Any:
    """The server tests' conftest, loaded by path: its launcher and its /proc reader."""
    spec = importlib.util.spec_from_file_location("_milvus_server_conftest", SERVER_CONFTEST)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
