"""Runnable conventions: per-call overrides, batch, real async, callbacks, configurable fields."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.runnables import ConfigurableField
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_thresholded import EVENT_NAME, MultiCollectionRetriever, ThresholdedRetriever
from thresholded import RetrievalPolicy

Q = "the question"
Q2 = "another question"
POLICY = RetrievalPolicy(min_similarity=0.5, top_k=10, max_per_source=None, max_chars=None)
SPECS = [
    ("a", 0.875, {"lang": "en"}),
    ("b", 0.75, {"lang": "de"}),
    ("c", 0.625, {"lang": "en"}),
    ("d", 0.25, {"lang": "en"}),
]


def ids(docs: list[Document]) -> list[str | None]:
    return [d.id for d in docs]


class Recorder(BaseCallbackHandler):
    def __init__(self) -> None:
        self.events: list[tuple[str, Any, UUID]] = []
        self.texts: list[str] = []
        self.retriever_runs: list[UUID] = []

    def on_retriever_start(self, serialized: Any, query: str, *, run_id: UUID, **kw: Any) -> None:
        self.retriever_runs.append(run_id)

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kw: Any) -> None:
        self.events.append((name, data, run_id))

    def on_text(self, text: str, **kw: Any) -> None:
        self.texts.append(text)


class AsyncRecorder(AsyncCallbackHandler):
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.texts: list[str] = []

    async def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kw: Any) -> None:
        self.events.append((name, data))

    async def on_text(self, text: str, **kw: Any) -> None:
        self.texts.append(text)


@pytest.fixture
def retriever(corpus) -> ThresholdedRetriever:
    return ThresholdedRetriever(vectorstore=corpus(SPECS).store, policy=POLICY)


# Per-call overrides ----------------------------------------------------------------
def test_per_call_k(retriever):
    assert ids(retriever.invoke(Q, k=1)) == ["a"]
    assert ids(retriever.invoke(Q, k=2)) == ["a", "b"]
    assert ids(retriever.invoke(Q)) == ["a", "b", "c"]


def test_per_call_min_similarity(retriever):
    assert ids(retriever.invoke(Q, min_similarity=0.75)) == ["a", "b"]
    assert ids(retriever.invoke(Q, min_similarity=0)) == ["a", "b", "c", "d"]
    assert ids(retriever.invoke(Q, k=2, min_similarity=0.875)) == ["a"]


def test_per_call_filters_reach_the_store_as_its_filter_function(corpus, monkeypatch):
    c = corpus(SPECS)
    seen: list[Any] = []
    original = InMemoryVectorStore.similarity_search_with_score_by_vector

    def spy(self, embedding, k=4, filter=None, **kwargs):
        seen.append(filter)
        return original(self, embedding, k=k, filter=filter, **kwargs)

    monkeypatch.setattr(InMemoryVectorStore, "similarity_search_with_score_by_vector", spy)
    retriever = ThresholdedRetriever(vectorstore=c.store, policy=POLICY)

    assert ids(retriever.invoke(Q, filters={"lang": "en"})) == ["a", "c"]
    assert len(seen) == 1 and callable(seen[0])
    with pytest.raises(TypeError, match="filters="):
        retriever.invoke(Q, filter=lambda doc: True)


def test_a_per_call_filter_narrows_the_search_kwargs_filter(corpus):
    c = corpus(SPECS)

    def only_de(doc: Document) -> bool:
        return doc.metadata["lang"] == "de"

    def only_en(doc: Document) -> bool:  # pragma: no cover - refused before any search
        return doc.metadata["lang"] == "en"

    retriever = ThresholdedRetriever(
        vectorstore=c.store, policy=POLICY, search_kwargs={"filter": only_de}
    )
    assert ids(retriever.invoke(Q)) == ["b"]
    assert ids(retriever.invoke(Q, filters={"lang": "en"})) == []
    assert ids(retriever.invoke(Q, filters={"lang": "de"})) == ["b"]
    with pytest.raises(TypeError, match="filters="):
        retriever.invoke(Q, search_kwargs={"filter": only_en})


def test_other_policy_fields_per_call(corpus):
    c = corpus([("a", 0.875, {"source": "S"}), ("b", 0.75, {"source": "S"})])
    retriever = ThresholdedRetriever(vectorstore=c.store, policy=POLICY)
    assert ids(retriever.invoke(Q)) == ["a", "b"]
    assert ids(retriever.invoke(Q, max_per_source=1)) == ["a"]


def test_unknown_call_arguments_are_refused(retriever):
    with pytest.raises(TypeError, match="use k"):
        retriever.invoke(Q, top_k=2)
    with pytest.raises(TypeError, match="mystery"):
        retriever.invoke(Q, mystery=1)


def test_invalid_overrides_are_refused(retriever):
    with pytest.raises(ValueError):
        retriever.invoke(Q, k=0)
    with pytest.raises(ValueError):
        retriever.invoke(Q, min_similarity=1.5)
    with pytest.raises(TypeError):
        retriever.invoke(Q, search_kwargs={"k": 3})


@pytest.mark.parametrize("k", [0, -2, "3"])
def test_a_bad_k_per_call_is_named_k(retriever, k):
    """It was a ValidationError of RetrievalPolicy naming top_k, a keyword the call refuses."""
    refused = "Input should be (greater than or equal to 1|a valid integer)$"
    with pytest.raises(ValueError, match=rf"^k={k!r}: {refused}"):
        retriever.invoke(Q, k=k)
    multi = MultiCollectionRetriever(collections=[retriever], policy=POLICY)
    with pytest.raises(ValueError, match=rf"^k={k!r}: ") as info:
        multi.invoke(Q, k=k)
    assert "top_k" not in str(info.value)


def test_k_in_search_kwargs_is_refused(corpus):
    with pytest.raises(ValueError, match="top_k"):
        ThresholdedRetriever(vectorstore=corpus(SPECS).store, search_kwargs={"k": 3})


# batch and async ---------------------------------------------------------------------
def test_batch(retriever):
    results = retriever.batch([Q, Q2])
    assert ids(results[0]) == ["a", "b", "c"]
    assert results[1] == []  # the other question is orthogonal to everything
    assert [ids(r) for r in retriever.batch([Q, Q], k=1)] == [["a"], ["a"]]


async def test_abatch(retriever):
    results = await retriever.abatch([Q, Q2], k=2)
    assert [ids(r) for r in results] == [["a", "b"], []]


async def test_ainvoke_uses_async_methods_only(corpus):
    c = corpus(SPECS)
    calls: list[str] = []

    class AsyncOnlyStore(InMemoryVectorStore):
        def similarity_search_with_score_by_vector(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("the sync search must not run in ainvoke")

        async def asimilarity_search_with_score_by_vector(
            self, embedding: list[float], k: int = 4, **kwargs: Any
        ) -> list[tuple[Document, float]]:
            calls.append("asearch")
            await asyncio.sleep(0)
            return InMemoryVectorStore.similarity_search_with_score_by_vector(
                self, embedding, k=k, **kwargs
            )

    embeddings = c.embeddings

    class AsyncEmbeddings(type(embeddings)):  # type: ignore[misc]
        def embed_query(self, text: str) -> list[float]:
            raise AssertionError("the sync embedder must not run in ainvoke")

        async def aembed_query(self, text: str) -> list[float]:
            calls.append("aembed")
            return list(self.vectors[text])

    async_embeddings = AsyncEmbeddings(embeddings.vectors)
    store = AsyncOnlyStore(async_embeddings)
    store.store = c.store.store
    retriever = ThresholdedRetriever(vectorstore=store, policy=POLICY)
    docs = await retriever.ainvoke(Q, k=2)
    assert ids(docs) == ["a", "b"]
    assert calls == ["aembed", "asearch"]
    report = await retriever.aretrieve_with_report(Q, min_similarity=0.7)
    assert ids(list(report.kept)) == ["a", "b"]
    assert [d.id for d in report.dropped] == ["c", "d"]


async def test_ainvoke_over_a_store_without_async_search(retriever):
    assert ids(await retriever.ainvoke(Q)) == ["a", "b", "c"]


async def test_concurrent_calls_keep_their_own_reports(retriever):
    reports = await asyncio.gather(
        *(retriever.aretrieve_with_report(Q, min_similarity=f) for f in (0.875, 0.75, 0.625, 0.0))
    )
    assert [len(r.kept) for r in reports] == [1, 2, 3, 4]


# Callbacks -----------------------------------------------------------------------------
def test_callbacks_receive_the_drop_reasons(retriever):
    recorder = Recorder()
    retriever.invoke(Q, config={"callbacks": [recorder]})
    ((name, data, run_id),) = recorder.events
    assert name == EVENT_NAME == "thresholded_selection"
    assert run_id == recorder.retriever_runs[0]
    assert data["stage"] == "retriever"
    assert [k["id"] for k in data["kept"]] == ["a", "b", "c"]
    assert data["kept"][0]["similarity"] == 0.875
    assert data["dropped"] == [{"id": "d", "reason": "below_threshold", "similarity": 0.25}]
    assert data["drop_counts"] == {"below_threshold": 1}
    assert data["nothing_matched"] is False
    assert data["min_similarity"] == 0.5
    assert len(recorder.texts) == 1 and "below_threshold=1" in recorder.texts[0]


async def test_async_callbacks_receive_the_drop_reasons(retriever):
    recorder = AsyncRecorder()
    await retriever.ainvoke(Q, config={"callbacks": [recorder]}, min_similarity=0.9)
    ((name, data),) = recorder.events
    assert name == EVENT_NAME
    assert data["nothing_matched"] is True
    assert data["drop_counts"] == {"below_threshold": 4}
    assert recorder.texts


async def test_custom_event_shows_in_astream_events(retriever):
    events = [
        e
        async for e in retriever.astream_events(Q, version="v2")
        if e["event"] == "on_custom_event"
    ]
    assert [e["name"] for e in events] == [EVENT_NAME]
    assert events[0]["data"]["drop_counts"] == {"below_threshold": 1}


def test_invoke_without_callbacks_works(retriever):
    assert ids(retriever.invoke(Q)) == ["a", "b", "c"]


# configurable_fields -------------------------------------------------------------------
def test_configurable_fields_reach_top_k_and_the_floor_through_the_policy(retriever):
    configurable = retriever.configurable_fields(
        policy=ConfigurableField(id="policy", name="Retrieval policy"),
    )

    def configured(**fields: object) -> dict:
        return {"configurable": {"policy": POLICY.with_overrides(**fields)}}

    assert ids(configurable.invoke(Q)) == ["a", "b", "c"]
    assert ids(configurable.invoke(Q, config=configured(top_k=1))) == ["a"]
    assert ids(configurable.invoke(Q, config=configured(min_similarity=0.75))) == ["a", "b"]
    assert ids(configurable.invoke(Q, config=configured(top_k=1, min_similarity=0.0))) == ["a"]
    assert ids(configurable.invoke(Q, config=configured(min_similarity=0.0), k=4)) == [
        "a",
        "b",
        "c",
        "d",
    ]


def test_configurable_policy_changes_the_floor(retriever):
    configurable = retriever.configurable_fields(policy=ConfigurableField(id="policy"))
    config = {"configurable": {"policy": RetrievalPolicy(min_similarity=0.9)}}
    assert configurable.invoke(Q, config=config) == []
    assert ids(configurable.invoke(Q)) == ["a", "b", "c"]


def test_configurable_policy(retriever):
    configurable = retriever.configurable_fields(policy=ConfigurableField(id="policy"))
    strict = POLICY.model_copy(update={"min_similarity": 0.8})
    assert ids(configurable.invoke(Q, config={"configurable": {"policy": strict}})) == ["a"]


def test_ls_params_name_the_store(retriever):
    params = retriever._get_ls_params()
    assert params["ls_retriever_name"] == "thresholded"
    assert params["ls_vector_store_provider"] == "InMemoryVectorStore"
    assert params["ls_embedding_provider"] == "ExactEmbeddings"


def test_a_raw_expression_on_another_store_with_a_docstore_is_refused(corpus):
    from langchain_core.stores import InMemoryStore

    c = corpus(SPECS)
    with pytest.raises(ValueError, match="filters="):
        ThresholdedRetriever(
            vectorstore=c.store,
            policy=POLICY,
            docstore=InMemoryStore(),
            search_kwargs={"expr": 'lang == "en"'},
        )
    with pytest.raises(ValueError, match="filters="):
        ThresholdedRetriever(vectorstore=c.store, policy=POLICY, expr='lang == "en"')


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("neighbours", True),
        ("neighbours", "1"),
        ("parent_levels", 1.0),
        ("parent_summaries", "false"),
        ("parent_summaries", 0),
        ("allow_model_mismatch", "no"),
        ("max_retries", True),
        ("retry_backoff", "0.5"),
        ("timeout", "2"),
    ],
)
def test_a_setting_of_another_type_is_refused_not_converted(corpus, name, value):
    """As in the LlamaIndex retriever, and as the policy's own fields: ``neighbours=True`` and
    ``timeout="2"`` are not read as 1 and 2.0."""
    store = corpus(SPECS).store
    with pytest.raises(ValueError, match=name):
        ThresholdedRetriever(vectorstore=store, policy=POLICY, **{name: value})
    retriever = MultiCollectionRetriever(collections=[store], policy=POLICY)
    if name in type(retriever).model_fields:
        with pytest.raises(ValueError, match=name):
            MultiCollectionRetriever(collections=[store], policy=POLICY, **{name: value})
    with pytest.raises(ValueError, match="fail_fast"):
        MultiCollectionRetriever(collections=[store], policy=POLICY, fail_fast="no")


def test_a_positional_argument_names_the_class_and_its_keywords(corpus):
    """``ThresholdedRetriever(store)`` said "EngineRetriever.__init__() takes 1 positional
    argument", a class the user never named."""
    store = corpus(SPECS).store
    with pytest.raises(TypeError, match=r"ThresholdedRetriever\(\) takes keyword arguments only"):
        ThresholdedRetriever(store, policy=POLICY)
    with pytest.raises(TypeError, match=r"MultiCollectionRetriever\(\) takes keyword arguments"):
        MultiCollectionRetriever([store], policy=POLICY)
