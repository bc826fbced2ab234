"""`perfcore run`: start an unmodified command with perfcore's instrumentation, then turn the
parts it wrote into one run folder (run.json, steps.csv, trace.json, PNGs) and a report."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

from perfcore.errors import UsageError
from perfcore.run.finish import finish_run
from perfcore.run.folder import prepare_out

__all__ = ["run_command", "check_command", "child_env", "run_child"]

BOOT = Path(__file__).resolve().parent / "_boot"


def check_command(cmd: list[str]) -> None:
    if not cmd:
        raise UsageError("no command given: perfcore run [OPTIONS] -- python train.py ARGS...")
    if shutil.which(cmd[0]) is None and not Path(cmd[0]).is_file():
        raise UsageError(f"no such command: {cmd[0]}")
    if Path(cmd[0]).name.startswith("python"):
        rest = cmd[1:]
        # python [-u -O ...] script.py: the first non-option is the script, unless -m / -c come first.
        for i, a in enumerate(rest):
            if a in ("-m", "-c") or a.startswith("-m") and len(a) > 2:
                return
            if a in ("-I", "-E"):
                raise UsageError(f"python {a} ignores PYTHONPATH, so perfcore cannot instrument it; drop {a}")
            if a.startswith("-"):
                continue
            if not Path(a).is_file():
                raise UsageError(f"no such script: {a}")
            return


def child_env(out: Path, steps: int | None, warmup: int, backend: str, kernels: bool,
              overrides: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    pkg_parent = str(Path(__file__).resolve().parents[2])
    paths = [str(BOOT), pkg_parent] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env["PERFCORE_RUN_DIR"] = str(out.resolve())
    env["PERFCORE_STEPS"] = str(steps or 0)
    env["PERFCORE_WARMUP"] = str(warmup)
    env["PERFCORE_BACKEND"] = backend
    env["PERFCORE_KERNELS"] = "1" if kernels else "0"
    env.update(overrides or {})
    return env


def run_child(cmd: list[str], env: dict[str, str]) -> int:
    """Runs the command; Ctrl-C reaches the child (same process group) and we wait for it to write."""
    proc = subprocess.Popen(cmd, env=env)
    old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)

    def forward_term(signum, frame):
        proc.send_signal(signum)

    old_term = signal.signal(signal.SIGTERM, forward_term)
    try:
        rc = proc.wait()
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
    return 128 - rc if rc < 0 else rc


def run_command(cmd: list[str], *, steps: int | None, warmup: int, out: Path | None, backend: str,
                kernels: bool, overrides: dict[str, str] | None = None, monitor_s: float | None = None
                ) -> tuple[int, dict[str, Any], Path]:
    if steps is not None and steps <= 0:
        raise UsageError(f"--steps must be at least 1, got {steps}")
    if warmup < 0:
        raise UsageError(f"--warmup must be >= 0, got {warmup}")
    check_command(cmd)
    out = prepare_out(out)
    sampler = None
    if monitor_s:
        from perfcore.capture.sampler import Sampler

        sampler = Sampler(monitor_s).start()
    try:
        rc = run_child(cmd, child_env(out, steps, warmup, backend, kernels, overrides))
    finally:
        samples = sampler.stop() if sampler else None
    doc = finish_run(out, rc, cmd, samples=samples)
    return rc, doc, out

