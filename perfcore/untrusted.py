"""Folders and files perfcore did not write, handled as untrusted: every component below the folder the
user named opened without following a link, only regular files read and never more than a cap, a claim
made atomically, and the manifest a run writes of what it made (name, size, content hash, inode and ctime), so that a
later clean-up removes only what is still byte for byte as that run left it. It imports only the
standard library and perfcore.errors, so that every layer can use it."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import stat
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Iterable

from perfcore.errors import PerfcoreError

__all__ = [
    "SMALL",
    "Refused",
    "open_dir",
    "open_file",
    "read_file",
    "open_regular",
    "open_to_others",
    "exclusive",
    "write_small",
    "MANIFEST",
    "identity",
    "entry",
    "manifest_entries",
    "record",
    "read_manifest",
    "matches",
    "unlisted",
    "remove_listed",
    "start_ticks",
    "alive",
    "owner_of",
    "environ_of",
]

# What a marker, a progress file or a settings file holds is a few hundred bytes: far more is no such file.
SMALL = 1 << 20

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO planted under a file's name is opened at once (and refused), never waited on.
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Refused(PerfcoreError):
    """A file perfcore will not read as one (a link, not a regular file, missing, over its cap): `problem`
    says what, in words that follow the path ("is a link ...")."""

    def __init__(self, path: Any, problem: str, missing: bool = False):
        super().__init__(f"{path}: {problem}")
        self.path, self.problem, self.missing = path, problem, missing


def _names(rel: str | os.PathLike) -> list[str]:
    """The components of a path relative to a folder: never absolute, never '..'."""
    path = PurePosixPath(os.fspath(rel))
    if path.is_absolute() or ".." in path.parts:
        raise Refused(rel, "is not a name inside its folder")
    return [p for p in path.parts if p != "."]


def _refused(path: Any, e: OSError) -> Refused:
    if e.errno == errno.ELOOP:
        return Refused(path, "is a link (perfcore reads no link inside a folder it did not write)")
    if e.errno == errno.ENOENT:
        return Refused(path, "missing", missing=True)
    if e.errno == errno.ENOTDIR:
        return Refused(path, "is not a regular file (a part of its path is not a folder)")
    return Refused(path, f"cannot be read ({e.strerror or e})")


def open_dir(root: str | os.PathLike, rel: str | os.PathLike = "") -> int:
    """A descriptor of folder root/rel: root as the user named it, each component of rel a real folder."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise _refused(root, e) from None
    try:
        for name in _names(rel):
            nxt = os.open(name, _DIR, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except OSError as e:
        os.close(fd)
        raise _refused(Path(root, rel), e) from None
    return fd


def open_file(root: str | os.PathLike, rel: str | os.PathLike) -> int:
    """A descriptor of the regular file root/rel, no component of rel a link (Refused otherwise)."""
    names = _names(rel)
    if not names:
        raise Refused(root, "is not a regular file")
    d = open_dir(root, PurePosixPath(*names[:-1]))
    path = Path(root, rel)
    try:
        fd = os.open(names[-1], _FILE, dir_fd=d)
    except OSError as e:
        raise _refused(path, e) from None
    finally:
        os.close(d)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Refused(path, "is not a regular file")
    return fd


def _size(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n} bytes"


def _read_fd(fd: int, path: Any, cap: int, what: str) -> bytes:
    size = os.fstat(fd).st_size
    if size > cap:
        raise Refused(path, f"is {_size(size)}, more than a {what} ever holds ({_size(cap)}); not read")
    chunks, got = [], 0
    while got <= cap:
        b = os.read(fd, min(1 << 20, cap + 1 - got))
        if not b:
            break
        chunks.append(b)
        got += len(b)
    if got > cap:  # it grew while read
        raise Refused(path, f"is more than a {what} ever holds ({_size(cap)}); not read")
    return b"".join(chunks)


def read_file(path: str | os.PathLike, cap: int = SMALL, what: str = "file of its kind") -> bytes:
    """The bytes of a regular file, not through a link at its own name, refused in one line above `cap`."""
    path = Path(path)
    fd = open_file(path.parent, path.name)
    try:
        return _read_fd(fd, path, cap, what)
    finally:
        os.close(fd)


def open_regular(root: str | os.PathLike, rel: str | os.PathLike = "") -> BinaryIO:
    """root/rel (or the file root itself when rel is empty) opened for reading as a binary file object,
    checked as open_file checks it, for readers that take a file (pandas, numpy)."""
    if not os.fspath(rel):
        root = Path(root)
        root, rel = root.parent, root.name
    return os.fdopen(open_file(root, rel), "rb")


def open_to_others(path: str | os.PathLike) -> Path | None:
    """The first folder, of `path` (where it exists) and every folder above it, that any user of the machine
    may change: writable by all without the sticky bit (anyone may rename what is in it, and put a link in
    its place), or with it but owned by another user (who may do the same). None when there is none. A
    folder there is no place for perfcore's files: they could be redirected through a link, or swapped."""
    p = Path(os.path.abspath(os.path.expanduser(path)))
    for folder in (p, *p.parents):
        try:
            st = os.stat(folder)
        except OSError:
            continue  # not made yet: perfcore makes it
        if stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_IWOTH:
            if not st.st_mode & stat.S_ISVTX or st.st_uid not in (0, os.getuid()):
                return folder
    return None


def exclusive(path: str | os.PathLike, text: str, mode: int = 0o644) -> bool:
    """Creates `path` holding `text`, only if nothing (not even a link) has that name: False when
    something does. Of several processes trying at once exactly one gets True."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    return True


def write_small(path: str | os.PathLike, text: str) -> None:
    """A small file replaced atomically, never through a link: a fresh temporary name, then a rename."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(3)}.tmp")
    if not exclusive(tmp, text):
        raise FileExistsError(errno.EEXIST, "temporary name taken", str(tmp))
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# -- the manifest: what a run made, so that only that is ever removed -------------------------------
MANIFEST = ".perfcore-manifest.json"
_MANIFEST_SCHEMA = "perfcore.manifest/1"
_HASH_CAP = 256 << 20  # a run's leftovers to list: more than this is left out of the list (so never removed)


def _hash(fd: int) -> tuple[int, str]:
    h, n = hashlib.sha256(), 0
    while b := os.read(fd, 1 << 20):
        h.update(b)
        n += len(b)
    return n, h.hexdigest()


def identity(path: str | os.PathLike) -> list[int] | None:
    """[inode, ctime in ns] of `path` itself (a link not followed), or None: what a copy, a tarball or a
    checkout cannot repeat (a new file gets a new inode, and no one can set a ctime), and what any change
    to the file (a write, a rename, a new link) alters. With the content hash, it ties a manifest's entry
    to the very file the run made, not to a file of the same bytes that someone placed there."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return [st.st_ino, st.st_ctime_ns]


def entry(root: str | os.PathLike, rel: str) -> dict[str, Any] | None:
    """{name, size, sha256, id} of the regular file root/rel (no link on the way), or None; id is its
    identity() as the open file has it."""
    try:
        fd = open_file(root, rel)
    except Refused:
        return None
    try:
        st = os.fstat(fd)
        size, digest = _hash(fd)
    finally:
        os.close(fd)
    return {"name": rel, "size": size, "sha256": digest, "id": [st.st_ino, st.st_ctime_ns]}


def _walk(root: Path, rel: str = "") -> Iterable[tuple[str, str]]:
    """(kind, name) below root/rel, links not followed: "file", "dir" or "other" (a link, a FIFO ...)."""
    try:
        d = open_dir(root, rel)
    except Refused:
        return
    try:
        with os.scandir(d) as it:
            entries = sorted((e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False)) for e in it)
    finally:
        os.close(d)
    for name, is_dir, is_file in entries:
        path = f"{rel}/{name}" if rel else name
        if is_dir:
            yield "dir", path
            yield from _walk(root, path)
        else:
            yield ("file" if is_file else "other"), path


def manifest_entries(root: str | os.PathLike, tops: Iterable[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """The regular files (name, size, sha256) and folders below root/<top> for each top name, links and
    other kinds not listed (so never removed), up to _HASH_CAP bytes in all."""
    root, files, dirs, total = Path(root), [], [], 0
    for top in tops:
        if not os.path.isdir(root / top) or os.path.islink(root / top):
            continue
        dirs.append(top)
        for kind, rel in _walk(root, top):
            if kind == "dir":
                dirs.append(rel)
            elif kind == "file":
                e = entry(root, rel)
                if e is not None and total + e["size"] <= _HASH_CAP:
                    total += e["size"]
                    files.append(e)
    return files, dirs


def read_manifest(root: str | os.PathLike, token: str) -> dict[str, Any] | None:
    """The manifest of root written by the run whose token is `token`: {"files": [...], "dirs": [...]},
    or None when there is none, it is damaged, or another run's."""
    try:
        doc = json.loads(read_file(Path(root) / MANIFEST, SMALL, "manifest"))
    except (Refused, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("schema") != _MANIFEST_SCHEMA or doc.get("token") != token:
        return None
    files, dirs = doc.get("files"), doc.get("dirs")
    good = (
        isinstance(files, list)
        and isinstance(dirs, list)
        and all(
            isinstance(e, dict)
            and isinstance(e.get("name"), str)
            and isinstance(e.get("size"), int)
            and isinstance(e.get("sha256"), str)
            for e in files
        )
        and all(isinstance(d, str) for d in dirs)
    )
    return {"files": files, "dirs": dirs} if good else None


def record(root: str | os.PathLike, token: str, files: Iterable[dict[str, Any]] = (), dirs: Iterable[str] = ()) -> None:
    """Adds entries to the manifest of root that the run with `token` keeps (one writer: that run)."""
    old = read_manifest(root, token) or {"files": [], "dirs": []}
    by_name = {e["name"]: e for e in old["files"]}
    by_name.update({e["name"]: e for e in files})
    doc = {
        "schema": _MANIFEST_SCHEMA,
        "token": token,
        "files": list(by_name.values()),
        "dirs": list(dict.fromkeys([*old["dirs"], *dirs])),
    }
    write_small(Path(root) / MANIFEST, json.dumps(doc, indent=1) + "\n")


def matches(root: str | os.PathLike, listed: dict[str, Any]) -> bool:
    """Whether root/<name> is still the regular file the entry lists: the same file (its identity, which an
    entry a run did not list from the file itself cannot give), with the same size and content hash."""
    try:
        rel = listed["name"]
        _names(rel)
    except (KeyError, TypeError, Refused):
        return False
    found = entry(root, rel)
    return found is not None and all(found[k] == listed.get(k) for k in ("size", "sha256", "id"))


def unlisted(root: str | os.PathLike, manifest: dict[str, Any], tops: Iterable[str]) -> list[str]:
    """What lies below root/<top> that the manifest does not list as it is now (a file changed since, a
    file or folder it never listed, a link): empty when every entry is the run's own, unchanged."""
    root = Path(root)
    files = {e["name"]: e for e in manifest["files"]}
    dirs = set(manifest["dirs"])
    out = []
    for top in tops:
        if not os.path.lexists(root / top):
            continue
        if os.path.islink(root / top) or not os.path.isdir(root / top) or top not in dirs:
            out.append(top)
            continue
        for kind, rel in _walk(root, top):
            if kind == "dir" and rel in dirs:
                continue
            if kind == "file" and rel in files and matches(root, files[rel]):
                continue
            out.append(rel)
    return out


def remove_listed(root: str | os.PathLike, manifest: dict[str, Any]) -> list[str]:
    """Removes each listed file that is still as listed, then each listed folder left empty, deepest first.
    Returns what was listed but kept (changed since, or not empty)."""
    root, kept = Path(root), []
    for e in manifest["files"]:
        if not matches(root, e):
            if os.path.lexists(root / e["name"]):
                kept.append(e["name"])
            continue
        parent, _, name = e["name"].rpartition("/")
        try:
            d = open_dir(root, parent)
        except Refused:
            kept.append(e["name"])
            continue
        try:
            os.unlink(name, dir_fd=d)
        except OSError:
            kept.append(e["name"])
        finally:
            os.close(d)
    for rel in sorted(manifest["dirs"], key=lambda r: -r.count("/")):
        parent, _, name = rel.rpartition("/")
        try:
            _names(rel)
            d = open_dir(root, parent)
        except Refused:
            continue
        try:
            os.rmdir(name, dir_fd=d)  # refuses a link and a folder that is not empty
        except FileNotFoundError:
            pass
        except OSError:
            kept.append(rel)
        finally:
            os.close(d)
    return kept


# -- processes: whether the pid a file names is still the process that wrote it ---------------------


def start_ticks(pid: int) -> int | None:
    """When process `pid` started, in clock ticks since boot (/proc/<pid>/stat), or None where it is
    gone, a zombie, or there is no /proc: with the pid, an identity a reused pid cannot repeat."""
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read(4096).rsplit(b")", 1)[1].split()
        return None if fields[0] in (b"Z", b"X") else int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def alive(pid: Any, ticks: Any) -> bool:
    """Whether the process that was `pid`, started at `ticks`, still runs here."""
    return isinstance(ticks, int) and not isinstance(ticks, bool) and start_ticks(pid) == ticks


def owner_of(pid: int) -> int | None:
    """The user id a process runs as, or None."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except (OSError, TypeError, ValueError):
        return None


def environ_of(pid: int) -> dict[bytes, bytes] | None:
    """The environment process `pid` started with (/proc/<pid>/environ), or None where it cannot be read
    (another user's process)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            raw = fh.read(4 << 20)
    except (OSError, TypeError, ValueError):
        return None
    pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
    return {k: v for k, _, v in pairs}
