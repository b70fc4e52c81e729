"""The contract fixture, built once per module on in-memory stores and on Milvus Lite."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the test modules import contract_data

from contract_data import (
    DIM,
    FixedEmbeddings,
    Fixture,
    langchain_docstore,
    langchain_documents,
    langchain_milvus,
    llama_index,
)
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core.vector_stores import SimpleVectorStore


@pytest.fixture(scope="module", params=["memory", "milvus"])
def fixture(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Fixture:
    documents = langchain_documents()
    if request.param == "memory":
        store = InMemoryVectorStore(FixedEmbeddings())
        store.add_documents(documents, ids=[d.id for d in documents])
        return Fixture(
            "memory", llama_index(SimpleVectorStore()), store, langchain_docstore(documents)
        )
    pytest.importorskip("langchain_milvus")
    from llama_index_thresholded.milvus import milvus_store

    folder = tmp_path_factory.mktemp("contract")
    index = llama_index(milvus_store(str(folder / "llama.db"), "contract", dim=DIM))
    store = langchain_milvus(folder / "langchain.db", documents)
    uri = str(folder / "langchain.db")
    return Fixture("milvus", index, store, langchain_docstore(documents), uri)
