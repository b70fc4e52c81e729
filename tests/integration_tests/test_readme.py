"""Every ```python block of README.md runs as written, on Milvus Lite and all-MiniLM-L6-v2.

README.md is read when the tests are collected, so the test follows the README. A
block's ``# Yours:`` comment names what it leaves to the reader; the fixture supplies
those names and no others, so a block that uses anything else fails with NameError.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration


def _nodes(tmp_path: Path, embed_model: Any) -> Any:
    from llama_index_thresholded.knowledge_base import knowledge_nodes
    from thresholded.knowledge_base import load_knowledge_base

    return knowledge_nodes(load_knowledge_base())[0]


def _index(tmp_path: Path, embed_model: Any) -> Any:
    from llama_index.core import VectorStoreIndex

    return VectorStoreIndex(_nodes(tmp_path, embed_model), embed_model=embed_model)


def _filters(tmp_path: Path, embed_model: Any) -> Any:
    from llama_index.core.vector_stores import FilterOperator, MetadataFilter, MetadataFilters

    internal = MetadataFilter(key="doc_type", value="internal", operator=FilterOperator.NE)
    return MetadataFilters(filters=[internal])


def _llm(tmp_path: Path, embed_model: Any) -> Any:
    from llama_index.core.llms import MockLLM

    return MockLLM()


def _reranker(tmp_path: Path, embed_model: Any) -> Any:
    from llama_index.core.postprocessor.types import BaseNodePostprocessor

    class BestFirst(BaseNodePostprocessor):
        """Stands in for a reranker: the best ``top_n`` by score."""

        top_n: int = 2

        def _postprocess_nodes(self, nodes: list, query_bundle: Any = None) -> list:
            return sorted(nodes, key=lambda n: -(n.score or 0.0))[: self.top_n]

    return BestFirst()


def _policy(tmp_path: Path, embed_model: Any) -> Any:
    from thresholded import RetrievalPolicy
    from thresholded.knowledge_base import EXAMPLE_KNOWLEDGE_BASE

    return RetrievalPolicy.from_profile(EXAMPLE_KNOWLEDGE_BASE / "threshold.json")


def _documents(tmp_path: Path, embed_model: Any) -> Any:
    from langchain_thresholded.knowledge_base import knowledge_documents
    from thresholded.knowledge_base import load_knowledge_base

    return knowledge_documents(load_knowledge_base())[0]


def _embeddings(tmp_path: Path, embed_model: Any) -> Any:
    from langchain_thresholded.embeddings import minilm_embeddings

    return minilm_embeddings()


def _retriever(tmp_path: Path, embed_model: Any) -> Any:
    from langchain_core.vectorstores import InMemoryVectorStore

    from langchain_thresholded import ThresholdedRetriever

    store = InMemoryVectorStore(_embeddings(tmp_path, embed_model))
    store.add_documents(_documents(tmp_path, embed_model))
    return ThresholdedRetriever(vectorstore=store, policy=_policy(tmp_path, embed_model))


def _prompt(tmp_path: Path, embed_model: Any) -> Any:
    from langchain_core.prompts import ChatPromptTemplate

    return ChatPromptTemplate.from_template("Answer from {context}: {question}")


def _chat_model(tmp_path: Path, embed_model: Any) -> Any:
    from langchain_core.language_models import FakeListChatModel

    return FakeListChatModel(responses=["Within 14 days."])


def _combine_docs_chain(tmp_path: Path, embed_model: Any) -> Any:
    from langchain_classic.chains.combine_documents import create_stuff_documents_chain
    from langchain_core.prompts import ChatPromptTemplate

    prompt = ChatPromptTemplate.from_template("Answer from {context}: {input}")
    return create_stuff_documents_chain(_chat_model(tmp_path, embed_model), prompt)


def _rewrite(tmp_path: Path, embed_model: Any) -> Any:
    from langchain_core.runnables import RunnableLambda

    return RunnableLambda(lambda inputs: inputs["input"])  # no history: the question itself


SUPPLIED: dict[str, Callable[[Path, Any], Any]] = {
    "docs": _documents,
    "embeddings": _embeddings,
    "retriever": _retriever,
    "prompt": _prompt,
    "chat_model": _chat_model,
    "format_docs": lambda tmp_path, embed_model: (
        lambda docs: "\n\n".join(d.page_content for d in docs)
    ),
    "combine_docs_chain": _combine_docs_chain,
    "rewrite": _rewrite,
    "nodes": _nodes,
    "embed_model": lambda tmp_path, embed_model: embed_model,
    "index": _index,
    "filters": _filters,
    "llm": _llm,
    "reranker": _reranker,
    "policy": _policy,
    "uri": lambda tmp_path, embed_model: str(tmp_path / "server.db"),  # Milvus Lite, not a server
}
"""What a README block may leave to the reader, as the example knowledge base gives it."""


def run_block(block: Any, tmp_path: Path, embed_model: Any) -> dict[str, Any]:
    unknown = sorted(set(block.yours) - set(SUPPLIED))
    assert not unknown, f"{block.id} leaves {unknown} to the reader; teach SUPPLIED to make them"
    namespace = {"__name__": "readme"}
    namespace.update({name: SUPPLIED[name](tmp_path, embed_model) for name in block.yours})
    exec(compile(block.code, block.id, "exec"), namespace)
    return namespace


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # blocks write relative paths such as ./kb.db
    return tmp_path


def test_readme_block_runs(readme_block: Any, in_tmp: Path, minilm_embed_model: Any) -> None:
    namespace = run_block(readme_block, in_tmp, minilm_embed_model)
    assert set(namespace) - {"__name__", "__builtins__", *readme_block.yours}, "defines nothing"


def test_the_readme_has_a_block_per_framework(readme: list) -> None:
    code = "\n".join(block.code for block in readme)
    for package in ("llama_index_thresholded", "langchain_thresholded"):
        assert f"from {package} import" in code


def llama_index_block(readme: list) -> Any:
    return next(b for b in readme if "existing_milvus_store" in b.code and "nodes" in b.yours)


def test_the_llama_index_block_builds_once_then_reopens(
    readme: list, in_tmp: Path, minilm_embed_model: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from pymilvus import MilvusClient

    block = llama_index_block(readme)
    sections = len(SUPPLIED["nodes"](in_tmp, minilm_embed_model))
    counts = []
    for _ in range(2):
        namespace = run_block(block, in_tmp, minilm_embed_model)
        store = namespace["store"]
        client = MilvusClient(uri=store.uri)
        rows = client.query(store.collection_name, output_fields=["count(*)"])
        counts.append(rows[0]["count(*)"])
        client.close()
    assert counts == [sections, sections]  # the second run reopened; it inserted nothing

    report = namespace["report"]
    assert report.kept and report.kept[0].node.metadata["source"] == "refund-policy"
    no_match = re.search(r'no_match_message="(?P<message>[^"]+)"', block.code)
    if no_match:  # the block asks its engine a question nothing answers
        assert no_match["message"] in capsys.readouterr().out
