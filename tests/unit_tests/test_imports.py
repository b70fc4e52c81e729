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
        "Selection",
        "Candidate",
        "select",
        "attach",
        "calibrate",
        "UncalibratedModelError",
        "ModelMismatchError",
    },
    "llama_index_thresholded": {
        "ThresholdedRetriever",
        "SimilarityThresholdPostprocessor",
        "AbstainingQueryEngine",
        "RetrievalReport",
        "MultiCollectionRetriever",
    },
    "langchain_thresholded": {
        "ThresholdedRetriever",
        "SimilarityThresholdCompressor",
        "ThresholdedReport",
    },
}


@pytest.mark.parametrize("package", sorted(EXPECTED))
def test_all_names_exist_and_include_the_documented_ones(package: str) -> None:
    module = importlib.import_module(package)
    assert EXPECTED[package] <= set(module.__all__)
    assert len(module.__all__) == len(set(module.__all__))
    for name in module.__all__:
        assert hasattr(module, name), f"{package}.{name} is in __all__ but missing"


def test_the_core_imports_no_framework() -> None:
    code = (
        "import sys, thresholded, thresholded.cli, thresholded.calibration;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'llama_index', 'langchain_core', 'langchain', 'llama_index_thresholded', "
        "'langchain_thresholded'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
