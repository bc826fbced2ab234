"""What the commands share: the options defined once and the TARGET of the triage commands; the
group (group.py), the value types (types.py) and the results' destinations (output.py) are
re-exported here, so a command imports its helpers from one place."""

from __future__ import annotations

import inspect
import os
import textwrap

import click

# Re-exported: the commands import their helpers from here.
from perfcore.cli.group import EXIT_FAILURE, EXIT_INTERRUPTED, one_line  # noqa: F401
from perfcore.cli.output import Results, results  # noqa: F401
from perfcore.cli.types import COUNT, NONNEG, Duration, ListOf, Number, UserPath  # noqa: F401

__all__ = [
    "steps_option",
    "warmup_option",
    "TargetCommand",
    "target_command",
    "target_arg",
    "load_target",
    "with_targets",
]


# ---- the options every command shares, defined once


def steps_option(default: int | None, help: str = "Measured steps (after warm-up)."):
    return click.option("--steps", type=COUNT, default=default, show_default=default is not None, help=help)


def warmup_option(default: int):
    return click.option(
        "--warmup", type=NONNEG, default=default, show_default=True, help="Steps at the start reported apart."
    )


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


def with_targets(script: str | None, name: str = "TARGET"):
    """The TARGET forms under a command's own help, said the same way by every command that takes one:
    the built-in workloads, a factory FILE.py:FUNCTION and, where `script` says what the command does with
    it, your script after --. Added after the docstring's first paragraph, which `perfcore --help` lists."""
    from perfcore.workloads import BUILTINS

    forms = [
        "\b",
        f"{name}, what to measure:",
        f"  {' | '.join(BUILTINS)}",
        "      a built-in workload; demo's JPEGs are made once, in ~/.cache/perfcore",
        "  FILE.py:FUNCTION",
        "      a function in your file that returns a perfcore.Workload",
    ]
    if script:  # click never wraps a \b block: its lines are kept within 80 columns here
        forms += [
            "  -- python train.py ARGS",
            *textwrap.wrap(f"your script, unmodified: {script}", 78, initial_indent=" " * 6, subsequent_indent=" " * 6),
        ]

    def add(f):
        first, _, rest = inspect.cleandoc(f.__doc__ or "").partition("\n\n")
        f.__doc__ = "\n\n".join(p for p in (first, "\n".join(forms), rest) if p)
        return f

    return add


def load_target(words):
    """The workload (loaded) or command (checked) a triage command works on, before any folder is made."""
    from perfcore.experiments.stages import parse_target

    if words and str(words[0]).endswith(".py") and os.path.isfile(words[0]):  # a workload file, no :FUNCTION
        raise click.UsageError(f"{words[0]} needs its function, {words[0]}:FUNCTION; a script: -- python {words[0]}")
    return parse_target(words)
