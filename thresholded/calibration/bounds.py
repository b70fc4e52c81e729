"""Upper bounds of a loss rate: exact binomial, and a bootstrap over articles."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["article_bootstrap_upper", "clopper_pearson_upper"]


def clopper_pearson_upper(lost: int, n: int, confidence: float = 0.95) -> float:
    """One-sided exact binomial upper bound of a loss rate seen as ``lost`` of ``n``."""
    if n <= 0:
        return 1.0
    if lost >= n:
        return 1.0
    alpha = 1.0 - confidence

    def cdf(p: float) -> float:
        if p <= 0.0:
            return 1.0
        if p >= 1.0:
            return 0.0
        log_p, log_q = math.log(p), math.log1p(-p)
        return sum(
            math.exp(
                math.lgamma(n + 1)
                - math.lgamma(k + 1)
                - math.lgamma(n - k + 1)
                + k * log_p
                + (n - k) * log_q
            )
            for k in range(lost + 1)
        )

    lo, hi = lost / n, 1.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if cdf(mid) > alpha:
            lo = mid
        else:
            hi = mid
    return hi


def article_bootstrap_upper(
    per_n: np.ndarray,
    per_lost: np.ndarray,
    *,
    confidence: float = 0.95,
    rounds: int = 2000,
    rng: np.random.Generator,
) -> float:
    """Upper quantile of the pooled loss when whole articles are resampled.

    Questions of one article tend to fail together, so they move together here.
    """
    if not per_n.size or rounds <= 0:
        return 0.0
    pick = rng.integers(0, per_n.size, size=(rounds, per_n.size))
    ratio = per_lost[pick].sum(axis=1) / np.maximum(per_n[pick].sum(axis=1), 1)
    return float(np.quantile(ratio, confidence))
