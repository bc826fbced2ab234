"""Writing result files: JSON documents (numpy values become plain numbers and lists, keys starting
with "_" are in-memory helpers and left out) and any text or bytes, always atomically: a temporary
file in the same folder, renamed over the target only once complete, removed when writing fails.
A reader never sees half a file, and a full disk leaves the previous version (or none) in place.
No write follows a symlink: the temporary file is created here, exclusively and not through a link,
and the rename replaces a link found at the target itself, never the file it points to (a folder
someone else prepared cannot redirect a write outside it)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any, Iterator

from perfcore.errors import ResultWriteError

__all__ = ["dumps", "write", "write_text", "write_bytes", "write_csv", "atomic_path", "write_target"]


def _default(o: Any) -> Any:
    if hasattr(o, "tolist"):
        return o.tolist()
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _public(doc: Any) -> Any:
    return {k: v for k, v in doc.items() if not str(k).startswith("_")} if isinstance(doc, dict) else doc


def dumps(doc: Any) -> str:
    return json.dumps(_public(doc), indent=2, default=_default) + "\n"


_WHY = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EROFS: "the folder is on a read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENOENT: "the folder does not exist",
    errno.ENOTDIR: "a part of the path is not a folder",
}


def _failed(path: Path, e: OSError) -> ResultWriteError:
    why = _WHY.get(e.errno, e.strerror or str(e))
    err = ResultWriteError(
        f"cannot write {path}: {why}; the files written before it are complete, "
        "free space or choose a writable --out and run again"
    )
    err.path, err.why = path, why  # for a caller that says what else the user can do
    return err


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yields a temporary path next to `path`; the caller writes it (pandas to_csv, savefig, np.savez ...),
    and on leaving the block it replaces `path`. On any error the temporary file is removed and
    `path` is untouched; an OSError becomes ResultWriteError (one line for the CLI)."""
    path = Path(path)
    # Unique per writer: two processes finishing into one folder never share a temporary file. The
    # suffix stays last, since writers such as savefig pick the format from it.
    tmp = path.with_name(f".{path.stem}.{os.getpid()}-{secrets.token_hex(3)}.tmp{path.suffix}")
    made = False
    try:
        # The writer fills a file made here: an existing name (a planted link) fails instead of being followed.
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666))
        made = True
        yield tmp
        os.replace(tmp, path)
    except BaseException as e:
        if made:  # only the file made here is removed
            with contextlib.suppress(OSError):
                tmp.unlink()
        if isinstance(e, OSError):
            raise _failed(path, e) from e
        raise


def write_bytes(path: Path, data: bytes, durable: bool = True) -> Path:
    """durable=False skips the fsync: still atomic for readers and for a killed process (the page
    cache survives it), for files rewritten every few seconds (progress), where a disk flush each
    time would cost the training loop."""
    path = Path(path)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            if durable:
                # A full disk can show only here (delayed allocation), not at write().
                os.fsync(f.fileno())
    return path


def write_text(path: Path, text: str, durable: bool = True) -> Path:
    # A byte that was not UTF-8 (an argument or a path, carried as Python's surrogate escape) is written as
    # that byte: kept, never a reason to lose the file. (JSON documents are ASCII: their escapes keep it.)
    return write_bytes(path, text.encode("utf-8", "surrogateescape"), durable)


def write_csv(path: Path, frame: Any) -> Path:
    """A pandas DataFrame as CSV (no index), atomically."""
    with atomic_path(Path(path)) as tmp:
        frame.to_csv(tmp, index=False)
    return Path(path)


def write(path: Path, doc: Any) -> Path:
    """One JSON document, atomically."""
    return write_text(path, dumps(doc))


def write_target(path: Path, text: str) -> Path:
    """A file the user named for a result (--json, compare's --html): a pipe, a device or a socket
    (`>(jq .)`, /dev/stdout, a named pipe) is written into as a shell's `>` would, never replaced by a
    regular file; any other name is written atomically (folder.check_target has checked it before)."""
    path = Path(path)
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is None or stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
        return write_text(path, text)
    try:
        with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)
    except OSError as e:
        raise _failed(path, e) from e
    return path
