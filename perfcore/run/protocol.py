"""What crosses between `perfcore run`'s parent and the instrumented child: the frozen configuration the
parent writes (and the one variable naming it), the folders and files the child writes under the run folder, and how the parent reads
them back. Both sides import this module and nothing of each other, so a change to what crosses is
made here once.

    <run dir>/.perfcore-child-<token>.json                the child's configuration, while the script runs
    <run dir>/parts/<key>/run.json, steps.csv, trace.npz   a process's part, written at its exit
    <run dir>/parts/<key>/checkpoint/run.json, steps.csv   the results so far, every ~30 s
    <run dir>/progress/<key>.json                          steps, recent step time, shares, every ~2 s
    <run dir>/workers/<pid>.L<loader>.csv, <pid>-main.L<loader>.csv  one line per batch a DataLoader made

<key> is rank<RANK> under a launcher that sets RANK (or, for the task's own process under srun without a
launcher, Slurm's SLURM_PROCID, which the parent reads and passes on), else pid<PID>-<host tag>: the same pid
comes up on every machine (a container starts its processes at 1), and one job's machines may share a folder.
A DataLoader's files under workers/ carry the host tag too.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import socket
import stat
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

# -- what the parent hands the child -------------------------------------------------------------
# perfcore's settings for its child never travel as variables of their own: a variable left in a shell
# (PERFCORE_SYNTHETIC=2 from an earlier experiment) would change a later plain run's training. They
# travel as one frozen ChildConfig, written by the parent into the run folder it has just created, in a
# file named by a random token. The one variable below names that file; it is the only thing a leftover
# could carry, and a leftover names a file that is gone (the parent removes it when the script ends), or
# one written by a perfcore that is not this process's ancestor: either way nothing is instrumented.
# A file, not an inherited descriptor: the script's own Pythons (torchrun's ranks, a spawned Pool) must
# find it too, and subprocess closes inherited descriptors by default.
ENV_CHILD_CONFIG = "PERFCORE_CHILD_CONFIG"
CONFIG_PREFIX, CONFIG_SUFFIX = ".perfcore-child-", ".json"
# A pipe's write end, inherited by the script's process: Python's signal.set_wakeup_fd writes there the
# number of each signal the script receives, so the parent passes on only the ones it did not get.
ENV_SIGNAL_FD = "PERFCORE_SIGNAL_FD"
# Every name perfcore ever used to hand its child something: the parent takes them all out of the
# environment it gives the script, so a leftover (this version's or an earlier one's) reaches nobody.
PARENT_ONLY_ENV = (
    ENV_CHILD_CONFIG,
    ENV_SIGNAL_FD,
    "PERFCORE_OUTER_PID",
    "PERFCORE_RUN_DIR",
    "PERFCORE_STEPS",
    "PERFCORE_WARMUP",
    "PERFCORE_BACKEND",
    "PERFCORE_KERNELS",
    "PERFCORE_STEP_ON",
    "PERFCORE_T_LAUNCH_NS",
    "PERFCORE_DL_OVERRIDES",
    "PERFCORE_SYNTHETIC",
    "PERFCORE_CHECKPOINT_S",
    "PERFCORE_TICK_EXTRA_S",
    "PERFCORE_NO_STEP_WARN_S",
    "PERFCORE_PACKAGE_PARENT",
)

# What may end a step, in the order the automatic choice prefers them.
STEP_SOURCES = ("optimizer", "backward", "batch", "forward")

# The folder the parent puts first on the child's PYTHONPATH: its sitecustomize.py boots the child.
BOOT_DIR = Path(__file__).resolve().parent / "child" / "_boot"

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


_PART_KEY = re.compile(r"rank[0-9]{1,10}|pid[0-9]{1,10}(-[0-9a-f]{8})?")
_COUNT = re.compile(r"[0-9]{1,10}")
# What a launcher (torchrun, mpirun, SLURM's wrappers) sets for each process of a job.
LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK")
# What srun sets for each task: its rank in the job step, their number, its rank on its node; and the step.
SLURM_TASK_VARIABLES = ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")
_SLURM_ID = re.compile(r"[0-9A-Za-z_]{1,32}")


def host_tag(host: str | None = None) -> str:
    """8 hex digits naming a host in a file name (the name itself may hold anything)."""
    return hashlib.sha256((socket.gethostname() if host is None else host).encode("utf-8", "replace")).hexdigest()[:8]


def part_key(rank: str | int | None) -> str:
    """The name of this process's part and progress file: rank<N>, else pid<P>-<host tag> (older folders
    name a part pid<P>). A rank that is not a plain integer never becomes part of a path: the process is
    keyed by its pid."""
    if rank is not None and _COUNT.fullmatch(str(rank)):
        return f"rank{int(rank)}"
    return f"pid{os.getpid()}-{host_tag()}"


def worker_file(pid: int, loader: int, main: bool = False) -> str:
    """The file under workers/ of one process's batches of one DataLoader (a worker's, or the main
    process's own fetches): <pid>[-main].<host tag>.L<loader>.csv."""
    return f"{int(pid)}{'-main' if main else ''}.{host_tag()}.L{int(loader)}.csv"


def slurm_task(environ: Mapping[str, str] | None = None) -> dict[str, int] | None:
    """This task's place in a Slurm job step (srun): {"rank", "world_size", "local_rank"} from
    SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID, or None where they are unset or not plain integers
    (a leftover in a shell, or srun's -n 1)."""
    environ = os.environ if environ is None else environ
    raw = [str(environ.get(n, "")).strip() for n in SLURM_TASK_VARIABLES]
    if not all(_COUNT.fullmatch(v) for v in raw):
        return None
    rank, world, local = (int(v) for v in raw)
    return {"rank": rank, "world_size": world, "local_rank": local} if 1 < world and rank < world else None


def slurm_step(environ: Mapping[str, str] | None = None) -> str | None:
    """The Slurm job step this process runs in (SLURM_JOB_ID.SLURM_STEP_ID, set by srun), or None."""
    environ = os.environ if environ is None else environ
    job, step = (str(environ.get(n, "")).strip() for n in ("SLURM_JOB_ID", "SLURM_STEP_ID"))
    return f"{job}.{step}" if _SLURM_ID.fullmatch(job) and _SLURM_ID.fullmatch(step) else None


def is_part_key(name: str) -> bool:
    """Whether a folder name under parts/ is one part_key makes (a name read from disk is checked)."""
    return bool(_PART_KEY.fullmatch(name))


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
            problems.append(
                f"perfcore: {name}={shown!r} is not a {kind} integer; ignoring it{instead}; "
                "unset it or let the launcher set it"
            )
    return values, problems


def part_dir(run_dir: Path, key: str) -> Path:
    return Path(run_dir) / PARTS / key


def checkpoint_dir(run_dir: Path, key: str) -> Path:
    return part_dir(run_dir, key) / CHECKPOINT


def progress_file(run_dir: Path, key: str) -> Path:
    return Path(run_dir) / PROGRESS / f"{key}.json"


# The most a settings or progress file holds: a few hundred bytes; a larger one is none perfcore wrote.
SMALL_FILE = 1 << 20


def read_small(path: Path) -> tuple[bytes, os.stat_result]:
    """A small file's bytes and its status, the file opened without following a link at its name (a FIFO
    opened without waiting): OSError when it cannot be, ValueError when it is no regular file or larger
    than SMALL_FILE (never read whole)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{path} is not a regular file")
        data = os.read(fd, SMALL_FILE + 1) if st.st_size <= SMALL_FILE else b""
        if st.st_size > SMALL_FILE or len(data) > SMALL_FILE:
            raise ValueError(f"{path} is {st.st_size} bytes, more than a file perfcore writes for its run holds")
        return data, st
    finally:
        os.close(fd)


def read_progress(run_dir: Path) -> dict[str, Any] | None:
    """The freshest progress file of a run (rank 0's when there are ranks), or None. Each is read as small
    files of the run are (read_small); one that is not is skipped."""
    d = Path(run_dir) / PROGRESS
    if d.is_symlink() or not d.is_dir():
        return None
    docs = []
    for f in d.glob("*.json"):
        try:
            doc = json.loads(read_small(f)[0])
        except (OSError, ValueError):
            continue  # being replaced right now: the next refresh reads it
        if isinstance(doc, dict):
            docs.append(doc)
    if not docs:
        return None
    rank0 = [x for x in docs if x.get("key") == "rank0"]
    return (
        rank0[0] if rank0 else max(docs, key=lambda x: x.get("time_ns", 0) if isinstance(x.get("time_ns"), int) else 0)
    )


# -- the child's configuration --------------------------------------------------------------------
# Test knobs: set only through `perfcore run --test-setting NAME=VALUE` (hidden), never from a shell.
TEST_SETTINGS = ("checkpoint_s", "tick_extra_s", "no_step_warn_s")


class ConfigError(ValueError):
    """A child configuration that cannot be used: the instrumentation stays off, with this one line."""


@dataclass(frozen=True)
class ChildConfig:
    """Everything the instrumented child is told, parsed once. `perfcore run` writes it (write) and the
    boot file reads it (load); the notebook magic and the trainer callbacks build one directly."""

    run_dir: str
    steps: int = 0  # measured steps wanted after warm-up (0: all)
    warmup: int = 5
    backend: str = "auto"  # kernel backend: auto, native, cupti-python, host
    kernels: bool = True  # trace kernels with CUPTI
    lines: bool = True  # sample the training thread's Python lines and count syncing tensor calls
    step_on: str | None = None  # one of STEP_SOURCES; None: the automatic choice
    t_launch_ns: int = 0  # the parent's clock at launch (same CLOCK_MONOTONIC); 0: unknown
    dl_overrides: Mapping[str, Any] = field(default_factory=dict)  # DataLoader settings a triage run changes
    synthetic: int = 0  # K: replay the first K batches (a triage run without input cost)
    stop_line: bool = True  # say on stderr when --steps stops the script (a triage's trials stop by design: not)
    checkpoint_s: float = CHECKPOINT_EVERY_S
    tick_extra_s: float = 0.0  # tests: seconds of extra work in each progress write (a slow tick)
    no_step_warn_s: float = 30.0  # seconds of the script's CPU time without a step before the child says so
    launcher_pid: int = 0  # the perfcore that wrote this file (0: built in-process)
    token: str = ""  # the random part of the file's name, repeated inside it
    # Under srun without a launcher: the task's rank and the number of tasks, for the script's own
    # process where no RANK is set (the parent read them from Slurm's variables).
    task_rank: int | None = None
    task_world_size: int | None = None
    job: str = ""  # the job this run is a part of, across machines (run.parent.job's digest); "" alone

    def __post_init__(self) -> None:
        for name in ("steps", "warmup", "t_launch_ns", "synthetic", "launcher_pid", "task_rank", "task_world_size"):
            v = getattr(self, name)
            if v is None and name.startswith("task_"):  # not a Slurm task
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ConfigError(f"{name}={v!r} is not a whole number >= 0")
        if not isinstance(self.job, str) or not re.fullmatch(r"[0-9a-f]{0,32}", self.job):
            raise ConfigError(f"job={self.job!r} is not a job's digest")
        for name in ("checkpoint_s", "tick_extra_s", "no_step_warn_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < float("inf"):
                raise ConfigError(f"{name}={v!r} is not a number of seconds >= 0")
        if not isinstance(self.run_dir, str) or not os.path.isabs(self.run_dir):
            raise ConfigError(f"run_dir={self.run_dir!r} is not an absolute path")
        if self.backend not in ("auto", "native", "cupti-python", "host"):
            raise ConfigError(f"backend={self.backend!r} is not auto, native, cupti-python or host")
        for name in ("kernels", "lines", "stop_line"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}={getattr(self, name)!r} is not true or false")
        if self.step_on is not None and self.step_on not in STEP_SOURCES:
            raise ConfigError(f"step_on={self.step_on!r} is not one of {', '.join(STEP_SOURCES)}")
        if not isinstance(self.dl_overrides, Mapping) or not all(isinstance(k, str) for k in self.dl_overrides):
            raise ConfigError(f"dl_overrides={self.dl_overrides!r} is not a JSON object of DataLoader settings")
        # Frozen all the way down: a later change to the caller's dict cannot reach the child.
        object.__setattr__(self, "dl_overrides", MappingProxyType(dict(self.dl_overrides)))

    def to_json(self) -> str:
        doc = {f.name: getattr(self, f.name) for f in fields(self)}
        return json.dumps({**doc, "dl_overrides": dict(self.dl_overrides)}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "ChildConfig":
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise ConfigError(f"not JSON ({e})") from None
        if not isinstance(doc, dict):
            raise ConfigError("not a JSON object")
        unknown = set(doc) - {f.name for f in fields(cls)}
        if unknown:
            raise ConfigError(f"unknown settings {sorted(unknown)} (written by another perfcore version?)")
        try:
            return cls(**doc)
        except TypeError as e:  # a required setting missing
            raise ConfigError(str(e)) from None

    def write(self) -> "ChildConfig":
        """Writes this configuration into its run folder under a fresh random name (its path: .path),
        readable by this user only, never through an existing file or link; returns what was written.
        The file stays open in this process until release(): a child checks that the perfcore it names
        as its launcher holds it, which a file someone else planted cannot show. The parent calls
        release() when the script has ended; it removes the files (.files())."""
        done = replace(self, launcher_pid=os.getpid(), token=secrets.token_hex(16))
        text = done.to_json()  # before the file exists: a setting JSON cannot carry leaves nothing behind
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(done.path, flags, 0o600)
        try:
            os.write(fd, text.encode())
        except BaseException:
            os.close(fd)
            done.path.unlink(missing_ok=True)
            raise
        object.__setattr__(done, "_held", fd)
        return done

    def release(self) -> None:
        """Ends what write() began: the file closed and, with the claim beside it, removed."""
        fd = self.__dict__.get("_held")
        if fd is not None:
            object.__setattr__(self, "_held", None)
            os.close(fd)
        for f in self.files():
            f.unlink(missing_ok=True)

    @property
    def path(self) -> Path:
        return Path(self.run_dir) / f"{CONFIG_PREFIX}{self.token}{CONFIG_SUFFIX}"

    @classmethod
    def load(cls, path: str) -> "ChildConfig":
        """The configuration a `perfcore run` that is this process's ancestor wrote for it, and holds open.
        Anything else (a leftover variable naming a finished run's file, a file not named as written, one
        planted for the pid of an ancestor that is no perfcore, a file too large to be one) is a ConfigError."""
        p = Path(path)
        token = p.name[len(CONFIG_PREFIX) : -len(CONFIG_SUFFIX)] if p.name.startswith(CONFIG_PREFIX) else ""
        if not p.is_absolute() or not token or not p.name.endswith(CONFIG_SUFFIX):
            raise ConfigError(f"{ENV_CHILD_CONFIG}={path!r} does not name a file perfcore run writes")
        try:
            raw, st = read_small(p)
        except OSError as e:
            raise ConfigError(
                f"{ENV_CHILD_CONFIG} names {path}, which cannot be read ({e.strerror}): "
                "the run it belonged to is over (a variable left in the environment?)"
            ) from None
        except ValueError as e:
            raise ConfigError(f"{e} (not a settings file perfcore run wrote)") from None
        try:
            config = cls.from_json(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise ConfigError(f"{path} is not text (not a settings file perfcore run wrote)") from None
        if config.token != token or Path(config.run_dir) != p.parent:
            raise ConfigError(f"{path} was not written for its own folder by perfcore run")
        if not launched_by(config.launcher_pid):
            raise ConfigError(
                f"{path} belongs to a perfcore run (pid {config.launcher_pid}) that did not start "
                "this process (a variable left in the environment?)"
            )
        if not holds(config.launcher_pid, st):
            raise ConfigError(
                f"{path} names pid {config.launcher_pid} as the perfcore run that wrote it, but that process "
                "does not hold it: it was not written for this process by its perfcore run"
            )
        return config

    def claim_outer(self) -> int | None:
        """None for the run's first instrumented process (the script's, or its launcher's: torchrun), which
        claims the run here; for a later one, the first one's pid: a Python the script started itself
        (a helper, a spawned Pool) when it has no RANK. The claim is a file beside the configuration,
        created exclusively, so no variable in the script's environment carries it."""
        path = self.path.with_suffix(".outer")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except FileExistsError:
            try:
                return int(path.read_text() or 0) or None
            except (OSError, ValueError):
                return None
        except OSError:
            return None
        with os.fdopen(fd, "w") as fh:
            fh.write(str(os.getpid()))
        return None

    def files(self) -> list[Path]:
        """The files a written configuration leaves in its run folder (the parent removes them)."""
        return [self.path, self.path.with_suffix(".outer")]


def holds(pid: int, st: os.stat_result) -> bool:
    """Whether process `pid` holds the file whose status is `st` open (ChildConfig.write keeps its file open
    while the script runs): on Linux, among /proc/<pid>/fd. Where that cannot be listed (a process of
    another user), whether the file belongs to the user `pid` runs as; with no /proc, True (the ancestry
    check stands alone there)."""
    fds = f"/proc/{pid}/fd"
    try:
        names = os.listdir(fds)
    except PermissionError:
        try:
            return os.stat(f"/proc/{pid}").st_uid == st.st_uid
        except OSError:
            return False
    except OSError:
        return not os.path.isdir("/proc/self")
    for name in names:
        try:
            held = os.stat(f"{fds}/{name}")
        except OSError:
            continue
        if (held.st_dev, held.st_ino) == (st.st_dev, st.st_ino):
            return True
    return False


def launched_by(pid: int) -> bool:
    """Whether process `pid` is an ancestor of this one (on Linux: its parent chain in /proc; elsewhere
    the parent, or a live process of that id)."""
    if pid <= 1:
        return False
    here = os.getppid()
    for _ in range(256):
        if here == pid:
            return True
        if here <= 1:
            return False
        try:
            with open(f"/proc/{here}/stat", "rb") as fh:
                here = int(fh.read().rsplit(b")", 1)[1].split()[1])  # the field after the command name
        except (OSError, ValueError, IndexError):
            break
    else:
        return False
    if os.path.isdir("/proc/self"):
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except OSError:
        return False
    return True
