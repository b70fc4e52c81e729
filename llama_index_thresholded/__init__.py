"""Thresholded retrieval for LlamaIndex: keep what clears a cosine floor, then attach context.

Needs the ``llama-index`` extra. The Milvus helpers (``milvus_store``,
``existing_milvus_store``, ``CompatibleMilvusVectorStore``) need the
``llama-index-milvus`` extra and are imported on first use, so that this package
imports without pymilvus.
"""

from typing import Any

from llama_index_thresholded.chat_engine import (
    AbstainingCondensePlusContextChatEngine,
    AbstainingContextChatEngine,
)
from llama_index_thresholded.embeddings import (
    UniversalSentenceEncoderEmbedding,
    load_embed_model,
    model_id_of,
)
from llama_index_thresholded.events import ThresholdSelectionEvent
from llama_index_thresholded.multi_collection import (
    CollectionSearchError,
    CollectionSpec,
    CollectionStatus,
    MultiCollectionRetriever,
    RetrieverClosedError,
)
from llama_index_thresholded.postprocessor import SimilarityThresholdPostprocessor
from llama_index_thresholded.query_engine import AbstainingQueryEngine
from llama_index_thresholded.retriever import ThresholdedRetriever
from thresholded.abstention import DEFAULT_NO_MATCH_MESSAGE, NOTHING_MATCHED
from thresholded.errors import CollectionNotFoundError
from thresholded.policy import RetrievalPolicy
from thresholded.report import ABSTAINED_BY, MultiCollectionReport, Report

_MILVUS_NAMES = ("CompatibleMilvusVectorStore", "existing_milvus_store", "milvus_store")

__all__ = [
    "DEFAULT_NO_MATCH_MESSAGE",
    "ABSTAINED_BY",
    "NOTHING_MATCHED",
    "AbstainingCondensePlusContextChatEngine",
    "AbstainingContextChatEngine",
    "AbstainingQueryEngine",
    "CollectionNotFoundError",
    "CollectionSearchError",
    "CollectionSpec",
    "CollectionStatus",
    "MultiCollectionReport",
    "MultiCollectionRetriever",
    "RetrieverClosedError",
    "Report",
    "RetrievalPolicy",
    "SimilarityThresholdPostprocessor",
    "ThresholdSelectionEvent",
    "ThresholdedRetriever",
    "UniversalSentenceEncoderEmbedding",
    "load_embed_model",
    "model_id_of",
    *_MILVUS_NAMES,
]


def __getattr__(name: str) -> Any:
    if name in _MILVUS_NAMES:
        from llama_index_thresholded import milvus

        return getattr(milvus, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
