"""Filters built from user input never reach sections they exclude (real Milvus Lite)."""

from __future__ import annotations

import numpy as np
import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters
from pymilvus.exceptions import MilvusException

from llama_index_thresholded import ThresholdedRetriever
from llama_index_thresholded.milvus import milvus_store
from thresholded import RetrievalPolicy
from thresholded.errors import SearchUnavailableError
from thresholded.milvus_expr import UnsafeFilterError

pytestmark = pytest.mark.integration

DIM = 4
QUERY = np.array([1.0, 0.0, 0.0, 0.0])


class _ConstantEmbedding(BaseEmbedding):
    """Every text embeds to the same unit vector: filters alone decide what comes back."""

    def _get_query_embedding(self, query: str) -> list[float]:
        return QUERY.tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return QUERY.tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return QUERY.tolist()


TRICKY_VALUES = [
    "public",
    "O'Brien",
    'say "hi"',
    "back\\slash",
    "ends with backslash\\",
    "tab\there",
]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> VectorStoreIndex:
    uri = str(tmp_path_factory.mktemp("injection") / "kb.db")
    store = milvus_store(uri, "sections", dim=DIM)
    nodes = [
        TextNode(id_=f"internal-{i}", text=f"internal {i}", metadata={"doc_type": "internal"})
        for i in range(3)
    ]
    nodes += [
        TextNode(id_=f"value-{i}", text=value, metadata={"doc_type": value})
        for i, value in enumerate(TRICKY_VALUES)
    ]
    for node in nodes:
        node.embedding = QUERY.tolist()
    storage = StorageContext.from_defaults(vector_store=store)
    return VectorStoreIndex(nodes, storage_context=storage, embed_model=_ConstantEmbedding())


@pytest.fixture(scope="module")
def retriever(index: VectorStoreIndex) -> ThresholdedRetriever:
    policy = RetrievalPolicy(min_similarity=0.0, top_k=20, max_per_source=None, max_chars=None)
    return ThresholdedRetriever(index, policy, neighbours=0, parent_summaries=False)


def _ids(retriever: ThresholdedRetriever, *filters: MetadataFilter) -> set[str]:
    report = retriever.retrieve_with_report("q", filters=MetadataFilters(filters=list(filters)))
    return {n.node.node_id for n in report.kept}


def test_key_injection_is_refused_before_any_query(retriever: ThresholdedRetriever) -> None:
    key = 'doc_type == "internal" or doc_type'
    with pytest.raises(UnsafeFilterError, match="not a plain field name"):
        _ids(retriever, MetadataFilter(key=key, value="public"))


def test_plain_llama_index_store_is_injectable(index: VectorStoreIndex) -> None:
    """The contrast: the store's own filter translation lets the key rewrite the filter."""
    key = 'doc_type == "internal" or doc_type'
    filters = MetadataFilters(filters=[MetadataFilter(key=key, value="public")])
    found = {
        n.node.node_id
        for n in index.as_retriever(similarity_top_k=20, filters=filters).retrieve("q")
    }
    assert any(i.startswith("internal-") for i in found)


@pytest.mark.parametrize(
    "payload",
    [
        "' or 1==1",
        '") or (doc_type != "',
        "' or doc_type == 'internal",
        '\\" or doc_type == "internal" or doc_type == \\"',
        "public\\",
        "internal' or '1'=='1",
    ],
)
def test_values_never_change_the_filter(retriever: ThresholdedRetriever, payload: str) -> None:
    assert _ids(retriever, MetadataFilter(key="doc_type", value=payload)) == set()


def test_backslash_value_in_an_and_filter_cannot_escape(retriever: ThresholdedRetriever) -> None:
    found = _ids(
        retriever,
        MetadataFilter(key="doc_type", value="x\\"),
        MetadataFilter(key="doc_type", value=" or doc_type == 'internal' or doc_type == "),
    )
    assert found == set()


@pytest.mark.parametrize("position", range(len(TRICKY_VALUES)))
def test_tricky_values_match_exactly_themselves(
    retriever: ThresholdedRetriever, position: int
) -> None:
    value = TRICKY_VALUES[position]
    assert _ids(retriever, MetadataFilter(key="doc_type", value=value)) == {f"value-{position}"}


@pytest.mark.parametrize(
    "value", ["two\nlines", "public\n or doc_type == 'internal'", "a\rb", "nul\x00"]
)
def test_line_breaks_are_refused_not_sent(retriever: ThresholdedRetriever, value: str) -> None:
    with pytest.raises(UnsafeFilterError, match="line break"):
        _ids(retriever, MetadataFilter(key="doc_type", value=value))


def test_in_and_not_in_with_tricky_values(retriever: ThresholdedRetriever) -> None:
    found = _ids(
        retriever, MetadataFilter(key="doc_type", value=TRICKY_VALUES, operator=FilterOperator.IN)
    )
    assert found == {f"value-{i}" for i in range(len(TRICKY_VALUES))}
    excluded = _ids(
        retriever, MetadataFilter(key="doc_type", value=["internal"], operator=FilterOperator.NIN)
    )
    assert not any(i.startswith("internal-") for i in excluded)
    assert len(excluded) == len(TRICKY_VALUES)


def test_allowed_keys_are_enforced(index: VectorStoreIndex) -> None:
    retriever = ThresholdedRetriever(
        index,
        RetrievalPolicy(min_similarity=0.0),
        neighbours=0,
        parent_summaries=False,
        allowed_filter_keys={"doc_type"},
    )
    with pytest.raises(UnsafeFilterError, match="allowed"):
        _ids(retriever, MetadataFilter(key="source", value="x"))
    assert _ids(retriever, MetadataFilter(key="doc_type", value="internal"))


def test_text_match_is_a_substring_and_wildcards_are_literal(
    retriever: ThresholdedRetriever,
) -> None:
    internal = {"internal-0", "internal-1", "internal-2"}
    for value in ("inter", "ternal", "nal"):
        found = _ids(
            retriever,
            MetadataFilter(key="doc_type", value=value, operator=FilterOperator.TEXT_MATCH),
        )
        assert found == internal
    for value in ("_", "inte_nal"):
        found = _ids(
            retriever,
            MetadataFilter(key="doc_type", value=value, operator=FilterOperator.TEXT_MATCH),
        )
        assert found == set()
    for value in ("%", "in%nal"):  # LlamaIndex's Milvus store reads % as a wildcard
        with pytest.raises(UnsafeFilterError, match="wildcard"):
            _ids(
                retriever,
                MetadataFilter(key="doc_type", value=value, operator=FilterOperator.TEXT_MATCH),
            )


def test_a_bad_filter_quoting_connection_refused_is_not_retried(
    index: VectorStoreIndex, milvus_searches: list[dict]
) -> None:
    """A filter Milvus refuses fails once, as itself, whatever words its value holds."""
    policy = RetrievalPolicy(min_similarity=0.0, top_k=20, max_per_source=None, max_chars=None)
    # a raw expression Milvus cannot parse, whose text holds "connection refused"
    broken = {"string_expr": 'doc_type == "connection refused" and'}
    patient = ThresholdedRetriever(
        index, policy, neighbours=0, max_retries=3, retry_backoff=0.5, vector_store_kwargs=broken
    )
    with pytest.raises(MilvusException, match="connection refused") as caught:
        patient.retrieve_with_report("question")
    assert not isinstance(caught.value, SearchUnavailableError)
    assert len(milvus_searches) == 1


def test_a_lone_surrogate_is_refused_before_any_query(
    retriever: ThresholdedRetriever, milvus_searches: list[dict]
) -> None:
    with pytest.raises(UnsafeFilterError, match=r"lone surrogate \(U\+DC80\)"):
        _ids(retriever, MetadataFilter(key="doc_type", value="public\udc80"))
    assert milvus_searches == []


def test_fetching_more_than_one_milvus_search_returns_is_refused_before_any_query(
    retriever: ThresholdedRetriever, milvus_searches: list[dict]
) -> None:
    with pytest.raises(ValueError, match="16,384, the most one Milvus search returns"):
        retriever.retrieve_with_report("q", top_k=16_385)
    assert milvus_searches == []
