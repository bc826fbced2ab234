"""The command `perfcore run` is given, checked before anything starts: it exists and may be run, it is not
perfcore itself, and the Python it starts will read PYTHONPATH (perfcore's instrumentation comes through it)."""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

from perfcore.errors import UsageError

__all__ = ["check_command"]


# Interpreter options that take the next argument as their value (python -W ignore train.py).
_PY_OPTS_WITH_VALUE = ("-W", "-X", "--check-hash-based-pycs")


def _is_python(path: str) -> bool:
    """A Python interpreter, or a script whose shebang runs one (a console script, torchrun)."""
    if Path(path).name.startswith("python"):
        return True
    exe = shutil.which(path) or path
    try:
        with open(exe, "rb") as fh:
            first = fh.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def _runs_perfcore(cmd: list[str]) -> bool:
    """Whether the command is itself perfcore (`perfcore run ...`, `python -m perfcore run ...`)."""
    if Path(cmd[0]).name == "perfcore":
        return True
    if not Path(cmd[0]).name.startswith("python"):
        return False
    for a, b in zip(cmd[1:], cmd[2:]):
        if a == "-m":
            return b in ("perfcore", "perfcore.cli")
        if not a.startswith("-"):
            return False
    return False


def check_command(cmd: list[str]) -> None:
    """A command perfcore can run and instrument, or UsageError with the one line that says why not and what
    to run instead (before any folder is made: a typo leaves nothing behind)."""
    if not cmd:
        raise UsageError("no command given: perfcore run [OPTIONS] -- python train.py ARGS...")
    if _runs_perfcore(cmd):
        raise UsageError(
            "the command is perfcore itself: one perfcore run measures the script; give it the script's "
            "command alone: perfcore run [OPTIONS] -- python train.py ARGS..."
        )
    if shutil.which(cmd[0]) is None:
        _check_found(cmd[0])
    if Path(cmd[0]).name.startswith("python"):
        _check_python_args(cmd[1:])
    else:
        _check_launcher(cmd[0])


def _check_found(name: str) -> None:
    """A command not on PATH: a file that exists and may be run as named."""
    if not Path(name).is_file():
        raise UsageError(f"no such command: {name}")
    if not os.access(name, os.X_OK):
        # A script named as the command: the system would refuse to run it ("Permission denied").
        runner = "python" if name.endswith(".py") or _is_python(name) else "<interpreter>"
        raise UsageError(f"{name} is not executable; run it as: perfcore run -- {runner} {shlex.quote(name)} ...")
    if os.sep not in name:
        # Executable, in this folder, but a bare name is looked up on PATH only (as a shell would).
        raise UsageError(f"{name} is not on PATH; run it as: perfcore run -- ./{shlex.quote(name)} ...")


def _check_launcher(name: str) -> None:
    """A launcher (torchrun, a console script) whose shebang starts Python with -I or -E would ignore
    PYTHONPATH, and so perfcore's instrumentation."""
    exe = shutil.which(name) or name
    if not _is_python(exe):
        return
    with open(exe, "rb") as fh:
        flags = fh.readline(256).split()[1:]
    for flag in (b"-I", b"-E"):
        if flag in flags:
            raise UsageError(
                f"{name} starts Python with {flag.decode()}, which ignores PYTHONPATH, so "
                f"perfcore cannot instrument it; run it as: perfcore run -- python {exe} ..."
            )


def _check_python_args(rest: list[str]) -> None:
    """python [-u -O -W ignore -X dev ...] script.py: the first non-option is the script, unless a
    -m / -c (alone or at the end of a cluster such as -uc) comes first."""
    i = 0
    while i < len(rest):
        a = rest[i]
        i += 1
        if a == "-" or a == "--":
            return  # the program comes on stdin, or what follows is not for us to judge
        if a in _PY_OPTS_WITH_VALUE:
            i += 1
        elif a.startswith("-") and not a.startswith("--"):
            skip = _option_cluster(a)
            if skip is None:
                return
            i += skip
        elif not a.startswith("--"):
            _check_script(a)
            return


def _option_cluster(a: str) -> int | None:
    """One cluster of single-letter options (-u, -uc, -Wignore): None where it names the program (-c, -m),
    else how many of the next words are its value."""
    for k, letter in enumerate(a[1:], 1):
        if letter in "IE":
            raise UsageError(f"python -{letter} ignores PYTHONPATH, so perfcore cannot instrument it; drop -{letter}")
        if letter in "cm":
            return None
        if letter in "WX":
            return 0 if a[k + 1 :] else 1  # its value is the rest of the cluster, or the next word
    return 0


def _check_script(a: str) -> None:
    """The script python is given: a readable file, or a folder with a __main__.py."""
    if Path(a).is_dir():
        if not (Path(a) / "__main__.py").is_file():
            raise UsageError(
                f"{a} is a folder, not a script (python runs a folder only through its __main__.py); "
                "give the .py file to run"
            )
        return
    if not Path(a).is_file():
        raise UsageError(f"no such script: {a}")
    if not os.access(a, os.R_OK):
        raise UsageError(f"cannot read the script {a}: permission denied")
