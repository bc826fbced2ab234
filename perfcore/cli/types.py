"""The CLI's value types: every number is checked once, here (nan, inf, negative, zero where
meaningless, not a number), and every path a command takes is expanded the same way."""

from __future__ import annotations

import os

import click

from perfcore.errors import PerfcoreError

__all__ = ["Number", "Duration", "ListOf", "UserPath", "COUNT", "NONNEG"]


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
