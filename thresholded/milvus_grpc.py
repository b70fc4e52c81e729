"""gRPC keepalive for Milvus clients, set so that no server answers it with GOAWAY.

pymilvus opens its channels with a keepalive ping every 10 s, also while no call is
in flight. A gRPC server accepts by default one ping per 5 minutes when it sends no
data (gRPC C++'s ``min_recv_ping_interval_without_data``, grpc-go's
``EnforcementPolicy.MinTime``), and none at all on a connection without calls; each
early ping is a strike, and after two strikes the server closes the connection with
GOAWAY ``too_many_pings``, which the client logs as an error. A Milvus Lite engine
does so after about two minutes of an idle client.

:data:`KEEPALIVE_OPTIONS` pings only while a call is in flight, and at most every 5
minutes. A dead server is still found out: every call can carry a deadline
(``timeout``), which is what bounds a call anyway.

pymilvus 2.6 shares one channel between the clients of one server and token, opened
with the options of the first of them; give these options to every client you
create, or at least to the first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

KEEPALIVE_OPTIONS: Mapping[str, Any] = {
    "grpc.keepalive_time_ms": 300_000,
    "grpc.keepalive_permit_without_calls": False,
}


def grpc_options(overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``grpc_options`` of a pymilvus client: the keepalive above, then ``overrides``."""
    return {**KEEPALIVE_OPTIONS, **(overrides or {})}


def client_kwargs(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``kwargs`` of a ``MilvusClient`` (or a store that makes one) with the keepalive added."""
    return {**kwargs, "grpc_options": grpc_options(kwargs.get("grpc_options"))}


def connection_kwargs(
    uri: str,
    *,
    token: str = "",
    db_name: str | None = None,
    timeout: float | None = None,
    grpc_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The arguments of a ``MilvusClient`` of ``uri`` (or a store's ``connection_args``):
    ``token``, ``db_name``, ``timeout`` and ``grpc_options`` where given, with the keepalive."""
    given = {"token": token, "db_name": db_name, "timeout": timeout, "grpc_options": grpc_options}
    return client_kwargs(
        {"uri": uri, **{k: v for k, v in given.items() if v is not None and v != ""}}
    )
