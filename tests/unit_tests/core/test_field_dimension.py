"""A Milvus collection's vector dimension, read as a courtesy: never a reason to fail."""

from __future__ import annotations

from thresholded.milvus_collection import field_dimension


class _Client:
    def __init__(self, description: dict | None) -> None:
        self._description = description

    def describe_collection(self, name: str) -> dict:
        if self._description is None:
            raise RuntimeError(f"collection {name} not found")
        return self._description


DESCRIBED = {
    "fields": [
        {"name": "id", "params": {}},
        {"name": "vector", "params": {"dim": 384}},
        {"name": "sparse", "params": {}},
    ]
}


def test_the_dimension_of_a_dense_field() -> None:
    assert field_dimension(_Client(DESCRIBED), "docs", "vector") == 384


def test_none_for_a_field_without_one() -> None:
    assert field_dimension(_Client(DESCRIBED), "docs", "sparse") is None
    assert field_dimension(_Client(DESCRIBED), "docs", "missing") is None


def test_none_when_the_collection_cannot_be_read() -> None:
    assert field_dimension(_Client(None), "docs", "vector") is None
