"""The metric a store reports, read from the store itself, for stores both adapters share.

FAISS and Chroma say how they score: a FAISS index has a metric type, a Chroma
collection a space. Chroma returns *distances*: squared L2, 1 - ip, 1 - cos.
An explicit ``metric=`` is checked against what a store reports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from thresholded.errors import UnsupportedMetricError
from thresholded.scores import Metric

_CHROMA_SPACES = {"l2": Metric.L2, "ip": Metric.IP_DISTANCE, "cosine": Metric.COSINE_DISTANCE}
"""What a Chroma space's score is: Chroma returns distances, never similarities."""


def contradiction_error(store: str, given: Metric, reported: Metric) -> UnsupportedMetricError:
    """An explicit metric that is not the one the store reports."""
    return UnsupportedMetricError(
        f"metric={given.value!r} was given, but {store} reports that it scores with "
        f"{reported.value}: reading its scores as {given.value} would put wrong cosines "
        f"(even an inverted ranking) under the floor. Leave metric= out (it is read from the "
        f"store) or pass metric={reported.value!r}."
    )


def checked_metric(
    store: str,
    given: Metric | str | None,
    reported: Callable[[], Metric | None],
    default: Metric | None = None,
) -> Metric | None:
    """The metric a store's raw scores are read in: ``given`` (``metric=``), which must be
    the one the store reports where it reports one (``reported``, asked once ``given`` is
    read); else the one it reports; else ``default``. None: nothing tells, and the adapter's
    error says what to pass."""
    parsed = None if given is None else Metric.parse(given)
    found = reported()
    if parsed is not None and found is not None and parsed is not found:
        raise contradiction_error(store, parsed, found)
    return parsed or found or default


def faiss_metric(index: Any, store: str) -> Metric:
    """The metric of a FAISS index: inner product, or squared L2."""
    import faiss

    kind = getattr(index, "metric_type", None)
    if kind == faiss.METRIC_INNER_PRODUCT:
        return Metric.IP
    if kind == faiss.METRIC_L2:
        return Metric.L2  # FAISS returns the squared distance
    raise UnsupportedMetricError(
        f"{store}'s FAISS index scores with metric type {kind!r}, which cannot be read as a "
        "cosine similarity: build it with an inner-product index on unit vectors "
        "(IndexFlatIP, DistanceStrategy.MAX_INNER_PRODUCT) or an L2 index (IndexFlatL2)."
    )


def chroma_metric(collection: Any, store: str) -> Metric:
    """The distance of a Chroma collection's space (its configuration, else its metadata)."""
    space = _chroma_space(collection)
    if space is None:
        space = "l2"  # Chroma's own default: a collection that names no space is l2
    found = _CHROMA_SPACES.get(str(space).lower())
    if found is None:
        raise UnsupportedMetricError(
            f"{store}'s Chroma collection uses the space {space!r}, which cannot be read as "
            f"a cosine similarity: use one of {sorted(_CHROMA_SPACES)}."
        )
    return found


def _chroma_space(collection: Any) -> str | None:
    try:
        configuration = collection.configuration or {}
    except Exception:  # an older chromadb keeps the space in the metadata only
        configuration = {}
    for key in ("hnsw", "spann"):
        section = configuration.get(key) if isinstance(configuration, Mapping) else None
        if isinstance(section, Mapping) and section.get("space"):
            return str(section["space"])
    metadata = getattr(collection, "metadata", None) or {}
    space = metadata.get("hnsw:space") if isinstance(metadata, Mapping) else None
    return str(space) if space else None
