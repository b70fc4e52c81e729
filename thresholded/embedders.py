"""The CLI's embedding models, loaded through whichever framework adapter is installed.

The calibration maths takes any ``Embedder``; a model is loaded by an adapter:
LlamaIndex's where the ``llama-index`` extra is installed, else LangChain's where
the ``langchain`` extra is. Both load the same models, from disk only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thresholded.errors import MissingExtraError
from thresholded.extras import is_installed, pip_install
from thresholded.models import ModelId

if TYPE_CHECKING:
    from thresholded.calibration import BatchedEmbedder


def load_embedder(name: str, *, batch_size: int = 32, progress: bool = True) -> BatchedEmbedder:
    """The model ``name`` (an alias or a local directory) as a calibration ``Embedder``."""
    from thresholded.calibration import BatchedEmbedder

    if is_installed("llama-index"):
        from llama_index_thresholded.calibration import embedder_of
        from llama_index_thresholded.embeddings import load_embed_model

        return embedder_of(load_embed_model(name), batch_size=batch_size, progress=progress)
    if is_installed("langchain"):
        from langchain_thresholded.embeddings import load_embeddings

        embeddings = load_embeddings(name)
        return BatchedEmbedder(
            ModelId.parse(str(embeddings.model_id)),
            embeddings.embed_documents,
            lambda texts: [embeddings.embed_query(text) for text in texts],
            batch_size=batch_size,
            progress=progress,
        )
    raise MissingExtraError(
        f"loading the embedding model {name!r} needs a framework adapter: "
        f"{pip_install('llama-index')} or {pip_install('langchain')}"
    )
