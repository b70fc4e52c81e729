"""``search_kwargs={"ids": ...}`` on a langchain-milvus store (Milvus Lite, hand-made vectors).

The ids restrict the search as a test of the primary key. One id may be given as a string,
as Chroma takes it: it is that id, not its characters.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_thresholded import ThresholdedRetriever
from langchain_thresholded.milvus import milvus_from_documents
from thresholded import RetrievalPolicy

pytestmark = pytest.mark.integration

POLICY = RetrievalPolicy(min_similarity=0.5, top_k=10, max_per_source=None, max_chars=None)
QUESTION = [1.0, 0.0, 0.0, 0.0]


class _Near(Embeddings):
    """Every text embeds to the question's vector."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(QUESTION) for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return list(QUESTION)


@pytest.mark.parametrize("ids", ["a0", ["a0"], ("a0",)])
def test_one_id_as_a_string_restricts_the_search_to_it(tmp_path: Path, ids: object) -> None:
    docs = [Document(id=i, page_content=f"near {i}") for i in ("a0", "a", "0", "b0")]
    store = milvus_from_documents(docs, _Near(), uri=str(tmp_path / "s.db"), collection_name="c")
    retriever = ThresholdedRetriever(vectorstore=store, policy=POLICY, search_kwargs={"ids": ids})
    found = retriever.invoke("q"), asyncio.run(retriever.ainvoke("q"))
    assert [[d.id for d in each] for each in found] == [["a0"], ["a0"]]


@pytest.mark.parametrize("ids", ["a0", ["a0", "b0"]])
def test_a_wrapped_mmr_retrievers_ids_restrict_its_search(tmp_path: Path, ids: object) -> None:
    """langchain-milvus's MMR search sent them to pymilvus beside the vector: every call
    failed with "Either ids or data must be provided, not both"."""
    docs = [Document(id=i, page_content=f"near {i}") for i in ("a0", "a", "0", "b0")]
    store = milvus_from_documents(docs, _Near(), uri=str(tmp_path / "m.db"), collection_name="c")
    wrapped = store.as_retriever(search_type="mmr", search_kwargs={"ids": ids})
    retriever = ThresholdedRetriever.from_retriever(wrapped, policy=POLICY)
    wanted = [ids] if isinstance(ids, str) else ids
    for found in (retriever.invoke("q"), asyncio.run(retriever.ainvoke("q"))):
        assert sorted(d.id for d in found) == wanted


def test_an_int_as_ids_is_refused_naming_ids(tmp_path: Path) -> None:
    """It failed with a bare "'int' object is not iterable"."""
    docs = [Document(id="a0", page_content="near a0")]
    store = milvus_from_documents(docs, _Near(), uri=str(tmp_path / "i.db"), collection_name="c")
    with pytest.raises(TypeError, match=r"search_kwargs\['ids'\] .*list of ids"):
        ThresholdedRetriever(vectorstore=store, policy=POLICY, search_kwargs={"ids": 5})


@pytest.mark.parametrize("search_type", ["similarity", "mmr"])
@pytest.mark.parametrize("ids", ["a0", ["a0", "b0"], []])
def test_an_ensemble_members_ids_restrict_its_search(
    tmp_path: Path, search_type: str, ids: object
) -> None:
    """The member was refused: its ids were said to be dropped by Milvus, which the
    retriever's own ids are not (a test of the primary key in its expr). An empty list
    names no row: the member finds nothing."""
    from langchain_classic.retrievers import EnsembleRetriever

    docs = [Document(id=i, page_content=f"near {i}") for i in ("a0", "a", "0", "b0")]
    store = milvus_from_documents(docs, _Near(), uri=str(tmp_path / "e.db"), collection_name="c")
    member = store.as_retriever(search_type=search_type, search_kwargs={"ids": ids, "k": 10})
    other = store.as_retriever(search_kwargs={"ids": ["a"], "k": 10})
    ensemble = EnsembleRetriever(retrievers=[member, other])
    retriever = ThresholdedRetriever.from_retriever(ensemble, policy=POLICY)
    wanted = sorted([*([ids] if isinstance(ids, str) else ids), "a"])
    for found in (retriever.invoke("q"), asyncio.run(retriever.ainvoke("q"))):
        assert sorted(str(d.metadata["pk"]) for d in found) == wanted


@pytest.mark.parametrize(
    ("search_type", "in_ensemble"), [("mmr", False), ("similarity", True), ("mmr", True)]
)
def test_a_searched_retrievers_filter_expression_restricts_its_search(
    tmp_path: Path, search_type: str, in_ensemble: bool
) -> None:
    """langchain-milvus sends a retriever's ``search_kwargs={"filter": ...}`` to pymilvus
    beside its own ``filter=expr``: every call of a wrapped MMR retriever or an ensemble
    member holding one failed with "got multiple values for keyword argument 'filter'". It
    holds in the ``expr``, with the retriever's own ``expr`` and ``ids``."""
    from langchain_classic.retrievers import EnsembleRetriever

    docs = [Document(id=i, page_content=f"near {i}") for i in ("a0", "a", "0", "b0")]
    store = milvus_from_documents(docs, _Near(), uri=str(tmp_path / "f.db"), collection_name="c")
    searched = store.as_retriever(
        search_type=search_type,
        search_kwargs={"filter": 'pk != "b0"', "expr": 'pk != "0"', "ids": ["a0", "b0", "0"]},
    )
    wrapped = EnsembleRetriever(retrievers=[searched]) if in_ensemble else searched
    retriever = ThresholdedRetriever.from_retriever(wrapped, policy=POLICY)
    for found in (retriever.invoke("q"), asyncio.run(retriever.ainvoke("q"))):
        assert [str(d.metadata["pk"]) for d in found] == ["a0"]


def test_ids_no_integer_key_can_be_find_nothing_without_a_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On an INT64 primary key, ``["abc"]`` names no row: the search ran unrestricted and
    every section it found was then dropped as outside the ids."""
    docs = [Document(page_content=f"near {i}") for i in range(3)]
    store = milvus_from_documents(
        docs, _Near(), uri=str(tmp_path / "k.db"), collection_name="c", auto_id=True
    )
    retriever = ThresholdedRetriever(
        vectorstore=store, policy=POLICY, search_kwargs={"ids": ["abc", "1e3"]}
    )
    searched = []
    monkeypatch.setattr(type(store.client), "search", lambda *a, **k: searched.append(k))
    reports = retriever.retrieve_with_report("q"), asyncio.run(retriever.aretrieve_with_report("q"))
    assert [(r.kept, r.dropped, r.outside_filters) for r in reports] == [((), (), 0)] * 2
    assert searched == []


_NOT_B0 = 'pk != "b0"'


@pytest.mark.parametrize(
    ("bind", "own"),
    [
        (lambda r: r.with_config(tags=["member"]), {"filter": _NOT_B0}),
        (lambda r: r.with_retry(stop_after_attempt=1), {"filter": _NOT_B0}),
        (lambda r: r.bind(filter=_NOT_B0), {}),
        (lambda r: r.with_fallbacks([r]).bind(filter=_NOT_B0), {}),
        (lambda r: _ensemble_of(r), {"filter": _NOT_B0}),
    ],
    ids=["with_config", "with_retry", "bind", "with_fallbacks", "nested_ensemble"],
)
def test_a_bound_ensemble_members_ids_and_filter_restrict_its_search(
    tmp_path: Path, bind: Any, own: dict[str, str]
) -> None:
    """A member wrapped in ``with_config(...)``, ``with_retry()``, ``bind(...)`` or
    ``with_fallbacks(...)``, or in a nested ensemble, is searched as it is unwrapped: its ids
    and raw filter (its own, or one a binding gives) hold in its ``expr``. Every call failed,
    with pymilvus's "Either ids or data must be provided, not both" or "got multiple values
    for keyword argument 'filter'"; behind fallbacks, each fallback was tried in its place."""
    from langchain_classic.retrievers import EnsembleRetriever

    docs = [Document(id=i, page_content=f"near {i}") for i in ("a0", "a", "0", "b0")]
    store = milvus_from_documents(docs, _Near(), uri=str(tmp_path / "b.db"), collection_name="c")
    member = store.as_retriever(search_kwargs={"ids": ["a0", "b0", "0"], "k": 10, **own})
    ensemble = EnsembleRetriever(retrievers=[bind(member)])
    retriever = ThresholdedRetriever.from_retriever(ensemble, policy=POLICY)
    for found in (retriever.invoke("q"), asyncio.run(retriever.ainvoke("q"))):
        assert sorted(str(d.metadata["pk"]) for d in found) == ["0", "a0"]


def _ensemble_of(retriever: Any) -> Any:
    from langchain_classic.retrievers import EnsembleRetriever

    return EnsembleRetriever(retrievers=[retriever])
