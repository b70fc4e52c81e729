"""Start a Milvus Lite engine and wait until it answers, before a client connects to it.

Milvus Lite 2.x runs its engine as a child process that listens on a Unix socket. It
reports the engine started once the process has lived for 0.5 s, whether or not the
socket exists yet; pymilvus then connects at once, and on a busy machine the first
connection fails with "Fail connecting to server on unix:...sock". Starting the engine
here (pymilvus reuses it for the same file) and waiting for its socket removes the
race. Milvus Lite 3.x serves in-process and is ready when started.

Milvus Lite 2.5 imports ``pkg_resources`` when it is imported, which warns that the
API is deprecated; :func:`import_server_manager` imports it with that one warning
silenced, and pymilvus finds it imported afterwards.
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

LITE_STARTUP_TIMEOUT = 60.0
SERVER_SCHEMES = ("unix", "http", "https", "tcp")
"""The URI schemes pymilvus's ``MilvusClient`` connects to as a server (not ``grpc``, which
it refuses); any other URI is a Milvus Lite file."""


def milvus_uri(uri: object) -> str:
    """``uri`` as pymilvus takes it, a str: a path (``pathlib.Path``) names a Milvus Lite
    file; anything else is a ``TypeError`` (pymilvus fails on it with an ``AttributeError``).
    A str that is neither a server address nor a ``.db`` file is a ``ValueError``: Milvus
    Lite would be started for it (``localhost:19530`` without ``http://``) and fail with
    "Unsupport db name"."""
    if isinstance(uri, os.PathLike):
        uri = str(os.fspath(uri))
    if not isinstance(uri, str):
        raise TypeError(
            "uri must be a str (a Milvus Lite file such as ./kb.db, or a server address such "
            f"as http://host:19530) or a path, got {type(uri).__name__}"
        )
    if urlparse(uri).scheme.lower() not in SERVER_SCHEMES and not uri.endswith(".db"):
        raise ValueError(
            f"uri {uri!r} is neither a server address (http://host:19530; also https, tcp, "
            "unix) nor a Milvus Lite file (a path ending in .db, such as ./kb.db)"
        )
    return uri


def is_lite_uri(uri: str) -> bool:
    """A local file path (Milvus Lite), not a server address."""
    return "://" not in uri and not uri.startswith("unix:")


def wait_for_milvus_lite(uri: str, timeout: float = LITE_STARTUP_TIMEOUT) -> None:
    """Start the Milvus Lite engine of the file ``uri`` if needed; return once it listens.

    Does nothing for a server address, or where ``milvus_lite`` is not installed.
    Raises ``TimeoutError`` naming the file and the socket when the engine does not
    open its socket within ``timeout`` seconds.
    """
    if not is_lite_uri(uri):
        return
    server_manager = import_server_manager()
    if server_manager is None:
        return
    local = server_manager.start_and_get_uri(uri)
    if not local or not str(local).startswith("unix:"):
        return  # not started (pymilvus reports why when it connects), or served in-process
    socket = Path(str(local)[len("unix:") :])
    deadline = time.monotonic() + timeout
    while not socket.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"the Milvus Lite engine for {uri} did not open its socket {socket} "
                f"within {timeout:g} s"
            )
        time.sleep(0.02)


def lite_engine_version() -> str | None:
    """The installed Milvus Lite's version, or None where ``milvus_lite`` is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("milvus-lite")
    except PackageNotFoundError:
        return None


def import_server_manager() -> Any | None:
    """Milvus Lite's server manager, or None where ``milvus_lite`` is not installed.

    Milvus Lite 2.5.1 imports ``pkg_resources`` (setuptools < 81), which warns on
    import that its API is deprecated: that import, and only it, runs with the
    warnings of ``pkg_resources`` silenced.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "pkg_resources is deprecated", UserWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning, module="pkg_resources")
        try:
            from milvus_lite.server_manager import server_manager_instance
        except ImportError:
            return None
    return server_manager_instance
