"""Connecting to Milvus: what a client takes, and a server that does not answer while a
store is built, as :class:`~thresholded.errors.SearchUnavailableError` naming its URI."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

from thresholded.errors import SearchUnavailableError
from thresholded.retry import describe_error, is_transient
from thresholded.strict import named_parameters

CONNECTION_OPTIONS = (
    "alias",
    "dedicated",
    "option",
    "address",
    "host",
    "port",
    "keep_alive",
    "secure",
    "grpc_options",
    "client_pem_path",
    "client_key_path",
    "ca_pem_path",
    "server_pem_path",
    "server_name",
)
"""The connection options pymilvus reads from the client's keyword arguments (``keep_alive``
only the older ``connections`` API reads)."""


@functools.cache
def client_arguments() -> frozenset[str]:
    """What a ``MilvusClient`` takes: its parameters and pymilvus' connection options."""
    from pymilvus import MilvusClient

    return frozenset((*named_parameters(MilvusClient.__init__), *CONNECTION_OPTIONS))


@contextlib.contextmanager
def unavailable_as_error(uri: str, collection: str, timeout: float | None) -> Iterator[None]:
    """Raise a server that cannot be reached as ``SearchUnavailableError`` naming ``uri``.

    Only failures that may pass (judged by ``thresholded.retry.is_transient``)
    are turned; a wrong parameter or a missing collection is raised as it is.
    """
    try:
        yield
    except SearchUnavailableError:
        raise
    except Exception as error:
        if not is_transient(error):
            raise
        deadline = "no deadline" if timeout is None else f"deadline {timeout:g} s"
        raise SearchUnavailableError(
            f"Milvus at {uri} did not answer while the store of collection {collection!r} "
            f"was being built ({deadline}): "
            f"{describe_error(error)}. Check that the server is running and reachable at "
            "this URI, or give it more time with a larger timeout."
        ) from error
