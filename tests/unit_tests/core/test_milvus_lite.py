"""``wait_for_milvus_lite``: the engine of a Lite file listens before a client connects."""

from __future__ import annotations

import pytest
from pymilvus import MilvusClient

from thresholded.milvus_lite import is_lite_uri, wait_for_milvus_lite


def test_a_lite_file_is_served_once_it_returns(tmp_path):
    path = str(tmp_path / "kb.db")
    wait_for_milvus_lite(path)
    client = MilvusClient(uri=path)  # the same engine, already listening
    assert client.list_collections() == []
    client.close()


def test_server_addresses_are_left_alone():
    assert not is_lite_uri("http://127.0.0.1:19530")
    assert not is_lite_uri("unix:/tmp/x.sock")
    assert is_lite_uri("./kb.db")
    wait_for_milvus_lite("http://127.0.0.1:1")  # returns at once: nothing is started


def test_an_engine_that_never_listens_is_a_clear_timeout(monkeypatch, tmp_path):
    from milvus_lite import server_manager

    socket = tmp_path / "never.sock"
    monkeypatch.setattr(
        server_manager.server_manager_instance,
        "start_and_get_uri",
        lambda path, args=None: f"unix:{socket}",
    )
    with pytest.raises(TimeoutError, match=r"did not open its socket .*never\.sock"):
        wait_for_milvus_lite(str(tmp_path / "kb.db"), timeout=0.1)


def test_a_collection_spec_names_a_milvus_lite_file_by_path_too(tmp_path):
    """As the Milvus helpers do; it was pydantic's "Input should be a valid string"."""
    from thresholded.collection_spec import CollectionSpec

    spec = CollectionSpec(uri=tmp_path / "kb.db", collection_name="kb")
    assert spec.uri == str(tmp_path / "kb.db")
    with pytest.raises(TypeError, match=r"uri must be a str .* or a path, got int"):
        CollectionSpec(uri=19530, collection_name="kb")


@pytest.mark.parametrize("uri", ["localhost:19530", "127.0.0.1:19530", "./kb"])
def test_a_uri_that_is_neither_a_server_nor_a_lite_file_is_refused(uri):
    """``localhost:19530`` (no ``http://``) started a Milvus Lite engine of that name, which
    failed with "Unsupport db name localhost:19530"."""
    from thresholded.collection_spec import CollectionSpec
    from thresholded.milvus_lite import milvus_uri

    said = rf"uri {uri!r} is neither a server address .*http://.* nor a Milvus Lite file .*\.db"
    with pytest.raises(ValueError, match=said):
        milvus_uri(uri)
    with pytest.raises(ValueError, match=said):
        CollectionSpec(uri=uri, collection_name="kb")
    assert milvus_uri("http://localhost:19530") == "http://localhost:19530"


def test_a_grpc_uri_is_refused_as_pymilvus_refuses_it():
    """``grpc://`` was taken and named as a server form, and pymilvus's ``MilvusClient``
    then refused it: "needs start with [unix, http, https, tcp]"."""
    from thresholded.milvus_lite import milvus_uri

    with pytest.raises(ValueError, match=r"neither a server address .*https, tcp, unix\)"):
        milvus_uri("grpc://127.0.0.1:19530")
    for uri in ("https://x.zillizcloud.com", "tcp://127.0.0.1:19530", "unix:/tmp/m.sock"):
        assert milvus_uri(uri) == uri
