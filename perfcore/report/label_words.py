"""What each label's time is and how it was measured, in words, and the few findings every report quotes
beside a verdict (start-up, the machine's interference, a gain): the leaf the other *_words modules
build on. Made from the facts analysis keeps; nothing here decides."""

from __future__ import annotations

from typing import Any, Mapping

from perfcore.analysis.results import Interference, Startup
from perfcore.analysis.uncertainty import LEVEL
from perfcore.analysis.units import fmt_band, fmt_ms, fmt_share, fmt_x

__all__ = [
    "WHAT",
    "what_of",
    "how_of",
    "gain_words",
    "speedups_words",
    "evidence_words",
    "startup_sentence",
    "interference_sentence",
    "interference_detail",
]

# What each avoidable label's time is, in a few words (the terminal's short lines).
WHAT = {
    "load": "waiting for data",
    "transfer": "copying data",
    "comm": "communication",
    "host": "time outside the model",
}
# What the time is, at length, and how the attribution measured it (GPU, no GPU).
_LONG = {
    "load": (
        "waiting for data",
        "the host waits in the DataLoader's next() while no GPU work runs",
        "the loop waits in the DataLoader's next()",
    ),
    "transfer": (
        "host-to-device copies not hidden by compute",
        "copy time with no kernel running",
        "time in the copy phase",
    ),
    "comm": (
        "collective communication not hidden by compute",
        "collective kernels with no compute kernel running",
        "time inside collectives",
    ),
    "host": (
        "host gaps (the GPU idles while Python, launches or syncs run)",
        "step time no kernel, copy or data wait covers",
        "step time outside loading, copies and the model's forward/backward/optimizer",
    ),
}
# Without a GPU, host is everything outside the timed phases: tensor math the loop runs outside
# modules (a functional loss, zero_grad, a manual parameter update, metrics) lands there beside
# Python and logging, and the hooks cannot tell them apart, so the words say both.
_CPU_HOST = (
    "time outside the model's modules, backward and optimizer (on a CPU this holds tensor math run "
    "outside modules, such as a functional loss, zero_grad or a manual parameter update, as well as "
    "Python and logging)"
)
# How a label was measured where an experiment replaced the attribution's figure, by its code.
_MEASURED_BY = {"synthetic": "the step time saved with synthetic data (experiment A)"}


def what_of(label: str, on_gpu: bool = True) -> str:
    """What an avoidable label's time is, in words (a check says what its experiment removed)."""
    if label == "host" and not on_gpu:
        return _CPU_HOST
    return _LONG[label][0]


def how_of(label: str, on_gpu: bool, measured_by: str | None = None) -> str:
    """How the label's time was measured: an experiment's code, else the attribution's definition."""
    if measured_by:
        return _MEASURED_BY.get(measured_by, measured_by)
    return _LONG[label][1] if on_gpu else _LONG[label][2]


# A speedup band's top past this many times says only that the noise leaves the top open.
OPEN_TOP_X = 10.0


def speedups_words(band: Any) -> str:
    """A band of speedups: "1.70-1.95x", or "1.70x or more" when nothing would be left at its top or the
    top is past OPEN_TOP_X (a busy run's "1.16-31.86x" reads as a figure; its top only says "no limit here")."""
    if not band or band[0] is None:
        return ""
    open_top = band[1] is None or band[1] > OPEN_TOP_X
    return f"{fmt_x(band[0])} or more" if open_top else fmt_band(band[0], band[1])


def gain_words(speedup: float | None, band: Any = None) -> str:
    """A speedup with its band: "up to 1.92x faster (1.80-2.05x)"; empty without a finite speedup above 1x
    (nothing below it is a gain)."""
    if speedup is None or not speedup > 1.0:
        return ""
    ok = band and band[0] is not None and band[1] is not None and band[0] != band[1]
    return f"up to {fmt_x(speedup)} faster" + (f" ({fmt_band(*band)})" if ok else "")


def evidence_words(f: Mapping[str, Any]) -> str:
    """A cause's evidence: its ms of the step, its share (with the interval) and how it was measured. f:
    label, ms_per_step, step_ms, share, share_band (or None), on_gpu, measured_by (or None)."""
    band = f.get("share_band")
    bnd = f", {100 * LEVEL:.0f}% interval {fmt_band(band[0], band[1], fmt_share)}" if band else ""
    how = how_of(str(f["label"]), bool(f.get("on_gpu")), f.get("measured_by"))
    return (
        f"{fmt_ms(float(f['ms_per_step']))} of a {fmt_ms(float(f['step_ms']))} step "
        f"({fmt_share(float(f['share']))}{bnd}), measured as {how}"
    )


def startup_sentence(su: Startup) -> str:
    """Start-up against the run (verdict.startup_share's figures)."""
    first, steps = su.first_step_ms, su.steps
    steady = su.steady_step_ms
    return (
        f"{fmt_ms(su.time_to_first_step_ms)} from launch to the end of the first step"
        + (
            f" (which took {fmt_ms(float(first))}" + (f"; a steady one {fmt_ms(steady)})" if steady and steps else ")")
            if first
            else ""
        )
        + f" is {fmt_share(su.share_of_run)} of this run"
        + (f" of {steps} steps; a longer run dilutes it" if steps else "")
    )


def interference_detail(f: Interference) -> str:
    """Who used the machine during the run: this run's main process and workers, other processes, the run
    queue and the main process's preemptions."""
    if f.others_cores is None or f.main_cores is None:
        return ""
    runq, n = f.run_queue_mean, f.main_processes
    preempted = f.main_nonvoluntary_per_s
    return (
        (
            f"this run's {n} training processes used {f.main_cores:.1f} core(s)"
            if isinstance(n, int) and n > 1
            else f"this run's main process used {f.main_cores:.1f} core(s) and its workers "
            f"{float(f.workers_cores or 0):.1f}"
        )
        + f"; other processes {f.others_cores:.1f} of {f.cores}"
        + (f"; {runq:.1f} tasks runnable on average" if runq is not None else "")
        + (f"; the main process was preempted {float(preempted):.0f} times a second" if preempted is not None else "")
    )


def interference_sentence(f: Interference) -> str:
    """The finding in one sentence from its reasons (codes) and figures."""
    said = {
        "others": lambda: f"other processes used {f.others_cores:.1f} of {f.cores} cores during this run",
        "steal": lambda: f"the hypervisor took {fmt_share(float(f.steal_share or 0))} of the CPU time (steal)",
        "gpu": lambda: f"{f.gpu_other_processes} other process(es) used the GPU",
    }
    parts = [said[r]() for r in f.reasons if r in said]
    if parts:
        return "; ".join(parts) + ": step times are inflated and the verdict is uncertain"
    return f"no material interference ({interference_detail(f)})"
