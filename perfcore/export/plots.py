"""PNG plots of a run: the stacked per-step breakdown over time, and the top kernels."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..attribution import LABELS
from .html import COLORS

__all__ = ["plot_breakdown", "plot_kernels"]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_breakdown(steps: pd.DataFrame, path: Path, title: str = "") -> Path:
    """Stacked bars, one per step: where each step's wall time went. Warm-up steps are hatched."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 4.2), dpi=110)
    x = steps["step"].to_numpy()
    bottom = pd.Series(0.0, index=steps.index)
    width = 1.0 if len(x) > 60 else 0.85
    for lb in LABELS:
        h = steps[f"{lb}_ms"]
        ax.bar(x, h, bottom=bottom, width=width, color=COLORS[lb], label=lb, linewidth=0)
        bottom = bottom + h
    if "warmup" in steps and steps["warmup"].any():
        w = steps[steps["warmup"]]
        ax.bar(w["step"], w["wall_ms"], width=width, fill=False, hatch="//", edgecolor="#555", linewidth=0,
               label="warm-up")
    ax.set_xlabel("step")
    ax.set_ylabel("ms")
    ax.set_title(title or "where each step's time goes", fontsize=10)
    ax.legend(ncol=6, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.15), frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return Path(path)


def plot_kernels(kernels: list[dict[str, Any]], path: Path) -> Path | None:
    if not kernels:
        return None
    plt = _plt()
    top = kernels[:15][::-1]
    fig, ax = plt.subplots(figsize=(10, 0.35 * len(top) + 1.2), dpi=110)
    labels = [k["name"] if len(k["name"]) <= 70 else k["name"][:67] + "..." for k in top]
    ax.barh(range(len(top)), [k["total_ms"] for k in top], color=COLORS["compute"])
    ax.set_yticks(range(len(top)), labels, fontsize=7)
    ax.set_xlabel("total ms")
    ax.set_title("top kernels by total time", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return Path(path)
