"""Calibrate the floor and the gate on what a LlamaIndex Milvus index holds.

The index's stored vectors are read back from its collection; only the questions
are embedded, with the index's embedding model. LlamaIndex filters are turned into
the Milvus expression the retriever would send.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.vector_stores.types import MetadataFilters

from llama_index_thresholded.backend import declared_fields
from llama_index_thresholded.embeddings import model_id_of
from llama_index_thresholded.filters import to_filter
from llama_index_thresholded.pushdown import is_milvus_store
from thresholded.calibration import (
    BatchedEmbedder,
    CalibrationResult,
    Question,
    SimpleCalibrationResult,
    SimpleForm,
    calibrate_collection,
)
from thresholded.calibration.collection import Layout, filter_expression, not_a_milvus_store

__all__ = ["calibrate_index", "embedder_of"]


def embedder_of(
    embed_model: BaseEmbedding, *, batch_size: int = 32, progress: bool = True
) -> BatchedEmbedder:
    """A LlamaIndex embedding model as a calibration ``Embedder`` (queries on the query path)."""
    return BatchedEmbedder(
        model_id_of(embed_model),
        embed_model.get_text_embedding_batch,
        lambda texts: [embed_model.get_query_embedding(text) for text in texts],
        batch_size=batch_size,
        progress=progress,
    )


def calibrate_index(
    vector_store: Any,
    embed_model: BaseEmbedding,
    questions: Sequence[Question] | SimpleForm,
    *,
    id_field: str | None = None,
    filters: MetadataFilters | str | None = None,
    progress: bool = True,
    **options: Any,
) -> CalibrationResult | SimpleCalibrationResult:
    """Calibrate on a ``MilvusVectorStore``'s collection: its sections and stored vectors,
    read through the store's own client (its server, token and database).

    ``filters`` (LlamaIndex filters or a Milvus expression) calibrates under them:
    a filter can only lower a question's best score. Other ``options`` are those of
    ``thresholded.calibration.calibrate`` (``passages``, ``mode``, ``gate_margin``...).
    """
    if not is_milvus_store(vector_store):
        hint = " (pass index.vector_store)" if hasattr(vector_store, "vector_store") else ""
        raise not_a_milvus_store(
            "calibrate_index",
            "MilvusVectorStore",
            vector_store,
            embedder="embedder_of(embed_model)",
            hint=hint,
        )
    return calibrate_collection(
        embedder_of(embed_model, progress=progress),
        None,
        vector_store.collection_name,
        questions,
        id_field=id_field,
        filter=filter_expression(
            filters,
            vector_store.client,
            translate=to_filter,
            declared=declared_fields(vector_store),
        ),
        progress=progress,
        client=vector_store.client,  # its uri, token and database: the store keeps no uri
        layout=Layout("llama-index", "id", vector_store.embedding_field, vector_store.text_key),
        **options,
    )
