"""langchain-milvus stores for cosine thresholds, created or reopened in one call.

``milvus_from_documents`` creates a collection from documents (or adds them to
an existing one); ``existing_milvus_store`` opens a collection that must exist,
to search it or to add to it. Both take a Milvus Lite file or a server address
as ``uri``, ``db_name`` for a database of a server, and ``timeout``: the
deadline, in seconds, of every call the store makes (searches, inserts,
lookups), loading a collection into memory apart (``UNTIMED``). The result is a
standard ``langchain_milvus.Milvus``.

Why they exist, with langchain-milvus 0.3.3 on pymilvus 2.6:

- langchain-milvus reads a collection's schema and index through pymilvus's ORM,
  ``Collection(name, using=store.alias)``, where ``alias`` is its
  ``MilvusClient``'s. Since pymilvus 2.6.10 a ``MilvusClient`` no longer
  registers that alias with the ORM, so the constructor fails on every existing
  collection, and adding documents fails on a new one, with
  ``ConnectionNotExistException: should create connection first``
  (langchain-ai/langchain-milvus#130).
- pymilvus 2.6 shares one connection, and so one alias, between every client of
  a server, whatever their database: registered as it is, the alias would send
  every store's schema and index calls to the database of whichever store
  registered it first.
- A Milvus Lite 2.5 engine reports that it has started before it listens
  (``thresholded.milvus_lite``).
- langchain-milvus makes one ``AsyncMilvusClient`` per store and uses it from every
  event loop; its connection belongs to the first loop, so once that loop closes
  every async call fails with ``Event loop is closed``. Each store therefore gets an
  async client per event loop (:class:`~thresholded.milvus_async.LoopLocalClient`).

So each store is built over a collection name that does not exist (the
constructor then makes no ORM call), given an ORM alias of its own, for its
server, token and database, and only then pointed at its collection and
initialised there as the constructor would have done.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from os import PathLike
from typing import TYPE_CHECKING, Any

from thresholded.errors import FieldNotFoundError, UnsupportedMetricError
from thresholded.filters.milvus import DeclaredFields, declared_of
from thresholded.milvus_async import LoopLocalClient
from thresholded.milvus_collection import (
    collection_not_found,
    refuse_drop,
    refuse_lite_partition_key,
    refuse_metric_named_otherwise,
    refuse_read_metric,
    reopened,
    require_lite_file,
)
from thresholded.milvus_expr import all_of_exprs, check_expression, id_membership
from thresholded.milvus_grpc import client_kwargs, connection_kwargs
from thresholded.milvus_lite import milvus_uri, wait_for_milvus_lite
from thresholded.milvus_timeout import check_timeout, with_timeout
from thresholded.scores import Metric
from thresholded.strict import search_ids

if TYPE_CHECKING:
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_milvus import Milvus

__all__ = [
    "DEFAULT_INDEX_TYPE",
    "UNTIMED",
    "connection_args",
    "existing_milvus_store",
    "milvus_from_documents",
    "orm_calls",
]

DEFAULT_INDEX_TYPE = "FLAT"
"""Index of a new collection: exact search, so no section that clears the floor is missed."""

UNTIMED = frozenset({"load_collection", "load_partitions"})
"""Client calls that ``timeout`` does not bound: loading waits until the server holds the
collection in memory, which can take longer than any query should; the server bounds it."""

_VECTOR_FIELD = "vector"
_TEXT_FIELD = "text"
_NOT_HERE = ("connection_args", "drop_old", "embedding_function")

_orm_lock = threading.Lock()
_orm_aliases: set[str] = set()
"""ORM aliases registered here, so that checking one needs no (deprecated) ORM call."""


def milvus_from_documents(
    documents: Sequence[Document],
    embeddings: Embeddings,
    *,
    uri: str | PathLike[str],
    collection_name: str,
    db_name: str | None = None,
    token: str = "",
    metric: Metric | str | None = None,
    ids: Sequence[str] | None = None,
    overwrite: bool = False,
    timeout: float | None = None,
    **kwargs: Any,
) -> Milvus:
    """A store over ``collection_name`` holding ``documents``: a new collection, or added to.

    A new collection gets a ``FLAT`` index with ``metric`` (default ``IP``: cosine
    similarities for unit vectors; ``COSINE`` for any vectors) and dynamic fields
    for the metadata (one JSON field where ``metadata_field`` names it). An existing
    collection keeps its index, whose metric must give cosines (and be ``metric``, when
    given); ``overwrite=True`` drops it first.

    The ids are ``ids``, else each document's ``id`` when every document has one,
    else generated by Milvus. ``auto_id=True`` asks for Milvus's keys (the documents' own
    ids are not used; with ``ids=`` it is an error), ``auto_id=False`` for yours (an error
    without them); on an existing collection ``auto_id`` must be the collection's. A
    document whose id the collection already holds replaces that row (loading the same
    documents again changes nothing; not in an ``auto_id`` collection, whose keys are
    Milvus's own, so a second load adds rows); an id given twice is a ``ValueError``.
    ``uri``, ``collection_name``, ``db_name``, ``token`` and ``timeout`` say where the
    collection is and how long a request may take, as for :func:`existing_milvus_store`;
    ``embeddings`` embeds the documents and the questions.
    ``kwargs`` go to ``langchain_milvus.Milvus`` (e.g. ``consistency_level``,
    ``index_params``, ``enable_dynamic_field``).
    """
    refuse_metric_named_otherwise("milvus_from_documents", kwargs)
    docs = list(documents)
    ids = _ids_of(docs, ids, kwargs.get("auto_id"))
    store = _open(
        uri,
        collection_name,
        embeddings,
        db_name=db_name,
        token=token,
        timeout=timeout,
        metric=metric,
        must_exist=False,
        overwrite=overwrite,
        new_collection={"auto_id": ids is None, "enable_dynamic_field": _dynamic(kwargs)},
        kwargs=kwargs,
    )
    if docs:
        with orm_calls():
            if ids is not None and store.col is not None and not _auto_id(store):
                # Milvus would keep both rows under one primary key
                store.upsert(ids=ids, documents=docs)
            else:
                store.add_documents(docs, ids=ids)
    return store


def _dynamic(kwargs: Mapping[str, Any]) -> bool:
    """Whether a new collection keeps its metadata in its dynamic field: unless a
    ``metadata_field`` asks for one JSON field (langchain-milvus ignores it where dynamic
    fields are on)."""
    return not kwargs.get("metadata_field")


def _ids_of(docs: list[Document], ids: Sequence[str] | None, auto_id: bool | None) -> Any:
    """The primary keys the documents are loaded under; None: Milvus generates them.

    ``auto_id`` asks for one or the other: ``True`` takes Milvus's keys (the documents'
    own ids are not used), ``False`` needs an id for every document.
    """
    if auto_id and ids is not None:
        raise ValueError(
            "auto_id=True makes Milvus generate the primary keys, so ids= would be dropped: "
            "leave auto_id out to load the documents under your ids, or leave out ids="
        )
    if ids is None and not auto_id and docs and all(doc.id for doc in docs):
        ids = [str(doc.id) for doc in docs]
    if auto_id is False and ids is None and docs:
        raise ValueError(
            "auto_id=False keeps the primary keys yours, but no ids were given: pass ids=... "
            "or documents that each have an id"
        )
    return None if ids is None else _unique_ids(ids, len(docs))


def _auto_id(store: Milvus) -> bool:
    """Whether the collection's primary keys are Milvus's own: the documents' ids are not
    them, and an upsert of a string id into the int64 key fails."""
    primary = getattr(getattr(store.col, "schema", None), "primary_field", None)
    return bool(getattr(primary, "auto_id", False) or getattr(store, "auto_id", False))


def _unique_ids(ids: Sequence[str], documents: int) -> list[str]:
    """The ids as a list, one per document and none twice: Milvus would store two rows under
    one primary key, and a search would spend its limit on the copies."""
    ids = [str(i) for i in ids]
    if len(ids) != documents:
        raise ValueError(f"{len(ids)} ids for {documents} documents: give one id per document")
    seen: set[str] = set()
    for i in ids:
        if i in seen:
            raise ValueError(f"the id {i!r} is given twice: each document needs its own id")
        seen.add(i)
    return ids


def existing_milvus_store(
    uri: str | PathLike[str],
    collection_name: str,
    *,
    embeddings: Embeddings,
    db_name: str | None = None,
    token: str = "",
    timeout: float | None = None,
    **kwargs: Any,
) -> Milvus:
    """A store over a collection that must already exist, to search it or to add documents.

    ``uri`` is the Milvus server (``http://127.0.0.1:19530``) or a Milvus Lite file (a
    path ending in ``.db``, a ``pathlib.Path`` too); ``collection_name`` the collection,
    in database ``db_name`` (None: the default one), reached with ``token`` (``user:password``
    or an API key; empty: none). ``embeddings`` embeds the questions (and documents added):
    the model the collection was built with. ``timeout`` (seconds) bounds each request.
    A missing collection raises ``CollectionNotFoundError``, naming those that
    exist, instead of being created empty. The primary key, whether Milvus
    generates ids, and dynamic fields are read from the collection; its index's
    metric must give cosines (``IP``, ``COSINE``, or ``L2`` on unit vectors).
    ``kwargs`` go to ``langchain_milvus.Milvus``.
    """
    refuse_read_metric("existing_milvus_store", kwargs)
    refuse_drop("existing_milvus_store", kwargs, rebuild="milvus_from_documents")
    return _open(
        uri,
        collection_name,
        embeddings,
        db_name=db_name,
        token=token,
        timeout=timeout,
        metric=None,
        must_exist=True,
        overwrite=False,
        new_collection={},
        kwargs=kwargs,
    )


def _open(
    uri: str | PathLike[str],
    collection_name: str,
    embeddings: Embeddings,
    *,
    db_name: str | None,
    token: str,
    timeout: float | None,
    metric: Metric | str | None,
    must_exist: bool,
    overwrite: bool,
    new_collection: dict[str, Any],
    kwargs: dict[str, Any],
) -> Milvus:
    from langchain_milvus import Milvus
    from pymilvus import MilvusClient

    uri = milvus_uri(uri)
    passed_twice = sorted(set(kwargs) & set(_NOT_HERE))
    if passed_twice:
        raise TypeError(
            f"{', '.join(passed_twice)} cannot be passed here: the collection is named by "
            "uri=, db_name=, token= and collection_name=; overwrite=True drops it"
        )
    timeout = check_timeout(timeout)
    kwargs = dict(kwargs)
    wanted, index_params = _index_request(metric, kwargs.pop("index_params", None))
    connection_args = connection_kwargs(uri, token=token, db_name=db_name, timeout=timeout)
    if must_exist:
        require_lite_file(uri, collection_name)
    wait_for_milvus_lite(uri)
    probe = MilvusClient(**connection_args)  # open until the store's clients share its connection
    try:
        client = with_timeout(probe, timeout)
        if overwrite and client.has_collection(collection_name):
            client.drop_collection(collection_name)
        if must_exist or client.has_collection(collection_name):
            settings = _existing_settings(
                client,
                collection_name,
                uri=uri,
                db_name=db_name,
                vector_field=kwargs.get("vector_field", _VECTOR_FIELD),
                text_field=kwargs.get("text_field", _TEXT_FIELD),
                metric=wanted,
                index_params=index_params,
            )
            _same_auto_id(kwargs.get("auto_id"), settings["auto_id"], collection_name)
            exists = True
        else:
            refuse_lite_partition_key(uri, collection_name, kwargs.get("partition_key_field"))
            settings = {**new_collection, "index_params": index_params}
            exists = False
        store = Milvus(
            embedding_function=embeddings,
            # a name with no collection: the constructor then makes no ORM call
            collection_name=f"thresholded_unopened_{uuid.uuid4().hex}",
            connection_args=connection_args,
            **{**settings, **kwargs},
        )
    finally:
        probe.close()
    store.collection_name = collection_name
    _ensure_orm_connection(store)
    # the deadline rides on the clients: langchain-milvus 0.3.3 passes its own ``timeout``
    # twice to the first insert into a new collection
    store._milvus_client = with_timeout(store._milvus_client, timeout, untimed=UNTIMED)
    _async_client_per_loop(store, timeout)
    if exists:
        with orm_calls():
            store._init(
                partition_names=store.partition_names,
                replica_number=store.replica_number,
                timeout=store.timeout,
            )
        check_metadata_field(store)
    return store


def _same_auto_id(asked: bool | None, found: bool, collection_name: str) -> None:
    """An ``auto_id`` that says otherwise than the collection would turn the ids given to a
    load into keys of the wrong kind, or drop them."""
    if asked is not None and bool(asked) is not found:
        raise ValueError(
            f"auto_id={asked!r}, but the collection {collection_name!r} was created with "
            f"auto_id={found!r}: leave auto_id out, it is read from the collection"
        )


def _index_request(metric: Metric | str | None, given: Any) -> tuple[Metric | None, dict[str, Any]]:
    """The metric asked for, if any, and the index a new collection gets.

    ``given`` (index parameters) defaults to ``FLAT``; its metric, ``metric`` and
    the default ``IP`` are taken in that order, and must agree and give cosines.
    """
    if given is None:
        given = {"index_type": DEFAULT_INDEX_TYPE, "params": {}}
    if not isinstance(given, Mapping):
        raise TypeError(
            f"index_params must be the parameters of one dense index (a dict), got {given!r}"
        )
    asked = None if metric is None else _cosine_metric(metric, "metric=")
    stated = given.get("metric_type")
    if stated is not None:
        found = _cosine_metric(stated, "index_params")
        if asked is not None and found is not asked:
            raise ValueError(f"metric={asked.value!r} contradicts index_params' {found.value!r}")
        asked = found
    return asked, {**given, "metric_type": (asked or Metric.IP).value}


def _cosine_metric(value: Metric | str, what: str) -> Metric:
    try:
        return Metric.parse(value)
    except UnsupportedMetricError:
        raise UnsupportedMetricError(
            f"{what} names the metric {value!r}, whose scores cannot be read as cosine "
            "similarities: use IP (on unit vectors) or COSINE"
        ) from None


def _existing_settings(
    client: Any,
    collection_name: str,
    *,
    uri: str,
    db_name: str | None,
    vector_field: Any,
    text_field: str,
    metric: Metric | None,
    index_params: dict[str, Any],
) -> dict[str, Any]:
    """The constructor arguments that make a store fit an existing collection."""
    description, _, live = reopened(
        client, collection_name, vector_field, uri=uri, db_name=db_name, argument="vector_field"
    )
    names = [spec["name"] for spec in description.get("fields", [])]
    if text_field not in names:
        raise FieldNotFoundError(
            f"collection {collection_name!r} has no text field {text_field!r}; its fields are "
            f"{names}",
            argument="text_field",
        )
    settings: dict[str, Any] = {
        "auto_id": bool(description.get("auto_id", False)),
        "enable_dynamic_field": bool(description.get("enable_dynamic_field", False)),
    }
    primary = [spec["name"] for spec in description.get("fields", []) if spec.get("is_primary")]
    if primary:
        settings["primary_field"] = primary[0]
    if live is None:
        settings["index_params"] = index_params  # langchain-milvus creates the index
        return settings
    found = _cosine_metric(live, f"the index of collection {collection_name!r}")
    if metric is not None and found is not metric:
        raise ValueError(
            f"collection {collection_name!r} is indexed with {found.value}, not {metric.value}: "
            "leave metric= out to use its index, or pass overwrite=True to rebuild it"
        )
    return settings


def json_metadata_field(store: Any) -> str | None:
    """The JSON field a langchain-milvus store keeps each document's metadata in (its
    ``metadata_field``; langchain-milvus ignores it where dynamic fields are on): a filter
    key is a key inside it. None: each key is a field of its own (declared or dynamic)."""
    field = getattr(store, "_metadata_field", None)
    if not field or getattr(store, "enable_dynamic_field", False):
        return None
    return str(field)


def json_fields(store: Any) -> list[str]:
    """The JSON fields of a langchain-milvus store's collection (none before it exists)."""
    from pymilvus import DataType

    col = getattr(store, "col", None)
    return [] if col is None else [f.name for f in col.schema.fields if f.dtype == DataType.JSON]


def declared_fields(store: Any) -> DeclaredFields:
    """The metadata keys of a langchain-milvus store that are declared fields of its
    collection, by kind (none where its metadata is one JSON field: the keys are in it)."""
    col = getattr(store, "col", None)
    if col is None or json_metadata_field(store) is not None:
        return DeclaredFields()
    return declared_of((f.name, f.dtype, f.element_type) for f in col.schema.fields)


def check_metadata_field(store: Any) -> None:
    """Refuse a langchain-milvus store whose ``metadata_field`` is no JSON field of its
    collection: langchain-milvus fails on every document it reads with a bare ``KeyError``,
    and a filter written inside the field matches nothing, as if nothing matched."""
    field = json_metadata_field(store)
    if field is None or getattr(store, "col", None) is None or field in json_fields(store):
        return
    dynamic = getattr(store.col.schema, "enable_dynamic_field", False)
    fix = (
        "it keeps its metadata in its dynamic field: leave metadata_field out"
        if dynamic
        else "name the JSON field its metadata is kept in"
    )
    raise ValueError(
        f"metadata_field={field!r}, but collection {store.collection_name!r} has no JSON field "
        f"{field!r} (its JSON fields: {json_fields(store)}"
        f"{', and a dynamic field' if dynamic else ''}): {fix}"
    )


def _ids_in_documents(store: Any) -> None:
    """Make a langchain-milvus store that keeps its metadata in one JSON field give each
    document it returns its primary key as ``Document.id``: langchain-milvus 0.3.3 reads
    only that field into the metadata and drops the key, so the sections it found could
    not be named (their stored vectors, their attachments). Safe to call again."""
    parse = getattr(store, "_parse_document", None)
    if json_metadata_field(store) is None or parse is None or hasattr(parse, "_keeps_ids"):
        return
    pk = str(getattr(store, "_primary_field", "pk"))

    def parse_with_id(data: dict) -> Document:
        key = data.get(pk)
        document = parse(data)
        if document.id is None and key is not None:
            document.id = str(key)
        return document

    parse_with_id._keeps_ids = True  # type: ignore[attr-defined]
    store._parse_document = parse_with_id


def varchar_key(store: Any) -> bool:
    """Whether a langchain-milvus collection's primary key is a string."""
    from pymilvus import DataType

    col = store.col
    return col is None or col.schema.primary_field.dtype == DataType.VARCHAR


RAW_EXPR_KEYS = ("expr", "filter")
"""Where a langchain-milvus store's arguments hold a raw expression; both hold at once."""


def in_one_expr(store: Any, search_kwargs: Mapping[str, Any], *exprs: str | None) -> dict[str, Any]:
    """A langchain-milvus store's search arguments with every restriction in one ``expr``:
    its raw ``expr`` and ``filter`` (:func:`raw_exprs`), verbatim, AND ``exprs``, AND its
    ``ids`` as a test of its primary key (:func:`ids_expr`). langchain-milvus sends a
    ``filter`` to pymilvus beside its own ``filter=expr``, and ids beside the question's
    vector, and pymilvus refuses both."""
    members = ids_expr(store, search_kwargs.get("ids"))
    kept = {k: v for k, v in search_kwargs.items() if k not in (*RAW_EXPR_KEYS, "ids")}
    expr = all_of_exprs([*raw_exprs(search_kwargs), *exprs, members])
    return kept if expr is None else {**kept, "expr": expr}


def raw_exprs(search_kwargs: Mapping[str, Any]) -> list[str]:
    """The raw Milvus expressions in a Milvus store's arguments: its ``expr`` and its
    ``filter``, each of which must hold (an empty one is none). Anything else there is not an
    expression Milvus could read, and is refused rather than left out."""
    found = []
    for key in RAW_EXPR_KEYS:
        value = search_kwargs.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        if not isinstance(value, str):
            raise TypeError(
                f"search_kwargs[{key!r}] of a Milvus store must be a Milvus boolean expression "
                f"string, got {type(value).__name__} {value!r}: give a structured filter as "
                "filters=... (e.g. {'doc_type': 'public'})"
            )
        found.append(check_expression(value))
    return found


def ids_expr(store: Any, ids: Any) -> str | None:
    """A langchain-milvus store's ``search_kwargs["ids"]`` (one id as a string, as Chroma
    takes it, or several: :func:`~thresholded.strict.search_ids`) as a test of its primary
    key, which langchain-milvus would send to pymilvus beside the question's vector, which it
    refuses. None: no ids, or none a key can be
    (:func:`~thresholded.milvus_expr.id_membership`; :func:`ids_admit_no_row` tells which)."""
    given = search_ids(ids, argument="search_kwargs['ids']")
    if not given:
        return None
    pk = str(getattr(store, "_primary_field", "pk"))
    return id_membership(pk, sorted(set(given)), integer=not varchar_key(store))


def ids_admit_no_row(store: Any, ids: Any) -> bool:
    """Whether a langchain-milvus store's ``search_kwargs["ids"]`` name no row it can hold:
    an empty list, or ids none of which its primary key can be (Milvus cannot be asked for
    ``pk in []``: a search restricted to them finds nothing without being made)."""
    return search_ids(ids, argument="search_kwargs['ids']") is not None and (
        ids_expr(store, ids) is None
    )


def ensure_collection(store: Any) -> None:
    """Refuse to search a langchain-milvus store whose collection does not exist (a misspelt
    name): langchain-milvus returns nothing for it, so every question would say nothing
    matched, as if the collection were empty. The store's ORM connection must be made."""
    with orm_calls():
        if store.col is not None:  # read once, then cached by the store
            return
    args = getattr(store, "_connection_args", None) or {}
    raise collection_not_found(
        store.collection_name,
        store.client.list_collections(),
        uri=str(args.get("uri", "")),
        db_name=args.get("db_name"),
    )


def _ensure_orm_connection(store: Any) -> None:
    """Point a langchain-milvus store's ORM calls at its own server, token and database.

    The store's ``alias`` becomes one of its own (langchain-milvus uses it for
    ORM calls and their cache only), registered with pymilvus's ORM when new.
    ``ThresholdedRetriever`` calls it before each search, for stores built
    directly with ``langchain_milvus.Milvus``; a store whose metadata is one JSON
    field is also made to return its documents' ids (:func:`_ids_in_documents`). A
    store that is not a Milvus store is left alone.
    """
    connection_args = getattr(store, "_connection_args", None)
    if not isinstance(getattr(store, "alias", None), str) or not isinstance(connection_args, dict):
        return
    _ids_in_documents(store)
    alias = _orm_alias(connection_args)
    if store.alias == alias and alias in _orm_aliases:
        return
    from pymilvus import connections

    with _orm_lock:
        if alias not in _orm_aliases:
            with orm_calls():
                if not connections.has_connection(alias):
                    connections.connect(alias=alias, **client_kwargs(connection_args))
            _orm_aliases.add(alias)
    store.alias = alias
    _async_client_per_loop(store)


def connection_args(uri: str, **kwargs: Any) -> dict[str, Any]:
    """``connection_args`` for a ``langchain_milvus.Milvus`` you build yourself (a hybrid
    store, say), with a gRPC keepalive no server answers with GOAWAY.

    ``kwargs`` (``token``, ``db_name``, ``timeout``, ``grpc_options``...) pass through;
    ``grpc_options`` given here win over the keepalive defaults.
    """
    return client_kwargs({"uri": uri, **kwargs})


@contextlib.contextmanager
def orm_calls() -> Iterator[None]:
    """Silence pymilvus's deprecation of its ORM API, for the calls in this block only.

    langchain-milvus 0.3.3 reads schemas and indexes, and writes, through that API;
    wrap your own direct calls on a store (``store.add_documents(...)``) in it.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*is an ORM-style PyMilvus API")
        yield


def _async_client_per_loop(store: Any, timeout: float | None = None) -> None:
    """Let a langchain-milvus store's async calls run from any event loop.

    Its ``AsyncMilvusClient`` becomes a :class:`~thresholded.milvus_async.LoopLocalClient`:
    each event loop gets a client of its own, made from the store's connection
    arguments as langchain-milvus makes its own, with ``timeout`` as every call's
    deadline. Safe to call again.
    """
    connection_args = getattr(store, "_connection_args", None)
    if not isinstance(connection_args, dict) or not hasattr(store, "_async_milvus_client"):
        return
    from pymilvus import AsyncMilvusClient

    def make() -> Any:
        return with_timeout(AsyncMilvusClient(**connection_args), timeout, untimed=UNTIMED)

    with _orm_lock:
        current = store._async_milvus_client
        if not isinstance(current, LoopLocalClient):
            home = with_timeout(current, timeout, untimed=UNTIMED)
            store._async_milvus_client = LoopLocalClient(make, home=home)


def _orm_alias(connection_args: Mapping[str, Any]) -> str:
    """An ORM alias of its own for one server, token and database."""
    db_name = connection_args.get("db_name") or "default"
    identity = "|".join(
        str(connection_args.get(key) or "") for key in ("uri", "token", "user", "password")
    )
    digest = hashlib.sha256(f"{identity}|{db_name}".encode()).hexdigest()[:16]
    return f"thresholded-{db_name}-{digest}"
