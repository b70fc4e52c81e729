"""Errors raised by the package; each names what is wrong and how to fix it."""

from __future__ import annotations


class ThresholdedError(Exception):
    """Base class of every error this package raises on purpose."""


class UncalibratedModelError(ThresholdedError, LookupError):
    """No threshold is known for the embedding model in use: calibrate first."""


class ModelMismatchError(ThresholdedError, ValueError):
    """A threshold measured for one embedding model was used with another."""


class UnsupportedMetricError(ThresholdedError, ValueError):
    """A score whose metric cannot be turned into a cosine similarity."""


class NotUnitVectorError(ThresholdedError, ValueError):
    """Inner product on vectors that are not unit length is not a cosine."""


class ScoreRangeError(ThresholdedError, ValueError):
    """A store's score reads as a cosine outside [-1, 1]: the vectors are not unit length, or
    the metric is not the store's."""


class DimensionMismatchError(ThresholdedError, ValueError):
    """The query vector's dimension differs from the collection's."""


class FieldNotFoundError(ThresholdedError, ValueError):
    """A collection has no field under the name a store expects; ``argument`` is the
    store's setting that names another one (``vector_field``, ``text_field``)."""

    def __init__(self, fact: str, *, argument: str, advice: str | None = None) -> None:
        super().__init__(f"{fact}: {advice or f'pass {argument}=...'}")
        self.fact, self.argument = fact, argument


class NonCosineScoreError(ThresholdedError, ValueError):
    """A non-cosine score reached a cosine floor while strict checking is on."""


class ModelWeightsNotFoundError(ThresholdedError, FileNotFoundError):
    """An embedding model's weights are not on disk and no hub can be reached."""


class ProfileError(ThresholdedError, ValueError):
    """A calibration profile is corrupt, of an unknown version, or does not fit."""


class PolicyFileError(ThresholdedError, ValueError):
    """A stored policy is not JSON, not a JSON object, or names a field twice."""


class CollectionNotFoundError(ThresholdedError, LookupError):
    """A collection that was asked for by name does not exist."""


class SearchUnavailableError(ThresholdedError, ConnectionError):
    """The vector store did not answer: down, restarting or frozen, after every retry."""

    def __init__(self, message: str, *, attempts: int = 1) -> None:
        super().__init__(message)
        self.attempts = attempts


class MissingExtraError(ThresholdedError, ImportError):
    """A feature needs an optional extra that is not installed; the message has the pip line."""


class UnsafeFilterError(ThresholdedError, ValueError):
    """A filter that could change the meaning of a query, or that means nothing: refused
    before any request is sent."""


class InexactFilterError(ThresholdedError, RuntimeError):
    """The store could not apply a call's filters exactly, and even its widest search held
    too few sections within them: the result could lack some, so none is returned."""


class RetrieverClosedError(ThresholdedError, RuntimeError):
    """A multi-collection retriever was closed (``close()``, the end of its ``with`` block)
    during a call, and the call's searches still waiting for a thread were cancelled. Call it
    again: a closed retriever starts its threads again."""
