"""Reading a Chroma collection by id: which ids it holds within a search's restrictions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from thresholded.strict import search_ids


def ids_within(collection: Any, ids: list[str], restrictions: Mapping[str, Any]) -> set[str]:
    """The ids among ``ids`` that ``collection`` (a ``chromadb`` collection) holds within a
    query's own ``ids``, ``where`` and ``where_document``, in one ``get``."""
    only = search_ids(restrictions.get("ids"), argument="ids")
    if only is not None:
        ids = [i for i in ids if i in only]
    if not ids:
        return set()
    clauses = {k: restrictions[k] for k in ("where", "where_document") if k in restrictions}
    found = collection.get(ids=ids, include=[], **clauses)
    return {str(i) for i in found["ids"]}
