"""The words catalog: every phrase perfcore prints is made here from the facts analysis keeps (nothing
here decides), and the renderers (terminal, stage_text, html, summary) only arrange them. One module a
concern: this one holds what every other builds on, what each label's time is and how it was measured,
the findings every report quotes beside a verdict (start-up, the machine's interference, a gain), a check
of the verdict (analysis.checks.Check), each word chosen from the status beside its number, and `perfcore
env`'s checks (a code and its figures -> the value and the fix); verdict (the verdict, compare, health),
advice (each finding's words and the short report's "try" lines), findings (memory, evaluation, the step
source, the loader plan, a stage's notes, the user's lines per label and the sweep's DataLoader patch) and
runs (how a script ended or saw no step, a run's notes, a capture, a link, a sweep's knee, and several
processes: ranks, nodes, processes side by side)."""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

from perfcore.analysis.checks import Against, Check, Reason
from perfcore.analysis.gain import FALLBACK_REL, FALLBACK_STEP
from perfcore.analysis.results import Interference, Loading, Startup
from perfcore.analysis.status import Agreement, Change
from perfcore.analysis.uncertainty import LEVEL
from perfcore.analysis.units import WIDTH, fmt_band, fmt_ms, fmt_share, fmt_x
from perfcore.capture.environment import Check as EnvCheck

__all__ = [
    "NO_STEPS",
    "WHAT",
    "EXCESS",
    "excess_words",
    "what_of",
    "how_of",
    "gain_words",
    "speedups_words",
    "evidence_words",
    "startup_sentence",
    "interference_sentence",
    "interference_detail",
    "interference_words",
    "check_long",
    "bound_long",
    "check_text",
    "loading_text",
    "readable_frame",
    "compute_shortfall",
    "compute_change",
    "LOADING_CAUSE",
    "WIDTH",
    "LEVEL_WORDS",
    "check_words",
    "driver_older_words",
    "with_words",
    "level_word",
    "fit",
    "fitting",
]


NO_STEPS = "no steps measured"  # what a run says in place of a verdict, where it measured no step
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
# A slow rank's excess, by its label: what it does more of, and why that makes it slower than the others.
EXCESS = {
    "load": ("its DataLoader waits", "its DataLoader keeps it waiting: more workers or a faster source on its node"),
    "compute": (
        "it computes",
        "it computes longer per step: uneven shards or sequence lengths, a slower or shared device, or other "
        "processes on its cores",
    ),
    "transfer": ("it copies", "its copies take longer: pinned memory and non_blocking copies on its node"),
    "host": (
        "it spends outside the timed phases",
        "it spends longer outside the model: logging, metrics or checkpointing done on that rank only",
    ),
}


def excess_words(label: str, why: bool = False) -> str:
    """What a slow rank does more of (why: why that makes it slower), by its excess label; a label this
    version does not know, as it is."""
    return EXCESS[label][why] if label in EXCESS else label


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
    """A speedup with its band: "about 1.92x faster (1.80-2.05x)"; empty without a finite speedup above 1x
    (nothing below it is a gain). "About", not "up to": the band is the estimate's interval and reaches
    past it ("up to 7.53x faster (3.78-25.45x)" read as a bound its own interval broke)."""
    if speedup is None or not speedup > 1.0:
        return ""
    ok = band and band[0] is not None and band[1] is not None and band[0] != band[1]
    return f"about {fmt_x(speedup)} faster" + (f" ({fmt_band(*band)})" if ok else "")


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


def interference_words(f: Interference) -> str:
    """The finding and who used the machine, as a report says it before any number it inflates."""
    return f"{interference_sentence(f)} ({interference_detail(f)})"


def _x(x: float | None, band) -> str:
    b = speedups_words(band)
    return fmt_x(x) + (f" ({b})" if b else "")


def _what(label: str) -> str:
    try:
        return what_of(label)
    except KeyError:  # a label this version does not know (a newer document): its name
        return label or "the cause"


def _busy(c: Check) -> str:
    """Only a measured busy machine is blamed; otherwise the drift is said as unexplained."""
    if c.others_cores is None:
        return "no interference measured"
    of = f" of {c.cores}" if c.cores else ""
    said = f"other processes used {c.others_cores:.1f}{of} cores (measured)"
    return said if c.machine_busy else f"{said}: not a busy machine"


def check_long(c: Check) -> str:
    """The check in one sentence, with every figure behind its status."""
    if c.reason is Reason.NO_MEASUREMENT or c.measured_speedup is None:
        return f"{c.name}: no measurement"
    if c.reason is Reason.ALL_ONE_LABEL:
        return f"{c.name} measured {fmt_x(c.measured_speedup)} (the step is all {_what(c.label)})"
    head = (
        f"{c.name} measured {_x(c.measured_speedup, c.measured_band)} against "
        f"{_x(c.predicted_speedup, c.predicted_band)} predicted: {c.status.value}"
    )
    if c.reason is Reason.COMPUTE_DRIFT and c.compute_ms and None not in c.compute_ms:
        # The bands are left out: a drifted pair's figures are not read, only the drift said.
        return (
            f"{c.name} measured {fmt_x(c.measured_speedup)} against {fmt_x(c.predicted_speedup)} predicted: "
            f"{c.status.value}, compute itself went from {fmt_ms(c.compute_ms[0])} to {fmt_ms(c.compute_ms[1])} "
            f"per step between the runs ({_busy(c)}); the attribution stands"
        )
    allow = speedups_words(c.agreement_band)
    if allow:
        allow += (
            f" (the prediction's interval, or two runs' usual spread: {100 * FALLBACK_REL:.0f}% of it "
            f"or {100 * FALLBACK_STEP:.0f}% of the step)"
            if c.fallback_band
            else " (the prediction's interval widened by the runs' noise)"
        )
    step, p, m = c.step_ms or 0.0, c.predicted_ms or 0.0, c.measured_saved_ms
    if c.status is Agreement.CONFIRMED and allow:
        head += f", within {allow}"
    elif (
        c.status is Agreement.INCONCLUSIVE
        and c.measured_noise_ms is not None
        and c.measured_noise_ms < p
        and m is not None
    ):
        head += (
            f", its saving ({fmt_ms(m)} per step) is within the runs' noise ({fmt_ms(c.measured_noise_ms)}), so it "
            f"cannot tell the predicted {fmt_ms(p)} from none: a quieter machine or more steps would settle it"
        )
    elif c.status is Agreement.INCONCLUSIVE and c.measured_noise_ms is not None:
        head += (
            f", the runs' noise ({fmt_ms(c.measured_noise_ms)} per step) is as large as the predicted saving "
            f"({fmt_ms(p)} of a {fmt_ms(step)} step): a quieter machine or more steps would settle it"
        )
    elif c.status in (Agreement.PARTLY, Agreement.NOT_CONFIRMED) and m is not None:
        head += (
            f", {_what(c.label)} saves {fmt_ms(m)} per step ({100 * m / step if step else 0:.0f}%), not {fmt_ms(p)}"
            if m >= 0
            else f", the step got {fmt_ms(-m)} slower instead of {fmt_ms(p)} faster"
        )
        if allow:
            head += f"; agreeing would be {allow}"
        grew = compute_shortfall(c)
        if grew is not None and c.compute_ms:
            head += (
                f"; compute itself took {fmt_ms(grew)} more per step in that run ({fmt_ms(c.compute_ms[0])} -> "
                f"{fmt_ms(c.compute_ms[1])}), {100 * min(grew / (p - m), 1.0):.0f}% of the shortfall"
            )
    return head


def compute_shortfall(c: Check) -> float | None:
    """How much more compute a step took in the experiment than in the baseline (ms), where that explains at
    least half of a partly / not confirmed check's shortfall (the saving predicted less the one measured):
    the measured cause of the gap, said beside it. None otherwise."""
    cm, p, m = c.compute_ms, c.predicted_ms, c.measured_saved_ms
    if c.status not in (Agreement.PARTLY, Agreement.NOT_CONFIRMED) or not cm or None in (p, m, *cm):
        return None
    grew, short = float(cm[1]) - float(cm[0]), float(p) - float(m)
    return grew if short > 0 and grew >= short / 2 else None


def compute_change(c: Check) -> str:
    """What else changed between the two runs, measured: compute per step in the baseline and in the
    experiment, where the two differ by more than a tenth ("" otherwise, or where a run has no figure)."""
    cm = c.compute_ms
    if not cm or None in cm or not cm[0] or abs(float(cm[1]) - float(cm[0])) <= 0.1 * float(cm[0]):
        return ""
    return f"compute per step {fmt_ms(cm[0])} -> {fmt_ms(cm[1])}"


def _compute_said(c: Check) -> str:
    cm = c.compute_ms
    if not cm or None in cm:
        return "was not measured in both runs"
    return f"stayed {fmt_ms(cm[0])} -> {fmt_ms(cm[1])}, so what else changed is not in the step's labels"


def workers_help(c: Check) -> str:
    """What a slower experiment B says of the workers: where it took the baseline's workers away
    (num_workers=0), that they help; where it added workers, that those do not."""
    return "the workers help here: without them steps are slower" if c.num_workers == 0 else "workers do not help here"


def bound_long(c: Check) -> str:
    """Experiment B (the workers changed) against the bound no worker setting can pass, removing all
    loading: what it measured, its change as measured (slower / within noise), inconclusive when the
    runs' noise is as large as the whole loading wait, and a gain above the bound flagged."""
    b, noise = c.measured_band, c.measured_noise_ms
    said = f"{c.name} measured {fmt_x(c.measured_speedup)}"
    said += f" ({fmt_band(b[0], b[1])})" if b and None not in b else ""
    if c.predicted_speedup is not None:
        said += f" of the {fmt_x(c.predicted_speedup)} that removing all loading can give"
    if c.status is Agreement.INCONCLUSIVE:
        said += (
            f": inconclusive, the runs' noise ({fmt_ms(noise)} per step) is as large as the whole "
            f"loading wait ({fmt_ms(c.bound_ms)})"
        )
    elif c.change is Change.SLOWER:
        said += f": slower, so {workers_help(c)}"
    elif c.change is Change.WITHIN_NOISE and c.measured_speedup != 1:
        said += f": within the runs' noise ({fmt_ms(noise)} per step), so workers do not measurably help here"
    if c.above_bound:
        m, top = c.measured_saved_ms, c.bound_ms
        within = noise is not None and m is not None and top is not None and m - top <= noise
        moved = compute_change(c)
        said += "; above that bound" + (
            f", within the runs' noise ({fmt_ms(noise)} per step)"
            if within
            else f": {moved} in that run (measured), which removing the wait alone does not explain"
            if moved
            else f": more than removing the wait explains; compute per step {_compute_said(c)}"
        )
    return said


def check_text(c: Check) -> str:
    """A check of the verdict in words, from its figures."""
    return bound_long(c) if c.against is Against.BOUND else check_long(c)


# What diagnose found loading to be, in a few words, by its kind.
LOADING_CAUSE = {
    "decoder": "CPU decode",
    "unprofiled": "data loading",
    "crowded": "data loading",
    "io": "I/O",
    "cpu": "CPU decode/augment",
}


def loading_text(f: Loading) -> str:
    """What diagnose found loading to be (diagnose.loading_cause), and what to do about it."""
    kind = f.kind
    if kind == "decoder":
        return f"The {f.decoder} decoder alone is {f.speedup:.2f}x faster per step: switch to it"
    if kind == "unprofiled":
        return "Workers' __getitem__ dominates; a workload factory lets diagnose split decode from I/O"
    if kind == "crowded":
        return (
            f"__getitem__ ran on a CPU {100 * f.cpu_to_wall:.0f}% of its time, but the host was "
            f"{f.cpu_percent:.0f}% busy, so it waited for a core as much as for I/O: run diagnose on "
            "a quieter machine to tell them apart"
        )
    if kind == "io":
        return (
            f"__getitem__ spends {100 * (1 - f.cpu_to_wall):.0f}% of its time waiting, not computing: "
            "faster storage, caching, or more workers to overlap the waits"
        )
    if kind == "cpu":
        top = readable_frame(f.top) if f.top else "?"
        return f"__getitem__ is CPU-bound (top: {top}): cheaper decode/augment, or more workers if cores are free"
    return ""


_METHOD = re.compile(r"<method '(\w+)' of '([\w.]+)' objects>")
_BUILTIN = re.compile(r"<built-in (?:function|method) ([\w.]+)(?: of .*)?>")


def readable_frame(function: str) -> str:
    """A profiler's name for a frame, readable: a library method as Class.method (its module said),
    the user's function as it came ("func (file.py:12)")."""
    m = _METHOD.fullmatch(function.strip())
    if m:
        name, owner = m.groups()
        cls = owner.rsplit(".", 1)[-1].removesuffix("Base")
        lib = owner.split(".", 1)[0]
        return f"{cls}.{name} ({lib.lstrip('_')})" if "." in owner else f"{cls}.{name}"
    m = _BUILTIN.fullmatch(function.strip())
    return f"{m.group(1)} (built-in)" if m else function


# A cause's tier in plain words: the verdict's "warn" is a threshold's name, not a finding, and "critical"
# read as an alarm to new users for a 27% share that costs a quarter of the step, not a failure.
LEVEL_WORDS = {"warn": "moderate", "critical": "major", "borderline": "borderline", "minor": "minor"}


def level_word(level: Any) -> str:
    """A level as run.json holds it ("warn", "critical", or a Level), in the words every output uses."""
    value = str(getattr(level, "value", level) or "")
    return LEVEL_WORDS.get(value, value)


def fit(*parts: tuple[str, int], width: int = WIDTH) -> str:
    """The parts in order, each (text, rank): rank 0 always, then the lowest ranked dropped first until the
    line fits in `width`. What is left out is in the verdict's long words (--explain, report.html)."""
    keep = [text for text, _ in parts]
    for k in sorted(range(len(parts)), key=lambda k: -parts[k][1]):
        if len("".join(keep)) <= width or parts[k][1] == 0:
            break
        keep[k] = ""
    return "".join(keep)


def fitting(forms: list[str]) -> str:
    """The first of a line's forms, longest first, that fits in WIDTH; else the last (the shortest)."""
    return next((ln for ln in forms if len(ln) <= WIDTH), forms[-1])


# -- `perfcore env`'s checks -------------------------------------------------------------------------

_GiB = 1024**3


def _gib(n: float, digits: int = 1) -> str:
    return f"{n / _GiB:.{digits}f}"


def driver_older_words(driver_cuda: str, cupti_cuda: str) -> str:
    return (
        f"the NVIDIA driver supports CUDA {driver_cuda}, older than the CUPTI perfcore uses (CUDA {cupti_cuda}): "
        f"kernel tracing needs a newer driver, or a torch built for CUDA {driver_cuda} (perfcore then rebuilt); "
        "CUDA events time the GPU meanwhile"
    )


def _cpu_mode(f: Mapping[str, Any]) -> tuple[str, str]:
    fix = "GPU timing, CUPTI and transfer tools are left out of this build"
    return f"CPU mode: {f['why']}", fix + (f"; for the CUDA mode {f['how']}" if f.get("how") else "")


def _free_space(f: Mapping[str, Any], warn: bool) -> tuple[str, str]:
    value = f"{_gib(f['free_bytes'])} GiB free ({f['fs']})"
    if not warn:
        return value, ""
    shm = f["path"] == "/dev/shm"
    why = "DataLoader workers hand batches over in shared memory" if shm else "scratch files and compile caches"
    todo = "run docker with --shm-size=8g" if shm else "free space or set TMPDIR"
    return value, f"only {_gib(f['free_bytes'], 2)} GiB free ({why}); {todo}"


def _gpu_others(f: Mapping[str, Any]) -> tuple[str, str]:
    desc = ", ".join(f"pid {p['pid']} ({_gib(p['used_bytes'])} GiB)" for p in f["processes"])
    fix = "other work on this GPU shares its SMs and memory bandwidth; stop it for clean numbers"
    return f"{f['count']} other process(es): {desc}", fix


# code -> (figures, warn) -> (value, fix); warn is the check's status being warn or fail.
_WORDS: dict[str, Callable[[Mapping[str, Any], bool], tuple[str, str]]] = {
    "native_missing": lambda f, w: ("perfcore._C not loadable", f["reason"]),
    "cuda_mode": lambda f, w: (f"CUDA mode, CUDA {f['toolkit']}, arch {f['arch']}", ""),
    "cupti": lambda f, w: (
        f"API {f['loaded']} loaded, {f['compiled']} compiled ({f['source']})",
        "; ".join(f["warnings"]),
    ),
    "cpu_mode": lambda f, w: _cpu_mode(f),
    "no_gpu": lambda f, w: (
        f"no CUDA GPU usable: {f['reason']}",
        "GPU checks skipped; perfcore measures host phases only here",
    ),
    "gpus": lambda f, w: (f"{f['count']} CUDA device(s) visible", ""),
    "driver_older": lambda f, w: (driver_older_words(f["driver_cuda"], f["cupti_cuda"]), ""),
    "nvml_missing": lambda f, w: (
        "nvidia-ml-py not installed",
        "pip install nvidia-ml-py (GPU utilisation sampling and process checks need it)",
    ),
    "nvml_unavailable": lambda f, w: (f"NVML unavailable: {f['error']}", "GPU sampling will fall back to none"),
    "value": lambda f, w: (str(f["value"]), ""),
    "gpu_memory": lambda f, w: (
        f"{f['gpu']}: {_gib(f['used_bytes'])} of {_gib(f['total_bytes'])} GiB in use",
        "another job holds GPU memory: results will be skewed; free it first" if w else "",
    ),
    "gpu_others": lambda f, w: _gpu_others(f),
    "gpu_alone": lambda f, w: ("no other process on this GPU", ""),
    "cpu_load": lambda f, w: (
        f"{f['busy_pct']:.0f}% busy over 0.3 s, {f['cores']} logical cores",
        "other processes compete with DataLoader workers; stop them or expect noisy load times" if w else "",
    ),
    "governor_hidden": lambda f, w: ("not exposed (VM or container)", ""),
    "governor": lambda f, w: (
        ",".join(f["governors"]),
        "frequency scaling adds noise: sudo cpupower frequency-set -g performance" if w else "",
    ),
    "ram": lambda f, w: (
        f"{_gib(f['available_bytes'])} of {_gib(f['total_bytes'])} GiB",
        "little free RAM: workers and pinned buffers may swap or be killed" if w else "",
    ),
    "nofile": lambda f, w: (
        f"soft {f['soft']}, hard {f['hard']}",
        f"DataLoader workers pass tensors through file descriptors: ulimit -n {f['suggested']}" if w else "",
    ),
    "free_space": _free_space,
    "torch_missing": lambda f, w: ("not installed", "pip install torch"),
    "torch": lambda f, w: (f"{f['version']} (CUDA {f['cuda'] or 'none'})", ""),
    "cudnn": lambda f, w: (str(f["version"]) if f["version"] is not None else "not available", ""),
    "cudnn_benchmark": lambda f, w: (
        str(f["on"]),
        ""
        if f["on"] or not f["gpu"]
        else "for fixed input shapes, torch.backends.cudnn.benchmark = True picks faster conv kernels",
    ),
    "check_failed": lambda f, w: (f"check failed: {f['error']}", ""),
}


def check_words(check: EnvCheck) -> tuple[str, str]:
    """(value, fix) of one `perfcore env` check; a code this version does not know (a newer document) shows
    its figures as they are."""
    figures = check.figures
    say = _WORDS.get(check.code)
    if say is None:
        return ", ".join(f"{k} {v}" for k, v in figures.items()), ""
    try:
        return say(figures, check.status in ("warn", "fail"))
    except (KeyError, TypeError, ValueError):  # figures missing or of another shape: said as they are
        return ", ".join(f"{k} {v}" for k, v in figures.items()), ""


def with_words(report: dict[str, Any]) -> dict[str, Any]:
    """The env document with each check's rendered value and fix beside its code and figures (run.json-style
    readers outside perfcore read "value" and "fix" as before)."""
    checks = []
    for c in report["checks"]:
        value, fix = check_words(EnvCheck(**c))
        checks.append({**c, "value": value, "fix": fix})
    return {**report, "checks": checks}
