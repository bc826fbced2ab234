"""The frame every perfcore command shares: the group that turns every failure into one line and an
exit code and loads each command only when it is used, the checked values (numbers, durations,
lists), the results options (--out, --json, --quiet), progress lines and the TARGET command type.
Nothing heavy is imported here: torch, pandas and the native core load inside the commands."""

from __future__ import annotations

import functools
import importlib
import os
import sys
import time
import traceback
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import click

from perfcore.errors import PerfcoreError
from perfcore.report.safe_text import clean

__all__ = [
    "PerfcoreGroup",
    "UserPath",
    "Number",
    "Duration",
    "ListOf",
    "COUNT",
    "NONNEG",
    "Results",
    "results",
    "folder_report",
    "steps_option",
    "warmup_option",
    "check_writable",
    "write_json",
    "Progress",
    "TargetCommand",
    "target_command",
    "target_arg",
    "load_target",
    "one_line",
    "debug_on",
    "version",
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "EXIT_NO_DEVICE",
    "EXIT_INTERRUPTED",
]

# Exit codes: 0 ok, 1 failure, 2 usage, 3 GPU/CUPTI unavailable; 130 interrupted (128 + SIGINT).
EXIT_FAILURE, EXIT_USAGE, EXIT_NO_DEVICE, EXIT_INTERRUPTED = 1, 2, 3, 130

# PERFCORE_DEBUG=0 or =false is someone turning tracebacks off, not on.
_DEBUG_OFF = ("", "0", "false", "no", "off")


def one_line(text: str) -> str:  # it may quote a folder's document: no control character passes
    return " ".join(clean(str(text)).split())


def debug_on() -> bool:
    return os.environ.get("PERFCORE_DEBUG", "").strip().lower() not in _DEBUG_OFF


class LazyCommands(MutableMapping):
    """The group's commands by name, each imported from its module on first lookup: listing the names
    (help, completion) imports nothing, so `perfcore --help` never loads a command's module."""

    def __init__(self, table: dict[str, tuple[str, str, str]]):
        self.table = table
        self.loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self.loaded:
            module, attr, _ = self.table[name]
            self.loaded[name] = getattr(importlib.import_module(module), attr)
        return self.loaded[name]

    def __setitem__(self, name: str, cmd: click.Command) -> None:
        self.loaded[name] = cmd

    def __delitem__(self, name: str) -> None:
        self.table.pop(name, None)
        self.loaded.pop(name, None)

    def __iter__(self):
        return iter(dict.fromkeys([*self.table, *self.loaded]))

    def __len__(self) -> int:
        return len(set(self.table) | set(self.loaded))


class PerfcoreGroup(click.Group):
    """Every way a command can fail ends here as one line on stderr and an exit code:
    usage (2), perfcore's own errors (their code), a file that cannot be written (1), Ctrl-C (130),
    and anything unexpected (1, named as perfcore's fault). PERFCORE_DEBUG=1 shows the traceback.

    `lazy` maps each command's name to (module, attribute, the first paragraph of its help): the
    list in `perfcore --help` is written from it, and a command's module is imported only when that
    command runs or shows its own help."""

    def __init__(self, *args, lazy: dict[str, tuple[str, str, str]] | None = None, **kw):
        super().__init__(*args, **kw)
        self.commands = LazyCommands(dict(lazy or {}))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        table, names = self.commands.table, self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        # Shortened by click's own rule, from the table's copy of the help (a stand-in command, not the module).
        rows = [
            (n, (click.Command(n, help=table[n][2]) if n in table else self.commands[n]).get_short_help_str(limit))
            for n in names
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            # Output still buffered must reach its reader: a full disk or a closed pipe is a failure.
            sys.stdout.flush()
            sys.exit(rv if isinstance(rv, int) else 0)
        except _NoArgsIsHelp as e:
            e.show()  # bare `perfcore`: the usual help, as click gives it, not squeezed into an error
            sys.exit(e.exit_code)
        except Exception as e:  # SystemExit (the script's exit code) passes through
            code, line = _failure(e)
            err: BaseException = e
        except KeyboardInterrupt as e:
            code, line, err = EXIT_INTERRUPTED, "perfcore: interrupted", e
        if debug_on():
            traceback.print_exception(type(err), err, err.__traceback__)
        click.echo(one_line(line)[:2000], err=True)
        sys.exit(code)


# click before 8.2 shows the help and exits 0 for a group without a command; later ones raise this.
_NoArgsIsHelp = getattr(click.exceptions, "NoArgsIsHelpError", ())


def _failure(e: Exception) -> tuple[int, str]:
    """(exit code, the one line) for an exception that ended a command."""
    if isinstance(e, click.exceptions.Abort):
        return EXIT_INTERRUPTED, "perfcore: interrupted"
    if isinstance(e, click.UsageError):
        where = e.ctx.command_path if e.ctx else "perfcore"
        return e.exit_code, f"{where}: error: {e.format_message()} (see '{where} --help')"
    if isinstance(e, click.ClickException):
        return e.exit_code, f"perfcore: error: {e.format_message()}"
    if isinstance(e, PerfcoreError):
        return e.exit_code, f"perfcore: error: {e}"
    if isinstance(e, OSError):
        return EXIT_FAILURE, f"perfcore: error:{f' {e.filename}:' if e.filename else ''} {e.strerror or e}"
    return EXIT_FAILURE, (
        f"perfcore: internal error: {type(e).__name__}: {e} "
        "(a perfcore bug: PERFCORE_DEBUG=1 shows where; please report it)"
    )


# ---- values: every number is checked once, here (nan, inf, negative, zero where meaningless, not a number)


class Number(click.ParamType):
    """A finite int or float within [low, high] (low excluded when low_open); see perfcore.run.options."""

    def __init__(self, kind: type = float, low: float | None = None, high: float | None = None, low_open: bool = False):
        self.kind, self.low, self.high, self.low_open = kind, low, high, low_open
        self.name = "integer" if kind is int else "number"

    def convert(self, value, param, ctx):
        from perfcore.run.options import number

        try:
            return number(value, "", kind=self.kind, low=self.low, high=self.high, low_open=self.low_open)
        except PerfcoreError as e:
            self.fail(str(e).removeprefix(": "), param, ctx)


COUNT, NONNEG = Number(int, low=1, high=10**9), Number(int, low=0, high=10**9)  # steps/repeats; warm-up steps


class Duration(click.ParamType):
    """100ms, 0.5s or 1 (seconds): finite, at least 10 ms."""

    name = "duration"

    def convert(self, value, param, ctx):
        from perfcore.run.options import duration

        try:
            return duration(value, "")
        except PerfcoreError as e:
            self.fail(str(e).removeprefix(": "), param, ctx)


class ListOf(click.ParamType):
    """Comma-separated values of one type: 8,16 or true,false."""

    def __init__(self, item: click.ParamType | str, what: str = "values"):
        self.item, self.what = item, what
        self.name = "list"

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        words = [w.strip() for w in str(value).split(",") if w.strip()]
        if not words:
            self.fail("empty list", param, ctx)
        if self.item == "bool":
            table = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
            bad = [w for w in words if w.lower() not in table]
            if bad:
                self.fail(f"expected true/false values, got {bad[0]!r}", param, ctx)
            return [table[w.lower()] for w in words]
        try:
            return [self.item.convert(w, param, ctx) for w in words]
        except click.BadParameter as e:
            self.fail(f"{self.what} {e.message}", param, ctx)


class UserPath(click.Path):
    """A path as typed, `~` expanded (bash leaves it after `=` and in quotes; a folder `~` in the working
    directory is never meant): every path a command takes, so parts, reader and finisher agree."""

    def convert(self, value, param, ctx):
        return super().convert(os.path.expanduser(value) if isinstance(value, str) else value, param, ctx)


# ---- the options every command shares, defined once


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
        click.echo(text, err=self.json_path == "-")

    def progress(self) -> "Progress":
        return Progress(quiet=self.quiet)

    def done(self, doc: dict | None, files: list[str] | None = None, folder: Path | None = None) -> None:
        """Says what was written, then writes the JSON copy."""
        if files:
            click.echo(f"wrote {folder or self.folder}/: " + ", ".join(files), err=True)
        if doc is not None:
            write_json(doc, self.json_path)


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
            default=None,
            help="Also write the result as JSON to PATH ('-' for stdout).",
        )(wrapper)
        if out:
            wrapper = click.option(
                "--out",
                type=UserPath(file_okay=False),
                default=None,
                help=f"Folder for the results (default ./perfcore-runs/{kind}-<time>-<id>; "
                "an existing folder that is not empty is left as it is and a new "
                "subfolder is used).",
            )(wrapper)
        return wrapper

    return deco


def folder_report(res: Results, kind: str, doc: dict, text: str, files: list[str]) -> list[str]:
    """report.html in an experiment's folder (its plots inline, heatmaps included); the files with it."""
    from perfcore.report.html import write_folder_report

    write_folder_report(res.folder, f"perfcore {kind}", doc, text, files)
    return list(files) + ["report.html"]


def steps_option(default: int | None, help: str = "Measured steps (after warm-up)."):
    return click.option("--steps", type=COUNT, default=default, show_default=default is not None, help=help)


def warmup_option(default: int):
    return click.option(
        "--warmup", type=NONNEG, default=default, show_default=True, help="Steps at the start reported apart."
    )


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
    from perfcore.report import jsonio

    if path == "-":
        click.echo(jsonio.dumps(doc), nl=False)
        return
    from perfcore.run.parent.folder import is_stream

    if is_stream(path):
        try:
            with open(path, "w") as f:
                f.write(jsonio.dumps(doc))
        except OSError as e:
            raise click.ClickException(f"cannot write JSON to {path}: {e.strerror or e}") from e
    else:
        jsonio.write(Path(path), doc)
    click.echo(f"wrote {path}", err=True)


class Progress:
    """Steps and ETA on stderr: one rewritten line on a terminal, a line per stage elsewhere; nothing when quiet."""

    def __init__(self, label: str = "", quiet: bool = False):
        self.tty = sys.stderr.isatty()
        self.quiet = quiet
        self.label = label
        self.t0 = time.perf_counter()
        self.stage_t0 = self.t0
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


class TargetCommand(click.Command):
    """A command whose TARGET is a workload (demo, FILE.py:FUNC) or, after --, a program to run.
    Options may follow a workload (`perfcore health demo --steps 10`); everything after a program
    (or after --) is the program's own."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" not in args:
            probe = self.make_parser(ctx)
            probe.allow_interspersed_args = False
            try:
                opts, _, _ = probe.parse_args(list(args))
                got = opts.get("target")  # a sentinel (not a tuple) when no target was given
                rest = list(got) if isinstance(got, (list, tuple)) else []
            except click.UsageError:
                rest = []
            if rest:
                from perfcore.experiments.stages import is_workload_spec

                if is_workload_spec(rest[0]) and not os.path.isfile(rest[0]):
                    ctx.allow_interspersed_args = True
        return super().parse_args(ctx, args)


def target_command(name: str):
    return click.command(
        name, cls=TargetCommand, context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
    )


target_arg = click.argument("target", nargs=-1, type=click.UNPROCESSED)


def load_target(words):
    """The workload (loaded) or command (checked) a triage command works on, before any folder is made."""
    from perfcore.experiments.stages import parse_target

    if words and str(words[0]).endswith(".py") and os.path.isfile(words[0]):  # a workload file, no :FUNCTION
        raise click.UsageError(f"{words[0]} needs its function, {words[0]}:FUNCTION; a script: -- python {words[0]}")
    return parse_target(words).check()


def version() -> str:
    from perfcore import __version__

    return __version__
