"""A run folder's parts on disk, handled as untrusted: which folders are parts (never one reached
through a link), the run's steps table (written once; compressed where large), and what finishing
leaves of each part (its checkpoint dropped, a large table compressed). Nothing outside the folder
being finished is read as a part, written or deleted."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfcore import untrusted
from perfcore import jsonio
from perfcore.safe_text import clean
from perfcore.run.protocol import CHECKPOINT, PARTS, PROGRESS, RAW_JSON, WORKERS, is_part_key
from perfcore.untrusted import SMALL, Refused, open_regular, read_file

if TYPE_CHECKING:
    from perfcore.analysis.process_part import Part

__all__ = [
    "part_dirs",
    "drop_checkpoints",
    "write_steps",
    "hand_over_table",
    "compress_parts",
    "LARGE_STEPS",
    "lost_results",
    "copy_workers",
]


def part_dirs(out: Path) -> list[Path]:
    """The part folders of a run folder: real folders named as protocol.part_key names them. A link
    (parts/ itself, or a part) is never followed: finishing writes into a part and drops its
    checkpoint, which through a link would change files outside the folder."""
    root = out / PARTS
    if root.is_symlink() or not root.is_dir():
        return []
    found = []
    for d in sorted(root.iterdir()):
        if d.is_symlink() or not d.is_dir():
            continue
        if not is_part_key(d.name):
            sys.stderr.write(f"perfcore: skipping {clean(str(d))}: not a part perfcore writes (rank<N> or pid<N>)\n")
            continue
        found.append(d)
    return found


def drop_checkpoints(out: Path, parts: list[Part]) -> None:
    """A part that wrote its own results no longer needs the checkpoint perfcore kept for it: the files
    perfcore writes there are removed, then the folder if nothing else is in it."""
    for p in parts:
        d = Path(p.dir or "")
        ck = d / CHECKPOINT
        # Only a real folder inside this run folder's parts/ (a linked part was never read): nothing outside
        # the folder being finished is deleted.
        if _own_part(out, d) and (d / "run.json").is_file() and ck.is_dir() and not ck.is_symlink():
            _drop_checkpoint(ck)


# The temporary names of a checkpoint's atomic writes that a kill leaves behind (jsonio.atomic_path).
_LEFT_BY_A_KILL = re.compile(r"\.(run|steps)\.[0-9]+-[0-9a-f]{6}\.tmp\.(json|csv)")


def _drop_checkpoint(ck: Path) -> None:
    """Removes perfcore's own files from checkpoint folder `ck` (regular files of its names, no link on the
    way), then the folder, which stays when anything else is in it: a copied folder's checkpoint may hold
    what its owner put there (notes, a model), which perfcore never removes."""
    from perfcore.analysis.reader import CHECKPOINT_TABLE

    # What run.child.progress writes there (steps.csv: an earlier version's table).
    ours = ("run.json", CHECKPOINT_TABLE, "steps.csv")
    try:
        d = untrusted.open_dir(ck)
    except untrusted.Refused:
        return
    try:
        for name in os.listdir(d):
            if name in ours or _LEFT_BY_A_KILL.fullmatch(name):
                with contextlib.suppress(OSError):
                    if stat.S_ISREG(os.stat(name, dir_fd=d, follow_symlinks=False).st_mode):
                        os.unlink(name, dir_fd=d)
    finally:
        os.close(d)
    with contextlib.suppress(OSError):
        ck.rmdir()  # refused while the folder holds anything else


# From this many rows a steps table is kept gzip-compressed (steps.csv.gz): 1M tiny steps made an 83 MB
# steps.csv, stored twice (the part's and the run's) and a third time as parquet.
LARGE_STEPS = 100_000


def _gzip(fh):
    """A gzip stream into the open file fh whose header names no file: given a path, gzip writes its
    name (the atomic write's temporary one, random) into the header, and the same table compressed twice
    differed."""
    import gzip

    return gzip.GzipFile(filename="", mode="wb", compresslevel=6, mtime=0, fileobj=fh)


def write_steps(part: Part, path: Path, files: dict[str, str], added: tuple[str, ...] | None) -> None:
    """steps.csv, and steps.parquet when pyarrow is installed; a large table only as steps.csv.gz.
    added: the columns the finish appended to the part's rows since they were read (the monitor's), None
    where it changed them otherwise. The part's own file then makes the run's: copied, or each of its lines
    joined to the added columns' (only those formatted: no re-formatting of every figure of every row)."""
    if len(part.table) >= LARGE_STEPS:
        files.pop(path.name, None)
        gz = path.with_name(path.name + ".gz")
        with (
            jsonio.atomic_path(gz) as tmp,
            open(tmp, "wb") as fh,
            _gzip(fh) as z,
            io.TextIOWrapper(z, encoding="utf-8", newline="") as text,
        ):
            part.table.to_csv(text, index=False)
        files[gz.name] = gz.name
        return
    src = part.dir
    if added is None or src is None or not _joined_csv(Path(src) / "steps.csv", part.table, added, path):
        jsonio.write_csv(path, part.table)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return
    # A file object, not a path: pyarrow cannot take a path holding a byte that is not UTF-8.
    with jsonio.atomic_path(path.with_suffix(".parquet")) as tmp, open(tmp, "wb") as fh:
        part.table.to_parquet(fh, index=False)
    files["steps.parquet"] = "steps.parquet"


class _NotItsRows(Exception):
    """The part's file does not hold the table's rows as the table would be written: write it whole."""


def _joined_csv(src: Path, table, added: tuple[str, ...], path: Path) -> bool:
    """path: the bytes table.to_csv(index=False) writes, made from src (the part's steps.csv, which holds the
    table's first columns, row by row) and the added last columns, formatted on their own, CSV_SLICE rows at
    a time. False, nothing written, where src is not that: its header or row count differs, a field is
    quoted (a line of it may be two), or it is not a regular file of its own."""
    from perfcore.run.part_files import CSV_SLICE

    cols, end = list(table.columns), os.linesep  # to_csv's line terminator
    k = len(cols) - len(added)
    if k <= 0 or tuple(cols[k:]) != tuple(added) or set(added) & set(cols[:k]):
        return False
    if not added:  # the part's rows as they are
        import shutil

        try:
            with open_regular(src) as own, jsonio.atomic_path(path) as tmp, open(tmp, "wb") as fh:
                shutil.copyfileobj(own, fh, 1 << 20)
        except (Refused, FileNotFoundError):
            return False
        return True
    try:
        with (
            open_regular(src) as raw,
            io.TextIOWrapper(raw, encoding="utf-8", newline="") as own,
            jsonio.atomic_path(path) as tmp,
            open(tmp, "w", encoding="utf-8", newline="") as fh,
        ):
            if own.readline() != table.iloc[:0, :k].to_csv(index=False):
                raise _NotItsRows
            fh.write(table.iloc[:0].to_csv(index=False))
            for since in range(0, len(table), CSV_SLICE):
                # With the index first, a row of one empty field is written as the whole table's row ends
                # (",") and not as csv writes a lone empty field ('""').
                more = table.iloc[since : since + CSV_SLICE, k:].reset_index(drop=True).to_csv(header=False)
                ends = [line.partition(",")[2] for line in more.split(end)[:-1]]
                lines = [own.readline() for _ in ends]
                if '"' in more or not all(line.endswith(end) and '"' not in line for line in lines):
                    raise _NotItsRows
                fh.write("".join(f"{line[: -len(end)]},{tail}{end}" for line, tail in zip(lines, ends)))
            if own.read(1):
                raise _NotItsRows
    except (_NotItsRows, Refused, FileNotFoundError, UnicodeDecodeError):
        return False
    return True


def _own_part(out: Path, d: Path) -> bool:
    """A real part folder of this run folder (not a checkpoint, not reached through a link)."""
    return d.parent == out / PARTS and not d.is_symlink() and not (out / PARTS).is_symlink()


def hand_over_table(out: Path, main: Part) -> None:
    """The run's steps table was written from the main part's rows: a large one is kept once. The
    part's run.json says its table is the run's (load_part reads it from there), and only then is the
    part's own copy removed: cut short between the two, the part still reads its own."""
    d = Path(main.dir or "")
    if len(main.table) < LARGE_STEPS or not _own_part(out, d) or not (out / "steps.csv.gz").is_file():
        return
    own = [d / n for n in ("steps.csv", "steps.csv.gz") if (d / n).is_file() and not (d / n).is_symlink()]
    if not own or (d / "run.json").is_symlink() or not (d / "run.json").is_file():
        return
    doc = json.loads((d / "run.json").read_text())
    if doc.get("steps_table") != "run":
        jsonio.write(d / "run.json", {**doc, "steps_table": "run"})
    for f in own:
        f.unlink()


def compress_parts(out: Path, parts: list[Part]) -> None:
    """A large part's steps.csv, read and written into the run's table, is kept compressed (merge and
    report read steps.csv.gz alike). Only parts of this folder, real folders, their own files."""
    import shutil

    for p in parts:
        d = Path(p.dir or "")
        csv = d / "steps.csv"
        if len(p.table) < LARGE_STEPS or not _own_part(out, d) or csv.is_symlink() or not csv.is_file():
            continue
        with (
            jsonio.atomic_path(d / "steps.csv.gz") as tmp,
            open(csv, "rb") as src,
            open(tmp, "wb") as fh,
            _gzip(fh) as dst,
        ):
            shutil.copyfileobj(src, dst, 1 << 20)
        csv.unlink()


def lost_results(out: Path) -> dict[str, Any] | None:
    """What a run that left no results had nonetheless seen: the most steps its progress files counted,
    the parts cut short while written (a folder with neither run.json nor raw.json: a full disk, a kill
    mid-write), the parts that keep a checkpoint. None when it saw none of these: it failed before its
    first step. {"steps", "cut_short", "checkpoints", "disk_full"}."""

    steps = 0
    progress = out / PROGRESS
    names = [] if progress.is_symlink() or not progress.is_dir() else sorted(progress.glob("*.json"))
    for f in names:
        try:
            seen = json.loads(read_file(f, SMALL, "progress file")).get("steps")
        except (Refused, ValueError, AttributeError):
            continue
        if isinstance(seen, int) and not isinstance(seen, bool):
            steps = max(steps, seen)
    parts = part_dirs(out)
    cut = [d.name for d in parts if not (d / "run.json").is_file() and not (d / RAW_JSON).is_file()]
    kept = [d.name for d in parts if (d / CHECKPOINT).is_dir() and not (d / CHECKPOINT).is_symlink()]
    if not (steps or cut or kept):
        return None
    try:
        st = os.statvfs(out)
        full = st.f_bavail * st.f_frsize < 1 << 20
    except OSError:
        full = False
    return {"steps": steps, "cut_short": cut, "checkpoints": kept, "disk_full": full}


# A DataLoader's batch lines as protocol.worker_file names them (and as older versions did, without a host).
_WORKER_FILE = re.compile(r"[0-9]{1,10}(-main)?(\.[0-9a-f]{8})?\.L[0-9]{1,6}\.csv")


def copy_workers(sources: list[Path], out: Path, tag: str | None = None) -> int:
    """The batch lines of other folders' DataLoaders (nodes' folders merged, or a job's folder for one
    node's view: only files of host `tag`) copied into out/workers/, where finishing reads them: regular
    files named as perfcore names them, never through a link, never over a file already there. Returns
    how many were copied."""
    import shutil

    n = 0
    for src in sources:
        root = Path(src) / WORKERS
        if root.is_symlink() or not root.is_dir():
            continue
        for f in sorted(root.iterdir()):
            if not _WORKER_FILE.fullmatch(f.name) or (tag is not None and f.name.split(".")[1] != tag):
                continue
            dest = out / WORKERS / f.name
            try:
                with open_regular(f) as fh:
                    dest.parent.mkdir(exist_ok=True)
                    with open(dest, "xb") as to:
                        shutil.copyfileobj(fh, to, 1 << 20)
                n += 1
            except (Refused, OSError):
                continue
    return n
