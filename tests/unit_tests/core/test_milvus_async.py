"""An async client per event loop: a client never outlives the loop it was made in."""

from __future__ import annotations

import asyncio
import gc
import itertools

from thresholded.milvus_async import LoopLocalClient


class FakeAsyncClient:
    """Remembers the event loop of its first call, and refuses any other, as pymilvus' does."""

    serial = itertools.count()

    def __init__(self) -> None:
        self.number = next(self.serial)
        self.loop: asyncio.AbstractEventLoop | None = None

    async def search(self, query: str) -> tuple[int, str]:
        loop = asyncio.get_running_loop()
        self.loop = self.loop or loop
        if self.loop is not loop:
            raise RuntimeError("Event loop is closed")
        await asyncio.sleep(0)
        return self.number, query


def per_loop() -> tuple[LoopLocalClient, FakeAsyncClient]:
    home = FakeAsyncClient()
    return LoopLocalClient(FakeAsyncClient, home=home), home


def test_each_new_event_loop_gets_a_client_of_its_own():
    client, home = per_loop()

    async def batch() -> set[int]:
        results = await asyncio.gather(*(client.search(f"q{i}") for i in range(16)))
        assert [q for _, q in results] == [f"q{i}" for i in range(16)]
        return {number for number, _ in results}

    runs = [asyncio.run(batch()) for _ in range(3)]
    assert all(len(numbers) == 1 for numbers in runs)  # one client per loop, shared by its tasks
    assert len(set.union(*runs)) == 3  # and a new one for each loop
    assert home.number not in set.union(*runs)


def test_outside_a_loop_the_original_client_answers():
    client, home = per_loop()
    assert client.current() is home
    assert client.number == home.number


def test_without_an_original_client_one_is_made_once_for_synchronous_callers():
    client = LoopLocalClient(FakeAsyncClient)
    assert client.current() is client.current()


def test_clients_of_closed_loops_are_forgotten():
    client, _ = per_loop()

    async def touch() -> int:
        return (await client.search("q"))[0]

    for _ in range(5):
        asyncio.run(touch())
    gc.collect()
    assert client.loops == 0

    async def while_open() -> int:
        await client.search("q")
        return client.loops

    assert asyncio.run(while_open()) == 1


def test_threads_with_loops_of_their_own_get_clients_of_their_own():
    client, _ = per_loop()

    async def number() -> int:
        return (await client.search("q"))[0]

    async def in_threads() -> list[int]:
        return list(await asyncio.gather(*(asyncio.to_thread(asyncio.run, number()) for _ in "ab")))

    numbers = asyncio.run(in_threads())
    assert len(set(numbers)) == 2
