"""The CLI's embedding models, loaded through whichever framework adapter is installed.

The calibration maths takes any ``Embedder``; a model is loaded by an adapter:
LlamaIndex's where the ``llama-index`` extra is installed, else LangChain's where
the ``langchain`` extra is. Both load the same models, from disk only.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from thresholded.errors import MissingExtraError
from thresholded.extras import is_installed, pip_install
from thresholded.models import ModelId

if TYPE_CHECKING:
    from thresholded.calibration import BatchedEmbedder


def load_embedder(name: str, *, batch_size: int = 32, progress: bool = True) -> BatchedEmbedder:
    """The model ``name`` (an alias or a local directory) as a calibration ``Embedder``.
    Without ``progress``, no progress bar is shown: neither the embedding's nor the model
    loading's (transformers' "Loading weights")."""
    if is_installed("llama-index"):
        from llama_index_thresholded.calibration import embedder_of
        from llama_index_thresholded.embeddings import load_embed_model

        with loading_bars(progress):
            model = load_embed_model(name)
        return embedder_of(model, batch_size=batch_size, progress=progress)
    if is_installed("langchain"):
        from langchain_thresholded.calibration import embedder_of as langchain_embedder
        from langchain_thresholded.embeddings import load_embeddings

        with loading_bars(progress):
            embeddings = load_embeddings(name)
        model = ModelId.parse(str(embeddings.model_id))
        return langchain_embedder(embeddings, model, batch_size=batch_size, progress=progress)
    raise MissingExtraError(
        f"loading the embedding model {name!r} needs a framework adapter: "
        f"{pip_install('llama-index')} or {pip_install('langchain')}"
    )


@contextmanager
def loading_bars(shown: bool) -> Iterator[None]:
    """Unless ``shown``, transformers' progress bars off while a model loads (the CLI's
    ``--no-progress``: ``calibrate``'s models, ``bench``'s), through its
    own switch (``transformers.utils.logging.disable_progress_bar``), and back on after if
    they were on."""
    if shown:
        yield
        return
    try:
        from transformers.utils import logging as transformers_logging
    except ImportError:  # a model that transformers does not load shows no such bar
        yield
        return
    was_on = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            transformers_logging.enable_progress_bar()
