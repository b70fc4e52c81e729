"""Argument types of the subcommands: a bad value is argparse's error naming the option,
before any model loads or any index is built."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def add_passages(parser: argparse.ArgumentParser) -> None:
    """``--passages``, as calibrate and bench both take it: a language code or ``all``."""
    parser.add_argument(
        "--passages",
        default="all",
        help="passage language a search may return: en, de (any language code) or all",
    )


def at_least(minimum: int) -> Callable[[str], int]:
    """A whole number no smaller than ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {text}")
        return value

    return parse


def nonblank(text: str) -> str:
    """A text with something in it: a blank one (an unset shell variable) is refused."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"is blank ({text!r}): give a text, or leave it out")
    return text


def cosine(text: str) -> float:
    """A cosine similarity, in [-1, 1]."""
    value = _number(text)
    if not (math.isfinite(value) and -1.0 <= value <= 1.0):
        raise argparse.ArgumentTypeError(f"must be a cosine similarity in [-1, 1], got {text}")
    return value


def fraction(text: str) -> float:
    """A share, in [0, 1)."""
    value = _number(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must lie in [0, 1), got {text}")
    return value


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
