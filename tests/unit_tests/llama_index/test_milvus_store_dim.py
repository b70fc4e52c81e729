"""A new collection's ``dim`` is an int Milvus accepts, refused before anything is created.

``milvus_store(..., dim=True)`` created a collection of dimension 1 in the file, then failed
with Milvus's "invalid dimension: 1"; ``dim="384"`` and ``dim=8.0`` were converted.
"""

from __future__ import annotations

import numpy as np
import pytest
from pymilvus import MilvusClient

from llama_index_thresholded.milvus import CompatibleMilvusVectorStore, milvus_store


def collections_at(uri: str) -> list[str]:
    client = MilvusClient(uri=uri)
    try:
        return client.list_collections()
    finally:
        client.close()


@pytest.mark.parametrize("dim", [True, "384", 8.0, None])
def test_a_dimension_of_another_type_is_refused_naming_dim(milvus_uri, dim):
    with pytest.raises(TypeError, match=r"dim must be .*an int.*got"):
        milvus_store(milvus_uri, "kb", dim=dim)
    assert collections_at(milvus_uri) == []


@pytest.mark.parametrize("dim", [1, 0, -8, 32_769])
def test_a_dimension_milvus_refuses_is_refused_before_creating_the_collection(milvus_uri, dim):
    with pytest.raises(ValueError, match=r"dim must be from 2 to 32768"):
        CompatibleMilvusVectorStore(uri=milvus_uri, collection_name="kb", dim=dim)
    assert collections_at(milvus_uri) == []


def test_a_numpy_integer_is_a_dimension(milvus_uri):
    store = milvus_store(milvus_uri, "kb", dim=np.int64(8))
    assert store.dim == 8
    assert collections_at(milvus_uri) == ["kb"]


def test_a_dimension_given_by_position_is_checked_too(milvus_uri):
    positional = [milvus_uri, "", "kb", False, True, None, "doc_id", "text", None, None, True, 1]
    with pytest.raises(ValueError, match=r"dim must be from 2"):
        CompatibleMilvusVectorStore(*positional)
