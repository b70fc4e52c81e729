"""``CollectionSpec``: one collection of a multi-collection retriever, in both adapters.

The fields and their checks are written once, here; each adapter subclasses it and
says what ``store`` may be (a LlamaIndex index or vector store, a LangChain
``VectorStore``), and the LangChain one adds its other ways to name a collection.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from thresholded.policy import RetrievalPolicy
from thresholded.scores import Metric
from thresholded.strict import StrictArguments


class CollectionSpec(StrictArguments, BaseModel):
    """One collection to search, with its own floor, candidate count and timeout.

    ``store`` is what to search (given first, or as ``store=``). Its floor comes from
    ``profile`` (a calibration profile of this collection; ``collection`` names the
    profile's collection when it is not the store's own), else from ``policy``, else
    from the retriever's global policy. ``retrieve_k`` candidates are fetched (default:
    the global ``top_k * over_fetch``); ``timeout`` (seconds) is the deadline of the
    collection's whole search stage, retries included (default: the retriever's).
    ``name`` labels the collection in reports. ``metric`` is the store's metric, for
    stores it cannot be read from.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True, extra="forbid")

    store: Any = None
    """What to search (see the adapter's ``CollectionSpec``)."""
    policy: RetrievalPolicy | None = None
    profile: str | Path | None = None
    collection: str | None = None
    """The profile's collection, where it is not the store's collection name."""
    retrieve_k: int | None = Field(default=None, ge=1, strict=True)
    timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    name: str | None = None
    metric: Metric | None = None
    """The store's metric (``IP``, ``COSINE``, ``L2``), for stores it cannot be read from."""

    def __init__(self, store: Any = None, /, **data: Any) -> None:
        """``CollectionSpec(store, name=...)``: the store may come first, unnamed."""
        if store is not None:
            if "store" in data:
                raise TypeError("CollectionSpec got the store twice: positionally and as store=")
            data["store"] = store
        super().__init__(**data)

    @field_validator("name")
    @classmethod
    def _name_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("a collection's name must not be blank")
        return value

    @field_validator("metric", mode="before")
    @classmethod
    def _parse_metric(cls, value: Any) -> Any:
        return None if value is None else Metric.parse(value)

    @field_validator("collection")
    @classmethod
    def _collection_of_a_profile(cls, value: str | None, info: Any) -> str | None:
        if value is not None and info.data.get("profile") is None:
            raise ValueError(
                f"collection={value!r} names the collection of a calibration profile: "
                "give profile=... too"
            )
        return value
