"""Thresholded retrieval for LlamaIndex: keep what clears a cosine floor, then attach context."""

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
    MultiCollectionReport,
    MultiCollectionRetriever,
)
from llama_index_thresholded.postprocessor import SimilarityThresholdPostprocessor
from llama_index_thresholded.query_engine import (
    DEFAULT_NO_MATCH_MESSAGE,
    NOTHING_MATCHED,
    AbstainingQueryEngine,
)
from llama_index_thresholded.report import RetrievalReport
from llama_index_thresholded.retriever import ThresholdedRetriever

__all__ = [
    "DEFAULT_NO_MATCH_MESSAGE",
    "NOTHING_MATCHED",
    "AbstainingCondensePlusContextChatEngine",
    "AbstainingContextChatEngine",
    "AbstainingQueryEngine",
    "CollectionSearchError",
    "CollectionSpec",
    "CollectionStatus",
    "MultiCollectionReport",
    "MultiCollectionRetriever",
    "RetrievalReport",
    "SimilarityThresholdPostprocessor",
    "ThresholdSelectionEvent",
    "ThresholdedRetriever",
    "UniversalSentenceEncoderEmbedding",
    "load_embed_model",
    "model_id_of",
]
