"""The public names of each package, and the core's independence from the frameworks."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

EXPECTED = {
    "thresholded": {
        "RetrievalPolicy",
        "CalibrationProfile",
        "ScoreKind",
        "Metric",
        "DropReason",
        "Report",
        "MultiCollectionReport",
        "DroppedItem",
        "calibrate",
        "UncalibratedModelError",
        "ModelMismatchError",
    },
    "thresholded.core": {
        "Candidate",
        "Selection",
        "select",
        "attach",
        "Backend",
        "Collection",
        "plan",
        "retrieve",
        "drive",
        "adrive",
    },
    "llama_index_thresholded": {
        "ThresholdedRetriever",
        "SimilarityThresholdPostprocessor",
        "AbstainingQueryEngine",
        "Report",
        "MultiCollectionReport",
        "MultiCollectionRetriever",
        "milvus_store",
        "existing_milvus_store",
    },
    "langchain_thresholded": {
        "ThresholdedRetriever",
        "SimilarityThresholdCompressor",
        "Report",
        "MultiCollectionReport",
        "MultiCollectionRetriever",
        "EVENT_NAME",
        "AbstainingChain",
    },
}


@pytest.mark.parametrize("package", sorted(EXPECTED))
def test_all_names_exist_and_include_the_documented_ones(package: str) -> None:
    module = importlib.import_module(package)
    assert EXPECTED[package] <= set(module.__all__)
    assert len(module.__all__) == len(set(module.__all__))
    for name in module.__all__:
        assert hasattr(module, name), f"{package}.{name} is in __all__ but missing"


@pytest.mark.parametrize("package", ["llama_index_thresholded", "langchain_thresholded"])
def test_the_adapters_report_with_the_core_types(package: str) -> None:
    """One report type: each adapter re-exports the core's, and its own are gone."""
    import thresholded

    module = importlib.import_module(package)
    assert module.Report is thresholded.Report
    assert module.MultiCollectionReport is thresholded.MultiCollectionReport
    for gone in ("RetrievalReport", "ThresholdedReport", "DroppedDocument"):
        assert gone not in module.__all__
        assert not hasattr(module, gone), gone


def test_the_top_level_keeps_what_an_application_needs() -> None:
    """What only an adapter author needs lives in ``thresholded.core``."""
    import thresholded

    for name in ("Candidate", "Selection", "Dropped", "select", "attach"):
        assert name not in thresholded.__all__
        assert not hasattr(thresholded, name), name


def loaded_after(statement: str, packages: set[str]) -> list[str]:
    """The modules of ``packages`` a fresh interpreter holds once ``statement`` has run."""
    code = (
        f"import sys; {statement}; "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {sorted(packages)!r}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return eval(out.stdout)


def test_the_core_imports_no_framework() -> None:
    """Nor does the CLI's parser (``thresholded --help``): it works on any install."""
    statement = (
        "import thresholded, thresholded.cli, thresholded.calibration; "
        "thresholded.cli.build_parser()"
    )
    frameworks = {"llama_index", "langchain_core", "langchain", "llama_index_thresholded"}
    frameworks |= {"langchain_thresholded", "pymilvus", "milvus_lite", "torch"}
    assert loaded_after(statement, frameworks) == []


def test_langchain_thresholded_imports_without_pymilvus() -> None:
    statement = "import langchain_thresholded, langchain_thresholded.milvus"
    assert loaded_after(statement, {"pymilvus", "milvus_lite", "langchain_milvus"}) == []


def test_llama_index_thresholded_imports_without_pymilvus() -> None:
    statement = "import llama_index_thresholded"
    assert loaded_after(statement, {"pymilvus", "milvus_lite", "langchain_core"}) == []
