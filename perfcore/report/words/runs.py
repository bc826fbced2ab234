"""A run's circumstances in words, each from its codes and figures: how the script ended (run/parent/
outcome's exit code, reason, signal and OOM killer, and the script's own end as its process saw it);
what failed (a script that failed after measured steps, a sweep configuration with no numbers of its
own); the run's notes (finishing's codes, the recording's and the capture's counts); `perfcore env`'s
checks and fixes; a CUDA Graph capture that failed (its usual cause and the fix, with the call's own
message); the transfer experiment's link (its nominal rate, or why NVML could not tell it)."""

from __future__ import annotations

import signal
from typing import Any, Callable, Mapping

from perfcore.analysis.command_results import ScriptExit
from perfcore.analysis.run_context import Exit, Note, Outcome
from perfcore.analysis.run_parts import Capture
from perfcore.analysis.run_report import RunReport

__all__ = [
    "outcome_sentence",
    "exit_sentence",
    "exit_words",
    "signal_name",
    "script_exit_words",
    "config_failure",
    "capture_notes",
    "notes_of",
    "note_words",
    "check_words",
    "driver_older_words",
    "sampling_words",
    "with_words",
    "capture_error_words",
    "CAUSES",
    "link_words",
    "crashed_early",
    "FEW_STEPS",
    "knee_text",
]


def signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def outcome_sentence(oc: Outcome) -> str:
    """The script's end as `perfcore run` saw it: "finished (exit 0)", "was killed by SIGKILL (exit 137)"."""
    rc, reason = oc.code, oc.reason
    if reason == "steps reached":
        return "stopped after the steps asked for (--steps)"
    if rc == 0:
        return "finished (exit 0)"
    if reason == "out of memory":
        return (
            f"was killed by the kernel's out-of-memory killer (SIGKILL, exit {rc}); "
            "lower the batch size or the DataLoader workers' memory"
        )
    if reason == "killed":
        said = f"was killed by {oc.signal} (exit {rc})"
        if oc.signal == signal.SIGKILL.name:
            said += (
                "; SIGKILL is what the kernel's out-of-memory killer sends: if memory was "
                "short (dmesg shows 'Out of memory'), that is the likely cause"
            )
        return said
    if reason == "interrupted":
        return f"was interrupted (Ctrl-C, exit {rc})"
    if reason == "terminated":
        return f"was terminated ({signal_name(rc - 128) if rc is not None and rc > 128 else 'SIGTERM'}, exit {rc})"
    if reason == "crashed":
        return f"crashed (exit {rc})"
    return f"exited with {rc}"


def exit_sentence(ex: Exit, outcome: Outcome | None) -> str:
    """The script's own end as the child saw it, with the code the parent got: "was interrupted
    (Ctrl-C, exit 130)", "crashed (ValueError: bad shape; exit 1)". An empty message says nothing,
    so a bare KeyboardInterrupt reads as Ctrl-C, never "(KeyboardInterrupt: )"."""
    reason, exc = ex.reason or "exited", (ex.exception or "").strip()
    name, _, msg = exc.partition(":")
    msg = msg.strip()
    code = f"exit {outcome.code}" if outcome is not None and outcome.code else ""
    if reason == "interrupted":
        head, detail = "was interrupted", "Ctrl-C" + (f": {msg}" if name == "KeyboardInterrupt" and msg else "")
    elif reason == "terminated":
        head, detail = "was terminated", "SIGTERM"
    elif reason.startswith("killed"):  # a checkpoint's "killed before writing its results"
        head, detail = f"was {reason}", (exc if msg else name)
    else:
        head, detail = reason, (exc if msg else name)
    # "Ctrl-C, exit 130" as the outcome words it; a message and the code apart: "ValueError: x; exit 1".
    inner = (", " if reason in ("interrupted", "terminated") else "; ").join(x for x in (detail, code) if x)
    return f"{head} ({inner})" if inner else head


def exit_words(r: RunReport) -> str:
    """How the script ended, for "partial results: the script ...": its own end with the exit code where
    perfcore run saw it end, else the reason with the exception's first line."""
    ex = r.exit or Exit()
    if r.outcome is not None:
        return exit_sentence(ex, r.outcome)
    return str(ex.reason) + (f" ({' '.join(str(ex.exception).split())})" if ex.exception else "")


# Diagnose's runs, as a failure names them.
_WHERE = {"baseline": " in the baseline", "synthetic": " with synthetic data", "workers": " with"}


def _steps(n: Any) -> str:
    n = int(n or 0)
    return f"{n} measured step{'' if n == 1 else 's'}"


def _how(ended: Any, code: Any) -> str:
    """How the script ended: its run document's words, else its exit code."""
    return str(ended) if ended else f"exited with {code}"


def script_exit_words(ex: ScriptExit) -> str:
    """ "the script crashed (...; exit 1) after 12 measured steps in the baseline: these results are
    partial"."""
    where = _WHERE.get(str(ex.run), "")
    if where == " with":
        where += " " + ", ".join(f"{k}={v}" for k, v in (ex.settings or {}).items())
    how = (
        exit_sentence(ex.exit, ex.outcome)
        if ex.exit is not None and ex.outcome is not None
        else outcome_sentence(ex.outcome)
        if ex.outcome is not None
        else None
    )
    return f"the script {_how(how, ex.code)} after {_steps(ex.steps)}{where}: these results are partial"


def config_failure(row: Mapping[str, Any]) -> str:
    """Why a sweep configuration has no numbers of its own (or only partial ones), from its reason; the
    exception's own message where it had one; an older row's stored text."""
    row = {k: v for k, v in dict(row).items() if not (isinstance(v, float) and v != v)}  # a table's NaN: none
    if isinstance(row.get("exit_code"), float):
        row["exit_code"] = int(row["exit_code"])
    reason = row.get("reason")
    if reason == "no_measured_step":
        if row.get("ended"):
            return f"the script {row['ended']} during warm-up: no measured step"
        if row.get("exit_code") is not None:
            return f"the script ended (exit {row['exit_code']}) during warm-up: no measured step"
        return "the run ended in warm-up: no measured step"
    if reason == "failed_partway":
        how = _how(row.get("ended"), row.get("exit_code"))
        return f"the script {how} after {_steps(row.get('steps'))}: these results are partial"
    if reason == "out_of_memory" and not row.get("error"):
        return "out of memory"
    return str(row.get("error") or "")


def capture_notes(cap: Capture) -> list[str]:
    """What the capture's counts mean for the numbers: one line per kind of loss."""
    out = []
    undecodable = cap.count("buffers_undecodable")
    if undecodable:
        out.append(
            f"{undecodable} CUPTI buffer(s) ended at a record CUPTI would not return "
            f"({cap.count('buffers_incomplete')} incomplete: work still running at stop); up to "
            f"{cap.count('bytes_unwalked')} bytes of records after them are lost"
        )
    lost = cap.count("dropped") + cap.count("overflow")
    if lost:
        out.append(
            f"{lost} CUPTI records were dropped (buffers full or drained too slowly): kernel "
            "and copy times are undercounted; see capture in run.json"
        )
    return out


def note_words(n: Note) -> str:
    """One note in words: its own text, or its code's words from its figures."""
    f = n.figures
    if n.code == "evaluation_only":
        return (
            ", ".join(f"pid {p}" for p in f.get("pids") or [])
            + " stepped no optimizer while other processes trained (evaluation only): not in the steps"
        )
    if n.code == "measured_apart":
        procs = f.get("processes") or []
        return (
            f"{len(procs)} other Python process(es) the script started ("
            + ", ".join(f"pid {p.get('pid')}: {p.get('steps', 0)} steps" for p in procs)
            + ") were measured apart: not ranks of this run, not merged into it"
        )
    if n.code == "from_checkpoint":
        return (
            "the process ended without writing its results (killed?): these are its last checkpoint's, "
            f"{f.get('steps')} settled steps"
        )
    if n.code == "finished_afterwards":
        return (
            "finished afterwards by `perfcore report` from the parts its processes wrote: perfcore stopped before "
            f"it saw the script end, so the exit code {f.get('exit_code')} is the one the results imply"
        )
    return n.text or n.code


def notes_of(r: RunReport) -> list[str]:
    """The run's notes, then those its capture facts call for."""
    return [note_words(n) for n in r.notes] + (capture_notes(r.capture) if r.capture is not None else [])


_GiB = 1024**3


def _gib(n: float, digits: int = 1) -> str:
    return f"{n / _GiB:.{digits}f}"


def driver_older_words(driver_cuda: str, cupti_cuda: str) -> str:
    return (
        f"the NVIDIA driver supports CUDA {driver_cuda}, older than the CUPTI perfcore uses (CUDA {cupti_cuda}): "
        f"kernel tracing needs a newer driver, or a torch built for CUDA {driver_cuda} (perfcore then rebuilt); "
        "CUDA events time the GPU meanwhile"
    )


def sampling_words(nvml_error: str) -> str:
    """What the sampler could not do, from NVML's error ("" when it samples the GPU)."""
    return f"no GPU sampling ({nvml_error}); CPU and RAM only" if nvml_error else ""


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


def check_words(check: Mapping[str, Any]) -> tuple[str, str]:
    """(value, fix) of one check (a dict of name, status, code, figures); a code this version does not
    know (a newer document) shows its figures as they are."""
    figures = check.get("figures") or {}
    say = _WORDS.get(str(check.get("code")))
    if say is None:
        return ", ".join(f"{k} {v}" for k, v in figures.items()), ""
    try:
        return say(figures, check.get("status") in ("warn", "fail"))
    except (KeyError, TypeError, ValueError):  # figures missing or of another shape: said as they are
        return ", ".join(f"{k} {v}" for k, v in figures.items()), ""


def with_words(report: dict[str, Any]) -> dict[str, Any]:
    """The env document with each check's rendered value and fix beside its code and figures (run.json-style
    readers outside perfcore read "value" and "fix" as before)."""
    checks = []
    for c in report["checks"]:
        value, fix = check_words(c)
        checks.append({**c, "value": value, "fix": fix})
    return {**report, "checks": checks}


# What usually causes each reason, and the fix.
CAUSES = {
    "not_capturable": (
        "the optimizer is not capturable: create it with capturable=True (Adam, AdamW, ...) so its step "
        "keeps its state on the GPU"
    ),
    "host_sync": (
        "a CPU sync ran inside the step: .item(), .cpu(), .tolist(), printing a tensor, "
        "torch.cuda.synchronize() or a data-dependent Python branch on a tensor value; move it out of the "
        "step or keep the value on the GPU"
    ),
    "invalidated": (
        "work outside the capture touched the captured stream (another thread, or a library call on the "
        "default stream); capture in one thread and keep other streams idle"
    ),
    "dynamic_shapes": (
        "the step's shapes changed between calls (dynamic shapes): a graph replays fixed shapes, so pad "
        "batches to one size (drop_last=True) or capture one graph per shape"
    ),
    "allocation": (
        "memory was allocated from outside the graph's private pool during capture; warm up more "
        "iterations first, and avoid host-side allocations inside the step"
    ),
    "unsupported_op": "an operation in the step cannot be captured; run the step eagerly to find the failing op",
}


def capture_error_words(f: Mapping[str, Any]) -> str:
    """One line: the optimizer that cannot be captured, or the failing call's message and its usual cause."""
    name = f.get("optimizer")
    if f.get("reason") == "optimizer_not_capturable":
        return (
            f"optimizer {name} cannot be captured as created: pass capturable=True "
            f"({name}(params, ..., capturable=True)) so its step stays on the GPU"
        )
    if f.get("reason") == "optimizer_no_capturable_mode":
        return (
            f"optimizer {name} has no capturable mode; use one that has (SGD, Adam, AdamW with "
            "capturable=True) or capture forward+backward only"
        )
    cause = CAUSES.get(str(f.get("reason")), CAUSES["unsupported_op"])
    return f"capture failed ({f['detail']}): {cause}" if f.get("detail") else f"capture failed: {cause}"


NOMINAL = "nominal = the most this device and system allow; the current link may be trained down when idle"


def link_words(link: Mapping[str, Any]) -> str:
    """The link's line: its nominal rate and what that means, or why NVML could not tell it."""
    if link.get("reason") == "nvml_unavailable":
        return f"link: NVML could not tell the link ({link.get('error')})"
    if link.get("gbps") is None:
        return ""
    return f"link: {link['gbps']:.1f} GB/s ({NOMINAL})"


# A script that fails within this many measured steps has shown its first steps, not its steady state:
# its figures are reported as partial and not advised on (the advice would be for a loop that does not
# run yet). The verdict's intervals need about this many steps to settle a 10% tier on a quiet machine.
FEW_STEPS = 50

# How the script ended when it did not finish: these are errors (an interrupt or --steps is the user's).
_ERRORS = ("crashed", "exited", "killed", "out of memory")


def crashed_early(r: RunReport) -> list[str]:
    """The lines a report leads with when the script failed within FEW_STEPS measured steps: the error in
    one line, and that the figures are partial and not advised on. Empty for a run that finished, was
    stopped, or failed later."""
    ex = r.exit
    if ex is None or ex.reason not in _ERRORS or r.steps >= FEW_STEPS:
        return []
    # The exit's words quote the exception's first line (cut at 200 characters where it is written; the
    # traceback is a file in the folder) and the exit code.
    return [
        f"partial results: the script {exit_words(r)}",
        f"{r.steps} measured step(s) before it ended are too few to advise on; the figures below are what ran",
    ]


def knee_text(k: dict[str, Any]) -> str:
    """A sweep's knee (sweep_results.knees) in words."""
    tail = []
    if k.get("flat"):
        tail.append(f"{', '.join(map(str, k['flat']))} add less than {int(float(k.get('within') or 0) * 100)}%")
    if k.get("worse"):
        tail.append(f"{', '.join(map(str, k['worse']))} are slower (cores shared with the loop)")
    return (
        f"batch {k['batch_size']}: throughput stops improving at {k['workers']} worker(s) "
        f"({float(k['samples_per_s']):.0f} samples/s" + (f"; {'; '.join(tail)})" if tail else ")")
    )
