"""Rows read by id on Milvus Lite come back whole, however many ids are asked for.

A query without a limit returns at most 16,383 rows on Milvus Lite: the rows of more ids
(the vectors of a hybrid search's 16,384 candidates, the neighbours of many kept sections)
were cut short without a word, and the sections left out were read from the docstore,
embedded again, or judged outside the retriever's restrictions.
"""

from __future__ import annotations

import asyncio

import pytest
from pymilvus import AsyncMilvusClient, MilvusClient

from thresholded.milvus_collection import arows_by_id, ids_matching, rows_by_id

pytestmark = pytest.mark.integration

ROWS = 16_500


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, MilvusClient]:
    uri = str(tmp_path_factory.mktemp("ids") / "ids.db")
    client = MilvusClient(uri)
    client.create_collection("c", dimension=2, id_type="string", max_length=16, metric_type="IP")
    rows = [{"id": f"n{i}", "vector": [1.0, 0.0], "tenant": "a"} for i in range(ROWS)]
    for start in range(0, ROWS, 5000):
        client.insert("c", rows[start : start + 5000])
    return uri, client


def test_every_row_asked_for_is_read(collection: tuple[str, MilvusClient]) -> None:
    _, client = collection
    ids = [f"n{i}" for i in range(ROWS)]
    rows = rows_by_id(client.query, "c", "id", ids, ["id"])
    assert sorted(r["id"] for r in rows) == sorted(ids)


def test_and_in_async_calls(collection: tuple[str, MilvusClient]) -> None:
    uri, _ = collection
    ids = [f"n{i}" for i in range(ROWS)]

    async def read() -> list[dict[str, object]]:
        client = AsyncMilvusClient(uri)
        try:
            return await arows_by_id(client.query, "c", "id", ids, ["id"])
        finally:
            await client.close()

    assert len({r["id"] for r in asyncio.run(read())}) == ROWS


def test_every_row_within_a_restriction_is_found(collection: tuple[str, MilvusClient]) -> None:
    _, client = collection
    ids = [f"n{i}" for i in range(ROWS)]
    assert ids_matching(client, "c", "id", ids, 'tenant == "a"') == set(ids)


def test_an_id_held_by_two_rows_pushes_no_other_out(tmp_path) -> None:
    """A LlamaIndex store without ``upsert_mode`` adds a second row for an id loaded again;
    a query asks for as many rows as ids, which holds because Milvus answers a query with one
    row per primary key: the second row never takes another id's place."""
    client = MilvusClient(str(tmp_path / "twice.db"))
    client.create_collection("c", dimension=2, id_type="string", max_length=16, metric_type="IP")
    ids = [f"n{i:03d}" for i in range(100)]
    client.insert("c", [{"id": i, "vector": [1.0, 0.0]} for i in ids[::2]])
    client.flush("c")
    client.insert("c", [{"id": i, "vector": [0.0, 1.0]} for i in ids])
    client.insert("c", [{"id": i, "vector": [0.0, 1.0]} for i in ids[:10]])
    assert ids_matching(client, "c", "id", ids, None) == set(ids)
    assert sorted(r["id"] for r in rows_by_id(client.query, "c", "id", ids, ["id"])) == ids
