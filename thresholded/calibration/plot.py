"""Plots of a calibration run: score distributions with floor and gate, and both curves.

matplotlib's Agg canvas is used directly (no pyplot, no global backend switch),
imported only when a plot is asked for. The file is written atomically.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from thresholded.files import atomic_write

if TYPE_CHECKING:
    from thresholded.calibration.result import CalibrationResult
    from thresholded.calibration.simple import SimpleCalibrationResult

__all__ = ["plot_result"]


def _panels(result: CalibrationResult | SimpleCalibrationResult) -> list[dict]:
    """One row of the figure per pair: its distributions and its two curves."""
    from thresholded.calibration.result import CalibrationResult

    if not isinstance(result, CalibrationResult):
        return [
            {
                "title": "simple form",
                "good": result.good if result.has_gold else np.empty(0),
                "top": result.good_top,
                "junk": {"should not match": result.junk},
                "floor_curve": result.curve,
                "gate_curve": result.gate_curve,
            }
        ]
    panels = []
    for s in result.pairs:
        origins = np.asarray(s.origins, dtype=object)[~s.answerable]
        panels.append(
            {
                "title": s.pair,
                "good": s.good,
                "top": s.good_top,
                "junk": {o: s.junk[origins == o] for o in sorted(set(origins.tolist()))},
                "floor_curve": result.curves[s.pair],
                "gate_curve": result.gate_curves.get(s.pair, ()),
            }
        )
    return panels


def _distributions(ax, panel: dict, bins: np.ndarray, colour_of: dict[str, str]) -> None:
    if panel["good"].size:
        ax.hist(
            panel["good"],
            bins=bins,
            alpha=0.5,
            color="tab:green",
            label=f"answering passages ({panel['good'].size})",
        )
    ax.hist(
        panel["top"],
        bins=bins,
        histtype="step",
        linewidth=1.8,
        color="tab:blue",
        label=f"answerable top scores ({panel['top'].size})",
    )
    for origin, scores in panel["junk"].items():
        if scores.size:
            ax.hist(
                scores,
                bins=bins,
                histtype="step",
                linewidth=1.6,
                color=colour_of[origin],
                label=f"unrelated top: {origin} ({scores.size})",
            )
    ax.set_title(f"{panel['title']}: cosine scores")
    ax.set_xlabel("cosine")
    ax.set_ylabel("questions")


def _curves(ax, panel: dict) -> None:
    for name, curve, style in (
        ("floor", panel["floor_curve"], "-"),
        ("gate", panel["gate_curve"], "--"),
    ):
        if not curve:
            continue
        x = [p.threshold for p in curve]
        ax.plot(
            x,
            [p.lost_share for p in curve],
            style,
            color="tab:green",
            label=f"{name}: answers lost",
        )
        ax.plot(
            x,
            [p.emptied_share for p in curve],
            style,
            color="tab:red",
            label=f"{name}: unrelated emptied",
        )
    ax.set_title(f"{panel['title']}: what each threshold costs and buys")
    ax.set_xlabel("threshold")
    ax.set_ylabel("share")
    ax.set_ylim(-0.02, 1.02)


def plot_result(result: CalibrationResult | SimpleCalibrationResult, path: str | Path) -> Path:
    """Write a PNG: distributions with floor and gate, and the lost/emptied curves of each."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    path = Path(path)
    panels = _panels(result)
    fig = Figure(figsize=(12, 3.6 * len(panels)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(panels), 2, squeeze=False)
    values = [v for p in panels for v in [p["good"], p["top"], *p["junk"].values()] if v.size]
    bins = np.linspace(
        min(float(v.min()) for v in values) - 0.02, max(float(v.max()) for v in values) + 0.02, 61
    )
    palette = ("tab:red", "tab:orange", "tab:purple", "tab:brown", "tab:pink", "tab:gray")
    origins = sorted({o for p in panels for o in p["junk"]})
    colour_of = {o: palette[i % len(palette)] for i, o in enumerate(origins)}
    for row, panel in enumerate(panels):
        left, right = axes[row]
        _distributions(left, panel, bins, colour_of)
        _curves(right, panel)
        for ax in (left, right):
            for name, value, style in (
                ("floor", result.threshold, ":"),
                ("gate", result.gate, "--"),
            ):
                if value is not None:
                    ax.axvline(value, color="black", linestyle=style, label=f"{name} {value:.2f}")
            ax.legend(fontsize=7)
    fig.suptitle(f"{result.model_id}, passages: {result.passages}, mode: {result.mode}")
    _save(fig, path)
    return path


def _save(fig, path: Path) -> None:
    """The plot, written all at once or not at all (see ``thresholded.files``)."""
    atomic_write(path, lambda handle: fig.savefig(handle, format="png", dpi=110))
