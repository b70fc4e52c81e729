"""Stored vectors read back by id, in one batch, from the local stores both adapters know."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from thresholded.rescore import Vector


def chroma_vectors(collection: Any, ids: list[str]) -> dict[str, Vector]:
    """A Chroma collection's embeddings of ``ids``, in one ``get``."""
    found = collection.get(ids=ids, include=["embeddings"])
    return {str(i): list(v) for i, v in zip(found["ids"], found["embeddings"], strict=True)}


def faiss_vectors(index: Any, id_at: Mapping[Any, str], ids: Iterable[str]) -> dict[str, Vector]:
    """A FAISS index's vectors of ``ids``, read back from their positions (``id_at``: the id
    at each position)."""
    wanted = set(ids)
    positions = {i: p for p, i in id_at.items() if i in wanted}
    return {i: [float(x) for x in index.reconstruct(int(p))] for i, p in positions.items()}
