"""The three ways to choose a threshold, and their defaults.

- ``never-lose``: under the lowest answering score, by a margin (default 0.02).
- ``loss-budget``: the highest threshold that loses at most ``max_loss`` of each
  pair's answers (margin 0 by default: the budget is the safety).
- ``separate``: the midpoint of the gap between answers and unrelated questions,
  only where there is one.

The floor and the gate use the same modes; each has its own margin.
"""

from __future__ import annotations

import math
import numbers
from typing import Literal

__all__ = [
    "DEFAULT_MARGIN",
    "DEFAULT_MAX_LOSS",
    "MODES",
    "Mode",
    "check_params",
    "in_force",
    "margin_of",
]

Mode = Literal["never-lose", "loss-budget", "separate"]
MODES: tuple[Mode, ...] = ("never-lose", "loss-budget", "separate")
DEFAULT_MARGIN: dict[str, float] = {"never-lose": 0.02, "loss-budget": 0.0, "separate": 0.0}
"""Margin under a threshold when none is given: never-lose keeps 0.02 below the lowest
answer; loss-budget's safety is the budget itself, cross-validated."""
DEFAULT_MAX_LOSS = 0.005


def margin_of(mode: Mode, margin: float | None) -> float:
    """The margin a mode uses: the one given, else the mode's default."""
    return DEFAULT_MARGIN[mode] if margin is None else margin


def in_force(threshold: float | None) -> float:
    """The cosine a floor or gate cuts below, as a policy applies it: None and 0 turn the
    floor and the gate off (they cut nothing, not even a negative cosine)."""
    return -math.inf if threshold is None or threshold == 0.0 else threshold


def check_params(
    mode: str, margin: float | None, max_loss: float, gate_margin: float | None = None
) -> None:
    """Refuse an unknown mode, or a margin or budget that is not a number in [0, 1), before
    any work."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")
    for name, value in (("margin", margin), ("gate_margin", gate_margin), ("max_loss", max_loss)):
        if value is not None:
            _check_share(name, value)


def _check_share(name: str, value: object) -> None:
    """A margin or a budget: a number in [0, 1) (a string such as ``"0.02"`` or a bool is
    refused by name, not compared)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number in [0, 1), got {value!r}")
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must lie in [0, 1), got {value}")
