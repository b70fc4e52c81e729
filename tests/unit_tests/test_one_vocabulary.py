"""Both adapters' retrievers and collection specs take the same names, with the same meaning.

Each test runs once per adapter over the same corpus: sections s1 (cosine 0.875),
s2 (0.75) and s3 (0.25), chained s1-s2-s3, under the summary p, itself under pp.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

import langchain_thresholded as lc
import llama_index_thresholded as li
from thresholded import ProfileError, RetrievalPolicy
from thresholded.fanout import CollectionSearchError

QUESTION = "the question"
DIM = 4
MODEL = "test/vocabulary"
VECTORS = {
    QUESTION: [1.0, 0.0, 0.0, 0.0],
    "s1": [0.875, (1 - 0.875**2) ** 0.5, 0.0, 0.0],
    "s2": [0.75, 0.0, (1 - 0.75**2) ** 0.5, 0.0],
    "s3": [0.25, 0.0, 0.0, (1 - 0.25**2) ** 0.5],
    "p": [0.0, 1.0, 0.0, 0.0],
    "pp": [0.0, 0.0, 1.0, 0.0],
}
SECTIONS = ("s1", "s2", "s3")
POLICY = RetrievalPolicy(min_similarity=0.5, top_k=3, max_per_source=None, max_chars=None)
BESIDE_A_PROFILE = RetrievalPolicy(top_k=3, max_per_source=None, max_chars=None)
"""POLICY but its floor: a profile gives the floor."""
SLOW = 1.0
"""Seconds a slow store takes to answer: well beyond the deadlines below."""

# The names every retriever of both adapters takes, with the same meaning.
SHARED = {
    "policy",
    "profile",
    "collection",
    "neighbours",
    "parent_summaries",
    "parent_levels",
    "max_retries",
    "retry_backoff",
    "timeout",
    "metric",
    "score_kind",
    "allow_model_mismatch",
    "filters",
    "allowed_filter_keys",
}
MULTI_SHARED = {
    "policy",
    "timeout",
    "max_retries",
    "retry_backoff",
    "allow_model_mismatch",
    "filters",
    "allowed_filter_keys",
}


# The corpus, in each framework ----------------------------------------------------------------
def llama_index(slow: float = 0.0, **settings: Any) -> Any:
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
    from llama_index.core.vector_stores import SimpleVectorStore

    class Embedding(BaseEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            return list(VECTORS[query])

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return list(VECTORS[query])

        def _get_text_embedding(self, text: str) -> list[float]:
            return list(VECTORS[text])

    class Store(SimpleVectorStore):
        def query(self, query: Any, **kwargs: Any) -> Any:
            time.sleep(slow)
            return super().query(query, **kwargs)

        async def aquery(self, query: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(slow)
            return super().query(query, **kwargs)

    def node(name: str, parent: str | None, **links: str) -> TextNode:
        node = TextNode(id_=name, text=name, embedding=VECTORS[name], metadata={"source": name})
        for relation, target in (("PREVIOUS", links.get("prev")), ("NEXT", links.get("next"))):
            if target:
                node.relationships[NodeRelationship[relation]] = RelatedNodeInfo(node_id=target)
        if parent:
            node.relationships[NodeRelationship.PARENT] = RelatedNodeInfo(node_id=parent)
        return node

    sections = [
        node("s1", "p", next="s2"),
        node("s2", "p", prev="s1", next="s3"),
        node("s3", "p", prev="s2"),
    ]
    storage = StorageContext.from_defaults(vector_store=Store())
    storage.docstore.add_documents([node("p", "pp"), node("pp", None)])
    embed_model = Embedding(model_name=MODEL, embed_batch_size=8)
    index = VectorStoreIndex(sections, storage_context=storage, embed_model=embed_model)
    settings = {"metric": "COSINE", "pushdown": False, **settings}
    return li.ThresholdedRetriever(index, **settings)


def langchain(slow: float = 0.0, **settings: Any) -> Any:
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.stores import InMemoryStore
    from langchain_core.vectorstores import InMemoryVectorStore

    class Vectors(Embeddings):
        model_id = MODEL

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [list(VECTORS[t]) for t in texts]

        def embed_query(self, text: str) -> list[float]:
            return list(VECTORS[text])

    class Store(InMemoryVectorStore):
        def similarity_search_with_score_by_vector(self, *args: Any, **kwargs: Any) -> Any:
            time.sleep(slow)
            return super().similarity_search_with_score_by_vector(*args, **kwargs)

        async def asimilarity_search_with_score_by_vector(self, *args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(slow)
            return super().similarity_search_with_score_by_vector(*args, **kwargs)

    def doc(name: str, parent: str | None, **links: str) -> Document:
        metadata = {"source": name, **{f"{k}_id": v for k, v in links.items()}}
        if parent:
            metadata["parent_id"] = parent
        return Document(id=name, page_content=name, metadata=metadata)

    docs = [
        doc("s1", "p", next="s2"),
        doc("s2", "p", prev="s1", next="s3"),
        doc("s3", "p", prev="s2"),
    ]
    store = Store(Vectors())
    store.add_documents(docs)
    docstore = InMemoryStore()
    docstore.mset([(d.id, d) for d in [*docs, doc("p", "pp"), doc("pp", None)]])
    return lc.ThresholdedRetriever(vectorstore=store, docstore=docstore, **settings)


ADAPTERS = [pytest.param(llama_index, id="llama_index"), pytest.param(langchain, id="langchain")]


def report_of(retriever: Any, **kwargs: Any) -> Any:
    return retriever.retrieve_with_report(QUESTION, **kwargs)


def item_id(item: Any) -> str:
    """A LangChain document's id, or a LlamaIndex node's."""
    return item.id if hasattr(item, "id") else item.node.node_id


def kept(report: Any) -> list[str]:
    return [item_id(i) for i in report.kept]


def attached(report: Any) -> list[str]:
    return sorted(item_id(i) for i in report.attached)


def floor_of(retriever: Any) -> float:
    if hasattr(retriever, "as_policy"):
        return retriever.as_policy().resolve_min_similarity()
    return retriever.min_similarity


# The names ------------------------------------------------------------------------------------
def test_both_retrievers_take_the_shared_names():
    llama = set(inspect.signature(li.ThresholdedRetriever.__init__).parameters)
    chain = set(lc.ThresholdedRetriever.model_fields)
    assert SHARED - llama == set()
    assert SHARED - chain == set()
    assert "embed_model" in llama and "embeddings" in chain
    assert {"k", "min_similarity", "min_top_similarity", "score_mode"} & (llama | chain) == set()


def test_both_multi_collection_retrievers_take_the_shared_names():
    llama = set(inspect.signature(li.MultiCollectionRetriever.__init__).parameters)
    chain = set(lc.MultiCollectionRetriever.model_fields)
    assert MULTI_SHARED - llama == set()
    assert MULTI_SHARED - chain == set()
    assert "embed_model" in llama and "embeddings" in chain
    assert {"k", "min_similarity", "min_top_similarity"} & (llama | chain) == set()


@pytest.mark.parametrize("field", ["k", "min_similarity", "score_mode", "top_k"])
def test_the_langchain_multi_collection_retriever_refuses_unknown_fields(field):
    retriever = langchain(policy=POLICY)
    with pytest.raises(TypeError, match=f"unexpected keyword argument.*{field}"):
        lc.MultiCollectionRetriever(collections=[retriever], policy=POLICY, **{field: 1})


# Attachments ----------------------------------------------------------------------------------
@pytest.mark.parametrize("build", ADAPTERS)
@pytest.mark.parametrize(
    ("levels", "summaries"), [(0, []), (1, ["p"]), (2, ["p", "pp"])], ids=["0", "1", "2"]
)
def test_parent_levels_is_how_many_levels_of_summaries_are_attached(build, levels, summaries):
    retriever = build(policy=POLICY, neighbours=0, parent_summaries=True, parent_levels=levels)
    report = report_of(retriever)
    assert kept(report) == ["s1", "s2"]
    assert attached(report) == summaries


@pytest.mark.parametrize("build", ADAPTERS)
@pytest.mark.parametrize("levels", [None, 0, 1])
def test_parent_summaries_off_attaches_no_parent(build, levels):
    given = {} if levels is None else {"parent_levels": levels}
    retriever = build(policy=POLICY, neighbours=1, parent_summaries=False, **given)
    assert attached(report_of(retriever)) == ["s3"]


@pytest.mark.parametrize("build", ADAPTERS)
@pytest.mark.parametrize("levels", [2, -1])
def test_parent_levels_beside_parent_summaries_off_is_refused(build, levels):
    """Both took parent_levels=2 with parent_summaries=False and attached no summary, and took
    parent_levels=-1 unchecked: a setting accepted that did nothing."""
    with pytest.raises(ValueError, match="parent_levels"):
        build(policy=POLICY, neighbours=1, parent_summaries=False, parent_levels=levels)


def test_the_llama_index_multi_collection_retriever_refuses_it_too():
    index = llama_index(policy=POLICY)._index
    with pytest.raises(ValueError, match="parent_summaries=False turns off"):
        li.MultiCollectionRetriever([index], POLICY, parent_summaries=False, parent_levels=2)


@pytest.mark.parametrize("build", ADAPTERS)
def test_a_negative_parent_levels_is_refused(build):
    with pytest.raises(ValueError):
        build(policy=POLICY, parent_levels=-1)


# The deadline ---------------------------------------------------------------------------------
@pytest.mark.parametrize("build", ADAPTERS)
def test_a_search_past_its_timeout_raises_rather_than_returning_nothing(build):
    retriever = build(slow=SLOW, policy=POLICY, timeout=0.05)
    start = time.perf_counter()
    with pytest.raises(CollectionSearchError, match="timeout") as info:
        report_of(retriever)
    assert time.perf_counter() - start < SLOW / 2
    assert [s.status for s in info.value.statuses] == ["timeout"]
    assert "no answer within 0.05 s" in str(info.value)


@pytest.mark.parametrize("build", ADAPTERS)
def test_a_search_past_its_timeout_raises_async(build):
    retriever = build(slow=SLOW, policy=POLICY, timeout=0.05)

    async def call() -> Any:
        return await retriever.aretrieve_with_report(QUESTION)

    start = time.perf_counter()
    with pytest.raises(CollectionSearchError, match="timeout"):
        asyncio.run(call())
    assert time.perf_counter() - start < SLOW / 2


@pytest.mark.parametrize("build", ADAPTERS)
def test_a_search_within_its_timeout_answers(build):
    retriever = build(slow=0.0, policy=POLICY, timeout=5.0)
    assert kept(report_of(retriever)) == ["s1", "s2"]
    assert kept(asyncio.run(retriever.aretrieve_with_report(QUESTION))) == ["s1", "s2"]


@pytest.mark.parametrize("build", ADAPTERS)
def test_a_store_error_within_the_timeout_is_raised_as_it_is(build, monkeypatch):
    retriever = build(policy=POLICY, timeout=5.0)
    # the one place the test reaches in: to break the store
    searched = getattr(retriever, "as_collection", lambda: retriever._collection)()
    backend = searched.backend

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("the store broke")

    monkeypatch.setattr(backend, "search", broken)
    with pytest.raises(KeyError, match="the store broke"):
        report_of(retriever)


@pytest.mark.parametrize("build", ADAPTERS)
@pytest.mark.parametrize("timeout", [0, -1.0, float("nan")])
def test_a_timeout_that_is_not_positive_is_refused(build, timeout):
    with pytest.raises(ValueError, match=r"timeout|greater than 0|finite"):
        build(policy=POLICY, timeout=timeout)


# The profile ----------------------------------------------------------------------------------
@pytest.fixture
def profile(tmp_path) -> Callable[..., Any]:
    def write(collection: str | None = "kb", floor: float = 0.8) -> Any:
        path = tmp_path / f"{collection}-{floor}.json"
        data = {"version": 2, "min_similarity": floor, "embedding_model": f"{MODEL}@{DIM}"}
        path.write_text(json.dumps({**data, "collection": collection}))
        return path

    return write


@pytest.mark.parametrize("build", ADAPTERS)
def test_profile_and_collection_give_the_profile_s_floor(build, profile):
    path = profile("kb", 0.8)
    retriever = build(policy=BESIDE_A_PROFILE, profile=path, collection="kb", neighbours=0)
    assert floor_of(retriever) == 0.8
    assert kept(report_of(retriever)) == ["s1"]  # 0.75 is below the profile's floor
    assert retriever.policy.top_k == POLICY.top_k  # the policy's other fields stay


@pytest.mark.parametrize("build", ADAPTERS)
def test_both_retrievers_read_the_floor_and_gate_in_force_by_one_name(build, profile, tmp_path):
    """LangChain's retriever had no ``min_similarity``, LlamaIndex's no ``min_top_similarity``;
    LangChain's ``policy`` is the field as given (no floor, no gate beside a profile)."""
    path = profile("kb", 0.8)
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "min_top_similarity": 0.85}))
    retriever = build(policy=BESIDE_A_PROFILE, profile=path, collection="kb", neighbours=0)
    assert (retriever.min_similarity, retriever.min_top_similarity) == (0.8, 0.85)
    plain = build(policy=POLICY, neighbours=0)
    assert (plain.min_similarity, plain.min_top_similarity) == (POLICY.min_similarity, None)


def multi_of(
    build: Callable[..., Any], policy: RetrievalPolicy, high_gate: float | None = None
) -> Any:
    """The corpus twice, as collections "high" (floor 0.8, gate ``high_gate``) and "low"
    (floor 0.6), merged under ``policy`` by the adapter's multi-collection retriever."""
    high = POLICY.with_overrides(min_similarity=0.8, min_top_similarity=high_gate)
    low = POLICY.with_overrides(min_similarity=0.6)
    if build is llama_index:
        index = build(policy=POLICY)._index
        specs = [li.CollectionSpec(index, name="high", policy=high, metric="COSINE")]
        specs += [li.CollectionSpec(index, name="low", policy=low, metric="COSINE")]
        return li.MultiCollectionRetriever(specs, policy, neighbours=0, pushdown=False)
    store = build(policy=POLICY).vectorstore
    specs = [lc.CollectionSpec(store, name="high", policy=high)]
    specs += [lc.CollectionSpec(store, name="low", policy=low)]
    return lc.MultiCollectionRetriever(collections=specs, policy=policy)


@pytest.mark.parametrize("build", ADAPTERS)
def test_both_multi_collection_retrievers_read_the_floors_and_gate_in_force(build):
    """LangChain's multi-collection retriever had neither ``floors``, ``min_similarity`` nor
    ``min_top_similarity``; LlamaIndex's only ``floors``. ``min_similarity`` is the lowest
    floor, as the report's; ``min_top_similarity`` the gate on the merged result."""
    gated = multi_of(build, POLICY.with_overrides(min_top_similarity=0.85))
    assert gated.floors == {"high": 0.8, "low": 0.6}
    assert (gated.min_similarity, gated.min_top_similarity) == (0.6, 0.85)
    report = report_of(gated)
    assert (report.min_similarity, report.gate) == (0.6, 0.85)
    plain = multi_of(build, POLICY)
    assert (plain.min_similarity, plain.min_top_similarity) == (0.6, None)


@pytest.mark.parametrize("build", ADAPTERS)
def test_both_multi_collection_retrievers_read_each_collection_s_gate(build):
    """A collection's own gate (its spec's policy or profile) empties its candidates, but
    nothing read it: ``min_top_similarity`` is the merged result's gate only. ``gates``
    reads each collection's, as ``floors`` its floor."""
    retriever = multi_of(build, POLICY.with_overrides(min_top_similarity=0.85), high_gate=0.9)
    assert retriever.gates == {"high": 0.9, "low": None}
    assert retriever.min_top_similarity == 0.85


@pytest.mark.parametrize("build", ADAPTERS)
def test_a_policy_s_own_floor_beside_a_profile_is_refused(build, profile):
    with pytest.raises(ValueError, match=r"sets min_similarity=0.5 \(the profile's: 0.8\)"):
        build(policy=POLICY, profile=profile("kb", 0.8), collection="kb")


@pytest.mark.parametrize("build", ADAPTERS)
def test_a_profile_of_another_collection_is_refused(build, profile):
    with pytest.raises(ProfileError, match="measured for collection 'kb', not 'faq'"):
        build(policy=BESIDE_A_PROFILE, profile=profile("kb"), collection="faq")


@pytest.mark.parametrize("build", ADAPTERS)
def test_a_profile_of_another_collection_says_how_to_go_on(build, profile):
    """The refusal named the two collections and no way on: a collection copied under
    another name holds the sections the profile was measured on."""
    with pytest.raises(ProfileError, match=r"thresholded calibrate.*pass collection='kb'"):
        build(policy=BESIDE_A_PROFILE, profile=profile("kb"), collection="faq")


@pytest.mark.parametrize("build", ADAPTERS)
def test_a_profile_of_a_named_collection_needs_collection_on_a_store_that_names_none(
    build, profile
):
    """An in-memory store names no collection: the caller says the profile is its own. The
    refusal is a ``ProfileError``, as for a store that names another collection (it was a
    plain ``ValueError``, which ``except ProfileError`` let through)."""
    with pytest.raises(ProfileError, match=r"names no collection.*pass collection='kb'"):
        build(policy=BESIDE_A_PROFILE, profile=profile("kb"))
    assert floor_of(build(policy=BESIDE_A_PROFILE, profile=profile(None, 0.7))) == 0.7


def chroma(adapter: str, name: str, **settings: Any) -> Any:
    """The sections in a Chroma collection called ``name`` (cosine space), searched by the
    adapter's retriever: a Chroma store names its collection, as a Milvus store does."""
    import chromadb
    from langchain_chroma import Chroma
    from langchain_core.embeddings import Embeddings
    from llama_index.core import VectorStoreIndex
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.vector_stores.chroma import ChromaVectorStore

    class Vectors(Embeddings):
        model_id = MODEL

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [list(VECTORS[t]) for t in texts]

        def embed_query(self, text: str) -> list[float]:
            return list(VECTORS[text])

    class Embedding(BaseEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            return list(VECTORS[query])

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return list(VECTORS[query])

        def _get_text_embedding(self, text: str) -> list[float]:
            return list(VECTORS[text])

    client = chromadb.EphemeralClient()
    space = {"hnsw:space": "cosine"}
    store = Chroma(name, Vectors(), client=client, collection_metadata=space)
    store.add_texts(list(SECTIONS), metadatas=[{"source": s} for s in SECTIONS], ids=SECTIONS)
    if adapter == "langchain":
        return lc.ThresholdedRetriever(vectorstore=store, **settings)
    index = VectorStoreIndex.from_vector_store(
        ChromaVectorStore(chroma_collection=store._collection),
        embed_model=Embedding(model_name=MODEL),
    )
    return li.ThresholdedRetriever(index, neighbours=0, parent_summaries=False, **settings)


@pytest.mark.parametrize("adapter", ["langchain", "llama_index"])
def test_a_chroma_store_names_its_collection_for_the_profile(adapter, profile):
    retriever = chroma(adapter, "kbase", policy=BESIDE_A_PROFILE, profile=profile("kbase", 0.8))
    assert floor_of(retriever) == 0.8
    assert kept(report_of(retriever)) == ["s1"]
    with pytest.raises(ProfileError, match="measured for collection 'kbase', not 'faq'"):
        chroma(adapter, "faq", policy=BESIDE_A_PROFILE, profile=profile("kbase"))


@pytest.mark.parametrize("build", ADAPTERS)
def test_collection_without_a_profile_is_refused(build):
    with pytest.raises(ValueError, match="give profile="):
        build(policy=POLICY, collection="kb")


# CollectionSpec -------------------------------------------------------------------------------
LANGCHAIN_ONLY = {"retriever"}


def test_both_collection_specs_have_the_same_fields():
    llama = set(li.CollectionSpec.model_fields)
    chain = set(lc.CollectionSpec.model_fields) - LANGCHAIN_ONLY
    assert llama == chain
    assert {
        "store",
        "policy",
        "profile",
        "collection",
        "retrieve_k",
        "timeout",
        "name",
        "metric",
        "uri",
        "collection_name",
        "db_name",
        "token",
    } == llama


def spec_store(adapter: str) -> Any:
    if adapter == "llama_index":
        from llama_index.core.vector_stores import SimpleVectorStore

        return SimpleVectorStore()
    from langchain_core.embeddings import FakeEmbeddings
    from langchain_core.vectorstores import InMemoryVectorStore

    return InMemoryVectorStore(FakeEmbeddings(size=DIM))


SPECS = {"llama_index": li.CollectionSpec, "langchain": lc.CollectionSpec}


@pytest.mark.parametrize("adapter", list(SPECS))
def test_a_collection_spec_takes_its_store_first_or_by_name(adapter):
    store = spec_store(adapter)
    spec = SPECS[adapter]
    assert spec(store, name="kb").store is store
    assert spec(store=store, name="kb", metric="cosine").metric == "COSINE"
    with pytest.raises(TypeError, match="twice"):
        spec(store, store=store)


@pytest.mark.parametrize("adapter", list(SPECS))
@pytest.mark.parametrize(
    "bad",
    [
        {"retrieve_k": 0},
        {"retrieve_k": True},
        {"timeout": 0},
        {"timeout": -1.0},
        {"timeout": float("inf")},
        {"name": "  "},
        {"metric": "hamming"},
        {"collection": "kb"},  # a profile's collection, without a profile
        {"policy": {"min_similarity": 2.0}},
    ],
    ids=lambda bad: next(iter(bad)),
)
def test_a_collection_spec_refuses_bad_values(adapter, bad):
    with pytest.raises(ValueError):
        SPECS[adapter](spec_store(adapter), **bad)


@pytest.mark.parametrize("adapter", list(SPECS))
def test_a_collection_spec_refuses_an_unknown_keyword(adapter):
    with pytest.raises(TypeError, match="unexpected keyword argument 'target'"):
        SPECS[adapter](spec_store(adapter), target="the old name")


def test_a_llama_index_spec_needs_an_index_or_a_vector_store():
    with pytest.raises(ValueError, match="VectorStoreIndex or a vector store"):
        li.CollectionSpec("not a store")


def test_a_langchain_spec_names_its_collection_exactly_one_way():
    store = spec_store("langchain")
    retriever = langchain(policy=POLICY)
    for ways in (
        {},
        {"store": store, "retriever": retriever},
        {"store": store, "uri": "kb.db", "collection_name": "kb"},
        {"retriever": retriever, "uri": "kb.db", "collection_name": "kb"},
    ):
        with pytest.raises(ValueError, match="exactly one of store="):
            lc.CollectionSpec(**ways)
    with pytest.raises(ValueError, match="a ready retriever brings its own"):
        lc.CollectionSpec(retriever=retriever, policy=POLICY)
    with pytest.raises(ValueError, match="belong to a collection named by URI"):
        lc.CollectionSpec(store=store, db_name="other")


def test_a_langchain_spec_of_a_store_builds_its_retriever_with_the_spec_s_floor(profile):
    member = langchain(policy=POLICY)
    store = member.vectorstore
    multi = lc.MultiCollectionRetriever(
        collections=[
            lc.CollectionSpec(
                store, name="by-policy", policy=POLICY.with_overrides(min_similarity=0.8)
            ),
        ],
        policy=POLICY,
    )
    assert [d.id for d in multi.retrieve_with_report(QUESTION).kept] == ["s1"]
    profiled = lc.MultiCollectionRetriever(
        collections=[
            lc.CollectionSpec(store, name="by-profile", profile=profile("kb", 0.7), collection="kb")
        ],
        policy=POLICY,
    )
    assert [d.id for d in profiled.retrieve_with_report(QUESTION).kept] == ["s1", "s2"]
    bare = lc.MultiCollectionRetriever(collections=[store], policy=POLICY)
    assert [d.id for d in bare.retrieve_with_report(QUESTION).kept] == ["s1", "s2"]


# Scores that cannot be judged ------------------------------------------------------------------
@pytest.mark.parametrize("build", ADAPTERS)
def test_unknown_scores_under_a_floor_need_rescoring_in_both_adapters(build):
    from thresholded import NonCosineScoreError

    with pytest.raises(NonCosineScoreError, match=r"kind 'unknown'.*hybrid_policy='rescore'"):
        build(policy=POLICY, score_kind="unknown")
    gate_only = POLICY.model_copy(update={"min_similarity": 0.0, "min_top_similarity": 0.9})
    with pytest.raises(NonCosineScoreError, match=r"the answer gate 0\.9"):
        build(policy=gate_only, score_kind="unknown")
    rescoring = POLICY.model_copy(update={"hybrid_policy": "rescore"})
    assert build(policy=rescoring, score_kind="unknown") is not None


def test_the_multilingual_model_takes_the_same_options_in_both_adapters():
    """LangChain's took denoise= and LlamaIndex's did not: a collection indexed with one
    could not be queried with the same vectors through the other."""
    from langchain_thresholded.embeddings import UniversalSentenceEncoderEmbeddings

    options = {"threads", "denoise"}
    assert options <= set(li.UniversalSentenceEncoderEmbedding.model_fields)
    assert options <= set(UniversalSentenceEncoderEmbeddings.model_fields)
    question = "Wie bekomme ich mein Geld zurück? 30 Tage"
    for denoise in (False, True):
        lc_vector = UniversalSentenceEncoderEmbeddings(denoise=denoise).embed_query(question)
        li_model = li.UniversalSentenceEncoderEmbedding(denoise=denoise)
        assert li_model.get_query_embedding(question) == pytest.approx(lc_vector, abs=1e-6)


@pytest.mark.parametrize(
    ("build", "other", "own"),
    [
        pytest.param(llama_index, "k", "top_k", id="llama_index"),
        pytest.param(langchain, "top_k", "k", id="langchain"),
    ],
)
def test_the_other_frameworks_name_for_top_k_is_answered_per_call(build, other, own):
    retriever = build(policy=POLICY)
    with pytest.raises(TypeError, match=rf"\['{other}'\] \(use {own}: .*per call it accepts"):
        report_of(retriever, **{other: 1})
    with pytest.raises(TypeError, match=r"\['mystery'\]; per call it accepts"):
        report_of(retriever, mystery=1)
    assert len(report_of(retriever, **{own: 1}).kept) == 1
