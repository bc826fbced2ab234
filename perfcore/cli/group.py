"""The `perfcore` group: commands loaded on first use, and every failure as one line and an exit code."""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import MutableMapping

import click

from perfcore.errors import PerfcoreError
from perfcore.safe_text import clean

__all__ = [
    "PerfcoreGroup",
    "one_line",
    "debug_on",
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
