"""LangChain adapter: cosine-thresholded dense retrieval over any ``VectorStore``.

``ThresholdedRetriever`` searches a store, reads every score as a true cosine and
applies the core ``RetrievalPolicy``; ``SimilarityThresholdCompressor`` applies
the floor inside compressor pipelines. It depends on langchain-core only;
langchain-milvus is recognised when installed, never imported here; its stores
are created and reopened by ``langchain_thresholded.milvus``, which imports
pymilvus on first use only. The embeddings of the packaged models are in
``langchain_thresholded.embeddings``.
"""

from langchain_thresholded.abstain import (
    DEFAULT_NO_MATCH_ANSWER,
    NOTHING_MATCHED,
    AbstainingChain,
)
from langchain_thresholded.compressors import SimilarityThresholdCompressor
from langchain_thresholded.ensemble import RetrieverSource
from langchain_thresholded.events import EVENT_NAME
from langchain_thresholded.multi_collection import (
    CollectionSearchError,
    CollectionSpec,
    CollectionStatus,
    MultiCollectionRetriever,
)
from langchain_thresholded.retrievers import ThresholdedRetriever
from langchain_thresholded.scoring import store_metric
from thresholded import metadata_keys
from thresholded.policy import RetrievalPolicy
from thresholded.report import MultiCollectionReport, Report
from thresholded.scores import Metric, ScoreKind
from thresholded.selection import DropReason

__all__ = [
    "DEFAULT_NO_MATCH_ANSWER",
    "EVENT_NAME",
    "NOTHING_MATCHED",
    "AbstainingChain",
    "CollectionSearchError",
    "CollectionSpec",
    "CollectionStatus",
    "DropReason",
    "Metric",
    "MultiCollectionReport",
    "MultiCollectionRetriever",
    "Report",
    "RetrievalPolicy",
    "RetrieverSource",
    "ScoreKind",
    "SimilarityThresholdCompressor",
    "ThresholdedRetriever",
    "metadata_keys",
    "store_metric",
]
