"""How the script ended, in words: its exit code, the signal that killed it, the OOM killer."""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

__all__ = ["oom_kills", "describe_exit", "signal_name", "no_step_fields", "STEP_HEADER"]

LABELS = ("load", "transfer", "compute", "comm", "host")
# steps.csv of a run that saw no step: the columns, no rows.
STEP_HEADER = "step,wall_ms," + ",".join(f"{lb}_ms" for lb in LABELS) + ",warmup\n"


def signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def oom_kills() -> int | None:
    """The kernel's count of OOM kills in this cgroup (v2 memory.events, else v1), or None."""
    for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
        try:
            for line in Path(path).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            continue
    return None


def describe_exit(rc: int, child_reason: str | None, oom_before: int | None = None,
                  oom_after: int | None = None) -> dict[str, Any]:
    """{"code", "reason", "signal", "sentence"} for the script's end as `perfcore run` saw it
    (rc: 128+N for death by signal N, as a shell reports it)."""
    out: dict[str, Any] = {"code": rc, "reason": child_reason or ("finished" if rc == 0 else "exited"),
                           "signal": None}
    if child_reason in ("steps reached",):
        out["sentence"] = "stopped after the steps asked for (--steps)"
    elif rc == 0:
        out["sentence"] = "finished (exit 0)"
    elif rc > 128 and child_reason not in ("interrupted", "terminated", "crashed"):
        sig = rc - 128
        out["signal"] = signal_name(sig)
        out["reason"] = "killed"
        out["sentence"] = f"was killed by {out['signal']} (exit {rc})"
        if sig == signal.SIGKILL:
            if oom_before is not None and oom_after is not None and oom_after > oom_before:
                out["reason"] = "out of memory"
                out["sentence"] = (f"was killed by the kernel's out-of-memory killer (SIGKILL, exit {rc}); "
                                   "lower the batch size or the DataLoader workers' memory")
            else:
                out["sentence"] += ("; SIGKILL is what the kernel's out-of-memory killer sends: if memory was "
                                    "short (dmesg shows 'Out of memory'), that is the likely cause")
    elif child_reason == "interrupted":
        out["sentence"] = f"was interrupted (Ctrl-C, exit {rc})"
    elif child_reason == "terminated":
        out["sentence"] = f"was terminated ({signal_name(rc - 128) if rc > 128 else 'SIGTERM'}, exit {rc})"
    elif child_reason == "crashed":
        out["sentence"] = f"crashed (exit {rc})"
    else:
        out["reason"] = "exited"
        out["sentence"] = f"exited with {rc}"
    return out


def no_step_fields(sentence: str) -> dict[str, Any]:
    """The measured fields of a run.json for a run that saw no step: zeros, and the sentence as its verdict."""
    zeros = {lb: 0.0 for lb in LABELS}
    return {"steps": 0, "warmup_steps": 0, "step_time_ms": {"mean": 0.0, "p50": 0.0, "p90": 0.0},
            "breakdown_ms": dict(zeros), "breakdown_fraction": dict(zeros),
            "verdict": {"bound": "none", "summary": sentence}, "recommendations": [], "no_step": sentence}
