"""Partition names limit a Milvus search; a value that names none is refused, never widened."""

from __future__ import annotations

import pytest

from thresholded.errors import UnsafeFilterError
from thresholded.milvus_collection import checked_partitions


@pytest.mark.parametrize("given", [["a"], ("a", "b"), {"a"}])
def test_a_list_of_names_is_kept(given) -> None:
    assert sorted(checked_partitions(given, argument="partition_names")) == sorted(given)


def test_none_is_every_partition() -> None:
    assert checked_partitions(None, argument="partition_names") is None


@pytest.mark.parametrize("empty", [[], (), set()])
def test_an_empty_list_is_refused(empty) -> None:
    with pytest.raises(UnsafeFilterError, match=r"partition_names=\[\] names no partition"):
        checked_partitions(empty, argument="partition_names")


@pytest.mark.parametrize("given", ["public", "", b"public", [1], ["a", None], 3])
def test_anything_but_a_list_of_names_is_refused(given) -> None:
    with pytest.raises(TypeError, match=r"partition_names takes a list of partition names"):
        checked_partitions(given, argument="partition_names")
