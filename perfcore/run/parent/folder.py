"""Run folders: where a command writes, chosen and checked before it starts.

perfcore writes only into folders it created. Each carries a marker file (MARKER) naming the
process that made it. A new or empty folder is taken and marked; a folder this process already
marked is used again (the CLI prepares it, then the run or merge it calls does too); any other
existing folder (the user's files, or an earlier run's results) is left as it is and this run
goes into a fresh subfolder of it, which perfcore names on stderr. One exception, said on stderr: a
folder this user's earlier `perfcore run` marked as failed before its first step (no results, only
what perfcore wrote while the script started) is taken by the next run, so that the run after a fix
lands where it was asked. What is removed then is decided by the manifest that earlier run wrote of its
own entries (untrusted.MANIFEST: names, sizes, content hashes, each file's inode and ctime), never by the
marker, and only where the marker names that manifest's own inode and ctime (a copied folder's cannot):
the folder is taken only when everything in it is such an entry, unchanged, and the take-over is one
exclusive claim, so of two runs starting on the folder at once exactly one takes it. Nothing else is
ever deleted.
Default folders are unique across processes and hosts started in the same second: time, then a
random suffix, and the folder is created exclusively (a name already taken is drawn again)."""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import sys
import time
from pathlib import Path
from typing import Any, Iterable

from perfcore import untrusted
from perfcore.errors import UsageError
from perfcore.run.parent.marker import MARKER, MARKER_SCHEMA, Marker, marker_of
from perfcore.untrusted import SMALL, Refused, read_file

__all__ = [
    "MARKER",
    "default_out",
    "prepare_out",
    "reuse_out",
    "is_run_folder",
    "marker_of",
    "Marker",
    "mark_failed",
    "live_run",
    "is_stream",
    "check_target",
    "remember",
    "drop_dead_settings",
    "prepare_job_out",
]

# One token per perfcore process: a folder marked with it was made by this very command.
_TOKEN = secrets.token_hex(8)
ROOT = Path("perfcore-runs")


def default_out(kind: str = "run", parent: Path | None = None) -> Path:
    """A name no other process is using: <parent>/<kind>-<time>-<random> (not yet created)."""
    return Path(parent or ROOT) / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def is_run_folder(folder: Path) -> bool:
    return marker_of(folder) is not None


def _alive_since(pid: Any, written_s: float) -> bool:
    """Whether process `pid` runs on this host and started before `written_s` (a file it wrote): a
    pid reused since by another process does not count, nor does a zombie."""
    import psutil

    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1 or pid == os.getpid():
        return False
    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE and proc.create_time() <= written_s + 1.0
    except (psutil.Error, OSError, ValueError):
        return False


def _perfcore_alive(mark: Marker, marker: os.stat_result) -> bool:
    """Whether the perfcore that wrote the marker still runs: the same pid started at the same tick (a
    marker of this version says when), else a process of that pid older than the marker; either way a
    process whose command line is perfcore's, run by the marker's owner. A marker naming pid 1 with its
    start, or any long-lived process that is no perfcore of this user, never keeps a folder "going"."""
    pid, started = mark.pid, mark.started
    if started is not None:
        if pid == os.getpid() or not untrusted.alive(pid, started):
            return False
    elif not _alive_since(pid, marker.st_mtime):
        return False
    if untrusted.owner_of(pid) != marker.st_uid:
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"perfcore" in fh.read(1 << 16)
    except OSError:
        return not os.path.isdir("/proc/self")


def _script_alive(pid: Any, written_s: float, owner: int, folder: Path) -> bool:
    """Whether the process a progress file names is a script process of this folder's run: alive, older
    than the file, run by the file's owner, and (where its environment can be read) started with a
    settings file of this folder. pid 1, or any long-lived process of another user, is not."""
    from perfcore.run.protocol import ENV_CHILD_CONFIG

    if not _alive_since(pid, written_s) or untrusted.owner_of(pid) != owner:
        return False
    env = untrusted.environ_of(pid)
    if env is None:
        return True  # another user's process we cannot look into, run by the file's owner: its word stands
    named = env.get(ENV_CHILD_CONFIG.encode())
    return named is not None and Path(os.fsdecode(named)).parent == folder.resolve()


def live_run(folder: Path) -> str | None:
    """Who is still writing `folder` ("perfcore (pid N)" or "its script (pid N)"), or None when no
    process of its run is alive here. Read from the folder's marker and progress files; a folder made
    on another host has no process here to ask about."""
    folder = Path(folder)
    mark = marker_of(folder)
    if mark is None or mark.host != socket.gethostname() or mark.token == _TOKEN:
        return None
    try:
        if _perfcore_alive(mark, (folder / MARKER).lstat()):
            return f"perfcore (pid {mark.pid})"
    except OSError:
        return None
    try:
        d = untrusted.open_dir(folder, "progress")
    except Refused:
        return None
    try:
        names = sorted(n for n in os.listdir(d) if n.endswith(".json"))
    finally:
        os.close(d)
    for name in names:
        try:
            fd = untrusted.open_file(folder, f"progress/{name}")
        except Refused:
            continue
        try:
            st = os.fstat(fd)
            doc = json.loads(os.read(fd, SMALL)) if st.st_size <= SMALL else None
        except (OSError, ValueError):
            continue
        finally:
            os.close(fd)
        if isinstance(doc, dict) and _script_alive(doc.get("pid"), st.st_mtime, st.st_uid, folder):
            return f"its script (pid {doc['pid']})"
    return None


def _cannot(out: Path, e: OSError) -> UsageError:
    return UsageError(f"cannot write to --out {out}: {e.strerror or e}; choose a writable folder")


def _marker_text(kind: str, job: str | None = None) -> str:
    from perfcore import jsonio

    doc = {
        "schema": MARKER_SCHEMA,
        "kind": kind,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        # With the pid, what a reused pid cannot repeat: whether this process still runs is asked of both.
        "started": untrusted.start_ticks(os.getpid()),
        "token": _TOKEN,
    }
    if job is not None:  # a job across machines: its other parents join this folder (prepare_job_out)
        doc.update(job=job, created_unix=time.time())
    return jsonio.dumps(doc)


def _claim(out: Path, kind: str, job: str | None = None) -> bool:
    """Marks `out` as this run's: the marker is created exclusively (never through a link), so of two
    commands claiming one folder at once exactly one gets it. False when it already has a marker."""
    try:
        return untrusted.exclusive(out / MARKER, _marker_text(kind, job), 0o666)
    except OSError as e:  # a read-only folder: say so before the work starts, not after it
        raise _cannot(out, e)


def _create(out: Path, kind: str, job: str | None = None) -> bool:
    """Makes `out` as a new folder and claims it; False when the name is already taken."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.mkdir()
    except FileExistsError:
        return False
    except OSError as e:
        raise _cannot(out, e)
    # Another command that found the new folder empty may have claimed it first: then it is theirs.
    return _claim(out, kind, job)


# The marker's word for a run that ended before its first step, and what perfcore writes in such a
# folder besides its marker (protocol.PARTS, WORKERS, PROGRESS).
_FAILED = "failed before its first step"
_LEFT_BEFORE_A_STEP = ("parts", "workers", "progress")


def _ours(out: Path) -> bool:
    mark = marker_of(out)
    return mark is not None and mark.token == _TOKEN and not (Path(out) / MARKER).is_symlink()


def remember(out: Path, paths: Iterable[Path]) -> None:
    """Lists files this command just wrote into its folder (its settings file) in the folder's manifest,
    so that a later perfcore may remove them once this process is gone, and only while they are
    unchanged. Nothing is listed in a folder whose marker is not this command's."""
    out = Path(out)
    if not _ours(out):
        return
    entries = [e for p in paths if Path(p).parent == out and (e := untrusted.entry(out, Path(p).name))]
    try:
        untrusted.record(out, _TOKEN, entries)
    except OSError:  # the folder keeps the file; only its later removal is lost
        pass


def mark_failed(out: Path) -> None:
    """Says in the marker of a folder this command made that its run ended before its first step, and lists
    in the manifest what the run left there (perfcore's leftovers, their sizes and hashes): the next
    `perfcore run` of the same user may take the folder, removing exactly those. A run that saw steps it
    could not write (a full disk) is never marked so (part_dirs.lost_results): its leftovers stay."""
    from perfcore import jsonio

    mark = marker_of(out)
    if mark is None or not _ours(out):
        return
    files, dirs = untrusted.manifest_entries(out, _LEFT_BEFORE_A_STEP)
    try:
        untrusted.record(out, _TOKEN, files, dirs)
        # The marker names its manifest's identity: a manifest made anywhere else (a crafted one, a copy)
        # never passes for it, so that nothing it lists, not even an empty folder, is removed.
        manifest = untrusted.identity(Path(out) / untrusted.MANIFEST)
        jsonio.write(Path(out) / MARKER, {**mark.doc, "ended": _FAILED, "manifest": manifest})
    except OSError:  # the folder is then left to the next run as an earlier run's: a subfolder
        pass


def _not_the_runs(out: Path, manifest: dict[str, Any]) -> list[str]:
    """What in the folder is not the failed run's own, unchanged: anything but its marker and its manifest
    at the top, and anything below that its manifest does not list."""
    tops = [n for n in os.listdir(out) if n not in (MARKER, untrusted.MANIFEST)]
    return [n for n in tops if n not in _LEFT_BEFORE_A_STEP] + untrusted.unlisted(out, manifest, tops)


def _take_failed(out: Path, mark: Marker, kind: str) -> bool:
    """Takes a folder this user's earlier run left as failed before its first step: its run is over, it
    was made on this host by this user, and everything in it is what that run listed in its manifest,
    unchanged. The take-over is one claim file, created exclusively, then the marker read back: of any
    number of commands doing this at once, in any order, one takes the folder; the others leave it as
    it is. Only the listed entries are removed."""
    token = mark.token
    if kind != "run" or mark.kind != "run" or mark.ended != _FAILED:
        return False
    if token is None or not re.fullmatch(r"[0-9A-Za-z-]{1,64}", token):
        return False
    try:
        if out.is_symlink() or mark.host != socket.gethostname() or live_run(out):
            return False
        if out.stat().st_uid != os.getuid() or (out / MARKER).lstat().st_uid != os.getuid():
            return False
        before = read_file(out / MARKER, SMALL, "folder marker")
        manifest, listed_by = untrusted.read_manifest(out, token), untrusted.identity(out / untrusted.MANIFEST)
        if manifest is None or listed_by is None or mark.manifest != listed_by or _not_the_runs(out, manifest):
            return False
        claim = f".perfcore-take-{token}"
        if not untrusted.exclusive(out / claim, _TOKEN):
            return False  # another command is taking it
    except (OSError, Refused):
        return False
    try:
        # Read back once claimed: still the failed run's marker, not the one a faster command wrote after
        # taking the folder. (A command that lost the claim meanwhile made its subfolder here: it stays, as
        # anything does that is not a listed entry, unchanged: each is checked again as it is removed.)
        if read_file(out / MARKER, SMALL, "folder marker") != before:
            return False
        untrusted.remove_listed(out, manifest)
        (out / untrusted.MANIFEST).unlink(missing_ok=True)  # the failed run's: this run keeps its own
        untrusted.write_small(out / MARKER, _marker_text(kind))
        return True
    except (OSError, Refused):
        return False
    finally:
        (out / claim).unlink(missing_ok=True)


def drop_dead_settings(out: Path) -> list[str]:
    """Removes the settings files (and the claim beside each) that the perfcore which made this folder
    wrote for its script, once that perfcore is gone (killed before it could remove them): each only
    where the folder's manifest, written by that perfcore, lists it and it is unchanged. Returns the
    names removed; anything else stays, whatever its name."""
    from perfcore.run.protocol import CONFIG_PREFIX, CONFIG_SUFFIX

    out = Path(out)
    mark = marker_of(out)
    if mark is None or mark.host != socket.gethostname() or mark.token is None:
        return []
    try:
        if _perfcore_alive(mark, (out / MARKER).lstat()):
            return []  # its own files, which it removes when its script ends
    except OSError:
        return []
    manifest = untrusted.read_manifest(out, mark.token)
    removed: list[str] = []
    for e in (manifest or {"files": []})["files"]:
        name = e["name"]
        if "/" in name or not (name.startswith(CONFIG_PREFIX) and name.endswith(CONFIG_SUFFIX)):
            continue
        if not untrusted.matches(out, e) or untrusted.remove_listed(out, {"files": [e], "dirs": []}):
            continue
        removed.append(name)
        # The claim the script's first Python made beside it holds that process's pid and nothing else.
        outer = name[: -len(CONFIG_SUFFIX)] + ".outer"
        try:
            if re.fullmatch(rb"[0-9]{0,10}", read_file(out / outer, 64, "claim")):
                (out / outer).unlink()
                removed.append(outer)
        except (Refused, OSError):
            pass
    return removed


def _fresh(parent: Path, kind: str) -> Path:
    for _ in range(64):
        out = default_out(kind, parent)
        if _create(out, kind):
            return out
    raise UsageError(f"could not find an unused folder name under {parent}; choose --out")


def prepare_out(out: Path | None, kind: str = "run") -> Path:
    """The folder this command writes into (created and marked); see the module docstring for the rule."""
    shared = untrusted.open_to_others(ROOT if out is None else out)
    if shared is not None:
        raise UsageError(
            f"cannot write to {f'--out {out}' if out else ROOT}: any user may change {shared} (writable by all, "
            "not only by its owner), and so redirect or swap perfcore's files there; choose a folder only you "
            "can change"
        )
    if out is None:
        return _fresh(ROOT, kind)
    out = Path(out).expanduser()  # the CLI's rule for `~`, for callers from Python too
    if _create(out, kind):
        return out
    if not out.is_dir():
        raise UsageError(f"cannot write to --out {out}: Not a directory; choose a writable folder")
    mark = marker_of(out)
    if mark is not None and mark.token == _TOKEN:
        return out
    try:
        empty = not any(out.iterdir())
    except OSError as e:
        raise _cannot(out, e)
    if empty and _claim(out, kind):
        return out
    if mark is not None and _take_failed(out, mark, kind):
        print(
            f"perfcore: {out} held your earlier run that failed before its first step (no results, only the "
            "files that run listed as its own while it started, now removed); this run writes there",
            file=sys.stderr,
        )
        return out
    sub = _fresh(out, kind)
    # Not empty, or claimed between the look and the claim: another command started on it just now.
    what = (
        "another perfcore command"
        if empty
        else "an earlier perfcore run"
        if mark is not None
        else "files perfcore did not write"
    )
    print(f"perfcore: {out} holds {what}; leaving it as it is and writing into {sub}", file=sys.stderr)
    return sub


# A job's parents start within torchrun's rendezvous timeout of each other (minutes): a folder whose job
# began longer ago than this is an earlier run of the same command, never joined.
JOIN_S = 3600.0
_JOB_DIR = ".perfcore-job"  # run.parent.job's: its report's claim closes the folder to joiners


def _joinable(out: Path, mark: Marker | None, job: str) -> bool:
    """Whether `out` is the folder of this very job, still open: its marker names the job, it began
    within JOIN_S, and its report was not claimed yet."""
    if mark is None or mark.kind != "run" or mark.job != job or out.is_symlink():
        return False
    if mark.created_unix is None or abs(time.time() - mark.created_unix) > JOIN_S:
        return False
    return not os.path.lexists(out / _JOB_DIR / "report")


def _marker_settled(out: Path, wait_s: float = 2.0) -> Marker | None:
    """The marker of a folder another parent may be creating this instant (made, marker not yet written
    whole): read again for a moment before it counts as none."""
    deadline = time.monotonic() + wait_s
    while True:
        mark = marker_of(out)
        if mark is not None or time.monotonic() > deadline:
            return mark
        try:
            if any(n != MARKER for n in os.listdir(out)):
                return None  # a folder with other things in it and no marker is not a parent's new folder
        except OSError:
            return None
        time.sleep(0.05)


def prepare_job_out(out: Path | None, job: str) -> Path:
    """The folder of a job across machines that this parent writes into, the same on every node that
    names the same --out (or none): `out` when it is new, empty, or already this job's (then joined);
    otherwise a folder inside it named by the job, job-<digest> (then -2, -3 ... past other runs of it),
    which the job's other parents find alike. A folder is never taken from another run or job."""
    base = Path(out).expanduser() if out is not None else ROOT / f"job-{job[:12]}"
    candidates = [base] + [base / (f"job-{job[:12]}" + (f"-{g}" if g > 1 else "")) for g in range(1, 64)]
    for i, folder in enumerate(candidates):
        if _create(folder, "run", job):
            got = folder
        elif not folder.is_dir():
            if i == 0:
                raise UsageError(f"cannot write to --out {folder}: Not a directory; choose a writable folder")
            continue
        else:
            mark = _marker_settled(folder)
            if _joinable(folder, mark, job):
                got = folder
            elif mark is None and not any(True for _ in folder.iterdir()) and _claim(folder, "run", job):
                got = folder
            elif mark is None and _joinable(folder, _marker_settled(folder), job):
                got = folder  # another parent claimed the empty folder first: this job's
            else:
                continue
        if i:
            print(f"perfcore: {base} holds another run; this job writes into {got}", file=sys.stderr)
        return got
    raise UsageError(f"could not find an unused folder for this job under {base}; choose --out")


def reuse_out(out: Path, needs: str) -> Path:
    """An earlier command's folder, to be continued (sweep --resume): it must be perfcore's and hold `needs`."""
    out = Path(out).expanduser()
    if not out.is_dir():
        raise UsageError(f"nothing to resume: {out} is not a folder")
    if not is_run_folder(out):
        raise UsageError(f"cannot resume in {out}: it is not a folder perfcore made (no {MARKER})")
    if not (out / needs).is_file():
        raise UsageError(f"nothing to resume in {out}: no {needs} (the sweep stopped before its first configuration?)")
    return out


def is_stream(path: str | Path) -> bool:
    """A device, pipe or socket (/dev/stdout, >(jq .)): written into, never replaced by a file."""
    return os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path)


def _perfcore_wrote(path: Path, page: bool) -> bool:
    """Whether an existing file is one perfcore writes: a page ending with perfcore's footer, or a
    JSON document of a perfcore schema."""
    try:
        if page:
            with open(path, "rb") as f:
                f.seek(max(0, path.stat().st_size - 256))
                return b"written by perfcore at " in f.read()
        if path.stat().st_size > 256 * 2**20:
            return False
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and str(doc.get("schema", "")).startswith("perfcore.")


def check_target(path: str | Path | None, inputs: Iterable[str | Path] = (), page: bool = False) -> None:
    """A file a command writes beside its folder (--json, compare's --html): it may replace only a
    file perfcore wrote (a JSON document or a page of its own), never a link, and never a file in a
    folder the command reads. Checked before any work, as one line."""
    if not path or str(path) == "-" or is_stream(path):
        return
    path = Path(path).expanduser()
    if not os.path.lexists(path):
        return
    flag = "--html" if page else "--json"
    where = next((Path(d) for d in inputs if _inside(path, Path(d))), None)
    if where is not None:
        raise UsageError(f"{flag} {path} is inside {where}, which this command reads; choose a path outside it")
    if path.is_symlink() or not path.is_file() or not _perfcore_wrote(path, page):
        what = (
            "a link" if path.is_symlink() else "not a file" if not path.is_file() else "a file perfcore did not write"
        )
        raise UsageError(f"{flag} {path} is {what}; perfcore replaces only files it wrote: choose another path")


def _inside(path: Path, folder: Path) -> bool:
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):
        return False
