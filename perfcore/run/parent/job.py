"""One job across machines, one folder: the `perfcore run` parents of a job (one per node under torchrun,
one per task under srun) recognise each other by the job's identity, each registers in the folder
atomically, and the one whose finish completes the job's ranks writes the job's report.

Nothing crosses between the machines but files in the folder: each parent writes its node's view into
nodes/<name>/ (its own processes' parts, finished as a run folder of their own), then a done file naming
the ranks its processes wrote; whoever finds every rank of the job done (and wins one exclusive claim)
writes the job's report at the top. A folder per node works too: no parent ever finds the job complete
there, each leaves its node's view, and `perfcore merge` of the copied folders makes the job's report.

The identity: Slurm's job and step (SLURM_JOB_ID.SLURM_STEP_ID, which srun sets for every task of a step,
unique per step), else torchrun's rendezvous as its command line gives it (--rdzv-endpoint and --rdzv-id,
or --master-addr and --master-port, defaults as torchrun's). A folder holds one job: a parent whose job's
identity differs, or that comes after the job was reported or after JOIN_S, goes to a folder of its own
named by its job (the same name on every node)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import socket
from pathlib import Path
from typing import Any, Mapping

from perfcore import untrusted
from perfcore.run import protocol

__all__ = ["Job", "job_of", "JOB_DIR", "register", "done", "ranks_done", "node_view_name", "mine", "finish_job"]

JOB_DIR = ".perfcore-job"  # the parents' registrations, done files and the report's claim
# torchrun's own defaults for a static rendezvous (--master-addr, --master-port).
_MASTER_ADDR, _MASTER_PORT = "127.0.0.1", "29500"
# torchrun's options that take no value (every other option takes the next word unless it has "=").
_TORCHRUN_FLAGS = {"--standalone", "--no-python", "--no_python", "-m", "--module", "--run-path", "--run_path"}
_LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch")


@dataclasses.dataclass(frozen=True)
class Job:
    """A job across machines as this parent sees it: how it was launched, what identifies it, how many
    nodes it asked for (None: not said), and, under srun without a launcher, this task's rank."""

    kind: str  # "torchrun" or "slurm"
    key: str
    nodes: int | None = None
    task: Mapping[str, int] | None = None

    @property
    def digest(self) -> str:
        return hashlib.sha256(f"{self.kind}:{self.key}".encode()).hexdigest()[:16]


def _launcher_args(cmd: list[str]) -> list[str] | None:
    """torchrun's own arguments (before the training script), or None when the command is no torchrun."""
    if not cmd:
        return None
    name = Path(cmd[0]).name
    if name == "torchrun":
        return cmd[1:]
    if name.startswith("python"):
        for i, a in enumerate(cmd[1:-1], 1):
            if a == "-m":
                return cmd[i + 2 :] if cmd[i + 1] in _LAUNCHER_MODULES else None
            if not a.startswith("-"):
                return None
    return None


def _options(args: list[str]) -> dict[str, str]:
    """torchrun's options up to the training script, their names with '_' as '-'."""
    out: dict[str, str] = {}
    i = 0
    while i < len(args):
        a = args[i]
        if not a.startswith("-"):
            break  # the training script
        name, eq, value = a.partition("=")
        name = "--" + name.lstrip("-").replace("_", "-") if name.startswith("--") else name
        if eq:
            out[name] = value
        elif a in _TORCHRUN_FLAGS or name in _TORCHRUN_FLAGS:
            out[name] = ""
        elif i + 1 < len(args):
            out[name] = args[i + 1]
            i += 1
        i += 1
    return out


def _most(nnodes: str) -> int | None:
    """--nnodes N or MIN:MAX -> the most nodes (None when not a count)."""
    top = nnodes.rpartition(":")[2]
    return int(top) if re.fullmatch(r"[0-9]{1,6}", top) else None


def job_of(cmd: list[str], environ: Mapping[str, str] | None = None) -> Job | None:
    """The job this `perfcore run` is one node or task of, or None for a run on one machine (a plain
    command, torchrun --standalone or --nnodes 1, srun -n 1)."""
    environ = os.environ if environ is None else environ
    args = _launcher_args(cmd)
    step = protocol.slurm_step(environ)
    task = protocol.slurm_task(environ)
    if step is not None and task is not None:
        # A launcher under srun (one torchrun a node) sets its workers' ranks itself.
        nnodes = str(environ.get("SLURM_NNODES", "")).strip()
        nodes = int(nnodes) if re.fullmatch(r"[0-9]{1,6}", nnodes) else None
        return Job("slurm", step, nodes, None if args is not None else task)
    if args is None:
        return None
    opts = _options(args)
    nodes = _most(opts.get("--nnodes", "1"))
    if "--standalone" in opts or not nodes or nodes < 2:
        return None
    if "--rdzv-endpoint" in opts:
        key = f"{opts['--rdzv-endpoint']}/{opts.get('--rdzv-id', 'none')}"
    else:
        key = f"{opts.get('--master-addr', _MASTER_ADDR)}:{opts.get('--master-port', _MASTER_PORT)}"
    return Job("torchrun", key, nodes, None)


def _me() -> str:
    return f"{protocol.host_tag()}-{os.getpid()}"


def register(out: Path) -> None:
    """This parent's registration in the job's folder (exclusive: one file per parent)."""
    d = Path(out) / JOB_DIR / "parents"
    d.mkdir(parents=True, exist_ok=True)
    untrusted.exclusive(d / f"{_me()}.json", json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))


def done(out: Path, rc: int, ranks: list[int], world_size: int | None) -> bool:
    """Says this parent is done (the ranks its processes wrote, the job's size as they saw it, its
    launcher's exit code), then whether it is the one to write the job's report: every rank of the job
    is done, and this parent won the one exclusive claim on the report. Every parent writes its done file
    before it counts, so of two finishing at once at least the later one sees both."""
    d = Path(out) / JOB_DIR / "done"
    d.mkdir(parents=True, exist_ok=True)
    doc = {"host": socket.gethostname(), "pid": os.getpid(), "rc": rc, "ranks": ranks, "world_size": world_size}
    untrusted.exclusive(d / f"{_me()}.json", json.dumps(doc))
    state = ranks_done(out)
    if not state["world_size"] or state["missing"]:
        return False
    return untrusted.exclusive(Path(out) / JOB_DIR / "report", _me())


def ranks_done(out: Path) -> dict[str, Any]:
    """What the done files say: the ranks done, the job's size (the largest any parent saw), the ranks
    still missing, each parent's exit code, and the first nonzero one (0 when all finished well)."""
    d = Path(out) / JOB_DIR / "done"
    ranks: set[int] = set()
    world, codes = 0, []
    names = sorted(os.listdir(d)) if d.is_dir() and not d.is_symlink() else []
    for name in names:
        try:
            doc = json.loads(untrusted.read_file(d / name, untrusted.SMALL, "done file"))
        except (untrusted.Refused, ValueError):
            continue
        if not isinstance(doc, dict):
            continue
        got = [r for r in doc.get("ranks") or [] if isinstance(r, int) and not isinstance(r, bool) and r >= 0]
        ranks.update(got)
        w = doc.get("world_size")
        if isinstance(w, int) and not isinstance(w, bool) and 0 < w <= 1 << 20:
            world = max(world, w)
        rc = doc.get("rc")
        codes.append(rc if isinstance(rc, int) and not isinstance(rc, bool) else 1)
    missing = sorted(set(range(world)) - ranks) if world else []
    return {
        "ranks": sorted(ranks),
        "world_size": world,
        "missing": missing,
        "parents": len(codes),
        "rc": next((c for c in codes if c != 0), 0),
    }


def node_view_name(job: Job) -> str:
    """The folder under nodes/ of this parent's view: its host (a file name's characters only), and its
    task under srun, where one host runs several."""
    host = re.sub(r"[^0-9A-Za-z._-]", "_", socket.gethostname())[:64].lstrip(".") or protocol.host_tag()
    return f"{host}-task{job.task['rank']}" if job.task else host


def _owner(part: Path) -> tuple[Any, Any]:
    """(host, perfcore pid) a part's process wrote into it: its run.json, or its raw part's facts; a part
    left only as a checkpoint says neither."""
    for name, inner in (("run.json", ()), (protocol.RAW_JSON, ("facts", "common"))):
        try:
            doc = json.loads(untrusted.read_file(part / name, 64 << 20, "part"))
        except (untrusted.Refused, ValueError):
            continue
        for key in inner:
            doc = doc.get(key) if isinstance(doc, dict) else None
        if isinstance(doc, dict):
            return doc.get("host"), doc.get("perfcore_pid")
    return None, None


def mine(part: Path) -> bool:
    """Whether a part in the job's folder is one of this parent's processes': written on this host by a
    process this perfcore started."""
    host, pid = _owner(part)
    return host == socket.gethostname() and pid == os.getpid()


def _view_folder(out: Path, job: Job) -> Path:
    """nodes/<name>/ of this parent, made and marked as its own (another parent's of the same name, a
    second task on the host under a launcher: <name>-<pid>)."""
    from perfcore.run.parent.folder import prepare_out

    name = node_view_name(job)
    nodes = Path(out) / "nodes"
    nodes.mkdir(exist_ok=True)
    target = nodes / name
    if target.exists():
        target = nodes / f"{name}-{os.getpid()}"
    return prepare_out(target, "run")


def finish_job(out: Path, rc: int, cmd: list[str], job: Job, **kw: Any) -> tuple[Any, Path, dict[str, Any] | None]:
    """This parent's end of the job: its node's view (its own processes' parts, finished into nodes/<name>/
    as a run folder of their own, with kw: the monitor's samples, interference), its done file, and where
    that completes the job, the job's report at the top of `out` from every part there (exit code: the
    first nonzero of the parents'). Returns (the document to show, its folder, None when this parent wrote
    the job's report, else what the done files say: ranks done and missing)."""
    from perfcore.errors import RunFailed
    from perfcore.run.parent.finish import finish_run, read_parts
    from perfcore.run.parent.part_dirs import copy_workers

    parts = read_parts(out, keep=mine)
    ranks = sorted(p.rank for p in parts if p.rank is not None)
    world = max([p.world_size or 0 for p in parts] + [0]) or None
    view = _view_folder(out, job)
    copy_workers([out], view, tag=protocol.host_tag())  # this host's DataLoader figures, for its ranks
    try:
        doc = finish_run(view, rc, cmd, parts, scope="node", **kw)
    except RunFailed:
        done(out, rc, ranks, world)  # this node had nothing to report: the job's report still comes
        raise
    if done(out, rc, ranks, world):
        state = ranks_done(out)
        return finish_run(out, state["rc"], cmd), out, None
    return doc, view, ranks_done(out)
