"""LangChain adapter: cosine-thresholded dense retrieval over any ``VectorStore``.

``ThresholdedRetriever`` searches a store, reads every score as a true cosine and
applies the core ``RetrievalPolicy``; ``SimilarityThresholdCompressor`` applies
the floor inside compressor pipelines. It depends on langchain-core only;
langchain-milvus is recognised when installed, never imported here, and the
Milvus helpers import pymilvus on first use only. The
embeddings of the packaged models are in ``langchain_thresholded.embeddings``.
"""

from langchain_thresholded.compressors import SimilarityThresholdCompressor
from langchain_thresholded.ensemble import RetrieverSource
from langchain_thresholded.milvus import (
    connection_args,
    ensure_orm_connection,
    wait_for_milvus_lite,
)
from langchain_thresholded.multi_collection import (
    CollectionSearchError,
    CollectionSpec,
    CollectionStatus,
    MultiCollectionReport,
    MultiCollectionRetriever,
)
from langchain_thresholded.report import EVENT_NAME, DroppedDocument, ThresholdedReport
from langchain_thresholded.retrievers import ThresholdedRetriever
from langchain_thresholded.scoring import store_metric
from thresholded import metadata_keys
from thresholded.policy import RetrievalPolicy
from thresholded.scores import Metric, ScoreKind
from thresholded.selection import DropReason

__all__ = [
    "EVENT_NAME",
    "CollectionSearchError",
    "CollectionSpec",
    "CollectionStatus",
    "DropReason",
    "DroppedDocument",
    "Metric",
    "MultiCollectionReport",
    "MultiCollectionRetriever",
    "RetrievalPolicy",
    "RetrieverSource",
    "ScoreKind",
    "SimilarityThresholdCompressor",
    "ThresholdedReport",
    "ThresholdedRetriever",
    "connection_args",
    "ensure_orm_connection",
    "metadata_keys",
    "store_metric",
    "wait_for_milvus_lite",
]
