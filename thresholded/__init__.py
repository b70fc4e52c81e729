"""Thresholded retrieval: drop what is clearly unrelated before it reaches the prompt.

The framework-free core: the policy, the selection, score kinds and metrics, and
the embedding models' measured floors. Adapters live in ``llama_index_thresholded``
and ``langchain_thresholded``.
"""

from thresholded import metadata_keys
from thresholded.calibration import calibrate
from thresholded.errors import (
    CollectionNotFoundError,
    DimensionMismatchError,
    ModelMismatchError,
    ModelWeightsNotFoundError,
    NonCosineScoreError,
    NotUnitVectorError,
    PolicyFileError,
    ProfileError,
    SearchUnavailableError,
    ThresholdedError,
    UncalibratedModelError,
    UnsafeFilterError,
    UnsupportedMetricError,
)
from thresholded.models import KNOWN_FLOORS, ModelId, default_floor
from thresholded.policy import RetrievalPolicy
from thresholded.profile import CalibrationProfile
from thresholded.retry import RetryPolicy
from thresholded.scores import Metric, ScoreKind, to_cosine
from thresholded.selection import (
    AttachedRole,
    Candidate,
    Dropped,
    DropReason,
    Selection,
    attach,
    select,
)

__all__ = [
    "KNOWN_FLOORS",
    "AttachedRole",
    "CalibrationProfile",
    "Candidate",
    "CollectionNotFoundError",
    "DimensionMismatchError",
    "DropReason",
    "Dropped",
    "Metric",
    "ModelId",
    "ModelMismatchError",
    "ModelWeightsNotFoundError",
    "NonCosineScoreError",
    "NotUnitVectorError",
    "PolicyFileError",
    "ProfileError",
    "RetrievalPolicy",
    "RetryPolicy",
    "ScoreKind",
    "SearchUnavailableError",
    "Selection",
    "ThresholdedError",
    "UncalibratedModelError",
    "UnsafeFilterError",
    "UnsupportedMetricError",
    "attach",
    "calibrate",
    "default_floor",
    "metadata_keys",
    "select",
    "to_cosine",
]
