"""One process's part of a run (parts/<key>/: its run.json, steps table and trace arrays) parsed once into a
frozen Part: the finish, the ranks' merge and the trainers' merge read its attributes, never its document.

The document itself stays beside the typed fields (`doc`): it is the base of the run's own document, which
the typed run (analysis.run_report) parses when the finish writes it. A field of the wrong kind reads as
None or empty here, never as an exception: the reader (analysis.reader.load_part) has already refused what
the run cannot be made from (a rank or pid that is no integer, a run document that does not parse)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping

from perfcore.analysis.codec import fields_of
from perfcore.analysis.run_context import Checkpoint, Exit, NoStep
from perfcore.analysis.run_parts import Kernel, Memcpy

__all__ = ["Part"]


@dataclasses.dataclass(frozen=True, eq=False)
class Part:
    """One process's part. `table` is its steps table (a DataFrame) and `raw` its trace arrays by name: the
    finish puts a job's hosts on one clock by shifting those arrays in place and lets them go once the trace
    is written (the arrays are 16 bytes a step), so `raw` is the part's own dict, not a copy. A part is
    itself only (eq=False): two processes' parts are never equal, and a table is never compared.

    The fields after `label` are its facts, each read from the document's key of its name by its
    annotation (codec.fields_of); a value of the wrong kind reads as the field's default."""

    doc: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    table: Any = None
    raw: dict[str, Any] = dataclasses.field(default_factory=dict)
    key: str = ""
    dir: Path | None = None
    label: str = ""
    pid: int | None = None
    rank: int | None = None
    world_size: int | None = None
    nested_in: int | None = None  # the pid of the process that started this one, where the script did
    host: str | None = None
    started_by: str | None = None  # "multiprocessing" for processes torch.multiprocessing started
    step_source: str | None = None
    steps: int = 0
    warmup_steps: int = 0
    exit: Exit = Exit()
    seen: dict[str, Any] = dataclasses.field(default_factory=dict)  # the hooks' counts before a step source
    no_step: NoStep | None = None
    checkpoint: Checkpoint | None = None  # a part that is its process's last checkpoint
    command: tuple[str, ...] = ()
    argv: tuple[str, ...] = ()  # the command, as a part written before `command` names it
    notes: tuple[Any, ...] = ()
    step_time_ms: dict[str, Any] = dataclasses.field(default_factory=dict)
    breakdown_ms: dict[str, Any] = dataclasses.field(default_factory=dict)
    breakdown_fraction: dict[str, Any] = dataclasses.field(default_factory=dict)
    evaluation: dict[str, Any] = dataclasses.field(default_factory=dict)
    compute_split_ms: dict[str, Any] = dataclasses.field(default_factory=dict)
    compute_split_gpu_ms: dict[str, Any] = dataclasses.field(default_factory=dict)
    starvation: dict[str, Any] = dataclasses.field(default_factory=dict)
    kernels: tuple[Kernel, ...] = ()
    memcpy: Memcpy = Memcpy()
    loaders: tuple[dict[str, Any], ...] = ()
    device: str = "cpu"
    backend: str = "none"

    @classmethod
    def parse(
        cls, doc: Mapping[str, Any], table: Any = None, raw: dict[str, Any] | None = None, **where: Any
    ) -> "Part":
        """A part from its run.json (`doc`), steps table and trace arrays; where: key, dir, label."""
        doc = doc if isinstance(doc, dict) else {}
        facts = fields_of(cls, doc, skip=_WHERE)
        where.setdefault("label", f"rank {facts['rank']}" if facts["rank"] is not None else f"pid {facts['pid']}")
        return cls(doc=doc, table=table, raw=raw if raw is not None else {}, **where, **facts)

    @property
    def stepped(self) -> bool:
        """Whether the process saw a step (a launcher that only imported torch saw none)."""
        return bool(self.steps or self.warmup_steps)

    @property
    def seen_calls(self) -> int:
        """Every call the hooks counted before a step source was chosen."""
        return sum(v for v in self.seen.values() if isinstance(v, int))

    def figures(self) -> dict[str, Any]:
        """Its steps' own figures, as the merged run lists each rank or trainer."""
        return {
            "steps": self.steps,
            "step_time_ms": self.step_time_ms,
            "breakdown_ms": self.breakdown_ms,
            "breakdown_fraction": self.breakdown_fraction,
            "exit": self.exit.reason,
        }

    @property
    def run_command(self) -> tuple[str, ...]:
        return self.command or self.argv

    @property
    def comm_ms(self) -> float:
        """Its steps' mean time in collectives."""
        comm = self.breakdown_ms.get("comm")
        return float(comm) if isinstance(comm, (int, float)) else 0.0

    @property
    def pageable_h2d(self) -> tuple[float, float]:
        """Host-to-device copies from pageable memory over the run: (bytes, ms)."""
        h2d = self.memcpy.by_direction.get("h2d")
        return (h2d.pageable_bytes, h2d.pageable_ms or 0.0) if h2d is not None else (0.0, 0.0)


# The fields that are not facts of the document: where the part is, and what it holds beside its run.json.
_WHERE = frozenset({"doc", "table", "raw", "key", "dir", "label"})
