"""Calibrate on what an existing Milvus collection holds: its sections and stored vectors.

The vectors a collection holds are what a search compares questions with, whatever
text, metadata header or model version produced them. Reading them back measures
the index itself; only the questions are embedded, with the model the collection
was built with (its dimension is checked against the vector field).

Both adapters' layouts are recognised:

- LlamaIndex: primary key ``id``, vectors ``embedding``, text ``text``, metadata as
  dynamic fields (``$meta``);
- LangChain: primary key ``pk``, vectors ``vector``, text ``text``, metadata as
  fields or dynamic fields.

A gold id in the questions is matched with the primary key, or with the metadata
key ``id_field`` names (e.g. ``pid``, ``source``). A metadata ``filter`` calibrates
under it: a filter removes candidates, so it can only lower a question's best score,
and a gate calibrated without the filter can empty answerable questions under it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from thresholded.calibration.data import UNDETERMINED, Passage, Question
from thresholded.errors import DimensionMismatchError, NotUnitVectorError, UnsupportedMetricError
from thresholded.filters import Filter, client_dialect, to_milvus
from thresholded.milvus_collection import describe_existing, require_lite_file
from thresholded.scores import Metric

__all__ = [
    "LAYOUTS",
    "Layout",
    "StoredCorpus",
    "detect_layout",
    "filter_expression",
    "not_a_milvus_store",
    "read_collection",
    "resolve_gold",
]

logger = logging.getLogger(__name__)


def not_a_milvus_store(
    what: str, wanted: str, store: Any, *, embedder: str, hint: str = ""
) -> TypeError:
    """The refusal of a store a collection cannot be read through, with the way to calibrate
    any other store: from its sections' texts, embedded with the store's model (``embedder``:
    the adapter's ``embedder_of(...)`` call)."""
    return TypeError(
        f"{what} reads a Milvus collection through a {wanted}, got {type(store).__name__}"
        f"{hint}. Any other store is calibrated from its sections' texts: write them as JSON "
        "Lines {pid, text} and run `thresholded calibrate --corpus sections.jsonl --queries "
        "questions.yaml --model ...`, or, from Python, thresholded.calibration.calibrate_simple"
        f"({embedder}, load_corpus('sections.jsonl'), load_simple_form('questions.yaml'))"
    )


def filter_expression(
    filters: Any, client: Any, *, translate: Callable[[Any], Filter | None], **layout: Any
) -> str:
    """The Milvus expression the collection is read under: ``filters`` as they are when they
    are one (a str), else in the core model by the adapter's ``translate`` and written for
    ``client``'s engine and the collection's ``layout`` (``to_milvus``'s ``json_field`` and
    ``declared``); a filter this engine cannot run exactly is refused: the calibration
    would read other rows."""
    if isinstance(filters, str):
        return filters
    written = to_milvus(translate(filters), client_dialect(client), **layout)
    if written.never:
        raise ValueError(f"the filters {filters} match no section: there is nothing to calibrate")
    if not written.exact:
        raise ValueError(
            f"the filters {filters} cannot be written exactly for this Milvus engine; pass the "
            "Milvus expression itself as filters='...'"
        )
    return written.expr or ""


@dataclass(frozen=True)
class Layout:
    """Where one adapter writes a section's id, vector and text."""

    name: str
    id_field: str
    vector_field: str
    text_field: str = "text"
    metadata_field: str | None = None
    """The JSON field a section's metadata is kept in (None: among the fields)."""

    def metadata(self, row: dict[str, Any]) -> dict[str, Any]:
        """A row's metadata, where ``id_field`` keys are read."""
        return row if self.metadata_field is None else row.get(self.metadata_field) or {}


LAYOUTS = (Layout("llama-index", "id", "embedding"), Layout("langchain", "pk", "vector"))


@dataclass(frozen=True)
class StoredCorpus:
    """A collection's sections as passages, their stored vectors (one row each), and keys.

    ``keys`` maps each passage's id to the value of the metadata key that gold ids
    name (the primary key itself when no ``id_field`` is given); ``metric`` is the vector
    field's index metric (None: not indexed).
    """

    passages: tuple[Passage, ...]
    vectors: np.ndarray
    layout: Layout
    dimension: int
    keys: dict[str, str]
    metric: Metric | None = None


def detect_layout(description: dict[str, Any], given: Layout | None = None) -> Layout:
    """The adapter layout of a described collection, or ``given`` (a store's own field
    names) when every field it names is there; an error naming its fields otherwise."""
    names = {f.get("name") for f in description.get("fields", [])}
    if given is not None:
        return _present(given, names)
    for layout in LAYOUTS:
        if {layout.id_field, layout.vector_field, layout.text_field} <= names:
            return layout
    raise ValueError(
        f"collection fields {sorted(n for n in names if n)} match neither the LlamaIndex "
        "layout (id, embedding, text) nor the LangChain one (pk, vector, text): calibrate "
        "through the store that names them, calibrate_index(store, ...) or "
        "calibrate_vectorstore(store, ...)"
    )


def _present(layout: Layout, names: set[Any]) -> Layout:
    missing = sorted({layout.id_field, layout.vector_field, layout.text_field} - names)
    if missing:
        raise ValueError(
            f"the {layout.name} store names the fields {missing}, which the collection does "
            f"not have; its fields are {sorted(n for n in names if n)}"
        )
    return layout


def _dimension(description: dict[str, Any], field: str) -> int:
    spec = next(f for f in description["fields"] if f.get("name") == field)
    return int(spec.get("params", {})["dim"])


MILVUS_METRICS = (Metric.IP, Metric.COSINE, Metric.L2)
"""The metrics of a dense field whose scores are cosines (IP and L2 on unit vectors)."""


def _metric(client: Any, collection: str, field: str) -> Metric | None:
    """The metric the vector field is indexed with (None: no index); one that gives no
    cosines is refused."""
    metric = None
    for index in client.list_indexes(collection, field_name=field):
        name = str(client.describe_index(collection, index).get("metric_type", "")).upper()
        if name and name not in MILVUS_METRICS:
            raise UnsupportedMetricError(
                f"{collection}.{field} is indexed with {name}: calibration measures cosines "
                "(COSINE, or IP or L2 on unit vectors)"
            )
        metric = Metric(name) if name else metric
    return metric


def _as_compared(vectors: np.ndarray, metric: Metric | None, collection: str) -> np.ndarray:
    """The stored vectors as the index compares them: COSINE normalises each one, so its
    sections may be stored at any length; under IP and L2 they must be unit length
    already (checked where they are scored)."""
    if metric is not Metric.COSINE:
        return vectors
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    if not norms.all():
        raise NotUnitVectorError(
            f"{collection} holds a zero vector: it has no cosine with any question; "
            "re-embed its section"
        )
    return vectors / norms


def _rows(client: Any, collection: str, filter: str, batch_size: int) -> Iterator[dict]:
    iterator = client.query_iterator(
        collection, batch_size=batch_size, filter=filter, output_fields=["*"]
    )
    try:
        while batch := iterator.next():
            yield from batch
    finally:
        iterator.close()


def _passage(row: dict[str, Any], layout: Layout) -> Passage:
    meta = layout.metadata(row)

    def text_of(key: str) -> str | None:
        value = meta.get(key)
        return None if value in (None, "", "None") else str(value)

    return Passage(
        pid=str(row[layout.id_field]),
        lang=text_of("lang") or UNDETERMINED,
        text=str(row.get(layout.text_field) or ""),
        group=text_of("group"),
        title=text_of("title"),
        source=text_of("source"),
    )


def read_collection(
    uri: str | None,
    collection: str,
    *,
    id_field: str | None = None,
    filter: str = "",
    dimension: int | None = None,
    batch_size: int = 512,
    progress: bool = True,
    client: Any = None,
    layout: Layout | None = None,
    **client_options: Any,
) -> StoredCorpus:
    """Read every section (under ``filter``) and its stored vector, in batches.

    The collection is read at ``uri``, through a connection of its own, or through
    ``client``, an open ``MilvusClient`` (e.g. a vector store's), when ``uri`` is None.
    ``dimension``, when given, must be the vector field's: the model that embeds the
    questions has to be the one the collection was built with. ``layout`` names the id,
    vector and text fields (a store's own); by default the adapters' layouts are tried.
    """
    if client is not None:
        if uri is not None or client_options:
            raise TypeError("read_collection takes a uri (and its client options) or a client")
        where = "the client's server"
        return _read(
            client, collection, where, id_field, filter, dimension, batch_size, progress, layout
        )
    if uri is None:
        raise TypeError("read_collection needs the collection's uri or an open client")
    from pymilvus import MilvusClient

    from thresholded.milvus_lite import wait_for_milvus_lite

    require_lite_file(uri, collection)
    wait_for_milvus_lite(uri)
    # a connection of its own, closed after the read: a shared one left idle by another
    # client may have been hung up on by the server
    own = MilvusClient(uri=uri, dedicated=True, **client_options)
    try:
        return _read(
            own, collection, uri, id_field, filter, dimension, batch_size, progress, layout
        )
    finally:
        own.close()


def _read(
    client: Any,
    collection: str,
    where: str,
    id_field: str | None,
    filter: str,
    dimension: int | None,
    batch_size: int,
    progress: bool,
    given: Layout | None,
) -> StoredCorpus:
    from tqdm import tqdm

    description = describe_existing(client, collection, uri=where)
    layout = detect_layout(description, given)
    dim = _dimension(description, layout.vector_field)
    if dimension is not None and dimension != dim:
        raise DimensionMismatchError(
            f"{collection}.{layout.vector_field} holds {dim}-dimensional vectors, the model "
            f"gives {dimension}: embed the questions with the model the collection was built with"
        )
    metric = _metric(client, collection, layout.vector_field)
    passages, vectors, keys = [], [], {}
    rows = tqdm(
        _rows(client, collection, filter, batch_size),
        desc=f"reading {collection}",
        unit="section",
        disable=not progress,
    )
    for row in rows:
        passage, meta = _passage(row, layout), layout.metadata(row)
        if id_field is not None and meta.get(id_field) in (None, ""):
            raise ValueError(f"section {passage.pid!r} has no metadata key {id_field!r}")
        passages.append(passage)
        vectors.append(row[layout.vector_field])
        keys[passage.pid] = str(meta[id_field]) if id_field else passage.pid
    if not passages:
        where = f" under the filter {filter!r}" if filter else ""
        raise ValueError(f"collection {collection!r} holds no sections{where}")
    logger.info("read %d sections of %s (%s layout)", len(passages), collection, layout.name)
    stored = _as_compared(np.asarray(vectors, dtype=np.float64), metric, collection)
    return StoredCorpus(tuple(passages), stored, layout, dim, keys, metric)


def resolve_gold(questions: Sequence[Question], stored: StoredCorpus) -> list[Question]:
    """Questions whose gold ids name the collection's sections by primary key.

    A gold id matches every section whose key equals it; an answerable question
    none of whose gold ids is in the collection (or under the filter) is left out,
    with a warning, since nothing there could answer it.
    """
    by_key: dict[str, list[str]] = {}
    for pid, key in stored.keys.items():
        by_key.setdefault(key, []).append(pid)
    resolved, missing = [], 0
    for q in questions:
        if not q.answerable:
            resolved.append(q)
            continue
        pids = tuple(p for gold in q.gold_pids for p in by_key.get(gold, ()))
        if pids:
            resolved.append(replace(q, gold_pids=pids))
        else:
            missing += 1
    if missing:
        logger.warning(
            "%d answerable questions name no section of the collection (or none under the "
            "filter) and are left out",
            missing,
        )
    return resolved
