"""LangChain adapter: cosine-thresholded dense retrieval over any ``VectorStore``.

``ThresholdedRetriever`` searches a store, reads every score as a true cosine and
applies the core ``RetrievalPolicy``; ``SimilarityThresholdCompressor`` applies the
same policy (or the floor alone) inside compressor pipelines. It depends on
langchain-core only; langchain-milvus is recognised when installed, never imported
here. The Milvus helpers (``milvus_from_documents``, ``existing_milvus_store``) need
the ``langchain-milvus`` extra and are imported on first use, so that this package
imports without pymilvus. The embeddings of the packaged models are in
``langchain_thresholded.embeddings`` (``minilm_embeddings`` and ``load_embeddings``
are also here).
"""

from typing import Any

from langchain_thresholded.abstain import AbstainingChain
from langchain_thresholded.compressors import SimilarityThresholdCompressor
from langchain_thresholded.embeddings import load_embeddings, minilm_embeddings
from langchain_thresholded.ensemble import RetrieverSource
from langchain_thresholded.events import EVENT_NAME
from langchain_thresholded.multi_collection import (
    CollectionSearchError,
    CollectionSpec,
    CollectionStatus,
    MultiCollectionRetriever,
    RetrieverClosedError,
)
from langchain_thresholded.retrievers import ThresholdedRetriever
from langchain_thresholded.scoring import store_metric
from thresholded import metadata_keys
from thresholded.abstention import DEFAULT_NO_MATCH_MESSAGE, NOTHING_MATCHED
from thresholded.errors import CollectionNotFoundError
from thresholded.policy import RetrievalPolicy
from thresholded.report import ABSTAINED_BY, MultiCollectionReport, Report
from thresholded.scores import Metric, ScoreKind
from thresholded.selection import DropReason

_MILVUS_NAMES = ("existing_milvus_store", "milvus_from_documents")

__all__ = [
    "ABSTAINED_BY",
    "DEFAULT_NO_MATCH_MESSAGE",
    "EVENT_NAME",
    "NOTHING_MATCHED",
    "AbstainingChain",
    "CollectionNotFoundError",
    "CollectionSearchError",
    "CollectionSpec",
    "CollectionStatus",
    "DropReason",
    "Metric",
    "MultiCollectionReport",
    "MultiCollectionRetriever",
    "RetrieverClosedError",
    "Report",
    "RetrievalPolicy",
    "RetrieverSource",
    "ScoreKind",
    "SimilarityThresholdCompressor",
    "ThresholdedRetriever",
    "load_embeddings",
    "metadata_keys",
    "minilm_embeddings",
    "store_metric",
    *_MILVUS_NAMES,
]


def __getattr__(name: str) -> Any:
    if name in _MILVUS_NAMES:
        from langchain_thresholded import milvus

        return getattr(milvus, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
