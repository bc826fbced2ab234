"""report.html's "On the GPU" section of a run: top kernels and their categories, copies by direction
(pageable bytes apart), power and temperature per step, and the capture's own statistics."""

from __future__ import annotations

from perfcore.analysis.run_report import RunReport
from perfcore.report.charts import COLORS
from perfcore.report.html_parts import esc, num, table

__all__ = ["gpu_section"]


def gpu_section(r: RunReport) -> str:
    """On a GPU: top kernels, kernel categories, copies by direction (pageable bytes), capture statistics."""
    parts = []
    ks = r.kernels
    cats = r.kernel_categories
    if ks:
        cat_total = sum(float(c.ms or 0) for c in cats.values())
        total = cat_total or sum(float(k.total_ms or 0) for k in ks) or 1.0
        what = "of all kernel time" if cat_total else f"of the top {len(ks)} kernels' time"
        rows = [
            [
                f"<span title='{esc(k.name)}'>{esc(k.name[:100])}</span>",
                esc(k.count),
                num(k.total_ms),
                num(k.mean_us, ".1f"),
                f"{100 * float(k.total_ms or 0) / total:.1f}% "
                f"<span class='hbar' style='background:{COLORS['compute']};width:"
                f"{80 * float(k.total_ms or 0) / total:.0f}px'></span>",
            ]
            for k in ks
        ]
        parts.append(
            f"<h3>Top kernels</h3>{table(['kernel', 'calls', 'total ms', 'mean µs', 'share ' + what], rows, {1, 2, 3})}"
        )
    if cats:
        rows = [[esc(c), num(v.ms), f"{100 * float(v.share or 0):.1f}%"] for c, v in cats.items()]
        parts.append(f"<h3>Kernel categories</h3>{table(['category', 'ms', 'share'], rows, {1, 2})}")
    by = r.memcpy.by_direction if r.memcpy is not None else {}
    if by:
        rows = [
            [
                esc(d),
                esc(v.count if v.count is not None else ""),
                f"{float(v.bytes) / 2**20:.1f}",
                num(v.ms),
                f"{float(v.pageable_bytes) / 2**20:.1f}",
                num(v.pageable_ms),
            ]
            for d, v in by.items()
        ]
        parts.append(
            "<h3>Copies by direction</h3>"
            + table(["direction", "count", "MiB", "ms", "pageable MiB", "pageable ms"], rows, {1, 2, 3, 4, 5})
        )
    per_step = r.monitor.per_step if r.monitor is not None else {}
    names = {"power_w": ("power", "W"), "temp_c": ("temperature", "°C")}
    rows = [
        [
            esc(names[k][0]),
            *(f"{num(getattr(v, s), '.1f')} {names[k][1]}" for s in ("mean", "min", "max")),
            esc(v.steps),
        ]
        for k, v in per_step.items()
        if k in names
    ]
    if rows:
        parts.append(
            "<h3>Power and temperature (per-step means, sampled)</h3>"
            + table(["", "mean", "lowest step", "highest step", "steps sampled"], rows, {1, 2, 3, 4})
        )
    cap = {
        k: v for k, v in (r.capture.stats if r.capture is not None else {}).items() if isinstance(v, (int, float, str))
    }
    if ks or by or any(k in cap for k in ("records", "dropped", "dropped_records", "buffers")):
        rows = [
            [
                esc(k.replace("_", " ")),
                esc(f"{v:,}" if isinstance(v, int) else f"{v:.4g}" if isinstance(v, float) else v),
            ]
            for k, v in cap.items()
        ]
        parts.append(f"<h3>Capture</h3>{table(['', ''], rows)}")
    return ("<h2>On the GPU</h2>" + "".join(parts)) if parts else ""
