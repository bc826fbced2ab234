"""Simulated nodes on one machine: each node its own UTS and time namespace (a hostname of its own and a
CLOCK_MONOTONIC shifted by thousands of seconds), its ranks talking gloo over loopback, launched per node as
a user launches a multi-node job: `perfcore run -- torchrun --nnodes N --node_rank K ...`, or one
`perfcore run -- python train.py` per Slurm task with srun's variables set. One node can be slowed from
outside: pinned by taskset to one core and, while the job trains (from the moment every rank is in its
training loop until every rank has left it), a busy loop pinned to the same core beside it and its training
processes held stopped part of the time. Start-up and perfcore's finish run unhindered: slowed, they
cost the tests minutes and slow nothing the tests read (the steps).

Used by tests/test_nodes*.py and bench/bench_nodes.py."""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

__all__ = ["Node", "Job", "namespaces_unavailable", "plan_nodes", "run_job", "busy_core", "WORK", "job_or_skip"]

SCRIPT = Path(__file__).resolve().parent / "scripts" / "ddp_train.py"
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
SLOW_CORE = 1
# The slowed node's training processes are also held stopped this share of every period (SIGSTOP and
# SIGCONT, as cpulimit does). On a machine whose cores other work already keeps busy, the scheduler moves
# that work off the pinned core and the pin alone costs the node nothing (measured on a 2-core machine at
# load 14: the pinned node's compute 17.8 ms a step against the other's 16.1 ms); stopping it does not
# hang on the machine's load.
STOPPED_SHARE, STOP_PERIOD_S = 0.6, 0.01
# The slowed node computes several times longer than the other (it is held stopped part of the time): a
# batch this size makes its compute, not gloo's wake-ups on a busy machine, what the other node waits for.
WORK = ("--batch", "1024", "--hidden", "2048")
# Monotonic clocks this far apart per node: hours, as two machines booted at different times are.
NODE_OFFSET_S = 7200


@dataclasses.dataclass(frozen=True)
class Node:
    """One simulated machine: its rank in the job, hostname, how far its monotonic clock is ahead of this
    machine's, and whether it runs pinned beside a busy loop."""

    rank: int
    hostname: str
    offset_s: int
    slowed: bool = False
    bare: bool = False  # runs the job without perfcore

    def wrap(self, inner: list[str]) -> list[str]:
        """inner, run inside this node's namespaces (and on the slow core when slowed)."""
        cmd = ["unshare", "--uts", "--time", f"--monotonic={self.offset_s}", "--fork", "--"]
        # The hostname is set inside the new UTS namespace, then the command replaces the shell.
        cmd += ["sh", "-c", 'hostname "$0" && exec "$@"', self.hostname, *inner]
        return ["taskset", "-c", str(SLOW_CORE), *cmd] if self.slowed else cmd


@dataclasses.dataclass
class Launch:
    """One `perfcore run` of the job: the node it ran on, its task (Slurm) or None (torchrun), its
    folder, exit code and stderr."""

    node: Node
    task: int | None
    out: Path
    returncode: int
    stderr: str


@dataclasses.dataclass
class Job:
    launches: list[Launch]
    wall_s: float

    @property
    def nodes(self) -> list[Node]:
        return sorted({la.node for la in self.launches}, key=lambda n: n.rank)


@functools.lru_cache(maxsize=1)
def namespaces_unavailable() -> str | None:
    """Why nodes cannot be simulated here (None when they can): unshare, taskset, time namespaces
    (Linux 5.6+) and the right to make them (root, or a user namespace the kernel allows)."""
    for tool in ("unshare", "taskset"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not Path(TORCHRUN).exists():
        return "torchrun is not installed next to this Python"
    try:
        p = subprocess.run(
            Node(0, "perfcore-probe", 1000).wrap(["cat", "/proc/uptime"]), capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unshare failed: {e}"
    if p.returncode != 0:
        return f"cannot make UTS and time namespaces here (root and Linux 5.6+ needed): {p.stderr.strip()[:200]}"
    return None


def plan_nodes(n: int = 2, slow: int | None = 1, bare: tuple[int, ...] = ()) -> list[Node]:
    """n nodes named node0.., monotonic clocks NODE_OFFSET_S apart (the first one 1000 s ahead of this
    machine's, so no node shares its clock), node `slow` slowed, the nodes in `bare` without perfcore."""
    return [Node(k, f"node{k}", 1000 + k * NODE_OFFSET_S, slowed=k == slow, bare=k in bare) for k in range(n)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def busy_core(core: int = SLOW_CORE) -> subprocess.Popen:
    """A loop that keeps `core` busy until it is killed: the slowed node shares that core with it."""
    return subprocess.Popen(["taskset", "-c", str(core), sys.executable, "-c", "while True: pass"])


def _runs_script(cmdline: bytes, script: str) -> bool:
    """Whether a process's command line runs `script` (the interpreter's first argument that is not an
    option), not merely names it (perfcore's and torchrun's command lines name it too)."""
    args = [a for a in cmdline.split(b"\0")[1:] if a and not a.startswith(b"-")]
    return bool(args) and args[0] == script.encode()


class Throttle(threading.Thread):
    """Slows a node while the job trains: a busy loop on SLOW_CORE, and the processes below `roots` that run
    the script `match` held stopped STOPPED_SHARE of every STOP_PERIOD_S, all at once (the node's machine
    paused, its collectives' threads too), until `trained()` says every rank has left its training loop, those
    processes have all exited, or stop(). Only processes this harness started (their descendants) are
    signalled."""

    SLOTS = 10

    def __init__(self, roots: list[int], match: str, trained):
        super().__init__(daemon=True)
        self.roots, self.match, self.trained = set(roots), match, trained
        self.done = threading.Event()
        self.pids: list[int] = []
        self.stopped: set[int] = set()

    def _targets(self) -> list[int]:
        parent, cmdline = {}, {}
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            try:
                stat = (d / "stat").read_text()
                parent[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
                cmdline[int(d.name)] = (d / "cmdline").read_bytes()
            except (OSError, ValueError, IndexError):
                continue
        below = []
        for pid in parent:
            p, seen = pid, 0
            while p in parent and p not in self.roots and seen < 64:
                p, seen = parent[p], seen + 1
            if p in self.roots and _runs_script(cmdline[pid], self.match):
                below.append(pid)
        return sorted(below)

    def _send(self, pid: int, sig: int) -> None:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
        if sig == signal.SIGSTOP:
            self.stopped.add(pid)
        else:
            self.stopped.discard(pid)

    def run(self) -> None:
        busy = busy_core()
        try:
            self._hold()
        finally:
            for pid in list(self.stopped):
                self._send(pid, signal.SIGCONT)
            busy.kill()
            busy.wait()

    def _hold(self) -> None:
        last, slot, seen = 0.0, 0, False
        stop_slots = round(STOPPED_SHARE * self.SLOTS)
        while not self.done.is_set():
            if time.monotonic() - last > 0.2:
                self.pids, last = self._targets(), time.monotonic()
                if (seen and not self.pids) or self.trained():
                    return  # the steps are over: what the ranks and parents do next runs at full speed
                seen = seen or bool(self.pids)
            for pid in self.pids:
                want = slot < stop_slots
                if want != (pid in self.stopped):
                    self._send(pid, signal.SIGSTOP if want else signal.SIGCONT)
            slot = (slot + 1) % self.SLOTS
            self.done.wait(STOP_PERIOD_S / self.SLOTS)

    def stop(self) -> None:
        self.done.set()
        self.join()


def _marked(marks: Path, what: str) -> int:
    """How many ranks have left the mark `what` (start: entered the training loop; end: left it)."""
    return sum(1 for f in marks.iterdir() if f.name.startswith(what))


def _await_training(marks: Path, ranks: int, procs: list[subprocess.Popen], deadline: float) -> None:
    """Until every rank has entered its training loop, one launch has exited (a failure the test reads), or the
    deadline."""
    while _marked(marks, "start") < ranks and time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            return
        time.sleep(0.05)


def _perfcore(out: Path, node: Node) -> list[str]:
    return [] if node.bare else [sys.executable, "-m", "perfcore", "run", "--warmup", "3", "--out", str(out), "--"]


def _env() -> dict[str, str]:
    # A leftover launcher or Slurm variable in the caller's shell is not this job's.
    drop = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID")
    return {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("SLURM_")}


def _commands(
    nodes: list[Node], per_node: int, outs: list[Path], launcher: str, script_args: list[str]
) -> list[tuple[Node, int | None, Path, list[str], dict[str, str]]]:
    port = free_port()
    base = _env()
    script = [str(SCRIPT), *script_args]
    runs = []
    if launcher == "torchrun":
        for node, out in zip(nodes, outs):
            cmd = [TORCHRUN, "--nnodes", str(len(nodes)), "--nproc_per_node", str(per_node)]
            cmd += ["--node_rank", str(node.rank), "--master_addr", "127.0.0.1", "--master_port", str(port)]
            runs.append((node, None, out, node.wrap(_perfcore(out, node) + cmd + script), base))
        return runs
    # srun: one perfcore per task, each with the variables srun sets for it; MASTER_ADDR and MASTER_PORT
    # as a Slurm batch script exports them for torch's env:// rendezvous.
    tasks = len(nodes) * per_node
    for node, out in zip(nodes, outs):
        for local in range(per_node):
            procid = node.rank * per_node + local
            env = {
                **base,
                "SLURM_JOB_ID": "4242",
                "SLURM_STEP_ID": "0",
                "SLURM_PROCID": str(procid),
                "SLURM_NTASKS": str(tasks),
                "SLURM_LOCALID": str(local),
                "SLURM_NODEID": str(node.rank),
                "SLURM_NNODES": str(len(nodes)),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
            }
            runs.append((node, procid, out, node.wrap(_perfcore(out, node) + [sys.executable, *script]), env))
    return runs


def run_job(
    tmp: Path,
    *,
    nodes: list[Node],
    per_node: int = 2,
    launcher: str = "torchrun",
    shared: bool = False,
    steps: int = 40,
    script_args: tuple[str, ...] = (),
    timeout: float = 600,
) -> Job:
    """Run the job: one `perfcore run` per node (torchrun) or per task (srun), all at once, into one
    shared folder (tmp/JOB) or one per node (tmp/<hostname>). A slowed node runs beside a busy loop."""
    if launcher not in ("torchrun", "srun"):
        raise ValueError(launcher)
    outs = [tmp / "JOB" if shared else tmp / n.hostname for n in nodes]
    marks, ranks = tmp / "marks", len(nodes) * per_node
    marks.mkdir(parents=True)
    args = ["--steps", str(steps), "--slow-rank", "-1", "--delay", "0", "--marks", str(marks), *script_args]
    runs = _commands(nodes, per_node, outs, launcher, args)
    logs = tmp / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    started, throttle = [], None
    try:
        for node, task, out, cmd, env in runs:
            name = node.hostname if task is None else f"{node.hostname}-task{task}"
            err = open(logs / f"{name}.err", "w")
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err, cwd=tmp)
            started.append((node, task, out, proc, err, logs / f"{name}.err"))
        deadline = time.monotonic() + timeout
        slowed = [proc.pid for node, _, _, proc, _, _ in started if node.slowed]
        if slowed:
            _await_training(marks, ranks, [s[3] for s in started], deadline)
            throttle = Throttle(slowed, str(SCRIPT), lambda: _marked(marks, "end") >= ranks)
            throttle.start()
        for *_, proc, _err, _path in started:
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    finally:
        if throttle is not None:
            throttle.stop()
        for *_, proc, err, _path in started:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            err.close()
    wall = time.perf_counter() - t0
    launches = [
        Launch(node, task, out, proc.returncode, path.read_text()) for node, task, out, proc, _, path in started
    ]
    return Job(launches, wall)


def job_or_skip(tmp: Path, **kw) -> Job:
    """run_job for a test: skipped, with the reason, where nodes cannot be simulated."""
    import pytest

    why = namespaces_unavailable()
    if why:
        pytest.skip(f"cannot simulate nodes here: {why}")
    return run_job(tmp, **kw)
