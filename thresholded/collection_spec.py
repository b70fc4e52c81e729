"""``CollectionSpec``: one collection of a multi-collection retriever, in both adapters.

The fields and their checks are written once, here, with the other way to name a
collection, a Milvus ``uri`` and ``collection_name``; each adapter subclasses it and
says what ``store`` may be (a LlamaIndex index or vector store, a LangChain
``VectorStore``), and the LangChain one adds a ready ``retriever``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from thresholded.milvus_lite import milvus_uri
from thresholded.policy import RetrievalPolicy
from thresholded.scores import Metric
from thresholded.strict import StrictArguments


class CollectionSpec(StrictArguments, BaseModel):
    """One collection to search, with its own floor, candidate count and timeout.

    ``store`` is what to search (given first, or as ``store=``), or ``uri`` and
    ``collection_name`` (with ``db_name`` and ``token``) name a Milvus collection, which is
    reopened (it must exist). Its floor comes from
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
    uri: str | None = None
    """A Milvus URI (a Milvus Lite file, a str or a path, or ``http://host:19530``), with
    ``collection_name``."""
    collection_name: str | None = None
    """The Milvus collection, with ``uri``."""
    db_name: str | None = None
    """The Milvus database; default: the server's default database."""
    token: str = ""
    """The Milvus server's token (``user:password``), with ``uri``."""

    def __init__(self, store: Any = None, /, **data: Any) -> None:
        """``CollectionSpec(store, name=...)``: the store may come first, unnamed."""
        if store is not None:
            if "store" in data:
                raise TypeError("CollectionSpec got the store twice: positionally and as store=")
            data["store"] = store
        super().__init__(**data)

    def named_by_uri(self, others: int, ways: str) -> bool:
        """Whether the spec names a Milvus collection by URI: exactly one of that and the
        ``others`` ways given (``ways`` lists them for the error), else a ``ValueError``."""
        by_uri = self.uri is not None or self.collection_name is not None
        if others + by_uri != 1:
            raise ValueError(
                f"give exactly one of {ways}, or uri=... and collection_name=... (and db_name=...)"
            )
        if by_uri and not (self.uri and self.collection_name):
            raise ValueError("a collection named by URI needs both uri and collection_name")
        if not by_uri and (self.db_name or self.token):
            raise ValueError("db_name and token belong to a collection named by URI")
        return by_uri

    def timeout_or(self, *defaults: float | None) -> float | None:
        """The collection's deadline: the spec's ``timeout``, else the first of ``defaults``
        set (e.g. its retriever's own, then the multi-collection retriever's)."""
        return next((t for t in (self.timeout, *defaults) if t is not None), None)

    def reopen_arguments(self, *defaults: float | None) -> dict[str, Any]:
        """The arguments of the adapter's ``existing_milvus_store`` for a collection named by
        URI: its ``uri``, ``collection_name``, ``token``, ``db_name`` where given, and its
        deadline (:meth:`timeout_or` of ``defaults``)."""
        assert self.uri is not None and self.collection_name is not None
        database = {"db_name": self.db_name} if self.db_name else {}
        return {
            "uri": self.uri,
            "collection_name": self.collection_name,
            "token": self.token,
            "timeout": self.timeout_or(*defaults),
            **database,
        }

    @field_validator("name")
    @classmethod
    def _name_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("a collection's name must not be blank")
        return value

    @field_validator("uri", mode="before")
    @classmethod
    def _uri_as_str(cls, value: Any) -> str | None:
        return None if value is None else milvus_uri(value)

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
