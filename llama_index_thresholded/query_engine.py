"""An "I don't know" path for query engines: no matching section, no LLM call.

``RetrieverQueryEngine`` turns an empty retrieval into the text "Empty Response".
So do the chat engines of llama-index-core 0.14 that answer from a retriever
(``ContextChatEngine``, ``CondensePlusContextChatEngine``): for an empty node list
their synthesizer returns "Empty Response" without calling the LLM, and the turn
goes to the chat memory with that answer (``CondensePlusContextChatEngine`` still
calls the LLM to condense a follow-up question first). The text cannot be
configured, and nothing tells the caller that nothing matched.

When nothing cleared the threshold, this engine returns a configured message
instead, such as how to reach a human, with ``metadata["nothing_matched"]``; the
chat engines of :mod:`llama_index_thresholded.chat_engine` do the same in a
conversation.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import AsyncGenerator, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.response.schema import (
    RESPONSE_TYPE,
    AsyncStreamingResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.postprocessor import SimilarityPostprocessor
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import VectorIndexAutoRetriever, VectorIndexRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, QueryType
from llama_index.core.storage.docstore import BaseDocumentStore
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters
from llama_index.core.vector_stores.utils import build_metadata_filter_fn

from llama_index_thresholded.backend import ids_held, restricting_kwargs
from llama_index_thresholded.filters import to_filter
from llama_index_thresholded.multi_collection import collection_of
from llama_index_thresholded.nodes import unlinked
from llama_index_thresholded.retriever import (
    EngineRetriever,
    question_of,
    restricting_node_ids,
    vector_retriever_holds_back,
)
from thresholded.abstention import (
    DEFAULT_NO_MATCH_MESSAGE,
    NOTHING_MATCHED,
    check_no_match_message,
    no_match_flags,
)
from thresholded.classes import is_named
from thresholded.engine import Pipeline, Step, adrive, drive
from thresholded.errors import UnsafeFilterError
from thresholded.filters import Combine, Condition, Filter, Group, Op, matches
from thresholded.metadata_keys import ATTACHED_ROLE
from thresholded.provenance import asked_of
from thresholded.report import abstained_by_after
from thresholded.strict import check_arguments, named_parameters, of_another_framework


def no_match_response(
    message: str,
    *,
    streaming: bool = False,
    asynchronous: bool = False,
    abstained_by: str | None = None,
) -> RESPONSE_TYPE:
    """``message`` as a synthesizer's response, flagged ``nothing_matched``.

    A ``Response``; when ``streaming``, a ``StreamingResponse`` (an
    ``AsyncStreamingResponse`` when ``asynchronous``) that yields it as one token.
    ``abstained_by`` (see :data:`~thresholded.report.ABSTAINED_BY`) says what emptied the result.
    """
    metadata = no_match_flags(abstained_by)
    if not streaming:
        return Response(response=message, source_nodes=[], metadata=metadata)
    if asynchronous:
        return AsyncStreamingResponse(response_gen=_aonce(message), metadata=metadata)
    return StreamingResponse(response_gen=_once(message), metadata=metadata)


def _answered(response: RESPONSE_TYPE) -> RESPONSE_TYPE:
    """The synthesizer's ``response``, flagged ``nothing_matched: False``: every answer of an
    abstaining engine carries the flag, as the chat engines' do."""
    response.metadata = {**(response.metadata or {}), NOTHING_MATCHED: False}
    return response


ATTACH_INSTEAD = (
    "Attach neighbours and summaries with ThresholdedRetriever's neighbours= and "
    "parent_summaries= (ThresholdedRetriever(index, policy, filters=..., neighbours=1) in "
    "place of LlamaIndex's own retriever), which are held to them"
)
"""What to do in place of a postprocessor that adds sections, however the filters are held."""


def check_retriever(owner: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Refuse an engine's retriever (its first argument, or ``retriever=``) that is not one
    (an index, a store, a query engine), before anything is built: its first question
    would fail with an ``AttributeError``. Refuse one that merges in sections from the
    docstore past the filters of a retriever it wraps (:func:`_docstore_merger`), and
    ``node_postprocessors`` that are not a list of postprocessors."""
    _check_node_postprocessors(owner, kwargs.get("node_postprocessors"))
    retriever = args[0] if args else kwargs.get("retriever")
    if retriever is not None and not isinstance(retriever, BaseRetriever):
        raise TypeError(
            f"{owner}: retriever must be a LlamaIndex retriever (a BaseRetriever), got "
            f"{type(retriever).__name__}: "
            + (
                of_another_framework(retriever, "llama_index_thresholded")
                or "give ThresholdedRetriever(index, policy=...), or wrap a retriever you have "
                "with ThresholdedRetriever.from_retriever(retriever, policy=...)"
            )
        )
    merger = None if retriever is None else _docstore_merger(retriever)
    if merger is not None:
        raise UnsafeFilterError(
            f"{owner}: {merger} merges in sections from elsewhere (the docstore's parents and "
            "sections between retrieved ones, the sections and retrievers an IndexNode points "
            "to), held to none of the filters, doc_ids, node_ids or store restrictions of the "
            f"retriever it wraps. Give the engine that retriever alone. {ATTACH_INSTEAD}"
        )


def _check_node_postprocessors(owner: str, postprocessors: Any) -> None:
    """Refuse a bare postprocessor, or anything in the list that is not one (a function), as
    the engine is built: the first question would fail with an ``AttributeError``."""
    if postprocessors is None:
        return
    if not isinstance(postprocessors, list | tuple):
        raise TypeError(
            f"{owner}: node_postprocessors must be a list of node postprocessors, got "
            f"{type(postprocessors).__name__}"
            + (
                ": put it in a list, node_postprocessors=[...]"
                if isinstance(postprocessors, BaseNodePostprocessor)
                else ""
            )
        )
    for position, postprocessor in enumerate(postprocessors):
        if not isinstance(postprocessor, BaseNodePostprocessor):
            raise TypeError(
                f"{owner}: node_postprocessors[{position}] is a "
                f"{type(postprocessor).__name__} "
                f"({getattr(postprocessor, '__name__', postprocessor)!r}), not a LlamaIndex "
                "node postprocessor (a BaseNodePostprocessor): subclass it and put the function "
                "in its _postprocess_nodes"
            )


class NoMatchMessage:
    """The ``no_match_message`` attribute of an abstaining engine: the answer when nothing
    matched, a str, checked whenever it is set."""

    def __get__(self, engine: Any, owner: type | None = None) -> Any:
        return self if engine is None else engine.__dict__["_no_match_message"]

    def __set__(self, engine: Any, message: str) -> None:
        engine.__dict__["_no_match_message"] = check_no_match_message(message)


def none_added(
    retriever: Any, retrieved: list[NodeWithScore], nodes: list[NodeWithScore]
) -> list[NodeWithScore]:
    """``nodes``, what the node postprocessors made of what ``retriever`` returned, when they
    added no section to it, or the retriever holds none back. A section a postprocessor adds
    (a ``PrevNextNodePostprocessor``'s neighbour, from the docstore) is held to none of the
    retriever's filters, so where it has some, adding one is an error. So it is where the
    nodes come from a retrieval of ours that held some back, passed on by another retriever
    (a ``QueryFusionRetriever`` around ours). There every node names other sections by id
    only (:func:`_unlinked`): one the retriever did not return as it is (a copy, or the
    docstore's own in place of it), and one a retrieval of ours did not produce (LlamaIndex's
    own filtered retriever returns its nodes as stored, whose relationships copy the metadata
    of the sections they point at, outside its filters too)."""
    returned = {id(n.node) for n in retrieved}
    others = [n for n in nodes if id(n.node) not in returned]  # first: seldom any, and cheap
    foreign = any(asked_of(n.node) is None for n in nodes)
    if not (others or foreign) or not _holds_back(retriever, retrieved):
        return nodes
    added = _sections(others) - _sections(retrieved)
    if added:
        raise UnsafeFilterError(
            f"the node postprocessors added {len(added)} section(s) that "
            f"{type(retriever).__name__} did not return (a PrevNextNodePostprocessor's "
            "neighbours, say): they are not held to its filters, doc_ids, node_ids or store "
            f"restrictions. {ATTACH_INSTEAD}, and give the engine postprocessors that only "
            "reorder, rescore or drop nodes"
        )
    return [_unlinked(n) for n in nodes]


def none_outside(retriever: Any, retrieved: list[NodeWithScore]) -> None:
    """Refuse what LlamaIndex's own vector retrievers returned outside their filters,
    ``node_ids``, ``doc_ids`` and store restrictions (:func:`_searched`, :func:`_within`):
    such a retriever follows an ``IndexNode`` to the object it carries (or its
    ``object_map`` holds), a section, retriever or query engine held to none of them. What
    a retrieval of ours returned is held to them already. The error names the restrictions
    the sections are outside of (:func:`_outside_message`), not the sections."""
    theirs = [n for n in retrieved if asked_of(n.node) is None]
    searched = _searched(retriever) if theirs else None
    if not searched:
        return
    nodes = [n.node for n in theirs]
    admitted = set().union(*(_within(s, nodes) for s in searched))
    outside = [n for n in nodes if n.node_id not in admitted]
    if outside:
        raise UnsafeFilterError(_outside_message(retriever, searched, outside))


_OUTSIDE = {
    "filters": "filters (their metadata does not meet them; a store that returns only some "
    "metadata leaves nothing to check a node against)",
    "node_ids": "node_ids (they are none of the nodes named, nor rows of a store that ignores "
    "node_ids)",
    "store": "doc_ids or vector_store_kwargs restrictions (the store does not hold them "
    "within these)",
}
"""What a section returned outside a restriction of LlamaIndex's vector retriever is outside
of, by restriction (:meth:`_Searched.outside`)."""


def _outside_message(retriever: Any, searched: list[_Searched], outside: list[Any]) -> str:
    failed = {s.outside(n) for s in searched for n in outside}
    what = "; or its ".join(text for name, text in _OUTSIDE.items() if name in failed)
    return (
        f"{type(retriever).__name__} returned {len(outside)} section(s) outside its {what}. "
        "LlamaIndex's retriever follows an IndexNode to the object it carries (a section, "
        "retriever or query engine), held to none of its restrictions. Use "
        "ThresholdedRetriever(index, policy, filters=...) in place of LlamaIndex's own "
        "retriever: it returns the IndexNode itself, within the filters"
    )


_DOCUMENT_KEYS = ("document_id", "doc_id", "ref_doc_id")
"""Where LlamaIndex's stores keep a node's document id beside its metadata, and filter it."""


_NODE_ID = "node_id"
"""Where :func:`_as_stored` puts a node's id, for a retriever's ``node_ids``: no metadata key
is there, each being under its plain name (:func:`_plain`)."""


def _as_stored(node: Any) -> dict[str, Any]:
    """A node's metadata as LlamaIndex's stores keep and filter it: its document's id under
    each of :data:`_DOCUMENT_KEYS` (``"None"`` for none), as ``node_to_metadata_dict`` writes
    it; every key under its plain name (:func:`_plain`), as :func:`_readable` reads them, and
    the node's id under :data:`_NODE_ID`."""
    stored = _with_document(node)
    return {**{_plain(key): value for key, value in stored.items()}, _NODE_ID: node.node_id}


def _with_document(node: Any) -> dict[str, Any]:
    """A node's metadata with its document's id under each of :data:`_DOCUMENT_KEYS`."""
    return {**node.metadata, **dict.fromkeys(_DOCUMENT_KEYS, node.ref_doc_id or "None")}


VectorRetriever = VectorIndexRetriever | VectorIndexAutoRetriever


@dataclass(frozen=True)
class _Searched:
    """LlamaIndex's vector retriever that holds some back, with its filters and ``node_ids``
    as filters on a node as stored (:func:`_as_stored`; None: they hold nothing back)."""

    retriever: VectorRetriever
    filters: Filter | None
    node_ids: Filter | None

    def outside(self, node: Any) -> str:
        """The first of the restrictions (:data:`_OUTSIDE`) ``node`` is outside of, as
        :func:`_within` tests them: its filters, its ``node_ids``, else the store's."""
        if not self.meets(node):
            return "filters"
        if self.node_ids is not None and not matches(self.node_ids, _as_stored(node)):
            return "node_ids"
        return "store"

    def meets(self, node: Any) -> bool:
        """Whether ``node`` meets the filters, as the core reads them and, on
        ``SimpleVectorStore``, as the store does (:func:`_read_by_store`)."""
        if self.filters is None:
            return True
        return matches(self.filters, _as_stored(node)) and _read_by_store(self.retriever, node)


def _searched(retriever: Any) -> list[_Searched] | None:
    """The LlamaIndex vector retrievers ``retriever`` searches through (itself, or those it
    wraps, :func:`_inner`), one of which each node it returns comes from, each with its
    filters and ``node_ids`` (:class:`_Searched`), where each holds some back; None where
    one of them holds none back (any node may come back). Ours add none: what they return
    is held to their filters already."""
    if isinstance(retriever, EngineRetriever):
        return []
    if isinstance(retriever, VectorRetriever):
        searched = _Searched(retriever, _filters_read(retriever), _of_nodes(retriever))
        kwargs, doc_ids = _store_restrictions(retriever)
        named = searched.filters is not None or searched.node_ids is not None
        if not named and not kwargs and doc_ids is None:
            return None
        _check_no_query_engine(retriever)
        return [searched]
    inner = [_searched(r) for r in _inner(retriever)]
    if not inner or any(found is None for found in inner):
        return None
    return [s for found in inner for s in found or ()]


def _within(searched: _Searched, nodes: list[Any]) -> set[str]:
    """The ids of ``nodes`` that LlamaIndex's vector retriever may return: within its
    filters and ``node_ids`` (:class:`_Searched`), and its ``doc_ids`` and store
    restrictions (:func:`_held_within`)."""
    meeting = [n for n in nodes if searched.meets(n)]
    listed = _listed(searched, meeting)
    return _held_within(searched.retriever, [n for n in meeting if n.node_id in listed])


_IGNORED_BY = {
    "node_ids": frozenset({"FaissVectorStore", "ChromaVectorStore"}),
    "doc_ids": frozenset({"SimpleVectorStore", "FaissVectorStore", "ChromaVectorStore"}),
}
"""LlamaIndex's stores (the classes themselves: a subclass may query otherwise) whose query
ignores a retriever's ``node_ids`` or ``doc_ids``: they return any of their rows
(``index.as_retriever()`` on FAISS, which names the nodes its index listed, returns those
added since). Any other store is taken to hold its search to them, so that a row outside
them was followed to."""


def _ignores(store: Any, restriction: str) -> bool:
    return type(store).__name__ in _IGNORED_BY[restriction]


def _listed(searched: _Searched, nodes: list[Any]) -> set[str]:
    """The ids of ``nodes`` within the ``node_ids`` of LlamaIndex's vector retriever: those
    they name and, on a store whose query ignores them (:data:`_IGNORED_BY`), the store's
    own rows, which it returns whatever they name, as it does past ``doc_ids``. An object
    the retriever followed an ``IndexNode`` to, which the store does not hold, is held to
    them."""
    if searched.node_ids is None:
        return {n.node_id for n in nodes}
    named = {n.node_id for n in nodes if matches(searched.node_ids, _as_stored(n))}
    others = [n for n in nodes if n.node_id not in named]
    if others and _ignores(_store_of(searched.retriever), "node_ids"):
        named |= _rows(searched.retriever, others) or set()
    return named


def _held_within(retriever: VectorRetriever, nodes: list[Any]) -> set[str]:
    """The ids of ``nodes`` within the ``doc_ids`` and store restrictions of LlamaIndex's
    vector ``retriever``. A node the store holds within its restrictions, as the store says
    (:func:`~.backend.ids_held`, within ``doc_ids`` too on a store that holds a search to
    them), is one (Chroma ignores ``doc_ids``: it returns such a node whatever they are);
    where the store cannot say, one it holds (:func:`_rows`) is, as the store's own row,
    past ``doc_ids`` only where its query ignores them (:data:`_IGNORED_BY`), and where it
    reads no node back its keywords are refused by name. A node it does not hold is an
    object the retriever followed an ``IndexNode`` to: within ``doc_ids`` by its document,
    within no restriction of the store's."""
    kwargs, doc_ids = _store_restrictions(retriever)
    ids = [n.node_id for n in nodes]
    if not (kwargs or doc_ids is not None) or not ids:
        return set(ids)
    store = _store_of(retriever)
    held = ids_held(store, ids, kwargs, doc_ids)
    rows = _rows(retriever, nodes)
    rows = held if rows is None else rows if held is None else held & rows
    if kwargs:
        if rows is None:  # nothing says which rows lie within them
            raise UnsafeFilterError(_unasked_message(retriever, sorted(kwargs)))
        return rows
    if held is None and not _ignores(store, "doc_ids"):
        rows = set()  # its search holds to them: a row outside them was followed to
    return (rows or set()) | {n.node_id for n in nodes if n.ref_doc_id in doc_ids}


def _store_restrictions(retriever: VectorRetriever) -> tuple[dict[str, Any], list[str] | None]:
    """The ``vector_store_kwargs`` of LlamaIndex's vector retriever that restrict what its
    store returns (:func:`~.backend.restricting_kwargs`), and its ``doc_ids``."""
    if isinstance(retriever, VectorIndexRetriever):
        kwargs, doc_ids = retriever._kwargs or {}, retriever._doc_ids
    else:  # an auto retriever passes them on to the plain one it builds
        kwargs = retriever._kwargs.get("vector_store_kwargs") or {}
        doc_ids = retriever._kwargs.get("doc_ids")
    return restricting_kwargs(_store_of(retriever), kwargs), doc_ids


def _store_of(retriever: VectorRetriever) -> Any:
    return retriever._index.vector_store


def _unasked_message(retriever: VectorRetriever, keys: list[str]) -> str:
    store = type(_store_of(retriever)).__name__
    return (
        f"{store} reads no node back by id, so which sections {type(retriever).__name__} "
        f"returned lie within its vector_store_kwargs {keys} cannot be asked, and a section "
        "it follows an IndexNode to is held to none of them. Use "
        "ThresholdedRetriever(index, policy, filters=...) with the restriction as "
        "MetadataFilters in place of LlamaIndex's own retriever, or build it without them"
    )


def _rows(retriever: VectorRetriever, nodes: list[Any]) -> set[str] | None:
    """The ids of ``nodes`` that the store of LlamaIndex's vector ``retriever`` holds as they
    are, the same text and metadata (:func:`_stored`): an object it followed an ``IndexNode``
    to that shares its id with a row (the ``IndexNode``'s own) is not that row. None where
    the store reads no node back by id."""
    stored = _stored(retriever._index, [n.node_id for n in nodes])
    if stored is None:
        return None
    held = {n.node_id: n.hash for n in stored if n is not None}
    return {n.node_id for n in nodes if held.get(n.node_id) == n.hash}


def _stored(index: Any, ids: list[str]) -> list[Any] | None:
    """The nodes among ``ids`` that ``index``'s store holds: its index's nodes, from the
    docstore, where the store keeps no text, else those it reads back by id (None where it
    reads none back)."""
    if not index.vector_store.stores_text or index._store_nodes_override:
        listed = set(index.index_struct.nodes_dict.values())
        return index.docstore.get_nodes([i for i in ids if i in listed], raise_error=False)
    try:
        return index.vector_store.get_nodes(node_ids=ids)
    except NotImplementedError:
        return None


def _of_nodes(retriever: VectorRetriever) -> Filter | None:
    """A vector retriever's ``node_ids`` (an auto retriever's, passed on to the plain one it
    builds) as a filter on :data:`_NODE_ID`: it follows an ``IndexNode`` among them to an
    object that is none of them. None where they restrict nothing
    (:func:`~.retriever.restricting_node_ids`: ``index.as_retriever()``'s)."""
    if isinstance(retriever, VectorIndexRetriever):
        node_ids = retriever._node_ids
    else:
        node_ids = retriever._kwargs.get("node_ids")
    node_ids = restricting_node_ids(retriever._index, node_ids)
    return None if node_ids is None else Condition(_NODE_ID, Op.IN, tuple(node_ids))


def _check_no_query_engine(retriever: BaseRetriever) -> None:
    """Refuse a retriever that holds some back (:func:`_searched`) whose ``object_map``
    holds a query engine: it follows an ``IndexNode`` to it and returns its answer as a new
    node, whose metadata is the answer's (its sources' by their ids), not the sections' it
    was made from: a filter it meets by lacking a key (``!=``, ``nin``, ``is_empty``, NOT) admits an
    answer made from sections outside it."""
    engines = sorted(
        {type(o).__name__ for o in retriever.object_map.values() if isinstance(o, BaseQueryEngine)}
    )
    if engines:
        raise UnsafeFilterError(
            f"{type(retriever).__name__} has filters, node_ids, doc_ids or vector_store_kwargs "
            "restrictions, and its object_map holds a "
            f"query engine ({', '.join(engines)}): it follows an IndexNode to it and returns "
            "its answer, made from sections held to none of them, with metadata that is not "
            "theirs. Give "
            "the query engine's retriever in its place, whose sections are checked, or use "
            "ThresholdedRetriever(index, policy, filters=...), which returns the IndexNode itself"
        )


def _own_filters(retriever: VectorIndexRetriever | VectorIndexAutoRetriever) -> Any:
    """The filters LlamaIndex's vector retriever is known to search under: a plain one's
    own, an auto retriever's ``extra_filters`` (those its LLM writes for each question are
    not kept), which it follows an ``IndexNode`` past as the plain one does."""
    if isinstance(retriever, VectorIndexRetriever):
        return retriever._filters
    return retriever._extra_filters


def _readable(filters: Any) -> Filter | None:
    """LlamaIndex's own filters in the core's model, each key under its plain name
    (:func:`_plain`): LlamaIndex filters on keys the model refuses as field names
    (``content-type``), and they hold back as any do. None where they have none. Filters
    the model refuses for another reason (a condition with no value) are refused, naming
    their keys as given."""
    try:
        return to_filter(_plain_keys(filters), checked_only=True)
    except UnsafeFilterError as exc:
        given = {_plain(key): key for key in _keys(filters)}
        message = _PLAIN_NAME.sub(lambda m: given.get(m[0], m[0]), str(exc))
        raise UnsafeFilterError(message) from None


_PLAIN_NAME = re.compile(r"k_[0-9a-f]+")
"""A plain name (:func:`_plain`) in an error, whole: ``k_61`` (``a``) begins ``k_6162``
(``ab``)."""


def _filters_read(retriever: VectorRetriever) -> Filter | None:
    """LlamaIndex's retriever's own filters (:func:`_readable`) as its store reads a
    substring match (TEXT_MATCH) in them: as one on ``SimpleVectorStore``; as a prefix on
    LlamaIndex's Milvus store, which writes it ``like 'v%'``, the value as given
    (:func:`_as_prefixes`). Refused on any other store (others match tokens or phrases), and
    on Milvus where the value holds what its LIKE reads as a wildcard: a section it follows
    an ``IndexNode`` to that holds the text elsewhere would pass a check of what the store
    never applied."""
    filters = _own_filters(retriever)
    store = _store_of(retriever)
    if filters is None or is_named(store, "SimpleVectorStore"):
        return _readable(filters)
    matched = _substring_matches(filters)
    if not matched:
        return _readable(filters)
    if not is_named(store, "MilvusVectorStore"):
        keys = ", ".join(sorted({repr(f.key) for f in matched}))
        raise UnsafeFilterError(
            f"{type(retriever).__name__} filters on {keys} by TEXT_MATCH, which "
            f"{type(store).__name__} applies its own way, not as the substring match what "
            "it returns is checked against. Use ThresholdedRetriever(index, policy, "
            "filters=...) in place of LlamaIndex's own retriever: it matches the substring"
        )
    if unread := [f for f in matched if not _read_as_prefix(f)]:
        raise UnsafeFilterError(
            f"{type(retriever).__name__} filters on "
            f"{', '.join(sorted({repr(f.key) for f in unread}))} by TEXT_MATCH "
            f"({', '.join(repr(f.value) for f in unread)}), which LlamaIndex's Milvus store "
            "writes unescaped into a LIKE pattern as a prefix: only a text holding none of "
            "LIKE's wildcards (%, _ and \\) and no quote is checked as it matched "
            "(TEXT_MATCH_INSENSITIVE it does not write). Use "
            "ThresholdedRetriever(index, policy, filters=...) in "
            "place of LlamaIndex's own retriever: it matches the substring"
        )
    return _as_prefixes(_readable(filters))


def _read_as_prefix(match: MetadataFilter) -> bool:
    """Whether LlamaIndex's Milvus store matches the stored text by the prefix
    ``match.value`` (``like 'value%'``): a text holding nothing it writes unescaped
    (:data:`_LIKE_WILDCARDS`), whose last character has a next (:func:`_as_prefixes`)."""
    value = match.value
    return (
        match.operator is FilterOperator.TEXT_MATCH
        and isinstance(value, str)
        and not _LIKE_WILDCARDS.search(value)
        and not value.endswith(chr(sys.maxunicode))
    )


_LIKE_WILDCARDS = re.compile(r"[%_\\'\"]")
"""What LlamaIndex's Milvus store writes into its ``like '...'`` unescaped and Milvus reads
otherwise than as the character: LIKE's wildcards, the escape, the quotes."""


def _as_prefixes(f: Filter | None) -> Filter | None:
    """``f`` with each substring match (TEXT_MATCH ``v``) read as the prefix ``v``: a text
    from ``v`` (inclusive) to ``v`` with its last character the next one (exclusive), which
    holds exactly the texts that begin with ``v``. The empty text begins every text, as it
    is in every one."""
    if f is None:
        return None
    if isinstance(f, Condition):
        if f.op is not Op.TEXT_MATCH or not f.value:
            return f
        value = str(f.value)
        after = value[:-1] + chr(ord(value[-1]) + 1)
        return Group(Combine.AND, (Condition(f.key, Op.GTE, value), Condition(f.key, Op.LT, after)))
    return Group(f.combine, tuple(_as_prefixes(child) for child in f.children))


def _read_by_store(retriever: VectorRetriever, node: Any) -> bool:
    """Whether ``SimpleVectorStore``, the store of LlamaIndex's ``retriever``, would find
    ``node`` within its filters, reading them its own way (Python's ``True == 1``; a
    TEXT_MATCH, CONTAINS, ANY or ALL on a value it cannot look in fails the store's search,
    where the core finds it false and its NOT true). A node it would fail on is not within
    them. On any other store, True: the core's reading is the check."""
    store = _store_of(retriever)
    if not is_named(store, "SimpleVectorStore"):
        return True
    metadata = _with_document(node)
    try:
        return build_metadata_filter_fn(lambda _: metadata, _own_filters(retriever))(node.node_id)
    except (TypeError, ValueError):
        return False


_SUBSTRING_MATCHES = frozenset({FilterOperator.TEXT_MATCH, FilterOperator.TEXT_MATCH_INSENSITIVE})


def _substring_matches(filters: Any) -> list[MetadataFilter]:
    """The substring matches (TEXT_MATCH) among LlamaIndex's ``filters``."""
    if isinstance(filters, MetadataFilter):
        return [filters] if filters.operator in _SUBSTRING_MATCHES else []
    return [m for f in filters.filters for m in _substring_matches(f)]


def _keys(filters: Any) -> set[str]:
    """Every key LlamaIndex's ``filters`` name."""
    if isinstance(filters, MetadataFilter):
        return {filters.key}
    return {key for f in filters.filters for key in _keys(f)}


def _plain_keys(filters: Any) -> Any:
    """LlamaIndex's ``filters`` with each key under its plain name (:func:`_plain`)."""
    if isinstance(filters, MetadataFilter):
        return filters.model_copy(update={"key": _plain(filters.key)})
    if isinstance(filters, MetadataFilters):
        return filters.model_copy(update={"filters": [_plain_keys(f) for f in filters.filters]})
    return filters


def _plain(key: Any) -> Any:
    """A metadata key as a name the core's model takes, one for each key (its UTF-8 bytes
    in hexadecimal): the filters are only checked here, never written for a store."""
    return f"k_{key.encode().hex()}" if isinstance(key, str) else key


def check_postprocessors(
    retriever: Any, retrieved: list[NodeWithScore], postprocessors: Sequence[Any]
) -> None:
    """Refuse, before they run, node postprocessors that read sections from a docstore
    (``PrevNextNodePostprocessor``, ``AutoPrevNextNodePostprocessor``) where the retriever
    holds some back (:func:`none_added`). What they read is held to none of its filters,
    and their own span hands it to every span handler (a tracing integration records it as
    the span's output) before :func:`none_added` could refuse it: an internal neighbour's
    text, or an internal parent's metadata in a stored copy's relationships. Behind such a
    retriever they can only add a section past its filters, or nothing."""
    _check_no_cutoff_deletes_attachments(retrieved, postprocessors)
    readers = sorted({type(p).__name__ for p in postprocessors if _reads_docstore(p)})
    if readers and _holds_back(retriever, retrieved):
        raise UnsafeFilterError(
            f"the node postprocessors {readers} read sections from the docstore, held to none "
            f"of the filters, doc_ids, node_ids or store restrictions of "
            f"{type(retriever).__name__}, and their spans would pass what they read to every "
            f"span handler. {ATTACH_INSTEAD}"
        )


def checked_retrieval(
    retriever: Any, postprocessors: Sequence[Any], query: str | QueryBundle
) -> tuple[list[NodeWithScore], str | None]:
    """What ``retriever`` returns for ``query``, after the node ``postprocessors``
    (:func:`postprocessed`), and, when nothing is left, what emptied it where that is known
    (:func:`~thresholded.report.abstained_by_after`)."""
    return drive(_checked_retrieval(retriever, postprocessors, query))


async def achecked_retrieval(
    retriever: Any, postprocessors: Sequence[Any], query: str | QueryBundle
) -> tuple[list[NodeWithScore], str | None]:
    """:func:`checked_retrieval`, awaiting the retriever and the postprocessors."""
    return await adrive(_checked_retrieval(retriever, postprocessors, query))


def _checked_retrieval(
    retriever: Any, postprocessors: Sequence[Any], query: str | QueryBundle
) -> Pipeline[tuple[list[NodeWithScore], str | None]]:
    bundle = query if isinstance(query, QueryBundle) else QueryBundle(query)
    if hasattr(retriever, "retrieve_with_report"):  # ours
        report = yield Step.call(retriever, "retrieve_with_report", query)
        retrieved = report.items
    else:
        report, retrieved = None, (yield Step.call(retriever, "retrieve", query))
    nodes = yield from _postprocessed(retriever, retrieved, postprocessors, bundle)
    return nodes, None if nodes else abstained_by_after(report, retrieved)


def postprocessed(
    retriever: Any,
    retrieved: list[NodeWithScore],
    postprocessors: Sequence[Any],
    bundle: QueryBundle,
) -> list[NodeWithScore]:
    """What the node ``postprocessors`` make of what ``retriever`` returned, checked before
    they run (:func:`check_postprocessors`) and after (:func:`none_added`)."""
    return drive(_postprocessed(retriever, retrieved, postprocessors, bundle))


async def apostprocessed(
    retriever: Any,
    retrieved: list[NodeWithScore],
    postprocessors: Sequence[Any],
    bundle: QueryBundle,
) -> list[NodeWithScore]:
    """:func:`postprocessed`, awaiting the postprocessors."""
    return await adrive(_postprocessed(retriever, retrieved, postprocessors, bundle))


def _postprocessed(
    retriever: Any,
    retrieved: list[NodeWithScore],
    postprocessors: Sequence[Any],
    bundle: QueryBundle,
) -> Pipeline[list[NodeWithScore]]:
    """Awaited, the store is asked which sections lie within the restrictions
    (:func:`none_outside`) in a thread, its client's calls blocking."""
    if any(asked_of(n.node) is None for n in retrieved):
        yield Step(
            lambda: none_outside(retriever, retrieved),
            lambda: asyncio.to_thread(none_outside, retriever, retrieved),
        )
    check_postprocessors(retriever, retrieved, postprocessors)
    nodes = retrieved
    for postprocessor in postprocessors:
        nodes = yield Step.call(postprocessor, "postprocess_nodes", nodes, query_bundle=bundle)
    return none_added(retriever, retrieved, nodes)


def _check_no_cutoff_deletes_attachments(
    retrieved: list[NodeWithScore], postprocessors: Sequence[Any]
) -> None:
    """Refuse LlamaIndex's ``SimilarityPostprocessor`` where the retriever attached
    neighbours or summaries: they carry no score, and it deletes every one of them."""
    cutoffs = [p for p in postprocessors if isinstance(p, SimilarityPostprocessor)]
    if not any(p.similarity_cutoff is not None for p in cutoffs):
        return
    attached = [n for n in retrieved if n.score is None and ATTACHED_ROLE in n.node.metadata]
    if attached:
        raise ValueError(
            f"SimilarityPostprocessor would delete the {len(attached)} neighbours and summaries "
            "the retriever attached (they carry no score, score=None): put "
            "SimilarityThresholdPostprocessor(min_similarity=...) in its place, which keeps "
            "each with its section, or set the floor in the retriever's policy"
        )


def _merges(retriever: Any) -> bool:
    """Whether ``retriever`` returns sections none of the retrievers it wraps returned (see
    :func:`_docstore_merger`)."""
    if _reads_docstore(retriever) or _reads_docstore(getattr(retriever, "_storage_context", None)):
        return True
    followed = ("_node_dict", "_query_engine_dict")
    others = len(getattr(retriever, "_retriever_dict", None) or ()) > 1
    return others or any(getattr(retriever, name, None) for name in followed)


def _reads_docstore(postprocessor: Any) -> bool:
    return isinstance(getattr(postprocessor, "docstore", None), BaseDocumentStore)


def _unlinked(node: NodeWithScore) -> NodeWithScore:
    """``node`` naming other sections by id only (:func:`~.nodes.unlinked`): the docstore's
    copy of a section carries its parent's and neighbours' metadata, which may be of
    sections outside the filters."""
    bare = unlinked(node.node)
    return node if bare is node.node else NodeWithScore(node=bare, score=node.score)


def _holds_back(retriever: Any, retrieved: list[NodeWithScore]) -> bool:
    """Whether ``retriever`` holds sections back (:func:`_restricts`), or returned nodes that
    a retrieval of ours produced under filters, ids or store restrictions."""
    if _restricts(retriever):
        return True
    return any((asked := asked_of(n.node)) is not None and asked.held_back for n in retrieved)


INNER_RETRIEVERS = ("_retrievers", "_retriever", "_vector_retriever", "_retriever_dict")
"""Where LlamaIndex's retrievers keep the ones they search through (``QueryFusionRetriever``,
``RouterRetriever``, ``TransformRetriever``, ``AutoMergingRetriever``, ``RecursiveRetriever``)."""


def _restricts(retriever: Any) -> bool:
    """Whether ``retriever``, or one it searches through, returns only some sections: one of
    ours with filters, ids or store restrictions, LlamaIndex's own ``VectorIndexRetriever``
    with its own (``index.as_retriever(filters=...)``), or its ``VectorIndexAutoRetriever``,
    which searches under the filters its LLM writes (and its ``extra_filters``): a section a
    postprocessor adds is held to their filters no more than to ours."""
    if isinstance(retriever, EngineRetriever):
        return retriever.restricted
    if isinstance(retriever, VectorIndexRetriever):
        return vector_retriever_holds_back(retriever)
    if isinstance(retriever, VectorIndexAutoRetriever):  # its LLM's filters, its extra ones
        return True
    return any(_restricts(r) for r in _inner(retriever))


def _inner(retriever: Any) -> list[BaseRetriever]:
    """The retrievers ``retriever`` searches through (:data:`INNER_RETRIEVERS`)."""
    inner: list[Any] = []
    for name in INNER_RETRIEVERS:
        found = getattr(retriever, name, None)
        found = list(found.values()) if isinstance(found, Mapping) else found
        inner.extend(found if isinstance(found, list | tuple) else [found])
    return [r for r in inner if isinstance(r, BaseRetriever) and r is not retriever]


def _docstore_merger(retriever: Any) -> str | None:
    """The name of a retriever in ``retriever`` (itself, or one it searches through) that
    merges sections from elsewhere into what a retriever it wraps returned, where that one
    holds some back: an ``AutoMergingRetriever`` fills in parents and the sections between
    retrieved ones from the docstore; a ``RecursiveRetriever`` follows an ``IndexNode`` to
    the section its ``node_dict`` holds, or to another retriever or query engine. None when
    there is none."""
    if isinstance(retriever, EngineRetriever | VectorIndexRetriever):
        return None
    inner = _inner(retriever)
    if _merges(retriever) and any(_restricts(r) for r in inner):
        return type(retriever).__name__
    return next((name for r in inner if (name := _docstore_merger(r)) is not None), None)


def _sections(nodes: list[NodeWithScore]) -> set[tuple[str | None, str]]:
    """Each node's section: its collection (a multi-collection retriever's mark) and id."""
    return {(collection_of(n), n.node.node_id) for n in nodes}


def _once(token: str) -> Generator[str, None, None]:
    yield token


async def _aonce(token: str) -> AsyncGenerator[str, None]:
    yield token


def _check_question(query: Any) -> None:
    """Refuse a question that is neither a str nor a QueryBundle (a coroutine, None) as the
    retriever does, before LlamaIndex's query event fails on it with pydantic's errors."""
    if not isinstance(query, str | QueryBundle):
        question_of(query)


class AbstainingQueryEngine(RetrieverQueryEngine):
    """A ``RetrieverQueryEngine`` that answers ``no_match_message`` when no node remains.

    The check runs after the node postprocessors (rerankers included), right
    before synthesis, so the LLM is only called when there is context.
    """

    def __init__(self, *args: Any, no_match_message: str = DEFAULT_NO_MATCH_MESSAGE, **kwargs: Any):
        accepted = [*named_parameters(RetrieverQueryEngine.__init__), "no_match_message"]
        check_arguments(f"{type(self).__name__}()", kwargs, accepted)
        check_retriever(f"{type(self).__name__}()", args, kwargs)
        super().__init__(*args, **kwargs)
        self.no_match_message = no_match_message

    no_match_message = NoMatchMessage()

    @classmethod
    def from_args(  # type: ignore[override]
        cls, *args: Any, no_match_message: str = DEFAULT_NO_MATCH_MESSAGE, **kwargs: Any
    ) -> AbstainingQueryEngine:
        """``RetrieverQueryEngine.from_args``, with ``no_match_message``.

        An unknown keyword is a ``TypeError`` (LlamaIndex's ``from_args`` ignores it).
        """
        accepted = [*named_parameters(super().from_args), "no_match_message"]
        check_arguments(f"{cls.__name__}.from_args()", kwargs, accepted)
        check_retriever(f"{cls.__name__}.from_args()", args, kwargs)
        check_no_match_message(no_match_message)
        engine = super().from_args(*args, **kwargs)
        engine.no_match_message = no_match_message  # type: ignore[attr-defined]
        return engine  # type: ignore[return-value]

    def with_retriever(self, retriever: BaseRetriever) -> AbstainingQueryEngine:
        """This engine over ``retriever``: its synthesizer, node postprocessors, callback
        manager and ``no_match_message``. LlamaIndex's builds a plain
        ``RetrieverQueryEngine``, which answers "Empty Response" and lets a postprocessor
        add sections past the retriever's filters."""
        return type(self)(
            retriever=retriever,
            response_synthesizer=self._response_synthesizer,
            callback_manager=self.callback_manager,
            node_postprocessors=self._node_postprocessors,
            no_match_message=self.no_match_message,
        )

    def _no_match(
        self, *, asynchronous: bool = False, abstained_by: str | None = None
    ) -> RESPONSE_TYPE:
        """The configured message, in the shape the synthesizer would have answered in."""
        streaming = getattr(self._response_synthesizer, "_streaming", False)
        return no_match_response(
            self.no_match_message,
            streaming=streaming,
            asynchronous=asynchronous,
            abstained_by=abstained_by,
        )

    def retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        retrieved = self._retriever.retrieve(query_bundle)
        return postprocessed(self._retriever, retrieved, self._node_postprocessors, query_bundle)

    async def aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        retrieved = await self._retriever.aretrieve(query_bundle)
        return await apostprocessed(
            self._retriever, retrieved, self._node_postprocessors, query_bundle
        )

    def synthesize(
        self,
        query_bundle: QueryBundle,
        nodes: list[NodeWithScore],
        additional_source_nodes: Any = None,
    ) -> RESPONSE_TYPE:
        if not nodes:
            return self._no_match()
        return _answered(super().synthesize(query_bundle, nodes, additional_source_nodes))

    async def asynthesize(
        self,
        query_bundle: QueryBundle,
        nodes: list[NodeWithScore],
        additional_source_nodes: Any = None,
    ) -> RESPONSE_TYPE:
        if not nodes:
            return self._no_match(asynchronous=True)
        return _answered(await super().asynthesize(query_bundle, nodes, additional_source_nodes))

    def query(self, str_or_query_bundle: QueryType) -> RESPONSE_TYPE:
        _check_question(str_or_query_bundle)
        return super().query(str_or_query_bundle)

    async def aquery(self, str_or_query_bundle: QueryType) -> RESPONSE_TYPE:
        _check_question(str_or_query_bundle)
        return await super().aquery(str_or_query_bundle)

    def _query(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        with self.callback_manager.event(
            CBEventType.QUERY, payload={EventPayload.QUERY_STR: query_bundle.query_str}
        ) as event:
            nodes, why = checked_retrieval(self._retriever, self._node_postprocessors, query_bundle)
            if nodes:
                response = self.synthesize(query_bundle, nodes)
            else:
                response = self._no_match(abstained_by=why)
            event.on_end(payload={EventPayload.RESPONSE: response})
        return response

    async def _aquery(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        with self.callback_manager.event(
            CBEventType.QUERY, payload={EventPayload.QUERY_STR: query_bundle.query_str}
        ) as event:
            retriever, postprocessors = self._retriever, self._node_postprocessors
            nodes, why = await achecked_retrieval(retriever, postprocessors, query_bundle)
            if nodes:
                response = await self.asynthesize(query_bundle, nodes)
            else:
                response = self._no_match(asynchronous=True, abstained_by=why)
            event.on_end(payload={EventPayload.RESPONSE: response})
        return response
