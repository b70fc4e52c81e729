"""Importing the adapters and using their Milvus helpers prints nothing, even with ``-W default``.

Each warning is silenced only around the one import or call that raises it (Milvus
Lite 2.5.1's ``pkg_resources`` import, langchain-milvus's reads through pymilvus's
deprecated ORM); the process's warning filters, logging and environment are left
as they were. Clients get a gRPC keepalive no server answers with GOAWAY.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from thresholded.milvus_grpc import KEEPALIVE_OPTIONS

pytestmark = pytest.mark.integration

NOISE = ("pkg_resources", "GOAWAY", "too_many_pings", "PyMilvusDeprecationWarning")

USE_THE_HELPERS = """
import logging, os, sys, warnings

# The frameworks first: some of them add warning filters of their own when imported.
import langchain_core.vectorstores, langchain_milvus, llama_index.core, pymilvus
import llama_index.vector_stores.milvus

filters, environ = list(warnings.filters), dict(os.environ)
root = (logging.getLogger().level, list(logging.getLogger().handlers))

import langchain_thresholded, llama_index_thresholded
from langchain_thresholded import milvus as lc_milvus
from llama_index_thresholded.milvus import existing_milvus_store, milvus_store

folder = sys.argv[1]
store = milvus_store(f"{folder}/li.db", "kb", dim=4, overwrite=True)
existing_milvus_store(f"{folder}/li.db", "kb")

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_thresholded import RetrievalPolicy, ThresholdedRetriever, store_metric

embeddings = DeterministicFakeEmbedding(size=4)
docs = [Document(page_content=t) for t in ("one", "two")]
lc = lc_milvus.milvus_from_documents(docs, embeddings, uri=f"{folder}/lc.db", collection_name="kb")
lc = lc_milvus.existing_milvus_store(f"{folder}/lc.db", "kb", embeddings=embeddings)
with lc_milvus.orm_calls():
    lc.add_documents([Document(page_content="three")])
print(store_metric(lc))

assert list(warnings.filters) == filters, "warning filters changed"
assert dict(os.environ) == environ, "environment changed"
assert (logging.getLogger().level, list(logging.getLogger().handlers)) == root, "logging changed"
"""


def test_the_adapters_and_their_milvus_helpers_print_nothing(tmp_path: Path) -> None:
    pytest.importorskip("langchain_milvus")
    result = subprocess.run(
        [sys.executable, "-W", "default", "-c", USE_THE_HELPERS, str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "IP"  # milvus_from_documents indexes with IP
    noisy = [line for line in result.stderr.splitlines() if any(w in line for w in NOISE)]
    assert not noisy, "\n".join(noisy)


def test_milvus_store_clients_keep_the_keepalive(tmp_path: Path) -> None:
    from llama_index_thresholded.milvus import milvus_store

    store = milvus_store(str(tmp_path / "kb.db"), "kb", dim=4)
    options = store._milvusclient._get_connection()._grpc_options
    assert KEEPALIVE_OPTIONS.items() <= options.items()


def test_langchain_connection_args_carry_the_keepalive_and_yours() -> None:
    from langchain_thresholded.milvus import connection_args

    args = connection_args("http://127.0.0.1:19530", db_name="faqs", grpc_options={"x": 1})
    assert args["uri"] == "http://127.0.0.1:19530" and args["db_name"] == "faqs"
    assert args["grpc_options"] == {**KEEPALIVE_OPTIONS, "x": 1}


def test_orm_calls_restores_the_warning_filters() -> None:
    from langchain_thresholded.milvus import orm_calls

    before = list(warnings.filters)
    with orm_calls():
        assert list(warnings.filters) != before
    assert list(warnings.filters) == before


LOAD_QUIETLY = """
from transformers.utils import logging

from thresholded.embedders import load_embedder

load_embedder("minilm", progress=False)
assert logging.is_progress_bar_enabled(), "progress bars left off for the rest of the process"
"""


def test_calibrate_no_progress_hides_the_model_loading_bar() -> None:
    """``thresholded calibrate --no-progress`` loads its model with ``progress=False``:
    transformers' "Loading weights" bar was printed all the same."""
    pytest.importorskip("transformers")
    result = subprocess.run(
        [sys.executable, "-c", LOAD_QUIETLY], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "Loading weights" not in result.stderr
    assert "it/s" not in result.stderr
