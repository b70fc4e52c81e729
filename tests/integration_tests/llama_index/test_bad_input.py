"""Bad input on the real stack: each case is a clear error or a documented safe result."""

from __future__ import annotations

from pathlib import Path

import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import TextNode

from llama_index_thresholded import ThresholdedRetriever
from llama_index_thresholded.milvus import existing_milvus_store, milvus_store
from thresholded import CollectionNotFoundError, DimensionMismatchError, RetrievalPolicy

pytestmark = pytest.mark.integration

TEXTS = [
    "To get a refund, open Settings, then Billing, and choose Request a refund.",
    "Two-factor authentication protects your account with a code from your phone.",
    "Export your workspace as CSV or JSON from the Data page.",
]


@pytest.fixture(scope="module")
def uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("bad-input") / "kb.db")


@pytest.fixture(scope="module")
def index(uri: str, minilm_embed_model) -> VectorStoreIndex:
    store = milvus_store(uri, "kb", dim=384, metric="COSINE")
    nodes = [TextNode(text=t, metadata={"source": f"doc{i}"}) for i, t in enumerate(TEXTS)]
    storage = StorageContext.from_defaults(vector_store=store)
    return VectorStoreIndex(nodes, storage_context=storage, embed_model=minilm_embed_model)


def test_a_question_longer_than_the_model_input_is_truncated_not_fatal(index) -> None:
    """MiniLM reads 256 word pieces; a 40,000-character question is cut to them, not refused.

    What counts is the start of the question: the floor is off here because the
    padding dilutes the cosine, which is the honest outcome for such a question.
    """
    retriever = ThresholdedRetriever(index, RetrievalPolicy(min_similarity=0.0), neighbours=0)
    question = "How do I get a refund for my plan? " + "please help " * 3500
    assert len(question) > 40_000
    report = retriever.retrieve_with_report(question)
    assert [n.node.metadata["source"] for n in report.kept][:1] == ["doc0"]


@pytest.mark.parametrize("question", ["", "   ", "\n\t"])
def test_an_empty_question_is_an_error(index, question: str) -> None:
    retriever = ThresholdedRetriever(index, RetrievalPolicy(min_similarity=0.3), neighbours=0)
    with pytest.raises(ValueError, match="empty"):
        retriever.retrieve(question)


def test_a_missing_collection_is_named(uri: str, index) -> None:
    with pytest.raises(CollectionNotFoundError, match=r"'kb_typo' does not exist.*'kb'"):
        existing_milvus_store(uri, "kb_typo")


@pytest.mark.parametrize("keyword", ["overwrite", "drop_old"])
def test_reopening_refuses_to_drop_the_collection(uri: str, index, keyword: str) -> None:
    """``overwrite=True`` went on to the store, which dropped the collection: every row
    was gone, and every question then matched nothing, without a word."""
    with pytest.raises(TypeError, match=rf"{keyword}=True.*milvus_store\(\.\.\., overwrite=True\)"):
        existing_milvus_store(uri, "kb", **{keyword: True})
    assert existing_milvus_store(uri, "kb").client.get_collection_stats("kb")["row_count"] == 3


def test_an_existing_collection_opens_with_its_dimension_and_metric(uri: str, index) -> None:
    store = existing_milvus_store(uri, "kb")
    assert store.dim == 384
    assert store.similarity_metric == "COSINE"


def test_a_model_of_another_dimension_is_refused_naming_both(uri: str, index) -> None:
    from llama_index_thresholded import UniversalSentenceEncoderEmbedding

    use = UniversalSentenceEncoderEmbedding()
    other = VectorStoreIndex.from_vector_store(existing_milvus_store(uri, "kb"), embed_model=use)
    retriever = ThresholdedRetriever(other, RetrievalPolicy(min_similarity=0.3), neighbours=0)
    with pytest.raises(DimensionMismatchError, match=r"512.*384"):
        retriever.retrieve("How do I get a refund?")


def test_a_profile_of_another_model_is_refused(tmp_path: Path, index) -> None:
    from thresholded import ModelMismatchError

    profile = tmp_path / "p.json"
    profile.write_text(
        '{"version": 1, "min_similarity": 0.35, "embedding_model": "BAAI/bge-m3@1024"}'
    )
    with pytest.raises(ModelMismatchError, match="bge-m3"):
        ThresholdedRetriever(index, profile=profile, collection="kb")


def test_a_profile_of_another_model_names_the_model_in_use_with_its_own_dimension(
    tmp_path: Path, uri: str, index
) -> None:
    """The model in use was named with the collection's dimension: the Universal Sentence
    Encoder over a MiniLM collection was "universal-sentence-encoder-multilingual-3@384"."""
    from llama_index_thresholded import UniversalSentenceEncoderEmbedding
    from thresholded import ModelMismatchError

    profile = tmp_path / "p.json"
    profile.write_text(
        '{"version": 1, "min_similarity": 0.3, '
        '"embedding_model": "sentence-transformers/all-MiniLM-L6-v2@384"}'
    )
    use = UniversalSentenceEncoderEmbedding()
    other = VectorStoreIndex.from_vector_store(existing_milvus_store(uri, "kb"), embed_model=use)
    with pytest.raises(ModelMismatchError, match=r"but \S*universal-sentence-encoder\S*@512 is"):
        ThresholdedRetriever(other, profile=profile, collection="kb")


@pytest.mark.parametrize("reopen", [milvus_store, existing_milvus_store], ids=["new", "existing"])
def test_nodes_indexed_again_under_their_ids_replace_their_rows(
    tmp_path: Path, minilm_embed_model, reopen
) -> None:
    """Indexing the same nodes again (a rerun of an ingestion script) keeps one row per id.
    Milvus itself inserts a second row under the same primary key, and a search for k
    rows then returned about k / 2 sections: it spent its limit on the copies."""
    uri = str(tmp_path / "kb.db")

    def index_into(store) -> VectorStoreIndex:
        nodes = [TextNode(id_=f"n{i}", text=t) for i, t in enumerate(TEXTS)]
        storage = StorageContext.from_defaults(vector_store=store)
        return VectorStoreIndex(nodes, storage_context=storage, embed_model=minilm_embed_model)

    index_into(milvus_store(uri, "kb", dim=384))
    store = reopen(uri, "kb", dim=384) if reopen is milvus_store else reopen(uri, "kb")
    index = index_into(store)
    (count,) = store.client.query("kb", filter="", output_fields=["count(*)"])
    assert count["count(*)"] == len(TEXTS)
    policy = RetrievalPolicy(min_similarity=0.0, top_k=2, max_per_source=None, max_chars=None)
    retriever = ThresholdedRetriever(index, policy, neighbours=0, parent_summaries=False)
    assert len(retriever.retrieve("How do I get a refund?")) == 2


def test_a_collection_whose_vector_field_is_named_otherwise_names_its_fields(
    tmp_path: Path,
) -> None:
    """The collection exists: a CollectionNotFoundError sent the README's
    ``except CollectionNotFoundError:`` on to build it again, and named no field to pass."""
    from pymilvus import MilvusClient

    from thresholded.milvus_lite import wait_for_milvus_lite

    uri = str(tmp_path / "fields.db")
    wait_for_milvus_lite(uri)
    client = MilvusClient(uri=uri)
    client.create_collection("kb", dimension=8, vector_field_name="emb")
    client.close()

    with pytest.raises(
        ValueError, match=r"no dense vector field 'embedding'.*\['emb'\].*embedding_field="
    ) as raised:
        existing_milvus_store(uri, "kb")
    assert not isinstance(raised.value, CollectionNotFoundError)
    assert existing_milvus_store(uri, "kb", embedding_field="emb").dim == 8


def test_a_milvus_lite_file_may_be_a_path(tmp_path: Path, minilm_embed_model) -> None:
    """A ``pathlib.Path`` failed in pymilvus with "'PosixPath' object has no attribute
    'endswith'" (building) or "argument of type 'PosixPath' is not iterable" (reopening)."""
    path = tmp_path / "kb.db"
    storage = StorageContext.from_defaults(vector_store=milvus_store(path, "kb", dim=384))
    VectorStoreIndex(
        [TextNode(text=TEXTS[0])], storage_context=storage, embed_model=minilm_embed_model
    )
    store = existing_milvus_store(path, "kb")
    assert (store.uri, store.client.get_collection_stats("kb")["row_count"]) == (str(path), 1)
    with pytest.raises(TypeError, match=r"uri must be a str .* or a path, got int"):
        existing_milvus_store(19530, "kb")


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"dim": 512, "metric": "COSINE"}, r"'kb' holds vectors of 384 dimensions, not dim=512"),
        ({"dim": 384}, r"'kb' is indexed with COSINE, not metric='IP'"),
        ({"dim": 384, "metric": "L2"}, r"'kb' is indexed with COSINE, not metric='L2'"),
    ],
)
def test_adding_to_a_collection_of_another_dimension_or_metric_is_refused(
    uri: str, index, settings: dict, said: str
) -> None:
    """``milvus_store`` on an existing collection took a contradicting ``dim`` or ``metric``
    without a word: the first insert failed on the dimension, the first search on the
    metric."""
    with pytest.raises(ValueError, match=rf"{said}.*existing_milvus_store.*overwrite=True"):
        milvus_store(uri, "kb", **settings)
    store = milvus_store(uri, "kb", dim=384, metric="COSINE")  # as it is: taken, rows kept
    assert store.client.get_collection_stats("kb")["row_count"] == 3


@pytest.mark.parametrize("metric", ["COSINE", "L2"])
def test_a_collection_with_no_index_yet_is_indexed_with_the_metric_asked(
    tmp_path: Path, metric: str
) -> None:
    """LlamaIndex's store indexes an existing collection that has no index before it reads
    its ``similarity_metric``, so with ``IP``: ``milvus_store(..., metric="COSINE")`` was
    refused as "indexed with IP, not metric='COSINE'", an index it had just made itself."""
    from pymilvus import DataType, MilvusClient

    uri = str(tmp_path / "kb.db")
    client = MilvusClient(uri)
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
    schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=8)
    client.create_collection("bare", schema=schema)
    assert client.list_indexes("bare") == []
    store = milvus_store(uri, "bare", dim=8, metric=metric.lower())
    assert store.client.describe_index("bare", "embedding")["metric_type"] == metric
