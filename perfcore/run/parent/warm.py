"""Loading what finishing a run needs while the script runs: the parent is idle until the script ends,
and after it only the real work should remain (numpy, pandas and the report code cost ~1-2 s to import
on a 2-core machine, as much as a short script's run)."""

from __future__ import annotations

from perfcore.run.warm_up import NICE_INCREMENT
from perfcore.run.warm_up import WarmUp as _WarmUp

__all__ = ["WarmUp", "FINISH_MODULES"]

# What finish_run and the terminal summary import, heaviest first (the most saved if the script ends early).
FINISH_MODULES = (
    "numpy",
    "pandas",
    "perfcore.report.reader",
    "perfcore.run.parent.finish",
    "perfcore.recording.replay",
    "perfcore.run.part_files",
    "perfcore.report.terminal",
    "perfcore.analysis.advice",
    "perfcore.analysis.memory",
    "perfcore.analysis.interference",
    "perfcore.report.chrome_trace",
    "perfcore.report.plots",
    "perfcore.report.html",
    "PIL.Image",
    "PIL.ImageDraw",
    "PIL.ImageFont",
    "PIL.PngImagePlugin",
    "pyarrow.parquet",  # steps.parquet, when pyarrow is installed
)


def _warm_fonts() -> str:
    from perfcore.report.raster import warm_fonts

    warm_fonts()
    return "fonts"


class WarmUp(_WarmUp):
    """FINISH_MODULES, then the chart font. stop() asks it to end after the module it is on and waits
    for that: the main thread then imports whatever is left itself, at its own priority, so a warm-up
    the script outran costs nothing."""

    def __init__(self, modules: tuple[str, ...] = FINISH_MODULES, nice: int = NICE_INCREMENT):
        super().__init__(modules, nice, after=_warm_fonts)
