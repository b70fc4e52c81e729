"""Recognising a store by its class name, without importing the package that defines it,
and reading the name of the collection it searches.

An adapter supports stores from optional packages (langchain-milvus, FAISS, Chroma):
importing each to run ``isinstance`` would make every one a dependency. A class and
its bases are known by name instead; the answer is cached per class, as it is asked
on every call.
"""

from __future__ import annotations

import functools

__all__ = ["class_names", "collection_name", "is_named"]


@functools.lru_cache(maxsize=256)
def class_names(cls: type) -> frozenset[str]:
    """The names of ``cls`` and of every class it derives from."""
    return frozenset(base.__name__ for base in cls.__mro__)


def is_named(obj: object, name: str) -> bool:
    """Whether ``obj`` is an instance of a class named ``name``, or of a subclass of one."""
    return name in class_names(type(obj))


def collection_name(store: object) -> str | None:
    """The name of the collection a vector store searches, where it has one: Milvus stores
    (both frameworks) keep ``collection_name``; Chroma stores keep their Chroma collection."""
    name = getattr(store, "collection_name", None)
    if name is None and (is_named(store, "Chroma") or is_named(store, "ChromaVectorStore")):
        name = getattr(getattr(store, "_collection", None), "name", None)
    return name if isinstance(name, str) and name else None


def default_label(store: object, position: int, db_name: str | None = None) -> str:
    """A collection's name in a multi-collection report when none is given, alike in both
    adapters: ``db/collection`` (a Milvus collection outside the default database
    ``db_name``), the store's ``collection_name``, else its class and ``position``
    (``InMemoryVectorStore[1]``)."""
    name = getattr(store, "collection_name", None)
    if not name:
        return f"{type(store).__name__}[{position}]"
    return f"{db_name}/{name}" if db_name and db_name != "default" else str(name)
