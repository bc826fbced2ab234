"""What crosses between `perfcore run`'s parent and the instrumented child: the environment the
parent sets, the folders and files the child writes under the run folder, and how the parent reads
them back. Both sides import this module and nothing of each other, so a change to what crosses is
made here once.

    <run dir>/parts/<key>/run.json, steps.csv, trace.npz   a process's part, written at its exit
    <run dir>/parts/<key>/checkpoint/run.json, steps.csv   the results so far, every ~30 s
    <run dir>/progress/<key>.json                          steps, recent step time, shares, every ~2 s
    <run dir>/workers/<pid>.L<loader>.csv, <pid>-main.L<loader>.csv  one line per batch a DataLoader made

<key> is rank<RANK> under a launcher that sets RANK, else pid<PID>.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Mapping

# -- the environment the parent sets for the child ------------------------------------------------
ENV_RUN_DIR = "PERFCORE_RUN_DIR"  # set: the boot file activates the instrumentation
ENV_STEPS = "PERFCORE_STEPS"  # measured steps wanted (0: all)
ENV_WARMUP = "PERFCORE_WARMUP"
ENV_BACKEND = "PERFCORE_BACKEND"  # kernel backend: auto, native, cupti-python
ENV_KERNELS = "PERFCORE_KERNELS"  # "1": trace kernels with CUPTI
ENV_STEP_ON = "PERFCORE_STEP_ON"  # one of STEP_SOURCES, or empty for the automatic choice
ENV_T_LAUNCH_NS = "PERFCORE_T_LAUNCH_NS"  # the parent's clock at launch (same CLOCK_MONOTONIC)
ENV_DL_OVERRIDES = "PERFCORE_DL_OVERRIDES"  # JSON: DataLoader settings a triage run changes
ENV_SYNTHETIC = "PERFCORE_SYNTHETIC"  # K: replay the first K batches (a triage run without input cost)
ENV_CHECKPOINT_S = "PERFCORE_CHECKPOINT_S"  # the checkpoint interval (tests shorten it)
ENV_TICK_EXTRA_S = "PERFCORE_TICK_EXTRA_S"  # tests: seconds of extra work in each progress write (a slow tick)
ENV_NO_STEP_WARN_S = "PERFCORE_NO_STEP_WARN_S"  # seconds without a step before the child says so
# "<pid>@<run dir>", set by the first instrumented process of a run for the Pythons it starts: one
# without RANK that sees its own run dir there is the script's own subprocess (a helper, a Pool
# worker), not a rank of a distributed job.
ENV_OUTER_PID = "PERFCORE_OUTER_PID"
ENV_PACKAGE_PARENT = "PERFCORE_PACKAGE_PARENT"  # PACKAGE_PARENT, for the boot file (which spells it)
# A pipe's write end, inherited by the script's process: Python's signal.set_wakeup_fd writes there the
# number of each signal the script receives, so the parent passes on only the ones it did not get.
ENV_SIGNAL_FD = "PERFCORE_SIGNAL_FD"

# What may end a step, in the order the automatic choice prefers them.
STEP_SOURCES = ("optimizer", "backward", "batch", "forward")

# The folder the parent puts first on the child's PYTHONPATH: its sitecustomize.py boots the child.
BOOT_DIR = Path(__file__).resolve().parent / "child" / "_boot"
# The folder holding the perfcore package: the boot file appends it to sys.path where the child's
# interpreter cannot import perfcore (an uninstalled checkout); never put on PYTHONPATH.
PACKAGE_PARENT = Path(__file__).resolve().parents[2]

# -- the files under the run folder ---------------------------------------------------------------
PARTS = "parts"
CHECKPOINT = "checkpoint"
# A part its process left for the parent to settle (a short run): the arrays, then the meta written last.
RAW_NPZ, RAW_JSON = "raw.npz", "raw.json"
PROGRESS = "progress"
WORKERS = "workers"
# A worker file's columns (no header): one line per batch.
WORKER_COLUMNS = ["pid", "worker", "start_ns", "end_ns", "getitem_ns", "collate_ns", "items", "rank"]

PROGRESS_EVERY_S = 2.0
CHECKPOINT_EVERY_S = 30.0


_PART_KEY = re.compile(r"(rank|pid)[0-9]{1,10}")
_COUNT = re.compile(r"[0-9]{1,10}")
# What a launcher (torchrun, mpirun, SLURM's wrappers) sets for each process of a job.
LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK")


def part_key(rank: str | int | None, pid: int | None = None) -> str:
    """The name of a process's part and progress file: rank<N>, else pid<P>. A rank that is not a
    plain integer never becomes part of a path: the process is keyed by its pid."""
    if rank is not None and _COUNT.fullmatch(str(rank)):
        return f"rank{int(rank)}"
    return f"pid{os.getpid() if pid is None else int(pid)}"


def is_part_key(name: str) -> bool:
    """Whether a folder name under parts/ is one part_key makes (a name read from disk is checked)."""
    return bool(_PART_KEY.fullmatch(name))


def launcher_rank() -> str | None:
    """This process's RANK as part_key takes it (the integer's digits), or None when unset or unusable."""
    rank = launcher_env()[0]["RANK"]
    return None if rank is None else str(rank)


def launcher_env(environ: Mapping[str, str] | None = None) -> tuple[dict[str, int | None], list[str]]:
    """RANK, WORLD_SIZE and LOCAL_RANK as integers (None when unset or not a plain non-negative
    integer), and one line for each that was set but unusable, saying what is done instead."""
    environ = os.environ if environ is None else environ
    values: dict[str, int | None] = {}
    problems = []
    for name in LAUNCHER_VARIABLES:
        raw = environ.get(name)
        if raw is None or raw.strip() == "":
            values[name] = None
        elif _COUNT.fullmatch(raw.strip()) and (name != "WORLD_SIZE" or int(raw) > 0):
            values[name] = int(raw)
        else:
            values[name] = None
            shown = raw.encode("unicode_escape").decode("ascii")[:40]
            kind = "positive" if name == "WORLD_SIZE" else "non-negative"
            instead = " (this process's results are keyed by its pid)" if name == "RANK" else ""
            problems.append(f"perfcore: {name}={shown!r} is not a {kind} integer; ignoring it{instead}; "
                            "unset it or let the launcher set it")
    return values, problems


def part_dir(run_dir: Path, key: str) -> Path:
    return Path(run_dir) / PARTS / key


def checkpoint_dir(run_dir: Path, key: str) -> Path:
    return part_dir(run_dir, key) / CHECKPOINT


def progress_file(run_dir: Path, key: str) -> Path:
    return Path(run_dir) / PROGRESS / f"{key}.json"


def read_progress(run_dir: Path) -> dict[str, Any] | None:
    """The freshest progress file of a run (rank 0's when there are ranks), or None."""
    d = Path(run_dir) / PROGRESS
    if not d.is_dir():
        return None
    docs = []
    for f in d.glob("*.json"):
        try:
            docs.append(json.loads(f.read_text()))
        except (OSError, ValueError):
            continue  # being replaced right now: the next refresh reads it
    if not docs:
        return None
    rank0 = [x for x in docs if x.get("key") == "rank0"]
    return rank0[0] if rank0 else max(docs, key=lambda x: x.get("time_ns", 0))
