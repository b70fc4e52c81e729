"""The wheel, installed into fresh virtual environments outside the repository.

The wheel is built from the repository's sources and installed with pip, from the
package index the machine is configured with, into three environments:

- ``[demo]``: ``thresholded demo`` runs from the installed package (its example
  knowledge base and profile are package data) and prints nothing noisy;
- ``[langchain,minilm]``: the LangChain README block runs, ``calibrate`` works,
  and no LlamaIndex, pymilvus or Milvus Lite distribution is installed;
- ``[llama-index,minilm]``: ``llama_index_thresholded`` imports and retrieves over
  a ``SimpleVectorStore``, and no pymilvus, Milvus Lite or LangChain distribution
  is installed.

Each environment gets ``torch==2.13.0`` first (so pip takes the CPU build) and the
repository's ``constraints.txt``, as ``make`` does. Selected with ``-m wheel``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.wheel]

REPO = Path(__file__).resolve().parents[2]
SOURCES = (
    "pyproject.toml",
    "README.md",
    "thresholded",
    "llama_index_thresholded",
    "langchain_thresholded",
)
NOISE = ("pkg_resources", "GOAWAY", "too_many_pings", "PyMilvusDeprecationWarning")
"""What the installed package must never print: warnings and gRPC errors fixed at their cause."""
MILVUS = {"pymilvus", "milvus-lite"}


def _run(args: list[str], *, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    """Run outside the repository, with the environment's own packages only."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return subprocess.run(
        args, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, check=False
    )


def _check(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, f"{result.args} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built from a copy of its sources (the repository stays clean)."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    source.mkdir()
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, source / name)
    _check(
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--quiet",
                "--no-deps",
                "--no-build-isolation",
                "--wheel-dir",
                str(root / "dist"),
                str(source),
            ],
            cwd=root,
        )
    )
    (built,) = (root / "dist").glob("thresholded_retrieval-*.whl")
    return built


class Venv:
    """A fresh virtual environment with the wheel and some of its extras installed."""

    def __init__(self, path: Path, wheel: Path, extras: str) -> None:
        self.path = path
        _check(_run([sys.executable, "-m", "venv", str(path)], cwd=path.parent))
        self.pip("install", "--upgrade", "pip", "setuptools<81", "wheel")
        self.pip("install", "torch==2.13.0")
        self.pip("install", "-c", str(REPO / "constraints.txt"), f"{wheel}[{extras}]")

    @property
    def python(self) -> str:
        return str(self.path / "bin" / "python")

    def pip(self, *args: str) -> None:
        _check(_run([self.python, "-m", "pip", "--quiet", *args], cwd=self.path))

    def run(self, *args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
        return _run(list(args), cwd=cwd, stdin=stdin)

    def bin(self, name: str) -> str:
        return str(self.path / "bin" / name)

    def distributions(self) -> set[str]:
        code = (
            "import importlib.metadata as m;"
            "print('\\n'.join(d.metadata['Name'].lower().replace('_', '-') "
            "for d in m.distributions()))"
        )
        out = _check(_run([self.python, "-c", code], cwd=self.path)).stdout
        return set(out.split())


def _venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path, extras: str) -> Venv:
    return Venv(tmp_path_factory.mktemp("venv") / "env", wheel, extras)


@pytest.fixture(scope="module")
def demo_env(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Venv:
    return _venv(tmp_path_factory, wheel, "demo")


@pytest.fixture(scope="module")
def langchain_env(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Venv:
    return _venv(tmp_path_factory, wheel, "langchain,minilm")


@pytest.fixture(scope="module")
def llama_index_env(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Venv:
    return _venv(tmp_path_factory, wheel, "llama-index,minilm")


def _quiet(stderr: str) -> None:
    noisy = [line for line in stderr.splitlines() if any(word in line for word in NOISE)]
    assert not noisy, "\n".join(noisy)


def test_the_wheel_carries_the_example_knowledge_base(wheel: Path) -> None:
    import zipfile

    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("README.md", "refund-policy.md", "questions.yaml", "threshold.json"):
        assert f"thresholded/example_knowledge_base/{name}" in names


def test_the_demo_runs_from_the_installed_wheel(demo_env: Venv, tmp_path: Path) -> None:
    where = _check(
        demo_env.run(
            demo_env.python,
            "-c",
            "import thresholded.knowledge_base as kb; print(kb.EXAMPLE_KNOWLEDGE_BASE)",
            cwd=tmp_path,
        )
    ).stdout.strip()
    assert Path(where).is_relative_to(demo_env.path)  # inside the installed package
    result = _check(
        demo_env.run(demo_env.bin("thresholded"), "demo", "--uri", "demo.db", cwd=tmp_path)
    )
    assert "No relevant information found." in result.stdout
    assert "refund-policy" in result.stdout
    _quiet(result.stderr)


def test_the_langchain_install_has_no_llama_index_and_no_milvus(langchain_env: Venv) -> None:
    installed = langchain_env.distributions()
    assert "langchain-core" in installed
    unwanted = {d for d in installed if d.startswith("llama-index") or d in MILVUS}
    assert not unwanted


def test_the_langchain_readme_block_runs_on_the_langchain_install(
    langchain_env: Venv, readme: list, tmp_path: Path
) -> None:
    block = next(b for b in readme if b.section == "LangChain" and "InMemoryVectorStore" in b.code)
    result = _check(langchain_env.run(langchain_env.python, "-", cwd=tmp_path, stdin=block.code))
    _quiet(result.stderr)


def test_the_cli_on_the_langchain_install(langchain_env: Venv, tmp_path: Path) -> None:
    cli = langchain_env.bin("thresholded")
    assert "calibrate" in _check(langchain_env.run(cli, "--help", cwd=tmp_path)).stdout
    demo = langchain_env.run(cli, "demo", cwd=tmp_path)
    assert demo.returncode == 2
    assert "pip install 'thresholded-retrieval[demo]'" in demo.stderr
    profile = _calibrate(langchain_env, tmp_path)
    assert profile["embedding_model"] == "sentence-transformers/all-MiniLM-L6-v2@384"


def _calibrate(env: Venv, folder: Path) -> dict[str, Any]:
    """``thresholded calibrate`` on the example knowledge base's sections and questions."""
    corpus = (
        "import json\n"
        "from thresholded.knowledge_base import load_knowledge_base\n"
        "for doc in load_knowledge_base():\n"
        "    for s in doc.sections:\n"
        "        row = {'pid': s.id, 'lang': 'en', 'text': s.text, 'source': doc.source}\n"
        "        print(json.dumps(row))\n"
    )
    (folder / "corpus.jsonl").write_text(
        _check(env.run(env.python, "-", cwd=folder, stdin=corpus)).stdout
    )
    questions = _check(
        env.run(
            env.python,
            "-c",
            "from thresholded.knowledge_base import EXAMPLE_KNOWLEDGE_BASE as kb;"
            "print(kb / 'questions.yaml')",
            cwd=folder,
        )
    ).stdout.strip()
    _check(
        env.run(
            env.bin("thresholded"),
            "calibrate",
            "--corpus",
            "corpus.jsonl",
            "--queries",
            questions,
            "--model",
            "minilm",
            "--out",
            "profile.json",
            "--no-progress",
            cwd=folder,
        )
    )
    return json.loads((folder / "profile.json").read_text())


def test_the_llama_index_install_has_no_langchain_and_no_milvus(llama_index_env: Venv) -> None:
    installed = llama_index_env.distributions()
    assert "llama-index-core" in installed
    unwanted = {d for d in installed if d.startswith("langchain") or d in MILVUS}
    assert not unwanted


LLAMA_INDEX_WITHOUT_MILVUS = """
from llama_index.core import VectorStoreIndex
from llama_index.core.schema import TextNode

import llama_index_thresholded
from llama_index_thresholded import ThresholdedRetriever, load_embed_model
from thresholded import RetrievalPolicy

embed_model = load_embed_model("minilm")
nodes = [
    TextNode(text="Refunds are paid within 14 days of the request."),
    TextNode(text="Invoices are emailed monthly."),
]
index = VectorStoreIndex(nodes, embed_model=embed_model)  # a SimpleVectorStore
retriever = ThresholdedRetriever(index, policy=RetrievalPolicy(min_similarity=0.33))
kept = retriever.retrieve("How do I get my money back?")
print(kept[0].node.get_content())
print(len(retriever.retrieve("What's the weather in Mumbai today?")))
"""


def test_llama_index_retrieves_over_a_simple_vector_store_without_milvus(
    llama_index_env: Venv, tmp_path: Path
) -> None:
    result = _check(
        llama_index_env.run(
            llama_index_env.python, "-", cwd=tmp_path, stdin=LLAMA_INDEX_WITHOUT_MILVUS
        )
    )
    assert result.stdout.splitlines() == ["Refunds are paid within 14 days of the request.", "0"]
    profile = _calibrate(llama_index_env, tmp_path)
    assert profile["embedding_model"] == "sentence-transformers/all-MiniLM-L6-v2@384"
