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


@pytest.mark.parametrize(
    "name", [".*", "pub.*", "public|internal", "[a-z]+", "", " ", "public ", "pub\\w", "é"]
)
def test_a_name_no_partition_can_have_is_refused(name) -> None:
    """Milvus before 2.3.4 (and with ``proxy.partitionNameRegexp``) searches every partition
    whose name matches ``^name$``: ``".*"`` opened the internal partitions too."""
    with pytest.raises(UnsafeFilterError, match=r"which no Milvus partition can be named"):
        checked_partitions(["public", name], argument="partition_names")


@pytest.mark.parametrize("name", ["_default", "public", "tenant-7", "t$1", "2024_q1"])
def test_every_name_a_partition_can_have_is_kept(name) -> None:
    assert checked_partitions([name], argument="partition_names") == (name,)
