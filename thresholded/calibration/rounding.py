"""Rounding of measured values: for reports, and down to the threshold grid."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["floor_to", "rounded"]


def rounded(value: Any, digits: int = 4) -> Any:
    """A float (numpy or not) rounded for a report; anything else unchanged."""
    if isinstance(value, float | np.floating):
        return round(float(value), digits)
    return value


def floor_to(value: float, resolution: float) -> float:
    """Round down to the grid, so rounding never eats into the margin or the budget."""
    if resolution <= 0:
        return value
    return round(math.floor(value / resolution + 1e-9) * resolution, 6)
