"""Milvus stores set up for cosine thresholds: IP on unit vectors, Lite or server by URI.

The same code serves Milvus Lite (a local file path as URI) and a Milvus
server, standalone or distributed (``http://host:19530``).
"""

from __future__ import annotations

from typing import Any

from llama_index.vector_stores.milvus import MilvusVectorStore

from thresholded.scores import Metric


def milvus_store(
    uri: str,
    collection_name: str,
    *,
    dim: int,
    metric: Metric | str = Metric.IP,
    overwrite: bool = False,
    **kwargs: Any,
) -> MilvusVectorStore:
    """A ``MilvusVectorStore`` whose dense scores are cosines (IP on unit vectors, or COSINE)."""
    metric = Metric.parse(metric)
    return MilvusVectorStore(
        uri=uri,
        collection_name=collection_name,
        dim=dim,
        similarity_metric=metric.value,
        overwrite=overwrite,
        **kwargs,
    )
