"""Thresholded retrieval: drop what is clearly unrelated before it reaches the prompt.

What an application needs whichever framework it uses: the policy, the report of
a call, score kinds and metrics, calibration, the embedding models' measured floors
and the errors. The retrievers live in the adapters, ``llama_index_thresholded`` and
``langchain_thresholded``; what an adapter author needs (candidates, the selection
rules, the engine) is in :mod:`thresholded.core`.
"""

from thresholded import metadata_keys
from thresholded.calibration import calibrate
from thresholded.errors import (
    CollectionNotFoundError,
    DimensionMismatchError,
    FieldNotFoundError,
    InexactFilterError,
    ModelMismatchError,
    ModelWeightsNotFoundError,
    NonCosineScoreError,
    NotUnitVectorError,
    PolicyFileError,
    ProfileError,
    RetrieverClosedError,
    ScoreRangeError,
    SearchUnavailableError,
    ThresholdedError,
    UncalibratedModelError,
    UnsafeFilterError,
    UnsupportedMetricError,
)
from thresholded.models import KNOWN_FLOORS, ModelId, default_floor
from thresholded.policy import RetrievalPolicy
from thresholded.profile import CalibrationProfile
from thresholded.report import DroppedItem, MultiCollectionReport, Report
from thresholded.retry import RetryPolicy
from thresholded.scores import Metric, ScoreKind, to_cosine
from thresholded.selection import AttachedRole, DropReason

__all__ = [
    "KNOWN_FLOORS",
    "AttachedRole",
    "CalibrationProfile",
    "CollectionNotFoundError",
    "DimensionMismatchError",
    "DropReason",
    "DroppedItem",
    "FieldNotFoundError",
    "InexactFilterError",
    "Metric",
    "ModelId",
    "ModelMismatchError",
    "ModelWeightsNotFoundError",
    "MultiCollectionReport",
    "NonCosineScoreError",
    "NotUnitVectorError",
    "PolicyFileError",
    "ProfileError",
    "Report",
    "RetrievalPolicy",
    "RetrieverClosedError",
    "RetryPolicy",
    "ScoreKind",
    "ScoreRangeError",
    "SearchUnavailableError",
    "ThresholdedError",
    "UncalibratedModelError",
    "UnsafeFilterError",
    "UnsupportedMetricError",
    "calibrate",
    "default_floor",
    "metadata_keys",
    "to_cosine",
]
