"""Every public class of both adapters refuses an unknown keyword argument with a TypeError.

A misspelt setting (``min_similarty=0.3``) that is silently ignored leaves a filter
that does not filter. Each class in ``__all__`` of ``llama_index_thresholded`` and
``langchain_thresholded`` is built here from minimal valid arguments plus ``bogus=1``;
classes that users do not build are listed, with the reason, in NOT_BUILT_BY_USERS.
A new public class must join one or the other.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.runnables import RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.response_synthesizers import get_response_synthesizer
from llama_index.core.schema import TextNode
from pydantic import ValidationError

import langchain_thresholded as lc
import llama_index_thresholded as li
from langchain_thresholded import embeddings as lc_embeddings
from thresholded import RetrievalPolicy

POLICY = RetrievalPolicy(min_similarity=0.3)

NOT_BUILT_BY_USERS = {
    # errors: raised by the package, not built by users
    "llama_index_thresholded.CollectionSearchError",
    "langchain_thresholded.CollectionSearchError",
    "llama_index_thresholded.CollectionNotFoundError",
    "langchain_thresholded.CollectionNotFoundError",
    "llama_index_thresholded.RetrieverClosedError",
    "langchain_thresholded.RetrieverClosedError",
    # reports: what a retrieval returns
    "llama_index_thresholded.Report",
    "llama_index_thresholded.MultiCollectionReport",
    "llama_index_thresholded.CollectionStatus",
    "langchain_thresholded.Report",
    "langchain_thresholded.MultiCollectionReport",
    "langchain_thresholded.CollectionStatus",
    # events: sent through LlamaIndex's instrumentation
    "llama_index_thresholded.ThresholdSelectionEvent",
    # enums: their members are used, never built with keywords
    "langchain_thresholded.DropReason",
    "langchain_thresholded.Metric",
    "langchain_thresholded.ScoreKind",
}


@dataclass(frozen=True)
class Stores:
    """The smallest stores and retrievers the classes can be built on."""

    index: VectorStoreIndex
    li_retriever: li.ThresholdedRetriever
    store: InMemoryVectorStore
    lc_retriever: lc.ThresholdedRetriever
    milvus_uri: str


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Stores:
    index = VectorStoreIndex(
        [TextNode(id_="a", text="Refunds are paid within 14 days.")],
        embed_model=MockEmbedding(embed_dim=4),
    )
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=4))
    return Stores(
        index=index,
        li_retriever=li.ThresholdedRetriever(index, POLICY),
        store=store,
        lc_retriever=lc.ThresholdedRetriever(vectorstore=store, policy=POLICY),
        milvus_uri=str(tmp_path_factory.mktemp("milvus") / "unknown_arguments.db"),
    )


Build = Callable[[Stores, dict[str, Any]], Any]


@dataclass(frozen=True)
class Case:
    name: str  # "module.Class", or "module.Class.factory" for a classmethod that builds one
    build: Build
    marks: tuple[Any, ...] = ()
    valid_build: bool = True  # False where building loads a model: seconds, tested elsewhere

    @property
    def cls(self) -> str:
        return ".".join(self.name.split(".")[:2])

    def param(self) -> Any:
        return pytest.param(self, id=self.name, marks=self.marks)


def _answer(_: Any) -> str:
    return "an answer"


CASES = [
    # LlamaIndex
    Case(
        "llama_index_thresholded.SimilarityThresholdPostprocessor",
        lambda s, kw: li.SimilarityThresholdPostprocessor(min_similarity=0.3, **kw),
    ),
    Case(
        "llama_index_thresholded.AbstainingQueryEngine",
        lambda s, kw: li.AbstainingQueryEngine(
            s.li_retriever, response_synthesizer=get_response_synthesizer(llm=MockLLM()), **kw
        ),
    ),
    Case(
        "llama_index_thresholded.AbstainingQueryEngine.from_args",
        lambda s, kw: li.AbstainingQueryEngine.from_args(s.li_retriever, llm=MockLLM(), **kw),
    ),
    Case(
        "llama_index_thresholded.AbstainingContextChatEngine",
        lambda s, kw: li.AbstainingContextChatEngine(
            retriever=s.li_retriever,
            llm=MockLLM(),
            memory=ChatMemoryBuffer.from_defaults(),
            prefix_messages=[],
            **kw,
        ),
    ),
    Case(
        "llama_index_thresholded.AbstainingContextChatEngine.from_defaults",
        lambda s, kw: li.AbstainingContextChatEngine.from_defaults(
            s.li_retriever, llm=MockLLM(), **kw
        ),
    ),
    Case(
        "llama_index_thresholded.AbstainingCondensePlusContextChatEngine",
        lambda s, kw: li.AbstainingCondensePlusContextChatEngine(
            retriever=s.li_retriever, llm=MockLLM(), memory=ChatMemoryBuffer.from_defaults(), **kw
        ),
    ),
    Case(
        "llama_index_thresholded.AbstainingCondensePlusContextChatEngine.from_defaults",
        lambda s, kw: li.AbstainingCondensePlusContextChatEngine.from_defaults(
            s.li_retriever, llm=MockLLM(), **kw
        ),
    ),
    Case(
        "llama_index_thresholded.UniversalSentenceEncoderEmbedding",
        lambda s, kw: li.UniversalSentenceEncoderEmbedding(**kw),
    ),
    Case(
        "llama_index_thresholded.ThresholdedRetriever",
        lambda s, kw: li.ThresholdedRetriever(s.index, POLICY, **kw),
    ),
    Case(
        "llama_index_thresholded.MultiCollectionRetriever",
        lambda s, kw: li.MultiCollectionRetriever([li.CollectionSpec(s.index)], POLICY, **kw),
    ),
    Case(
        "llama_index_thresholded.CollectionSpec",
        lambda s, kw: li.CollectionSpec(s.index, **kw),
    ),
    Case(
        "llama_index_thresholded.CompatibleMilvusVectorStore",
        lambda s, kw: li.CompatibleMilvusVectorStore(
            uri=s.milvus_uri, collection_name="c", dim=4, overwrite=True, **kw
        ),
    ),
    Case(
        "llama_index_thresholded.milvus_store",
        lambda s, kw: li.milvus_store(s.milvus_uri, "c", dim=4, overwrite=True, **kw),
    ),
    # LangChain
    Case(
        "langchain_thresholded.SimilarityThresholdCompressor",
        lambda s, kw: lc.SimilarityThresholdCompressor(min_similarity=0.3, **kw),
    ),
    Case(
        "langchain_thresholded.AbstainingChain",
        lambda s, kw: lc.AbstainingChain(
            retriever=s.lc_retriever, answer_chain=RunnableLambda(_answer), answer_type="str", **kw
        ),
    ),
    Case(
        "langchain_thresholded.RetrieverSource",
        lambda s, kw: lc.RetrieverSource(s.lc_retriever, **kw),
    ),
    Case(
        "langchain_thresholded.ThresholdedRetriever",
        lambda s, kw: lc.ThresholdedRetriever(vectorstore=s.store, policy=POLICY, **kw),
        (),
    ),
    Case(
        "langchain_thresholded.MultiCollectionRetriever",
        lambda s, kw: lc.MultiCollectionRetriever(
            collections=[lc.CollectionSpec(retriever=s.lc_retriever)], policy=POLICY, **kw
        ),
        (),
    ),
    Case(
        "langchain_thresholded.CollectionSpec",
        lambda s, kw: lc.CollectionSpec(retriever=s.lc_retriever, **kw),
        (),
    ),
    # Public outside __all__: the embeddings of the packaged models.
    Case(
        "langchain_thresholded.embeddings.UniversalSentenceEncoderEmbeddings",
        lambda s, kw: lc_embeddings.UniversalSentenceEncoderEmbeddings(**kw),
    ),
    Case(
        "langchain_thresholded.embeddings.LocalSentenceTransformerEmbeddings",
        lambda s, kw: lc_embeddings.LocalSentenceTransformerEmbeddings(
            model_path=str(lc_embeddings.minilm_path()), **kw
        ),
        valid_build=False,
    ),
]

VALIDATION_ERROR = {
    # The core policy, re-exported: extra="forbid" makes an unknown field a ValidationError
    # that names it, as when a stored policy is loaded (RetrievalPolicy.load, from_dict).
    "langchain_thresholded.RetrievalPolicy": lambda s, kw: RetrievalPolicy(**kw),
    "llama_index_thresholded.RetrievalPolicy": lambda s, kw: RetrievalPolicy(**kw),
}


def public_classes() -> set[str]:
    names = set()
    for module in (li, lc):
        for name in module.__all__:
            if inspect.isclass(getattr(module, name)):
                names.add(f"{module.__name__}.{name}")
    return names


def test_every_public_class_is_checked_or_listed_as_not_built_by_users():
    checked = {case.cls for case in CASES} | set(VALIDATION_ERROR)
    assert public_classes() - checked - NOT_BUILT_BY_USERS == set()
    assert not checked & NOT_BUILT_BY_USERS


@pytest.mark.parametrize("case", [case.param() for case in CASES])
def test_an_unknown_keyword_is_a_type_error_naming_it(case: Case, stores: Stores):
    if case.valid_build:
        case.build(stores, {})  # the arguments are valid without it
    with pytest.raises(TypeError, match="bogus"):
        case.build(stores, {"bogus": 1})


@pytest.mark.parametrize("name", sorted(VALIDATION_ERROR))
def test_the_policy_names_an_unknown_field(name: str, stores: Stores):
    with pytest.raises(ValidationError, match="bogus"):
        VALIDATION_ERROR[name](stores, {"bogus": 1})


@pytest.mark.parametrize("adapter", ["llama_index", "langchain"])
def test_a_framework_s_name_for_the_floor_points_to_the_policy(adapter: str, stores: Stores):
    """``similarity_cutoff`` (LlamaIndex's SimilarityPostprocessor) and ``score_threshold``
    (LangChain's similarity_score_threshold) are the floor: the constructor says so, as it
    does for ``min_similarity``. It named neither the policy nor the field."""
    for name in ("similarity_cutoff", "score_threshold"):
        with pytest.raises(TypeError, match=r"policy=RetrievalPolicy\(min_similarity=\.\.\.\)"):
            if adapter == "llama_index":
                li.ThresholdedRetriever(stores.index, **{name: 0.3})
            else:
                lc.ThresholdedRetriever(vectorstore=stores.store, **{name: 0.3})


def test_the_milvus_store_takes_the_client_s_connection_options(tmp_path):
    """The check refuses misspellings, not what pymilvus reads: its connection options and
    the client's own arguments pass, and reach the store."""
    milvus_uri = str(tmp_path / "options.db")
    store = li.milvus_store(
        milvus_uri,
        "c",
        dim=4,
        overwrite=True,
        secure=False,
        grpc_options={},
        timeout=5.0,
        alias="thresholded-test",  # LlamaIndex's store reads it
        dedicated=True,  # MilvusClient reads it
    )
    assert store.timeout == 5.0
    assert li.milvus_store(milvus_uri, "d", dim=4, embedding_field="vec").embedding_field == "vec"
    with pytest.raises(ValueError, match=r"'c' has no dense vector field 'vec'.*\['embedding'\]"):
        li.milvus_store(milvus_uri, "c", dim=4, embedding_field="vec")


def test_the_milvus_helpers_name_their_own_words_for_what_they_set(tmp_path):
    """LlamaIndex calls the metric similarity_metric; milvus_store sets it from metric=, and
    existing_milvus_store reads it, and dim, from the collection. Either given again was
    Python's "got multiple values for keyword argument", which says neither."""
    milvus_uri = str(tmp_path / "words.db")
    with pytest.raises(TypeError, match=r"similarity_metric.*metric='COSINE'"):
        li.milvus_store(milvus_uri, "c", dim=4, similarity_metric="COSINE")
    li.milvus_store(milvus_uri, "c", dim=4)
    for given in ({"similarity_metric": "IP"}, {"dim": 4}, {"metric": "IP"}):
        with pytest.raises(TypeError, match=rf"{next(iter(given))}=.*reads from the collection"):
            li.existing_milvus_store(milvus_uri, "c", **given)
    with pytest.raises(TypeError, match=r"metric='IP'.*reads from the collection's index"):
        lc.existing_milvus_store(
            milvus_uri, "c", embeddings=DeterministicFakeEmbedding(size=4), metric="IP"
        )


@pytest.mark.parametrize("name", ["metric_type", "similarity_metric"])
def test_the_metric_under_another_name_points_to_metric_in_both_adapters(tmp_path, name):
    """``metric_type=`` (Milvus's word) went on to the store: LlamaIndex listed every option
    the store takes, and LangChain said "Milvus.__init__() got an unexpected keyword
    argument", for ``similarity_metric=`` (LlamaIndex's word) too."""
    uri = str(tmp_path / "metric.db")
    emb = DeterministicFakeEmbedding(size=4)
    with pytest.raises(TypeError, match=rf"{name}=.*pass metric='COSINE'"):
        li.milvus_store(uri, "c", dim=4, **{name: "COSINE"})
    with pytest.raises(TypeError, match=rf"{name}=.*pass metric='COSINE'"):
        lc.milvus_from_documents([], emb, uri=uri, collection_name="c", **{name: "COSINE"})
    li.milvus_store(uri, "c", dim=4)
    with pytest.raises(TypeError, match=rf"{name}='IP'.*reads from the collection"):
        li.existing_milvus_store(uri, "c", **{name: "IP"})
    with pytest.raises(TypeError, match=rf"{name}='IP'.*reads from the collection"):
        lc.existing_milvus_store(uri, "c", embeddings=emb, **{name: "IP"})


@pytest.mark.parametrize("adapter", ["llama_index", "langchain"])
def test_reopening_a_milvus_lite_file_that_is_not_there_names_the_path(tmp_path, adapter):
    """A misspelt file path read "collection 'kb' does not exist at ./kb_typo.db; it has: []",
    and left an empty Milvus Lite database at that path."""
    from thresholded import CollectionNotFoundError

    path = tmp_path / "kb_typo.db"
    with pytest.raises(CollectionNotFoundError, match=r"no Milvus Lite file at .*kb_typo\.db"):
        if adapter == "llama_index":
            li.existing_milvus_store(str(path), "kb")
        else:
            lc.existing_milvus_store(str(path), "kb", embeddings=DeterministicFakeEmbedding(size=4))
    assert not path.exists()
