"""Another retriever as candidate source: an ``EnsembleRetriever`` in ``ThresholdedRetriever``.

An ``EnsembleRetriever`` (dense + BM25, fused by weighted reciprocal rank) returns
documents without their scores. ``RetrieverSource`` runs its retrievers and fuses
them exactly as ``EnsembleRetriever.weighted_reciprocal_rank`` does, so each
document carries its RRF score: ``sum(weight / (rank + c))``. Such a score is
never compared with a cosine floor; with ``hybrid_policy="rescore"`` the floor
meets each document's dense cosine, and the RRF score and order stay.

Any other retriever is taken in its own order, its documents' score read from
``metadata[score_key]`` when one is named (else no score: the order stays).
``ThresholdedRetriever.from_retriever`` builds the whole thing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig, RunnableWithFallbacks
from langchain_core.runnables.base import RunnableBindingBase
from langchain_core.runnables.configurable import DynamicRunnable
from langchain_core.tracers.context import _configure_hooks, tracing_v2_callback_var
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever
from langsmith.run_helpers import tracing_context

from langchain_thresholded.faiss_window import first_window, wider_window
from langchain_thresholded.milvus import RAW_EXPR_KEYS, ids_admit_no_row, in_one_expr
from langchain_thresholded.scoring import is_faiss, is_milvus
from thresholded.scores import ScoreKind, rrf_fused

Scored = list[tuple[Document, float | None]]

MMR_FETCH_K = 20
"""The candidates a LangChain store's MMR search chooses among unless told (``fetch_k``)."""

MMR_MAX_ROWS = 512
"""The most documents a widened MMR search asks for: MMR compares each document it picks with
every one picked before, so its cost grows with the cube of the rows (3,072 rows took about
40 s of a 1,600-document store's, 384 under 1 s)."""

_SILENT: RunnableConfig = {"callbacks": [], "configurable": {}}
"""The config an inner retriever runs with: no callbacks, no configurable values. Without a
config, LangChain gives it the ambient one of an enclosing chain, and its
``on_retriever_end`` (every document it found, those outside the filters too) would reach
the caller's handlers and ``astream_events``; the chain's configurable values are the
retriever around it's (its ``call_filters``), which it applies (a configurable inner
retriever is refused)."""


@contextmanager
def _untraced() -> Iterator[None]:
    """No tracer for the inner retrievers' runs: LangChain adds one to every run, whatever its
    config, when tracing is on (``LANGSMITH_TRACING``, ``tracing_v2_enabled()``) or runs are
    collected (``collect_runs()``), and would record every document they found, those outside
    the filters too. Tasks and threads started inside copy this context."""
    variables: list[ContextVar[Any]] = [var for var, *_ in _configure_hooks]
    variables.append(tracing_v2_callback_var)
    tokens = [(var, var.set(None)) for var in variables]
    try:
        with tracing_context(enabled=False):
            yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def is_ensemble(retriever: object) -> bool:
    """Whether ``retriever`` fuses other retrievers by weighted reciprocal rank.

    Recognised by its fields (``retrievers``, ``weights``, ``c``) so that
    ``langchain-classic`` never has to be imported here.
    """
    return all(hasattr(retriever, name) for name in ("retrievers", "weights", "c"))


def members_of(retriever: Any) -> list[Any]:
    """The retrievers whose documents ``retriever`` returns: an ensemble's, or itself."""
    return list(retriever.retrievers) if is_ensemble(retriever) else [retriever]


def searching_members(retriever: Any, depth: int = 0) -> list[Any]:
    """The retrievers whose documents ``retriever`` returns, however it nests them: each
    member of an ensemble (of an ensemble inside it too), each of a ``with_fallbacks(...)``'s
    runnables, else itself; each as it is bound (``bind(...)``, ``with_retry()``)."""
    inner = unbound(retriever)[0]
    if isinstance(inner, RunnableWithFallbacks):
        nested = [inner.runnable, *inner.fallbacks]
    elif is_ensemble(inner):
        nested = members_of(inner)
    else:
        return [retriever]
    if depth > 8:
        raise ValueError("the retriever nests ensembles and fallbacks more than 8 deep")
    return [m for r in nested for m in searching_members(r, depth + 1)]


class RetrieverSource(VectorStore):
    """A retriever seen as a store of scored candidates, for ``ThresholdedRetriever``.

    ``k`` (the retriever's ``top_k * over_fetch``) cuts the fused list; how many
    documents each inner retriever returns is its own setting. It takes no store
    arguments: the ``ThresholdedRetriever`` over it checks every document against its
    ``filters`` (neighbours and summaries included), and inner retrievers may filter too.

    Args:
        retriever: The retriever whose results are judged, e.g. an ``EnsembleRetriever``.
        embeddings: The dense model, to re-score the results (``hybrid_policy="rescore"``).
        score_key: For a retriever other than an ensemble: the metadata key of each
            document's score; default: no score (the retriever's order stays).
        resize: Ask the retriever (an ensemble: each member) for the ``k`` documents each
            search asks for: a store's retriever (``store.as_retriever(...)``, an MMR
            search's ``fetch_k`` at least as many) and a retriever with a ``k`` field
            (``BM25Retriever``); any other keeps its own size. Default: each keeps its own
            ``k`` on a first search, and is asked for ``k`` on a search the engine widens
            because too few of the first one's documents lay within the filters
            (:meth:`resized`), so that the sections within them farther out are reached.
    """

    def __init__(
        self,
        retriever: BaseRetriever,
        *,
        embeddings: Embeddings | None = None,
        score_key: str | None = None,
        resize: bool = False,
    ) -> None:
        not_configurable(retriever)
        self.retriever = retriever
        self._embeddings = embeddings
        self.score_key = score_key
        self.resize = resize

    @property
    def embeddings(self) -> Embeddings | None:
        return self._embeddings

    @property
    def score_kind(self) -> ScoreKind:
        """RRF for an ensemble; unknown for any other retriever."""
        return ScoreKind.RRF if is_ensemble(self.retriever) else ScoreKind.UNKNOWN

    # What ThresholdedRetriever calls -------------------------------------------------------
    def similarity_search_with_score(self, query: str, k: int = 4, **kwargs: Any) -> Scored:
        _no_store_arguments(kwargs)
        not_configurable(self.retriever)  # it, or its members, may have changed since
        with _untraced():
            if is_ensemble(self.retriever):
                inner = self._members(k)
                return self._fuse([_invoked(r, query) for r in inner])[:k]
            return self._read_scores(_invoked(self._sized(self.retriever, k), query))[:k]

    async def asimilarity_search_with_score(self, query: str, k: int = 4, **kwargs: Any) -> Scored:
        _no_store_arguments(kwargs)
        not_configurable(self.retriever)  # it, or its members, may have changed since
        with _untraced():
            if is_ensemble(self.retriever):
                inner = self._members(k)
                lists = await asyncio.gather(*(_ainvoked(r, query) for r in inner))
                return self._fuse(list(lists))[:k]
            sized = self._sized(self.retriever, k)
            return self._read_scores(await _ainvoked(sized, query))[:k]

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k, **kwargs)]

    async def asimilarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in await self.asimilarity_search_with_score(query, k, **kwargs)]

    def resized(self) -> RetrieverSource:
        """This source with ``resize`` set: what a widened search searches."""
        if self.resize:
            return self
        return RetrieverSource(
            self.retriever, embeddings=self._embeddings, score_key=self.score_key, resize=True
        )

    def _members(self, k: int) -> list[BaseRetriever]:
        """The ensemble's members, each :meth:`_sized` to ``k``."""
        members = self.retriever.retrievers  # type: ignore[attr-defined]
        return [self._sized(member, k) for member in members]

    def _sized(self, retriever: BaseRetriever, k: int) -> BaseRetriever:
        """``retriever``, asked for ``k`` documents where ``resize`` is set and it can be: its
        own ``k`` would cap a search the engine widens (the filters hold after the search),
        and the sections within them farther out would never be reached."""
        retriever = _in_one_expr(retriever)
        if not self.resize:
            return retriever
        if isinstance(retriever, VectorStoreRetriever):
            kwargs = {**retriever.search_kwargs, "k": k}
            if retriever.search_type == "mmr":
                kwargs["fetch_k"] = max(int(kwargs.get("fetch_k") or MMR_FETCH_K), k)
            return retriever.model_copy(update={"search_kwargs": kwargs})
        if "k" in getattr(type(retriever), "model_fields", ()):  # a runnable may be no model
            return retriever.model_copy(update={"k": k})
        return retriever

    @property
    def max_rows(self) -> int | None:
        """The most rows a widened search asks for: :data:`MMR_MAX_ROWS` when it runs an MMR
        search (the retriever's, or an ensemble member's), else None (the engine's limit)."""
        return MMR_MAX_ROWS if any(_is_mmr(r) for r in members_of(self.retriever)) else None

    @property
    def max_rows_advice(self) -> str:
        """What the error past the widest search advises: the retriever searches without the
        filters, which of its searches stop early or keep their own size, and what reaches
        farther."""
        if not is_ensemble(self.retriever) and _is_mmr(self.retriever):
            return (
                f"The MMR search (search_type='mmr') runs without the filters and is "
                f"{_mmr_limit()}. "
                "Search by similarity instead "
                "(store.as_retriever(search_type='similarity'), widened as far as any store's "
                "search), give broader filters, or ask for fewer candidates"
            )
        return (
            f"The {self._searching_without_filters()}{self._limits()}. {self._filtered_search()}, "
            "give broader filters, or ask for fewer candidates"
        )

    def _filtered_search(self) -> str:
        """How the retriever itself can search within the filters."""
        if is_ensemble(self.retriever):
            return (
                "Set the filter on the members' stores (as_retriever(search_kwargs="
                "{'filter': ...})) so that they search within it"
            )
        return "Give the wrapped retriever the filter itself"

    def _searching_without_filters(self) -> str:
        if is_ensemble(self.retriever):
            members = len(self.retriever.retrievers)  # type: ignore[attr-defined]
            return f"ensemble of {members} members searches without the filters"
        return f"wrapped {type(self.retriever).__name__} searches without the filters"

    def _limits(self) -> str:
        """Each searched retriever that stops early (MMR) or keeps its own size, named."""
        notes = []
        for position, retriever in enumerate(members_of(self.retriever)):
            which = (
                f"member {position} ({type(retriever).__name__})"
                if is_ensemble(self.retriever)
                else "it"
            )
            if _is_mmr(retriever):
                notes.append(f"; {which} is an MMR search (search_type='mmr'), {_mmr_limit()}")
            elif not _resizable(retriever):
                notes.append(
                    f"; {which} keeps its own size, so a widened search gets no more of its "
                    "documents"
                )
        return "".join(notes)

    # Fusion ---------------------------------------------------------------------------
    def _fuse(self, doc_lists: Sequence[Sequence[Document]]) -> Scored:
        """Weighted reciprocal rank fusion, as ``EnsembleRetriever`` does it, with the scores."""
        ensemble: Any = self.retriever
        id_key = getattr(ensemble, "id_key", None)

        def key(doc: Document) -> str:
            return doc.page_content if id_key is None else str(doc.metadata[id_key])

        return list(rrf_fused(doc_lists, ensemble.weights, ensemble.c, key))

    def _read_scores(self, docs: Iterable[Document]) -> Scored:
        """Each document with the number in ``metadata[score_key]`` (else None)."""
        key = self.score_key
        read = [(doc, None if key is None else doc.metadata.get(key)) for doc in docs]
        return [(doc, float(v) if isinstance(v, (int, float)) else None) for doc, v in read]

    # A source, not a store ---------------------------------------------------------------
    def add_texts(
        self, texts: Iterable[str], metadatas: list[dict] | None = None, **kwargs: Any
    ) -> list[str]:
        raise NotImplementedError("add documents to the inner retrievers' own stores")

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict] | None = None,
        **kwargs: Any,
    ) -> RetrieverSource:
        raise NotImplementedError("build the inner retrievers, then RetrieverSource(retriever)")


def _invoked(retriever: Any, query: str) -> list[Document]:
    """``retriever``'s documents; a store's retriever over FAISS with a filter searched for
    as far as the filter needs (see :mod:`langchain_thresholded.faiss_window`)."""
    windowed = _first_window(retriever)
    found = windowed.invoke(query, _SILENT)
    while (wider := _wider_window(windowed, found)) is not None:
        windowed, found = wider, wider.invoke(query, _SILENT)
    return found


async def _ainvoked(retriever: Any, query: str) -> list[Document]:
    """Async :func:`_invoked`."""
    windowed = _first_window(retriever)
    found = await windowed.ainvoke(query, _SILENT)
    while (wider := _wider_window(windowed, found)) is not None:
        windowed, found = wider, await wider.ainvoke(query, _SILENT)
    return found


def _first_window(retriever: Any) -> Any:
    """A FAISS similarity search with a filter, over every row of a small index (an MMR search
    keeps its own ``fetch_k``: they are the candidates it chooses among)."""
    if not _faiss_filtered(retriever) or retriever.search_type != "similarity":
        return retriever
    kwargs = first_window(retriever.vectorstore, retriever.search_kwargs, _k(retriever))
    return retriever.model_copy(update={"search_kwargs": dict(kwargs)})


def _wider_window(retriever: Any, found: list[Document]) -> Any | None:
    """The FAISS search with a filter again over a wider window, when it found too few."""
    if not _faiss_filtered(retriever):
        return None
    store, kwargs, mmr = retriever.vectorstore, retriever.search_kwargs, _is_mmr(retriever)
    wider = wider_window(store, kwargs, _k(retriever), len(found), mmr=mmr)
    return None if wider is None else retriever.model_copy(update={"search_kwargs": dict(wider)})


def _faiss_filtered(retriever: Any) -> bool:
    return (
        isinstance(retriever, VectorStoreRetriever)
        and is_faiss(retriever.vectorstore)
        and retriever.search_type in ("similarity", "mmr")
        and retriever.search_kwargs.get("filter") is not None
    )


def _k(retriever: VectorStoreRetriever) -> int:
    return int(retriever.search_kwargs.get("k") or 4)


def _is_mmr(retriever: Any) -> bool:
    return isinstance(retriever, VectorStoreRetriever) and retriever.search_type == "mmr"


def _resizable(retriever: Any) -> bool:
    """Whether a widened search can ask ``retriever`` for more documents (see ``_sized``)."""
    return isinstance(retriever, VectorStoreRetriever) or "k" in getattr(
        type(retriever), "model_fields", ()
    )


def _mmr_limit() -> str:
    return (
        f"widened to MMR_MAX_ROWS = {MMR_MAX_ROWS} rows at most, as its cost grows with the "
        "cube of the rows"
    )


def not_configurable(retriever: Any) -> None:
    """Refuse a configurable retriever, or an ensemble with one among its members (however
    wrapped: ``with_retry()``, ``with_fallbacks()``, a nested ensemble): it is run here
    without the call's config, so what the config sets (e.g. ``call_filters``, a tenant's
    filter) would silently not apply, and its defaults would be searched. Checked at every
    search too: the retriever's members may be changed after construction."""
    for position, member in enumerate(members_of(retriever)):
        inner = unbound(member)[0]
        if isinstance(inner, DynamicRunnable) or _configurable(member):
            which = f"the ensemble's member {position}" if member is not retriever else "it"
            raise ValueError(
                f"a retriever whose search is set by a call's config cannot be wrapped "
                f"({which} is a configurable {type(inner).__name__}): it would be run without "
                "the call's config, so the fields the config sets (call_filters, say) would "
                "not apply. Wrap the retriever itself, and make the ThresholdedRetriever "
                "configurable instead (its call_filters narrow its filters)"
            )


def unbound(retriever: Any) -> tuple[Any, dict[str, Any]]:
    """The retriever inside ``bind(...)``, ``with_config(...)`` and ``with_retry()``, and the
    call arguments they give each of its searches (an outer binding's replace an inner
    one's, as they are passed on)."""
    kwargs: dict[str, Any] = {}
    while isinstance(retriever, RunnableBindingBase):
        kwargs = {**retriever.kwargs, **kwargs}
        retriever = retriever.bound
    return retriever, kwargs


def as_configured(retriever: Any, config: RunnableConfig | None) -> Any:
    """The runnable a call runs where a call's config chooses it (``configurable_fields``,
    ``configurable_alternatives``), inside the bindings around it, as their config and
    ``config`` set it; any other as it is."""
    inner = retriever
    while isinstance(inner, RunnableBindingBase | DynamicRunnable):
        if isinstance(inner, DynamicRunnable):
            return as_configured(*inner.prepare(config))
        config, inner = inner._merge_configs(config), inner.bound
    return retriever


def _configurable(runnable: Any) -> bool:
    """Whether a call's config sets some of the runnable's search, however deeply it is
    wrapped: LangChain lists it in ``config_specs`` through bindings, retries, fallbacks,
    sequences and a nested ensemble's members."""
    try:
        return bool(getattr(runnable, "config_specs", None))
    except Exception:  # a runnable whose specs cannot be listed is not known to be safe
        return True


def _no_store_arguments(kwargs: dict[str, Any]) -> None:
    if kwargs:
        raise TypeError(
            f"a retriever takes no store arguments, got {sorted(kwargs)}: give "
            "ThresholdedRetriever filters=..., or set filters on the inner retrievers"
        )


def _in_one_expr(retriever: Any, bound: Mapping[str, Any] | None = None) -> Any:
    """A langchain-milvus ``as_retriever(search_kwargs=...)`` with its ``filter`` and its
    ``ids`` held in its ``expr`` (:func:`~langchain_thresholded.milvus.in_one_expr`): its
    search would send them to pymilvus beside its own ``filter=expr`` and the question's
    vector. Inside ``bind(...)``, ``with_config(...)``, ``with_retry()``,
    ``with_fallbacks(...)`` and a nested ensemble too, with the raw filters and ids a
    binding gives its search (``bound``, which replace its own, as LangChain passes them
    on). Ids that name no row (an empty list) find nothing, without a search: Milvus takes
    no ``pk in []``."""
    if isinstance(retriever, RunnableBindingBase):
        return _rebound(
            retriever, _in_one_expr(retriever.bound, {**retriever.kwargs, **(bound or {})})
        )
    if isinstance(retriever, RunnableWithFallbacks):
        each = [_in_one_expr(r, bound) for r in (retriever.runnable, *retriever.fallbacks)]
        return retriever.model_copy(update={"runnable": each[0], "fallbacks": each[1:]})
    if is_ensemble(retriever):  # it calls its members without a binding's arguments
        members = [_in_one_expr(r) for r in members_of(retriever)]
        return retriever.model_copy(update={"retrievers": members})
    if not isinstance(retriever, VectorStoreRetriever) or not is_milvus(retriever.vectorstore):
        return retriever
    given = {k: v for k, v in (bound or {}).items() if k in _IN_EXPR}
    kwargs = {**retriever.search_kwargs, **given}
    if "ids" not in kwargs and "filter" not in kwargs:
        return retriever
    if ids_admit_no_row(retriever.vectorstore, kwargs.get("ids")):
        return _NoDocuments()
    in_one = in_one_expr(retriever.vectorstore, kwargs)
    return retriever.model_copy(update={"search_kwargs": in_one})


_IN_EXPR = frozenset({*RAW_EXPR_KEYS, "ids"})
"""The arguments of a langchain-milvus search held in its one ``expr``."""


def _rebound(binding: RunnableBindingBase, inner: Any) -> Any:
    """``binding`` around ``inner`` (:func:`_in_one_expr` of the retriever it bound), without
    the arguments held in an ``expr`` now (:data:`_IN_EXPR`); itself where nothing changed,
    and nothing to bind where ``inner`` finds nothing."""
    if inner is binding.bound or isinstance(inner, _NoDocuments):
        return binding if inner is binding.bound else inner
    kept = {k: v for k, v in binding.kwargs.items() if k not in _IN_EXPR}
    return binding.model_copy(update={"bound": inner, "kwargs": kept})


class _NoDocuments(BaseRetriever):
    """What a Milvus retriever restricted to ids that name no row finds: nothing."""

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return []

    async def _aget_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return []
