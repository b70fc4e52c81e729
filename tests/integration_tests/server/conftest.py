"""A real Milvus standalone server for the tests: the ``milvus`` PyPI package (2.3.5).

``milvus_server_uri`` (session-scoped) starts ``milvus-server`` without docker, in
its own process group, with a fresh data folder under the test run's tmp and
free ports found for this run (etcd included), then yields
``http://127.0.0.1:<port>`` once pymilvus can connect. At the end it stops what
it started, and only that: SIGINT to ``milvus-server`` (which stops its Milvus
child), then SIGTERM and finally SIGKILL to the process group it created.

Clients are pointed at 127.0.0.1 only, and every component advertises
127.0.0.1; Milvus 2.3.5 itself cannot be told to listen on loopback only (its
gRPC servers bind all interfaces), embedded etcd does (see ``_etcd_config``).

Needs the ``server`` extra (``pip install 'thresholded-retrieval[server]'``);
without it these tests are skipped.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import TextNode
from pydantic import Field, PrivateAttr

MILVUS_SERVER = Path(sys.executable).with_name("milvus-server")
STARTUP_TIMEOUT = 180.0
STOP_TIMEOUT = 15.0
HOST = "127.0.0.1"
BIN_CACHE = Path(tempfile.gettempdir()) / "thresholded-milvus-server-2.3.5-bin"
"""Decompressed server binaries, reused across runs (decompressing takes ~20 s)."""

_PORT_OPTIONS = (
    "--etcd-port",
    "--root-coord-port",
    "--proxy-port",
    "--proxy-internal-port",
    "--query-coord-port",
    "--query-node-port",
    "--index-coord-port",
    "--index-node-port",
    "--data-coord-port",
    "--data-node-port",
)
_ADVERTISED = (
    "rootCoord",
    "proxy",
    "queryCoord",
    "queryNode",
    "indexNode",
    "dataCoord",
    "dataNode",
)


def _free_ports(count: int) -> list[int]:
    """Ports free on 127.0.0.1 right now, all distinct (held open together while chosen)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((HOST, 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _etcd_config(data: Path, client_port: int, peer_port: int) -> Path:
    """Embedded etcd on 127.0.0.1 and this run's ports (its defaults are 2379/2380)."""
    path = data / "embedEtcd.yaml"
    path.write_text(
        "\n".join(
            [
                "name: default",
                f"data-dir: {data / 'data' / 'etcd.data'}",
                f"listen-client-urls: http://{HOST}:{client_port}",
                f"advertise-client-urls: http://{HOST}:{client_port}",
                f"listen-peer-urls: http://{HOST}:{peer_port}",
                f"initial-advertise-peer-urls: http://{HOST}:{peer_port}",
                f"initial-cluster: default=http://{HOST}:{peer_port}",
                "",
            ]
        ),
        encoding="utf-8",
    )
    return path


def _seed_binaries(data: Path) -> None:
    """Hard-link (else copy) cached binaries into ``data/bin``; milvus-server skips them then."""
    if BIN_CACHE.is_dir():
        try:
            shutil.copytree(BIN_CACHE, data / "bin", copy_function=os.link)
        except OSError:
            shutil.rmtree(data / "bin", ignore_errors=True)
            shutil.copytree(BIN_CACHE, data / "bin")


def _cache_binaries(data: Path) -> None:
    if BIN_CACHE.is_dir() or not (data / "bin").is_dir():
        return
    staging = Path(tempfile.mkdtemp(prefix=BIN_CACHE.name + ".", dir=BIN_CACHE.parent))
    try:
        shutil.copytree(data / "bin", staging / "bin")
        os.rename(staging / "bin", BIN_CACHE)
    except OSError:
        pass  # another run cached them first, or /tmp is full: not worth failing for
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _log_tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _wait_until_connected(uri: str, proc: subprocess.Popen, log: Path) -> None:
    from pymilvus import MilvusClient

    deadline = time.monotonic() + STARTUP_TIMEOUT
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"milvus-server exited with {proc.returncode}:\n{_log_tail(log)}")
        try:
            client = MilvusClient(uri=uri, timeout=3)
            client.list_collections()
            client.close()
            return
        except Exception as exc:  # not up yet
            last = exc
            time.sleep(0.5)
    raise TimeoutError(f"Milvus at {uri} did not answer in {STARTUP_TIMEOUT:.0f} s: {last}")


def _group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group, from /proc."""
    if not Path("/proc/self/stat").exists():  # no procfs: ask the kernel
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        return [pgid]
    return [
        pid
        for pid, fields in process_table().items()
        if int(fields[2]) == pgid and fields[0] != "Z"
    ]


def process_table() -> dict[int, list[str]]:
    """Every process's ``/proc/<pid>/stat`` fields after its name (state, ppid, pgrp, ...).

    Also read by ``benchmarks/`` (CPU time of the processes a benchmark started).
    """
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        table[int(entry.name)] = stat[stat.rindex(")") + 2 :].split()
    return table


def _wait_for_group(pgid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _group_members(pgid):
            return True
        time.sleep(0.2)
    return not _group_members(pgid)


def _stop(proc: subprocess.Popen) -> None:
    """Stop the server this fixture started: its process group, and nothing else."""
    pgid = proc.pid  # start_new_session=True: the group is ours alone
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)  # milvus-server stops its Milvus child on SIGINT
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_TIMEOUT)
    for sig in (signal.SIGTERM, signal.SIGKILL):  # the Milvus child may ignore SIGTERM
        if not _group_members(pgid):
            break
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        if _wait_for_group(pgid, STOP_TIMEOUT):
            break
    if proc.poll() is None:
        proc.wait(timeout=STOP_TIMEOUT)


class RunningServer:
    """A started ``milvus-server``: its URI, and signals to its own process group only."""

    def __init__(self, uri: str, proc: subprocess.Popen) -> None:
        self.uri = uri
        self.proc = proc

    @property
    def pgid(self) -> int:
        return self.proc.pid  # start_new_session=True: the group is ours alone

    def signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pgid, sig)

    def freeze(self) -> None:
        """Stop every process of the server (SIGSTOP): its sockets stay open, nothing answers."""
        self.signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL the whole server at once, as a crash or an OOM kill would."""
        self.signal(signal.SIGKILL)
        _wait_for_group(self.pgid, STOP_TIMEOUT)


@contextlib.contextmanager
def milvus_server(data: Path) -> Iterator[str]:
    """Start ``milvus-server`` with its data in ``data``; yield its URI; stop it.

    Also used by ``benchmarks/`` (loaded by path), so it needs nothing from pytest.
    """
    with milvus_server_process(data) as server:
        yield server.uri


@contextlib.contextmanager
def milvus_server_process(data: Path) -> Iterator[RunningServer]:
    """``milvus_server``, yielding the running server itself (for fault injection)."""
    if not MILVUS_SERVER.exists():
        raise FileNotFoundError(
            "needs the Milvus server: pip install 'thresholded-retrieval[server]'"
        )
    ports = _free_ports(len(_PORT_OPTIONS) + 1)
    etcd_peer = ports.pop()
    _seed_binaries(data)
    command = [str(MILVUS_SERVER), "--data", str(data)]
    for option, port in zip(_PORT_OPTIONS, ports, strict=True):
        command += [option, str(port)]
    for component in _ADVERTISED:
        command += ["--extra-config", f"{component}.ip={HOST}"]
    env = {**os.environ, "ETCD_CONFIG_PATH": str(_etcd_config(data, ports[0], etcd_peer))}
    log = data / "milvus-server.out"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=data,
            start_new_session=True,
        )
    try:
        uri = f"http://{HOST}:{ports[2]}"
        _wait_until_connected(uri, proc, log)
        _cache_binaries(data)
        yield RunningServer(uri, proc)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGCONT)  # a frozen server cannot handle SIGINT
        _stop(proc)


@pytest.fixture
def disposable_server(tmp_path: Path) -> Iterator[RunningServer]:
    """A server of this test's own, which the test may freeze or kill."""
    if not MILVUS_SERVER.exists():
        pytest.skip("needs the Milvus server: pip install 'thresholded-retrieval[server]'")
    with milvus_server_process(tmp_path) as server:
        yield server


@pytest.fixture(scope="session")
def milvus_server_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not MILVUS_SERVER.exists():
        pytest.skip("needs the Milvus server: pip install 'thresholded-retrieval[server]'")
    with milvus_server(tmp_path_factory.mktemp("milvus-server")) as uri:
        yield uri


# Hand-made vectors ------------------------------------------------------------------------

DIM = 8
QUESTION = "question"
E0 = [1.0] + [0.0] * (DIM - 1)


def vec(cos: float, axis: int = 1) -> list[float]:
    """A unit vector whose cosine with e0 (the question) is ``cos``."""
    v = [0.0] * DIM
    v[0] = cos
    v[axis] = math.sqrt(1.0 - cos * cos)
    return v


class HandEmbedding(BaseEmbedding):
    """Maps known texts to chosen vectors; an unknown text is an error."""

    vectors: dict[str, list[float]] = Field(default_factory=dict)
    _calls: list[str] = PrivateAttr(default_factory=list)

    def _lookup(self, text: str) -> list[float]:
        self._calls.append(text)
        return list(self.vectors[text])

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._lookup(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._lookup(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._lookup(text)


def section(node_id: str, cos: float, axis: int = 1, **metadata: Any) -> TextNode:
    return TextNode(
        id_=node_id, text=f"Section {node_id}.", metadata=metadata, embedding=vec(cos, axis)
    )


@pytest.fixture(scope="session")
def embed_model() -> HandEmbedding:
    return HandEmbedding(vectors={QUESTION: E0}, model_name="test/hand-made")


@pytest.fixture(scope="session")
def build_index(milvus_server_uri: str, embed_model: HandEmbedding):
    """Index sections into a fresh collection of the test server (Strong consistency)."""
    from llama_index_thresholded.milvus import milvus_store

    def build(collection: str, nodes: list[TextNode], **store_kwargs: Any) -> VectorStoreIndex:
        store = milvus_store(
            milvus_server_uri,
            collection,
            dim=DIM,
            overwrite=True,
            consistency_level="Strong",
            **store_kwargs,
        )
        storage = StorageContext.from_defaults(vector_store=store)
        return VectorStoreIndex(nodes, storage_context=storage, embed_model=embed_model)

    return build


class Hand:
    """The hand-made vectors above, handed to tests as one fixture."""

    DIM = DIM
    QUESTION = QUESTION
    E0 = E0
    vec = staticmethod(vec)
    section = staticmethod(section)


@pytest.fixture(scope="session")
def hand() -> type[Hand]:
    return Hand


@pytest.fixture(scope="session")
def reopen(milvus_server_uri: str, embed_model: HandEmbedding):
    """A new index (new sync and async clients) over an existing collection."""
    from llama_index_thresholded.milvus import milvus_store

    def open_again(index: VectorStoreIndex) -> VectorStoreIndex:
        old = index.vector_store
        db = getattr(getattr(old.client, "_config", None), "db_name", "") or ""
        kwargs = {"db_name": db} if db else {}
        store = milvus_store(
            milvus_server_uri,
            old.collection_name,
            dim=DIM,
            metric=old.similarity_metric,
            consistency_level="Strong",
            **kwargs,
        )
        return VectorStoreIndex.from_vector_store(store, embed_model=embed_model)

    return open_again
