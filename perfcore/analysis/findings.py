"""Findings, typed: what a run or an experiment found beside the verdict, each a kind (FindingKind), a level,
its figures, the user's site (file:line), the gain it predicts, the change it proposes and, where
experiments tested it, the Checks analysis.checks.reconcile made of the prediction and the measurement. What
a finding then offers follows two rules, each said once in `offered_gain`: a measurement outranks a model,
and nothing below 1x is offered as a gain. No words: report/ says each kind."""

from __future__ import annotations

import dataclasses
import enum
import re
from typing import Any

from perfcore.analysis.checks import Against, Check
from perfcore.analysis.results import Gain, Level

__all__ = ["FindingKind", "Site", "Finding", "offered_gain", "offered_check"]


class FindingKind(str, enum.Enum):
    """Every kind of finding, by the code documents carry. The first group answers one of the verdict's
    causes; the second stands beside the causes with its own advice; the last are findings said beside the
    verdict without advice of their own (their figures live in the run's facts)."""

    # Advice on a cause: the loader's (load), the copies' (transfer), the collectives' (comm), the host's.
    MORE_WORKERS = "more_workers"
    CHEAPER_BATCHES = "cheaper_batches"
    PERSISTENT_WORKERS = "persistent_workers"
    FEWER_WORKERS = "fewer_workers"
    DEEPER_PREFETCH = "deeper_prefetch"
    WORKERS_MEASURED = "workers_measured"
    OVERLAP_COPIES = "overlap_copies"
    OVERLAP_COMM = "overlap_comm"
    LAUNCH_OVERHEAD = "launch_overhead"
    HOST_GAPS = "host_gaps"
    UNTIMED_HOST_WORK = "untimed_host_work"
    # Findings beside the causes, each with its advice.
    PIN_MEMORY = "pin_memory"
    PAGEABLE_DESPITE_PIN = "pageable_despite_pin"
    BALANCE_RANKS = "balance_ranks"
    SET_NUM_THREADS = "set_num_threads"
    FASTER_COMPUTE = "faster_compute"
    STARTUP = "startup"
    EVALUATION = "evaluation"
    MEMORY_LEAK = "memory_leak"
    MEMORY_PRESSURE = "memory_pressure"
    MEMORY_NEAR_CAPACITY = "memory_near_capacity"
    # Said beside the verdict; their figures are facts of the run.
    STRAGGLER = "straggler"
    WAITING = "waiting"
    INTERFERENCE = "interference"
    THREADS_BUSY = "threads_busy"
    OUTLIERS = "outliers"
    STARVATION = "starvation"

    @property
    def memory(self) -> bool:
        return self in (FindingKind.MEMORY_LEAK, FindingKind.MEMORY_PRESSURE, FindingKind.MEMORY_NEAR_CAPACITY)


_SITE = re.compile(r"(.*):(\d+)")


@dataclasses.dataclass(frozen=True)
class Site:
    """A place in the user's code: a file and its line (None where only the file is known)."""

    file: str
    line: int | None = None

    @classmethod
    def parse(cls, text: str | None) -> "Site | None":
        """ "path/to/file.py:42" as a Site; None for nothing."""
        if not text:
            return None
        m = _SITE.fullmatch(str(text))
        return cls(m.group(1), int(m.group(2))) if m else cls(str(text))

    def __str__(self) -> str:
        return self.file if self.line is None else f"{self.file}:{self.line}"


def offered_check(checks: tuple[Check, ...]) -> Check | None:
    """The measurement a finding offers in place of its prediction (a measurement outranks a model): what an
    experiment measured of the advice's own change, else what an experiment without the cause at all
    measured (the ceiling of any change to it); only one that lies above 1x (Check.above_1x)."""
    offered = [c for c in checks if c.against in (Against.ADVICE, Against.CEILING) and c.above_1x]
    return next((c for c in offered if c.against is Against.ADVICE), offered[0] if offered else None)


def offered_gain(predicted: Gain | None, checks: tuple[Check, ...] = ()) -> Gain | None:
    """The gain a finding offers, by two rules: a measurement outranks a model (offered_check's), and nothing
    whose measurement does not lie above 1x is offered as a gain: where the cause removed altogether measured
    no gain above 1x, the model's prediction is not offered in its place either."""
    best = offered_check(checks)
    if best is not None:
        return Gain(saved_ms=0.0, step_after_ms=0.0, speedup=best.measured_speedup, band=best.measured_band)
    if any(c.against is Against.CEILING for c in checks):
        return None
    if predicted is None or predicted.speedup is None or predicted.speedup < 1.0:
        return None
    return predicted


@dataclasses.dataclass(frozen=True)
class Finding:
    """One finding: its kind, level, figures (numbers and codes, keyed as its kind documents them), the
    verdict's cause it answers (a label) or its topic ("memory", "startup", "threads", "straggler",
    "evaluation"), the user's site, the gain it predicts, the change it proposes (settings and their values),
    the perfcore command that tests it (a code) and, where experiments did, their Checks."""

    kind: FindingKind
    level: Level = Level.WARN
    cause: str | None = None
    figures: dict[str, Any] = dataclasses.field(default_factory=dict)
    site: Site | None = None
    gain: Gain | None = None
    change: dict[str, Any] = dataclasses.field(default_factory=dict)
    test: str | None = None
    checks: tuple[Check, ...] = ()

    @property
    def offered(self) -> Gain | None:
        return offered_gain(self.gain, self.checks)

    def measured(self, against: Against) -> Check | None:
        """The check an experiment made of it, held to `against`, or None."""
        return next((c for c in self.checks if c.against is against), None)
