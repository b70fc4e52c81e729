"""What an existing Milvus collection is, read through a ``MilvusClient``.

Both adapters open collections that must already exist. A misspelt name would
otherwise create a new, empty collection, and every question would then quietly
"match nothing"; and the scores of an opened collection must be read in the
metric its index really uses.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from thresholded.errors import CollectionNotFoundError, FieldNotFoundError, UnsafeFilterError
from thresholded.milvus_lite import is_lite_uri, lite_engine_version
from thresholded.scores import Metric
from thresholded.strict import list_of_strings

MAX_DIMENSION = 32_768
"""The largest dimension of a Milvus vector field (the smallest is 2)."""


def check_dimension(dim: object, *, optional: bool = False) -> int | None:
    """A new collection's ``dim``: an int from 2 to 32,768, refused otherwise before anything
    is created (``True`` would make a collection of dimension 1, and Milvus refuses it only
    when indexing it). ``optional``: None stands for an existing collection's own."""
    if dim is None and optional:
        return None
    if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
        raise TypeError(
            f"dim must be the embedding model's dimension, an int (e.g. 384), got {dim!r}"
        )
    if not 2 <= int(dim) <= MAX_DIMENSION:
        raise ValueError(f"dim must be from 2 to {MAX_DIMENSION}, as Milvus requires, got {dim}")
    return int(dim)


METRIC_NAMES = ("metric_type", "similarity_metric")
"""What Milvus (``metric_type``) and LlamaIndex (``similarity_metric``) call the metric that
the helpers of both adapters take as ``metric=``."""


def refuse_metric_named_otherwise(function: str, kwargs: dict[str, Any]) -> None:
    """Point ``metric_type=`` or ``similarity_metric=`` to ``metric=``, the one name."""
    for name in METRIC_NAMES:
        if name in kwargs:
            raise TypeError(
                f"{function}() got {name}={kwargs[name]!r}: the metric is metric= here, "
                f"pass metric={kwargs[name]!r} instead"
            )


def refuse_read_metric(function: str, kwargs: dict[str, Any], *also: str) -> None:
    """Refuse the metric (under any of its names), and ``also``, that a reopened
    collection's index already says."""
    for name in ("metric", *METRIC_NAMES, *also):
        if name in kwargs:
            source = "vector field" if name == "dim" else "index"
            raise TypeError(
                f"{function}() got {name}={kwargs[name]!r}, which it reads from the "
                f"collection's {source}: leave it out (a new collection is built with "
                f"{name if name == 'dim' else 'metric'}=...)"
            )


def refuse_drop(function: str, kwargs: dict[str, Any], *, rebuild: str) -> None:
    """Refuse ``overwrite`` and ``drop_old`` in a call that reopens a collection: they drop
    it, and every question would then match nothing. ``rebuild`` names the call that
    builds a collection anew (``milvus_store``, ``milvus_from_documents``)."""
    for name in ("overwrite", "drop_old"):
        if name in kwargs:
            raise TypeError(
                f"{function}() reopens a collection and never drops it: {name}="
                f"{kwargs[name]!r} would delete every row it holds. Leave it out; to build "
                f"the collection anew, use {rebuild}(..., overwrite=True)"
            )


def require_lite_file(uri: str, collection_name: str) -> None:
    """Refuse a Milvus Lite path where no file is: Milvus Lite would create an empty
    database there, and a misspelt path would read as a missing collection."""
    if is_lite_uri(uri) and not Path(uri).exists():
        raise CollectionNotFoundError(
            f"collection {collection_name!r} does not exist: there is no Milvus Lite file at "
            f"{uri} (a misspelt path?). Give the path of the file the collection was built "
            "in, or build it first (milvus_store in LlamaIndex, milvus_from_documents in "
            "LangChain)"
        )


def partition_key_of(description: dict[str, Any]) -> str | None:
    """The partition key field of a described collection, or None."""
    fields = description.get("fields", [])
    return next((f["name"] for f in fields if f.get("is_partition_key")), None)


def refuse_lite_partition_key(uri: str, collection_name: str, field: str | None) -> None:
    """Refuse a partition key field on Milvus Lite 2.x, which evaluates no filter on such a
    collection: every filtered search, and every fetch by id, fails with "Invalid expr"."""
    engine = lite_engine_version()
    if field is None or not is_lite_uri(uri) or engine is None or not engine.startswith("2."):
        return
    raise ValueError(
        f"collection {collection_name!r} has the partition key field {field!r}, and Milvus "
        f"Lite {engine} evaluates no filter on such a collection: every filtered search, and "
        "every fetch of stored vectors by id, fails with 'Invalid expr ...: invalid "
        f"parameter'. On Milvus Lite keep {field!r} as plain metadata (leave "
        "partition_key_field out) and filter on it with filters=; or use a Milvus server"
    )


def describe_existing(
    client: Any, collection_name: str, *, uri: str, db_name: str | None = None
) -> dict[str, Any]:
    """``client.describe_collection(collection_name)``; a missing collection is an error.

    The error names the URI, the database and the collections that do exist.
    """
    names = client.list_collections()
    if collection_name not in names:
        raise collection_not_found(collection_name, names, uri=uri, db_name=db_name)
    return client.describe_collection(collection_name)


def collection_not_found(
    collection_name: str, names: Iterable[str], *, uri: str, db_name: str | None = None
) -> CollectionNotFoundError:
    """The error for a collection that is not at ``uri``: it names the URI, the database and
    the collections that do exist (``names``)."""
    where = f"{uri} (database {db_name!r})" if db_name else uri
    return CollectionNotFoundError(
        f"collection {collection_name!r} does not exist at {where}; it has: {sorted(names)}"
    )


def vector_dims(description: dict[str, Any]) -> dict[str, int]:
    """The dimension of each fixed-size vector field of a described collection, by name."""
    return {
        spec["name"]: int(spec["params"]["dim"])
        for spec in description.get("fields", [])
        if "dim" in spec.get("params", {})
    }


def field_dimension(client: Any, collection_name: str, field: str) -> int | None:
    """The dimension of the vector ``field`` of a collection, read through ``client``; None
    where it has none (a sparse field, no such field) or the collection cannot be read (it may
    not exist yet): the dimension is a courtesy check, never a reason to fail."""
    try:
        description = client.describe_collection(collection_name)
    except Exception:
        return None
    return vector_dims(description).get(field)


def dense_dimension(
    description: dict[str, Any], collection_name: str, field: str, *, argument: str
) -> int:
    """The dimension of a described collection's dense vector ``field``; a collection
    without it is an error naming its vector fields and the ``argument`` that names one."""
    vectors = vector_dims(description)
    if field not in vectors:
        raise FieldNotFoundError(
            f"collection {collection_name!r} has no dense vector field {field!r}; its "
            f"vector fields are {sorted(vectors)}",
            argument=argument,
        )
    return vectors[field]


class Reopened(NamedTuple):
    """What reopening an existing collection reads of it (:func:`reopened`)."""

    description: dict[str, Any]
    dim: int
    """The dimension of its dense vector field."""
    metric: str | None
    """The metric of the index on that field, as Milvus names it; None: it has no index."""


def reopened(
    client: Any,
    collection_name: str,
    field: str,
    *,
    uri: str,
    db_name: str | None,
    argument: str,
) -> Reopened:
    """An existing collection that a store reopens, read through ``client``: a missing one is
    an error (:func:`describe_existing`), as is a partition key on Milvus Lite 2.x
    (:func:`refuse_lite_partition_key`) and a collection without the dense vector ``field``,
    which ``argument`` names (:func:`dense_dimension`)."""
    description = describe_existing(client, collection_name, uri=uri, db_name=db_name)
    refuse_lite_partition_key(uri, collection_name, partition_key_of(description))
    dim = dense_dimension(description, collection_name, field, argument=argument)
    return Reopened(description, dim, index_metric(client, collection_name, field))


def index_metric(client: Any, collection_name: str, field: str) -> str | None:
    """The metric of the index on ``field``, as Milvus names it; None when it has no index."""
    for index_name in client.list_indexes(collection_name, field_name=field):
        described = client.describe_index(collection_name, index_name)
        if described.get("metric_type"):
            return str(described["metric_type"])
    return None


def check_fits_existing(
    client: Any, collection_name: str, field: str, *, dim: int, metric: Metric
) -> None:
    """Refuse to add to an existing collection of another dimension or index metric than
    asked: the first insert would fail on the dimension, the first search on the metric.
    A collection that does not exist yet is made as asked."""
    if not client.has_collection(collection_name):
        return
    fix = (
        "open it with existing_milvus_store(uri, collection_name), which reads them, or pass "
        "overwrite=True to rebuild it"
    )
    description = client.describe_collection(collection_name)
    found = dense_dimension(description, collection_name, field, argument="embedding_field")
    if found != dim:
        raise ValueError(
            f"collection {collection_name!r} holds vectors of {found} dimensions, not "
            f"dim={dim}: {fix}"
        )
    live = index_metric(client, collection_name, field)
    if live is not None and live.upper() != metric.value:
        raise ValueError(
            f"collection {collection_name!r} is indexed with {live}, not metric="
            f"{metric.value!r}: {fix}"
        )


def checked_partitions(partitions: Any, *, argument: str) -> tuple[str, ...] | None:
    """The partitions a search is limited to (None: every one). A list that names none is
    refused, as is anything but a list of names: Milvus reads an empty list as every
    partition, so a list built from a caller's rights that came out empty would widen the
    search instead of narrowing it."""
    if partitions is None:
        return None
    partitions = list_of_strings(partitions, argument=argument, what="partition names")
    if not partitions:
        raise UnsafeFilterError(
            f"{argument}=[] names no partition, and Milvus would search every partition: "
            f"give the partitions to search, or leave {argument} out to search them all"
        )
    for name in partitions:
        _check_partition_name(name, argument=argument)
    return tuple(partitions)


PARTITION_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_$-]{0,254}")
"""What Milvus lets a partition be named (ASCII letters, digits, ``_``; ``$`` on older
servers, ``-`` on newer ones), and nothing a pattern reads as more than itself."""


def _check_partition_name(name: str, *, argument: str) -> None:
    """Refuse a name no partition can have. A search does not check the names it is given
    as strictly as a partition's creation does, and a server that reads them as patterns
    (Milvus before 2.3.4, or ``proxy.partitionNameRegexp``) searches every partition
    whose name matches ``^name$``: ``".*"`` opens them all."""
    if not PARTITION_NAME.fullmatch(name):
        raise UnsafeFilterError(
            f"{argument} holds {name!r}, which no Milvus partition can be named (letters, "
            "digits, '_', '-' and '$' only), and a server that reads partition names as "
            "patterns would search every partition it matches: give partition names "
            "exactly as they were created"
        )


ID_BATCH = 8192
"""The most ids one query by id asks for: a query returns at most 16,383 rows on Milvus Lite
whatever its filter matches, and takes a limit of at most 16,384, so the rows of more ids
are read in batches. A query answers one row per primary key (an id a store without upserts
holds twice too), so a batch's rows fit, and a limit of one row per id leaves none out."""


def ids_matching(
    client: Any,
    collection_name: str,
    id_field: str,
    ids: list[str],
    expr: str | None,
    *,
    partitions: Sequence[str] | None = None,
    integer: bool = False,
) -> set[str]:
    """The ids among ``ids`` whose rows satisfy the raw expression ``expr`` and lie in
    ``partitions`` (either None: any), in one query per :data:`ID_BATCH` ids: how sections
    fetched by id (neighbours, parent summaries) are held to restrictions only the engine
    can read. A section the collection does not hold satisfies nothing. ``integer``: the
    field holds integers."""
    found: set[str] = set()
    for members, batch in _memberships(id_field, ids, integer):
        rows = client.query(
            collection_name,
            filter=f"({expr}) and ({members})" if expr else members,
            output_fields=[id_field],
            limit=len(batch),
            **({"partition_names": list(partitions)} if partitions else {}),
        )
        found.update(str(row[id_field]) for row in rows)
    return found


def vectors_of(rows: Iterable[Mapping[str, Any]], pk: str, field: str) -> dict[str, list[float]]:
    """The ``field`` vectors of rows read by id, by their primary key as a string, each a list
    of floats (pymilvus may hand back its own sequence types); a row without one is left out."""
    return {str(row.get(pk)): list(row[field]) for row in rows if row.get(field) is not None}


def rows_by_id(
    query: Callable[..., Iterable[Mapping[str, Any]]], *args: Any, **kwargs: Any
) -> list[Mapping[str, Any]]:
    """The rows of ids, read with ``query`` (a ``MilvusClient``'s) in the queries of
    :func:`queries_by_id`, given its arguments."""
    return [row for each in queries_by_id(*args, **kwargs) for row in query(**each)]


async def arows_by_id(
    query: Callable[..., Awaitable[Iterable[Mapping[str, Any]]]], *args: Any, **kwargs: Any
) -> list[Mapping[str, Any]]:
    """:func:`rows_by_id` with an ``AsyncMilvusClient``'s ``query``."""
    rows: list[Mapping[str, Any]] = []
    for each in queries_by_id(*args, **kwargs):
        rows.extend(await query(**each))
    return rows


def queries_by_id(
    collection_name: str,
    id_field: str,
    ids: list[str],
    output_fields: list[str],
    *,
    integer: bool = False,
    **options: Any,
) -> list[dict[str, Any]]:
    """The arguments of the Milvus queries for the rows of ``ids``, ``output_fields`` of each:
    one per :data:`ID_BATCH` ids, ``options`` (``timeout``) in each. Not pymilvus's
    ``ids=``, which writes each string between quotes as it is: an id a section links to
    (``x'] or id in ['``) would change what the query reads, or break it for the whole hop;
    an id no row can have is not asked for. ``integer``: the field holds integers."""
    return [
        {
            "collection_name": collection_name,
            "filter": members,
            "output_fields": output_fields,
            **options,
        }
        for members, _ in _memberships(id_field, ids, integer)
    ]


def _memberships(id_field: str, ids: list[str], integer: bool) -> list[tuple[str, list[str]]]:
    """``id_field in [...]`` for each batch of :data:`ID_BATCH` ids, with the batch; a batch
    of ids no row can have is left out."""
    from thresholded.milvus_expr import id_membership

    batches = [ids[i : i + ID_BATCH] for i in range(0, len(ids), ID_BATCH)]
    tests = [(id_membership(id_field, batch, integer=integer), batch) for batch in batches]
    return [(members, batch) for members, batch in tests if members is not None]
