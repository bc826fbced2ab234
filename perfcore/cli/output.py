"""Where a command's results go: the run folder, the JSON copy (checked before the work), the report
and the progress lines on stderr."""

from __future__ import annotations

import functools
import os
import re
import shutil
import sys
import textwrap
import time
from pathlib import Path

import click

from perfcore.analysis.units import WIDTH
from perfcore.cli import COMMANDS
from perfcore.cli.group import EXIT_USAGE
from perfcore.cli.types import UserPath
from perfcore.safe_text import clean

__all__ = ["Results", "echo_fitted", "results", "wrap_lines", "wrote_line"]


class Results:
    """Where a command's results go: the run folder (--out, made on first use), the JSON copy (--json),
    the human report (stdout, or stderr when stdout carries the JSON), progress (unless --quiet)."""

    def __init__(self, kind: str, out: str | None, json_path: str | None, quiet: bool):
        self.kind, self.out, self.json_path, self.quiet = kind, out, json_path, quiet
        self._folder: Path | None = None
        check_writable(json_path)

    @property
    def folder(self) -> Path:
        if self._folder is None:
            from perfcore.run.parent.folder import prepare_out

            self._folder = prepare_out(Path(self.out) if self.out else None, self.kind)
        return self._folder

    def continue_in(self, folder: Path) -> None:
        """Results go into an earlier command's folder (checked by the caller), not a new one."""
        self._folder = folder

    def echo(self, text: str) -> None:
        echo_fitted(text, err=self.json_path == "-")

    def progress(self) -> "Progress":
        return Progress(quiet=self.quiet)

    def done(self, doc: dict | None, files: list[str] | None = None, folder: Path | None = None) -> None:
        """Says what was written, then writes the JSON copy."""
        if files:
            click.echo(wrote_line(f"{folder or self.folder}/", files), err=True)
        if doc is not None:
            write_json(doc, self.json_path)

    def done_with_report(self, result, text: str, files: list[str]) -> None:
        """report.html in an experiment's folder (its plots inline, heatmaps included), then done with the
        result and its files."""
        from perfcore.report.html import write_folder_report

        write_folder_report(self.folder, f"perfcore {self.kind}", result, text, files)
        self.done(result.to_dict(), [*files, "report.html"])


# A figure stays beside its unit across a break ("216 ms", not "216" then "ms"): textwrap splits at ASCII
# white space only, so a no-break space holds the pair until the lines are made.
_FIGURE_UNIT = re.compile(r"(\d) (ns|µs|ms|s|KiB|MiB|GiB|cores?)\b")
# A command the report prints to be pasted (perfcore report FOLDER --explain, git apply PATCH) is never broken
# across lines: a break would paste as two commands. Held: the command (any of the group's) and its arguments
# (options, paths, quoted or named files), not the sentence that may follow it.
_COMMAND = re.compile(
    rf"\b(?:perfcore (?:{'|'.join(COMMANDS)})|git apply)"
    r"(?: (?:[-'\"/.~<]\S*|\S*[/.:=]\S*))*"
)


def wrap_lines(text: str, width: int) -> str:
    """Each line longer than `width` broken at spaces, its continuation under the line's own indent plus
    two, so that a long --explain paragraph reads as one block; a word longer than the width (a path)
    stays whole, a figure stays beside its unit and a command with its arguments."""
    out = []
    for line in text.split("\n"):
        body = line.lstrip(" ")
        if len(line) <= width or not body:
            out.append(line)
            continue
        indent = line[: len(line) - len(body)]
        held = _COMMAND.sub(lambda m: m.group().replace(" ", "\xa0"), _FIGURE_UNIT.sub("\\1\xa0\\2", body))
        kw = {"initial_indent": indent, "subsequent_indent": indent + "  ", "break_on_hyphens": False}
        out += [piece.replace("\xa0", " ") for piece in textwrap.wrap(held, width, break_long_words=False, **kw)]
    return "\n".join(out)


def echo_fitted(text: str, err: bool = False) -> None:
    """The text on stdout (stderr with err) as a terminal shows it best: wrapped to the terminal's width
    where the stream is one; piped or captured output keeps a fact to a line, for grep and for tools."""
    stream = sys.stderr if err else sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        tty = False
    fitted = wrap_lines(text, max(shutil.get_terminal_size((WIDTH, 24)).columns, 40)) if tty else text
    click.echo(fitted, err=err)


def wrote_line(folder: str, files: list[str], width: int = WIDTH) -> str:
    """The folder and as many of its files as fit the report's WIDTH columns (the rest counted: the folder lists
    them); only a folder's own long path runs past it."""
    head, shown = f"wrote {clean(str(folder))}: ", []
    for i, name in enumerate(files):
        rest = len(files) - i - 1
        tail = f", and {rest} more" if rest else ""
        if shown and len(head + ", ".join([*shown, name]) + tail) > width:
            break
        shown.append(name)
    left = len(files) - len(shown)
    return head + ", ".join(shown) + (f", and {left} more" if left else "")


def results(kind: str, out: bool = True):
    """--out (when the command writes a folder), --json and --quiet; the command gets `res: Results`."""

    def deco(f):
        @functools.wraps(f)
        def wrapper(*args, out=None, json_path=None, quiet=False, **kw):
            return f(Results(kind, out, json_path, quiet), *args, **kw)

        wrapper = click.option("--quiet", "-q", is_flag=True, help="No progress lines on stderr.")(wrapper)
        wrapper = click.option(
            "--json",
            "json_path",
            type=UserPath(dir_okay=False, allow_dash=True),
            help="Also write the result as JSON to PATH ('-' for stdout).",
        )(wrapper)
        if out:
            wrapper = click.option(
                "--out",
                type=UserPath(file_okay=False),
                help=f"Folder for the results (default ./perfcore-runs/{kind}-<time>-<id>; "
                "an existing folder that is not empty is left as it is and a new "
                "subfolder is used).",
            )(wrapper)
        return wrapper

    return deco


class JsonTargetError(click.ClickException):
    """--json names a place no file can go: a usage error, found before any work is done."""

    exit_code = EXIT_USAGE


def check_writable(path: str | None) -> None:
    """Fail before the work, not after it, when a result could not be saved or would replace a file not perfcore's."""
    from perfcore.run.parent.folder import check_target, is_stream

    if not path or path == "-":
        return
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise JsonTargetError(f"cannot write JSON to {path}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK) and not is_stream(path):
        raise JsonTargetError(f"cannot write JSON to {path}: folder {parent} is not writable")
    check_target(path)


def write_json(doc: dict, path: str | None) -> None:
    if not path:
        return
    from perfcore import jsonio

    if path == "-":
        click.echo(jsonio.dumps(doc), nl=False)
        return
    from perfcore.errors import ResultWriteError
    from perfcore.run.parent.folder import is_stream

    try:
        jsonio.write_target(Path(path), jsonio.dumps(doc))  # a pipe is written into, never replaced
    except ResultWriteError as e:
        if not is_stream(path) or not isinstance(e.__cause__, OSError):
            raise
        raise click.ClickException(f"cannot write JSON to {path}: {e.__cause__.strerror or e.__cause__}") from e
    click.echo(f"wrote {clean(str(path))}", err=True)


class Progress:
    """Steps and ETA on stderr: one rewritten line on a terminal, a line per stage elsewhere; nothing when quiet."""

    def __init__(self, quiet: bool = False):
        self.tty = sys.stderr.isatty()
        self.quiet = quiet
        self.label = ""
        self.stage_t0 = time.perf_counter()
        self._last = -1.0

    def stage(self, name: str) -> None:
        self.label = name
        self.stage_t0 = time.perf_counter()
        if not self.tty and not self.quiet:
            click.echo(f"  {name} ...", err=True)

    def steps(self, done: int, total: int) -> None:
        if not self.tty or self.quiet:
            return
        now = time.perf_counter()
        if now - self._last < 0.2 and done < total:
            return
        self._last = now
        eta = (now - self.stage_t0) / done * (total - done) if done else 0.0
        click.echo(f"\r  {self.label}: {done}/{total} steps, ETA {eta:.0f} s   ", err=True, nl=done >= total)

    def configs(self, done: int, total: int, eta, label: str) -> None:
        if self.quiet:
            return
        msg = f"  [{done}/{total}] {label}" + (f", ETA {eta:.0f} s" if eta is not None else "")
        if self.tty:
            click.echo(f"\r{msg:<90}", err=True, nl=done >= total)
        else:
            click.echo(msg, err=True)
