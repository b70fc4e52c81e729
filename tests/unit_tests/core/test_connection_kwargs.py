"""A Milvus client's arguments: what is given, and the keepalive no server answers with GOAWAY."""

from __future__ import annotations

from thresholded.milvus_grpc import KEEPALIVE_OPTIONS, connection_kwargs


def test_only_what_is_given() -> None:
    assert connection_kwargs("http://127.0.0.1:19530") == {
        "uri": "http://127.0.0.1:19530",
        "grpc_options": dict(KEEPALIVE_OPTIONS),
    }


def test_every_argument_given() -> None:
    given = connection_kwargs(
        "kb.db", token="u:p", db_name="tenants", timeout=2.5, grpc_options={"x": 1}
    )
    assert given == {
        "uri": "kb.db",
        "token": "u:p",
        "db_name": "tenants",
        "timeout": 2.5,
        "grpc_options": {**KEEPALIVE_OPTIONS, "x": 1},
    }


def test_an_empty_token_or_database_is_none() -> None:
    assert set(connection_kwargs("kb.db", token="", db_name="")) == {"uri", "grpc_options"}
