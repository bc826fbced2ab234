"""A small PNG canvas on Pillow for the run folder's charts (bars, steps, lines, ticks, legend).
matplotlib's import and first figure cost ~1-2 s, more than a short run's whole finish; Pillow (which
matplotlib itself needs, so it is always there) draws the same binned charts in milliseconds."""

from __future__ import annotations

import importlib.util
import math
import textwrap
from functools import lru_cache
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

__all__ = ["Figure", "Panel", "nice_ticks", "ms_label", "step_label", "wrap_title", "warm_fonts"]

SCALE = 2  # drawn at twice the size, then reduced: smooth edges and text without per-primitive antialiasing
AXIS = "#333333"
GRID = "#e3e3e3"


def ms_label(v: float) -> str:
    """A tick in ms, or s from a second up; never an offset or an exponent (".83e+04")."""
    if abs(v) >= 1000:
        return f"{v / 1000:g} s"
    return f"{v:g} ms" if v else "0"


def step_label(v: float) -> str:
    """A step number that fits under its tick at any run length: 900, 20k, 1.5M."""
    if abs(v) >= 1e6:
        return f"{v / 1e6:g}M"
    return f"{v / 1e3:g}k" if abs(v) >= 1e4 else f"{v:g}"


def wrap_title(text: str, width: int = 110) -> str:
    """Two lines at most, the rest cut with an ellipsis."""
    lines = textwrap.wrap(text, width) or [""]
    if len(lines) > 2:
        lines = [lines[0], lines[1][: width - 1] + "…"]
    return "\n".join(lines)


def nice_ticks(lo: float, hi: float, target: int = 6, integer: bool = False) -> list[float]:
    """Round tick values (1, 2, 2.5, 5 x 10^k apart) inside [lo, hi], about `target` of them."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / max(1, target - 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    if integer:
        step = max(1.0, math.ceil(step))
    first = math.ceil(lo / step - 1e-9) * step
    ticks = [round(first + i * step, 10) for i in range(int((hi - first) / step + 1e-9) + 1)]
    return [0.0 if t == 0 else t for t in ticks]


@lru_cache(maxsize=8)
def _font(size_px: int):
    """DejaVu Sans from matplotlib's package data, found without importing matplotlib; Pillow's own
    default font where that file or FreeType is missing (smaller, still legible)."""
    from PIL import ImageFont

    spec = importlib.util.find_spec("matplotlib")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = Path(root) / "mpl-data" / "fonts" / "ttf" / "DejaVuSans.ttf"
        try:
            return ImageFont.truetype(str(path), size_px)
        except (OSError, ImportError):
            continue
    try:
        return ImageFont.load_default(size=size_px)
    except TypeError:  # Pillow < 10.1: the fixed bitmap font
        return ImageFont.load_default()


def _px(size_pt: float) -> int:
    """Points at the saved image's 110 dpi (the matplotlib charts' size) -> pixels on the drawn one."""
    return round(size_pt * 110 / 72 * SCALE)


def warm_fonts() -> None:
    """Load the chart font at the sizes the charts use (FreeType opens and sizes it once each)."""
    for pt in (7, 8, 9, 10):
        _font(_px(pt))


class Figure:
    """One image of width x height pixels (as saved); panels are placed on it in fractions."""

    def __init__(self, width_px: int, height_px: int):
        from PIL import Image, ImageDraw

        self.size = (width_px, height_px)
        self.image = Image.new("RGB", (width_px * SCALE, height_px * SCALE), "white")
        self.draw = ImageDraw.Draw(self.image)
        self.primitives = 0  # drawing calls, each at most a shape per bin: fixed, whatever the run length

    def text(self, xy: tuple[float, float], s: str, size: float = 9, anchor: str = "la", fill: str = AXIS) -> None:
        """`size` in points at the saved image's 110 dpi, as the matplotlib charts had them."""
        self.draw.text(xy, s, font=_font(_px(size)), anchor=anchor, fill=fill)

    def text_width(self, s: str, size: float = 9) -> float:
        return self.draw.textlength(s, font=_font(_px(size))) / SCALE

    def title(self, s: str, y_frac: float, size: float = 10) -> None:
        lines = s.split("\n")
        size = 9 if len(lines) > 1 else size
        step = size * 110 / 72 * 1.25 * SCALE
        y = y_frac * self.image.height - step * len(lines)
        for i, line in enumerate(lines):
            self.text((self.image.width / 2, y + i * step), line, size=size, anchor="ma")

    def legend(self, items: Sequence[tuple[str, str]], y_frac: float, size: float = 8) -> None:
        """Colour swatches and names in one centred row."""
        box, gap = 10 * SCALE, 16 * SCALE
        widths = [box + 5 * SCALE + self.text_width(name, size) * SCALE for _, name in items]
        x = (self.image.width - sum(widths) - gap * (len(items) - 1)) / 2
        y = y_frac * self.image.height
        for (color, name), w in zip(items, widths):
            self.draw.rectangle([x, y, x + box, y + box], fill=color)
            self.text((x + box + 5 * SCALE, y + box / 2), name, size=size, anchor="lm")
            x += w + gap

    def save(self, path: Path) -> None:
        """Atomically (temporary file, then rename): a reader never sees half a PNG."""
        from perfcore import jsonio

        small = self.image.reduce(SCALE)  # a box average of each 2x2: ~10x cheaper than a Lanczos resize
        with jsonio.atomic_path(Path(path)) as tmp:
            small.save(tmp, format="PNG", compress_level=6)


class Panel:
    """A plot box on a Figure (left, top, right, bottom as fractions of it) with data limits."""

    def __init__(self, fig: Figure, box: tuple[float, float, float, float]):
        w, h = fig.image.size
        self.fig, self.draw = fig, fig.draw
        self.x0, self.y0, self.x1, self.y1 = box[0] * w, box[1] * h, box[2] * w, box[3] * h
        self.xlim, self.ylim = (0.0, 1.0), (0.0, 1.0)

    def limits(self, x: tuple[float, float], y: tuple[float, float]) -> None:
        fix = lambda lo, hi: (lo, hi) if hi != lo else (lo - 0.5, lo + 0.5)  # noqa: E731 (hi < lo: inverted)
        self.xlim, self.ylim = fix(*map(float, x)), fix(*map(float, y))

    def px(self, x) -> np.ndarray:
        a, b = self.xlim
        return self.x0 + (np.asarray(x, dtype=np.float64) - a) / (b - a) * (self.x1 - self.x0)

    def py(self, y) -> np.ndarray:
        a, b = self.ylim
        v = self.y1 - (np.asarray(y, dtype=np.float64) - a) / (b - a) * (self.y1 - self.y0)
        return np.clip(v, self.y0, self.y1)

    def inside(self, t: float, lim: tuple[float, float]) -> bool:
        return min(lim) - 1e-9 <= t <= max(lim) + 1e-9

    def rects(self, x0, x1, y0, y1, color: str) -> None:
        """Filled rectangles in data coordinates (one per bar or bin; zero heights skipped)."""
        px0, px1 = np.clip(self.px(x0), self.x0, self.x1), np.clip(self.px(x1), self.x0, self.x1)
        py0, py1 = np.minimum(self.py(y0), self.py(y1)), np.maximum(self.py(y0), self.py(y1))
        keep = (py1 - py0 >= 0.5) & (px1 > px0)
        for a, b, c, d in zip(px0[keep], py0[keep], np.maximum(px1[keep] - 1, px0[keep]), py1[keep]):
            self.draw.rectangle([a, b, c, d], fill=color)
        self.fig.primitives += 1

    def line(self, x, y, color: str, width: float = 1.0) -> None:
        pts = np.stack([self.px(x), self.py(y)], 1)
        pts = pts[np.isfinite(pts).all(1)]
        if len(pts) >= 2:
            self.draw.line([tuple(p) for p in pts], fill=color, width=round(width * SCALE), joint="curve")
        self.fig.primitives += 1

    def dots(self, x, y, color: str, radius: float = 1.6) -> None:
        """A dot per point: a second line beside a solid one (p90 beside the median), told apart at a glance."""
        r = radius * SCALE
        for a, b in zip(self.px(x), self.py(y)):
            if math.isfinite(a) and math.isfinite(b):
                self.draw.ellipse([a - r, b - r, a + r, b + r], fill=color)
        self.fig.primitives += 1

    def markers(self, x, y, color: str, radius: float = 4.0) -> None:
        """Downward triangles (an outlier step)."""
        r = radius * SCALE
        for a, b in zip(self.px(x), self.py(y)):
            self.draw.polygon([(a - r, b - r), (a + r, b - r), (a, b + r)], fill=color)
        self.fig.primitives += 1

    def xaxis(self, ticks: Sequence[float], label: Callable[[float], str], title: str = "", size: float = 8) -> None:
        for t in ticks:
            if self.inside(t, self.xlim):
                x = float(self.px(t))
                self.draw.line([x, self.y1, x, self.y1 + 4 * SCALE], fill=AXIS, width=SCALE)
                self.fig.text((x, self.y1 + 6 * SCALE), label(t), size=size, anchor="mt")
        if title:
            self.fig.text(((self.x0 + self.x1) / 2, self.y1 + 22 * SCALE), title, size=9, anchor="mt")

    def grid(self, yticks: Sequence[float]) -> None:
        """Horizontal lines at the y ticks, drawn first so the data cover them."""
        for t in yticks:
            if self.inside(t, self.ylim):
                y = float(self.py(t))
                self.draw.line([self.x0, y, self.x1, y], fill=GRID, width=SCALE)

    def yaxis(self, ticks: Sequence[float], label: Callable[[float], str], title: str = "", size: float = 8) -> None:
        for t in ticks:
            if self.inside(t, self.ylim):
                y = float(self.py(t))
                self.draw.line([self.x0 - 4 * SCALE, y, self.x0, y], fill=AXIS, width=SCALE)
                self.fig.text((self.x0 - 6 * SCALE, y), label(t), size=size, anchor="rm")
        if title:  # above the axis, right-aligned to it unless that would cut it at the image's edge
            x = max(self.x0 - 4 * SCALE, (self.fig.text_width(title, 8) + 4) * SCALE)
            self.fig.text((x, self.y0 - 6 * SCALE), title, size=8, anchor="rb")

    def frame(self) -> None:
        self.draw.rectangle([self.x0, self.y0, self.x1, self.y1], outline=AXIS, width=SCALE)
