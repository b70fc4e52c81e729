"""The leak fixture, built once per module on Milvus Lite (the venv's engine)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the test modules import leak_data

from leak_data import DIM, langchain_docstore, langchain_documents, langchain_milvus, llama_index


@dataclass
class Leaky:
    """The mixed documents, in both adapters' stores."""

    llama_index: Any
    langchain_store: Any
    langchain_docstore: Any


@pytest.fixture(scope="module")
def leaky(tmp_path_factory: pytest.TempPathFactory) -> Leaky:
    pytest.importorskip("langchain_milvus")
    from llama_index_thresholded.milvus import milvus_store

    folder = tmp_path_factory.mktemp("leaks")
    index = llama_index(milvus_store(str(folder / "llama.db"), "leaks", dim=DIM))
    documents = langchain_documents()
    store = langchain_milvus(folder / "langchain.db", documents)
    return Leaky(index, store, langchain_docstore(documents))
