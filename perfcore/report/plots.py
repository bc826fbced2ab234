"""PNG plots of a run: the binned breakdown over time, the top kernels, heatmaps, ranks, transfer curves.
Drawn on matplotlib Figures with the Agg canvas directly: never pyplot, so the user's GUI backend
(MPLBACKEND, matplotlibrc, Jupyter's inline) is neither needed nor changed."""
from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from perfcore.analysis.attribution import LABELS
from perfcore.analysis.bins import BINS, OUTLIER_FACTOR
from perfcore.report.charts import COLORS

__all__ = ["plot_breakdown", "plot_kernels"]


def _import_matplotlib() -> None:
    """import matplotlib even when MPLBACKEND names a backend it rejects (e.g. Qt4Agg): that value is
    set aside for the import only (perfcore draws on Agg either way) and put back for the user."""
    if "matplotlib" in sys.modules:
        return
    try:
        import matplotlib  # noqa: F401
    except ValueError:
        for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
            del sys.modules[name]
        saved = os.environ.pop("MPLBACKEND", None)
        try:
            import matplotlib  # noqa: F401,F811
        finally:
            if saved is not None:
                os.environ["MPLBACKEND"] = saved


class _Figures:
    """What the plots need of pyplot (subplots, close), on standalone Figures."""

    @staticmethod
    def subplots(nrows: int = 1, ncols: int = 1, figsize=None, dpi=None, **kw):
        _import_matplotlib()
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=figsize, dpi=dpi)
        FigureCanvasAgg(fig)
        return fig, fig.subplots(nrows, ncols, **kw)

    @staticmethod
    def close(fig) -> None:
        fig.clear()  # not registered with pyplot: nothing else holds it


def _plt() -> type[_Figures]:
    return _Figures


def _ms_axis(ax, axis: str = "y") -> None:
    """Tick labels in ms, or s from a second up; never an offset or exponent (".83e+04")."""
    from matplotlib.ticker import FuncFormatter

    def label(v, _pos):
        if abs(v) >= 1000:
            return f"{v / 1000:g} s"
        return f"{v:g} ms" if v else "0"

    (ax.yaxis if axis == "y" else ax.xaxis).set_major_formatter(FuncFormatter(label))


def _step_axis(ax) -> None:
    """Step numbers that fit under their tick at any run length: 900, 20k, 1.5M."""
    from matplotlib.ticker import FuncFormatter

    def label(v, _pos):
        if abs(v) >= 1e6:
            return f"{v / 1e6:g}M"
        return f"{v / 1e3:g}k" if abs(v) >= 1e4 else f"{v:g}"

    ax.xaxis.set_major_formatter(FuncFormatter(label))


def _title(ax, text: str, width: int = 110) -> None:
    """A title that fits: wrapped to two lines at most, the rest cut with an ellipsis."""
    lines = textwrap.wrap(text, width) or [""]
    if len(lines) > 2:
        lines = [lines[0], lines[1][: width - 1] + "…"]
    ax.set_title("\n".join(lines), fontsize=9 if len(lines) > 1 else 10)


def _save(fig, path) -> None:
    """Atomically (temporary file, then rename): a reader never sees half a PNG."""
    from perfcore.report import jsonio

    with jsonio.atomic_path(Path(path)) as tmp:
        fig.savefig(tmp)


def plot_breakdown(steps: pd.DataFrame, path: Path, title: str = "", bins: int = BINS) -> Path:
    """Where the step time goes over the run, binned: stacked bars of each bin's mean ms per label (one
    bar per step for short runs), its median and p90 step time as lines, warm-up shaded, outliers
    marked. A fixed number of artists, so the cost does not grow with the run."""
    from perfcore.analysis.bins import bin_steps, outliers

    plt = _plt()
    b = bin_steps(steps, bins)
    out = outliers(steps)
    fig, ax = plt.subplots(figsize=(10, 4.2), dpi=110)
    per_step = bool(len(b)) and int(b["steps"].max()) == 1
    x = b["first_step"].to_numpy(dtype=float)
    width = (b["last_step"].to_numpy(dtype=float) - x + 1) * (0.85 if per_step and len(b) <= 60 else 1.0)
    bottom = np.zeros(len(b))
    edges = np.append(x, x[-1] + width[-1]) if len(b) else np.zeros(1)
    for lb in LABELS:
        h = b[f"{lb}_ms"].to_numpy()
        if len(b) <= 60:  # separate bars: one collection of rectangles per label (a patch each costs ~2 ms)
            _bars(ax, x, width, bottom, h, COLORS[lb], lb)
        else:  # one filled outline per label instead of a patch per bar: the same picture, far cheaper
            ax.stairs(bottom + h, edges, baseline=bottom, fill=True, color=COLORS[lb], label=lb, linewidth=0)
        bottom = bottom + h
    if not per_step:
        mid = x + width / 2
        ax.plot(mid, b["median_ms"], color="#111", lw=1, label="median step")
        ax.plot(mid, b["p90_ms"], color="#111", lw=1, ls=":", label="p90 step")
    top = float(max(bottom.max(initial=0.0), b["p90_ms"].max() if len(b) else 0.0)) * 1.25 or 1.0
    if len(b) and b["warmup"].any():
        last_warm = float(b.loc[b["warmup"], "last_step"].max()) + 1
        ax.axvspan(x[0], last_warm, color="#555", alpha=0.12, lw=0, label="warm-up")
    if len(out):
        n_all = out.attrs.get("count", len(out))
        ax.scatter(out["step"], np.minimum(out["wall_ms"], top * 0.97), marker="v", s=14, color="#c00", zorder=3,
                   label=f"{n_all} outlier step(s) > {OUTLIER_FACTOR:g}x median"
                         + (f" ({len(out)} slowest shown)" if n_all > len(out) else ""))
    if len(b):
        ax.set_xlim(x[0], x[-1] + width[-1])
        ax.set_ylim(0, top)
    ax.set_xlabel("step" if per_step else f"step ({len(b)} bins of ~{int(b['steps'].median())} steps: mean per label)")
    ax.set_ylabel("per step")
    _ms_axis(ax)
    _step_axis(ax)
    _title(ax, title or "where each step's time goes")
    ax.legend(ncol=5, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.17), frameon=False)
    # Fixed margins for this fixed-size figure (tight_layout would draw it once more to measure):
    # room for "1.5 s"-wide tick labels, the two-line title and the legend below.
    fig.subplots_adjust(left=0.085, right=0.975, top=0.87, bottom=0.25)
    _save(fig, path)
    plt.close(fig)
    return Path(path)


def _bars(ax, x: np.ndarray, width: np.ndarray, bottom: np.ndarray, height: np.ndarray, color: str, label: str) -> None:
    """Stacked-bar segments as one PolyCollection (what ax.bar draws, without an artist per bar)."""
    from matplotlib.collections import PolyCollection

    x0, x1, y0, y1 = x, x + width, bottom, bottom + height
    verts = np.stack([np.stack([x0, y0], 1), np.stack([x0, y1], 1), np.stack([x1, y1], 1), np.stack([x1, y0], 1)], 1)
    ax.add_collection(PolyCollection(verts, facecolors=color, edgecolors="none", linewidths=0, label=label))


def plot_kernels(kernels: list[dict[str, Any]], path: Path) -> Path | None:
    if not kernels:
        return None
    plt = _plt()
    top = kernels[:15][::-1]
    fig, ax = plt.subplots(figsize=(10, 0.35 * len(top) + 1.2), dpi=110)
    labels = [k["name"] if len(k["name"]) <= 70 else k["name"][:67] + "..." for k in top]
    ax.barh(range(len(top)), [k["total_ms"] for k in top], color=COLORS["compute"])
    ax.set_yticks(range(len(top)), labels, fontsize=7)
    ax.set_xlabel("total")
    _ms_axis(ax, "x")
    ax.set_title("top kernels by total time", fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return Path(path)


def plot_heatmaps(configs: pd.DataFrame, out_dir: Path) -> list[Path]:
    """samples/s over batch_size x num_workers, annotated, one PNG per pin_memory/prefetch slice."""

    plt = _plt()
    paths = []
    ok = configs.copy()
    ok["prefetch_factor"] = ok["prefetch_factor"].fillna(0).astype(int)
    vmax = float(ok.loc[~ok["oom"], "samples_per_s"].max()) if (~ok["oom"]).any() else 1.0
    for (pin, pf), g in ok.groupby(["pin_memory", "prefetch_factor"]):
        # Configurations without workers have no prefetch_factor: show them in every slice.
        g = pd.concat([g, ok[(ok["num_workers"] == 0) & (ok["pin_memory"] == pin)]]).drop_duplicates(
            subset=["batch_size", "num_workers"])
        bss = sorted(g["batch_size"].unique())
        nws = sorted(g["num_workers"].unique())
        grid = np.full((len(bss), len(nws)), np.nan)
        oom = np.zeros_like(grid, dtype=bool)
        for _, r in g.iterrows():
            i, j = bss.index(r["batch_size"]), nws.index(r["num_workers"])
            grid[i, j] = r["samples_per_s"]
            oom[i, j] = bool(r["oom"])
        fig, ax = plt.subplots(figsize=(1.2 * len(nws) + 2.5, 0.8 * len(bss) + 1.8), dpi=110)
        im = ax.imshow(np.where(oom, np.nan, grid), cmap="viridis", vmin=0, vmax=vmax, aspect="auto")
        for i in range(len(bss)):
            for j in range(len(nws)):
                txt = "OOM" if oom[i, j] else ("" if np.isnan(grid[i, j]) else f"{grid[i, j]:.0f}")
                ax.text(j, i, txt, ha="center", va="center", color="white" if (grid[i, j] or 0) < 0.6 * vmax else "black",
                        fontsize=9)
        ax.set_xticks(range(len(nws)), [str(n) for n in nws])
        ax.set_yticks(range(len(bss)), [str(b) for b in bss])
        ax.set_xlabel("num_workers")
        ax.set_ylabel("batch_size")
        ax.set_title(f"samples/s  (pin_memory={pin}, prefetch_factor={pf or '-'})", fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.046)
        fig.tight_layout()
        path = Path(out_dir) / f"heatmap_pin{int(pin)}_pf{pf}.png"
        _save(fig, path)
        plt.close(fig)
        paths.append(path)
    return paths


def _stacked_rows(names: list[str], breakdowns: list[dict[str, float]], notes: list[str], path: Path,
                  title: str) -> Path:
    """One horizontal bar per row, split by label, first row on top; `notes` printed at each bar's end."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 0.6 * len(names) + 1.6), dpi=110)
    for j, (bd, note) in enumerate(zip(breakdowns, notes)):
        left = 0.0
        for lb in LABELS:
            v = (bd or {}).get(lb, 0.0)
            ax.barh(j, v, left=left, color=COLORS[lb], label=lb if j == 0 else None)
            left += v
        if note:
            ax.text(left, j, f"  {note}", va="center", fontsize=8)
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("per step")
    _ms_axis(ax, "x")
    _title(ax, title)
    ax.legend(ncol=5, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.25), frameon=False)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return Path(path)


def plot_experiments(experiments: list[dict[str, Any]], path: Path, title: str = "") -> Path:
    """One stacked bar per experiment: mean step time split by label."""
    notes = [f"{e['step_ms']:.1f} ms" if e.get("step_ms") == e.get("step_ms") and e.get("step_ms") is not None
             else "OOM" for e in experiments]
    return _stacked_rows([e["name"] for e in experiments], [e.get("breakdown_ms") for e in experiments], notes,
                         path, title or "experiments")


def plot_timeline(samples: pd.DataFrame, path: Path, title: str = "") -> Path:
    """Sampler rows over time: utilisation (GPU when there is one), CPU %, memory."""
    plt = _plt()
    t = (samples["t_ns"] - samples["t_ns"].iloc[0]) / 1e9 if len(samples) else samples.get("t_ns", [])
    gpu = "gpu_util" in samples
    fig, axes = plt.subplots(2, 1, figsize=(10, 4.8), dpi=110, sharex=True)
    if gpu:
        axes[0].plot(t, 100 * samples["gpu_util"], label="GPU util %", color=COLORS["compute"])
    axes[0].plot(t, samples["cpu_percent"], label="CPU %", color=COLORS["load"])
    axes[0].set_ylabel("%")
    axes[0].set_ylim(0, 105)
    axes[0].legend(fontsize=8, loc="upper right")
    mem_col = "gpu_mem_used_bytes" if gpu else "ram_used_bytes"
    axes[1].plot(t, samples[mem_col] / 2**30, color=COLORS["transfer"])
    axes[1].set_ylabel("GPU memory GiB" if gpu else "RAM used GiB")
    axes[1].set_xlabel("seconds")
    _title(axes[0], title or "perfcore monitor")
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return Path(path)


def plot_ranks(ranks: list[dict[str, Any]], path: Path) -> Path:
    """One stacked bar per rank: mean ms per step by label (a straggler stands out by its colours)."""
    return _stacked_rows([f"rank {r['rank']}" for r in ranks], [r["breakdown_ms"] for r in ranks],
                         [f"{r['step_time_ms']['mean']:.1f} ms" for r in ranks], path, "per-rank breakdown")


def plot_transfer(curve: pd.DataFrame, path: Path, nominal_gbps: float | None = None) -> Path:
    """GB/s against copy size, pinned vs pageable, both directions, with the link's nominal rate."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=110)
    styles = {("h2d", "pinned"): ("-", COLORS["compute"]), ("h2d", "pageable"): ("--", COLORS["compute"]),
              ("d2h", "pinned"): ("-", COLORS["load"]), ("d2h", "pageable"): ("--", COLORS["load"])}
    for (d, mem), g in curve.groupby(["direction", "memory"]):
        ls, c = styles.get((d, mem), ("-", "k"))
        g = g.sort_values("size_bytes")
        ax.plot(g["size_bytes"], g["gbps"], ls, color=c, marker="o", ms=3, label=f"{d} {mem}")
    if nominal_gbps:
        ax.axhline(nominal_gbps, color="#888", lw=1, ls=":", label=f"link nominal {nominal_gbps:.0f} GB/s")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("copy size (bytes)")
    ax.set_ylabel("GB/s")
    ax.set_title("host<->device copy bandwidth", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return Path(path)
