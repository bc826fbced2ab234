"""What else ran on the machine during a run: a sampler thread that reads /proc every `interval_s`
and records the machine's CPU time (busy, idle, steal, the run queue) beside the CPU time of the
run's own process tree, the run's main process apart from its children (DataLoader workers), and
the main process's involuntary context switches; other processes on the GPU through NVML where it
is available. Ticks, not percentages: analysis.interference turns two or more samples into what
other processes used, so a sampler never decides anything.

The run's tree is its root process and every descendant. CPU time stays with the tree when a child
exits: the kernel adds a reaped child's time to its parent's cutime/cstime, so the tree's total is
each live process's utime+stime+cutime+cstime, counted once.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["InterferenceSampler", "read_stat", "read_process", "process_tree", "snapshot", "FIELDS"]

# A sample's columns: the machine's (read_stat), the run's tree summed over its processes, the GPU's others.
MACHINE_FIELDS = ("total_ticks", "busy_ticks", "steal_ticks", "procs_running")
TREE_FIELDS = (
    "tree_ticks",
    "depth0_ticks",
    "depth1_ticks",
    "depth0_nonvoluntary",
    "depth1_nonvoluntary",
    "tree_processes",
)
GPU_FIELDS = ("gpu_other_processes", "gpu_other_bytes")
FIELDS = ("t_s", *MACHINE_FIELDS, *TREE_FIELDS, *GPU_FIELDS)


def read_stat(root: str | Path = "/proc") -> dict[str, int]:
    """The machine's CPU ticks from /proc/stat (all CPUs summed), and the runnable tasks now."""
    out = dict.fromkeys(MACHINE_FIELDS, 0)
    for line in Path(root, "stat").read_text().splitlines():
        if line.startswith("cpu "):
            v = [int(x) for x in line.split()[1:]]
            v += [0] * (8 - len(v))
            user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
            # guest time is already inside user and nice.
            out["busy_ticks"] = user + nice + system + irq + softirq
            out["steal_ticks"] = steal
            out["total_ticks"] = user + nice + system + idle + iowait + irq + softirq + steal
        elif line.startswith("procs_running"):
            out["procs_running"] = int(line.split()[1])
    return out


def read_process(pid: int, root: str | Path = "/proc") -> dict[str, int] | None:
    """utime, stime, cutime, cstime (ticks), ppid and involuntary context switches of one process;
    None when it is gone."""
    try:
        raw = Path(root, str(pid), "stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces: fields start after the last ')'.
    rest = raw[raw.rindex(")") + 2 :].split()
    out = {
        "ppid": int(rest[1]),
        "utime": int(rest[11]),
        "stime": int(rest[12]),
        "cutime": int(rest[13]),
        "cstime": int(rest[14]),
        "nonvoluntary": 0,
    }
    try:
        for line in Path(root, str(pid), "status").read_text().splitlines():
            if line.startswith("nonvoluntary_ctxt_switches"):
                out["nonvoluntary"] = int(line.split()[1])
    except OSError:
        pass
    return out


def _children(pid: int, root: Path) -> list[int] | None:
    """Direct children through /proc/PID/task/*/children; None where the kernel does not offer it."""
    tasks = root / str(pid) / "task"
    try:
        names = os.listdir(tasks)
    except OSError:
        return []
    kids: list[int] = []
    for tid in names:
        try:
            kids += [int(x) for x in (tasks / tid / "children").read_text().split()]
        except FileNotFoundError:
            return None
        except OSError:
            continue
    return kids


def process_tree(pid: int, root: str | Path = "/proc") -> dict[int, int]:
    """pid -> depth (0 for `pid` itself) of a process and all its descendants."""
    root = Path(root)
    depth = {pid: 0}
    frontier = [pid]
    by_parent: dict[int, list[int]] | None = None
    while frontier:
        nxt = []
        for p in frontier:
            kids = _children(p, root)
            if kids is None:  # no children files: one scan of every process's parent
                if by_parent is None:
                    by_parent = {}
                    for name in os.listdir(root):
                        if name.isdigit():
                            info = read_process(int(name), root)
                            if info:
                                by_parent.setdefault(info["ppid"], []).append(int(name))
                kids = by_parent.get(p, [])
            for k in kids:
                if k not in depth:
                    depth[k] = depth[p] + 1
                    nxt.append(k)
        frontier = nxt
    return depth


def snapshot(pid: int, root: str | Path = "/proc", gpu=None, now=time.monotonic) -> dict[str, Any]:
    """One sample (FIELDS) of the machine and of `pid`'s tree. gpu: a callable giving the pids on the
    device and their memory [(pid, bytes)], or None."""
    s = read_stat(root)
    tree = process_tree(pid, root)
    rec = {"t_s": now(), **s, **dict.fromkeys(TREE_FIELDS, 0), **dict.fromkeys(GPU_FIELDS)}
    for p, d in tree.items():
        info = read_process(p, root)
        if info is None:
            continue
        own = info["utime"] + info["stime"]
        rec["tree_ticks"] += own + info["cutime"] + info["cstime"]
        rec["tree_processes"] += 1
        if d <= 1:
            rec[f"depth{d}_ticks"] += own
            rec[f"depth{d}_nonvoluntary"] += info["nonvoluntary"]
    if gpu is not None:
        try:
            others = [(p, b) for p, b in gpu() if p not in tree]
            rec["gpu_other_processes"] = len(others)
            rec["gpu_other_bytes"] = int(sum(b or 0 for _, b in others))
        except Exception:  # a GPU query that fails only leaves the GPU side unknown
            pass
    return rec


def _nvml_processes():
    """A callable listing (pid, used bytes) of compute processes on every GPU, or None without NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    except Exception:
        return None

    def procs():
        out = []
        for h in handles:
            for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
                out.append((int(p.pid), int(getattr(p, "usedGpuMemory", 0) or 0)))
        return out

    return procs


class InterferenceSampler:
    """Samples `snapshot` every `interval_s` on a daemon thread, from start() to stop(), which returns
    the samples as a dict of lists (FIELDS). pid: the root of the run's tree (default this process).
    Never raises into the run: a failed read ends sampling and is kept in `note`.

    The GPU's process list is asked for once, at the first sample (before the run's work starts), and
    repeated in the later samples so that any window of them carries it: listing a GPU's processes
    costs milliseconds and takes the driver's global lock, which every CUDA call of the training
    process then waits for (a utilisation or memory read does not)."""

    def __init__(self, pid: int | None = None, interval_s: float = 0.25, root: str | Path = "/proc", gpu: bool = True):
        self.pid = os.getpid() if pid is None else pid
        self.interval_s = interval_s
        self.root = root
        self.gpu = _nvml_processes() if gpu else None
        self.samples: list[dict[str, Any]] = []
        self.note: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def available(self) -> bool:
        return Path(self.root, "stat").exists()

    def _take(self) -> None:
        try:
            rec = snapshot(self.pid, self.root, self.gpu if not self.samples else None)
            if self.samples:  # the GPU's processes as listed at the first sample, said in every one
                rec.update({k: self.samples[0][k] for k in GPU_FIELDS})
            self.samples.append(rec)
        except Exception as e:  # /proc unreadable (not Linux, a sandbox): nothing to measure
            self.note = f"interference not measured: {type(e).__name__}: {e}"
            self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._take()

    def start(self) -> "InterferenceSampler":
        if not self.available:
            self.note = f"interference not measured: no {Path(self.root, 'stat')}"
            return self
        self._take()
        self._thread = threading.Thread(target=self._loop, name="perfcore-interference", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, list]:
        """Ends sampling with one last sample (so the samples span the whole run) and returns them."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * self.interval_s + 1.0)
            self._thread = None
            if self.note is None:
                self._take()
        return {f: [s.get(f) for s in self.samples] for f in FIELDS}
