"""Calibrate the floor and the gate on what a LangChain Milvus vector store holds.

The store's stored vectors are read back from its collection; only the questions
are embedded, with the store's embedding function.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.embeddings import Embeddings

from langchain_thresholded.filters import to_filter
from langchain_thresholded.milvus import declared_fields, json_metadata_field
from langchain_thresholded.scoring import is_milvus
from thresholded.calibration import (
    BatchedEmbedder,
    CalibrationResult,
    Question,
    SimpleCalibrationResult,
    SimpleForm,
    calibrate_collection,
)
from thresholded.calibration.collection import Layout, filter_expression, not_a_milvus_store
from thresholded.models import ModelId

__all__ = ["calibrate_vectorstore", "embedder_of"]


def embedder_of(
    embeddings: Embeddings,
    model_id: ModelId | str | None = None,
    *,
    batch_size: int = 32,
    progress: bool = True,
) -> BatchedEmbedder:
    """LangChain embeddings as a calibration ``Embedder`` (queries on the query path);
    ``model_id`` names the model (default: the embeddings' own ``model_id``, as the
    packaged ones have). ``batch_size`` texts are embedded at a time, under a progress bar
    when ``progress``."""
    name = model_id or getattr(embeddings, "model_id", None)
    if not name:
        raise ValueError(
            f"name the embedding model: model_id=... ({type(embeddings).__name__} has no "
            "model_id of its own)"
        )
    return BatchedEmbedder(
        name,
        embeddings.embed_documents,
        lambda texts: [embeddings.embed_query(text) for text in texts],
        batch_size=batch_size,
        progress=progress,
    )


def calibrate_vectorstore(
    vectorstore: Any,
    questions: Sequence[Question] | SimpleForm,
    *,
    model_id: str | None = None,
    id_field: str | None = None,
    filters: Any = None,
    progress: bool = True,
    **options: Any,
) -> CalibrationResult | SimpleCalibrationResult:
    """Calibrate on a ``langchain_milvus.Milvus`` store's collection and stored vectors.

    ``model_id`` names the embedding model (default: the embeddings' own
    ``model_id``, as the packaged ones have). ``filters`` calibrates under them, as the
    retriever's ``filters``: a structured filter or its dict form (``{"doc_type":
    "public"}``), or a Milvus expression. Other ``options`` are those of
    ``thresholded.calibration.calibrate``.
    """
    if not is_milvus(vectorstore):
        raise not_a_milvus_store(
            "calibrate_vectorstore",
            "langchain_milvus.Milvus store",
            vectorstore,
            embedder="embedder_of(embeddings, model_id)",
        )
    embedder = embedder_of(vectorstore.embeddings, model_id, progress=progress)
    connection = dict(getattr(vectorstore, "_connection_args", {}) or {})
    uri = connection.pop("uri", None)
    if not uri:
        raise ValueError("the vector store's connection_args name no uri")
    options_of_client = {k: v for k, v in connection.items() if k in ("token", "db_name") and v}
    return calibrate_collection(
        embedder,
        uri,
        vectorstore.collection_name,
        questions,
        id_field=id_field,
        filter=filter_expression(
            filters,
            vectorstore.client,
            translate=to_filter,
            json_field=json_metadata_field(vectorstore),
            declared=declared_fields(vectorstore),
        ),
        progress=progress,
        client_options=options_of_client or None,
        layout=_layout_of(vectorstore),
        **options,
    )


def _layout_of(store: Any) -> Layout | None:
    """The store's own id, vector and text fields, and the JSON field its metadata is kept in
    (if one is); None where it has several vector fields."""
    vector = store._vector_field
    if isinstance(vector, list | tuple):
        vector = vector[0] if len(vector) == 1 else None
    if not isinstance(vector, str):
        return None
    fields = (str(store._primary_field), vector, str(store._text_field))
    return Layout("langchain", *fields, metadata_field=json_metadata_field(store))
