"""analysis.process_part: a part's run.json read once into a Part, every fact by its annotation; a value of the
wrong kind reads as the field's default, never as an exception."""
from __future__ import annotations

import pytest

from perfcore.analysis.process_part import Part
from perfcore.analysis.run_context import Exit

RANK = {
    "rank": 1,
    "pid": 40,
    "world_size": 2,
    "host": "node1",
    "steps": 30,
    "warmup_steps": 5,
    "step_source": "optimizer",
    "exit": {"reason": "crashed", "exception": "RuntimeError: boom", "t_exception_ns": 17},
    "seen": {"forward": 3, "backward": 2, "wall_ms": 1.5},
    "breakdown_ms": {"load": 1.0, "comm": 2.5},
    "memcpy": {"by_direction": {"h2d": {"bytes": 800.0, "ms": 2.0, "pageable_bytes": 600.0, "pageable_ms": 1.5}}},
    "kernels": [{"name": "gemm", "count": 4, "total_ms": 2.0, "mean_us": 500.0}],
    "argv": ["python", "train.py"],
}


def test_a_part_reads_its_facts_once():
    p = Part.parse(RANK, key="rank1")
    assert (p.rank, p.pid, p.world_size, p.host, p.label, p.key) == (1, 40, 2, "node1", "rank 1", "rank1")
    assert (p.steps, p.warmup_steps, p.stepped, p.step_source) == (30, 5, True, "optimizer")
    assert p.exit == Exit(reason="crashed", exception="RuntimeError: boom", t_exception_ns=17)
    assert p.seen_calls == 5  # counts only: the wall time is no call
    assert p.comm_ms == 2.5 and p.pageable_h2d == (600.0, 1.5)
    assert [k.name for k in p.kernels] == ["gemm"] and p.kernels[0].count == 4
    assert p.run_command == ("python", "train.py")  # a part written before `command` was kept
    assert Part.parse({"pid": 7}).label == "pid 7" and not Part.parse({"pid": 7}).stepped


@pytest.mark.parametrize(
    "field, bad, default",
    [
        ("rank", "1", None),
        ("host", 5, None),
        ("steps", None, 0),
        ("warmup_steps", [1], 0),
        ("exit", "crashed", Exit()),
        ("exit", {"exception": 3}, Exit()),
        ("seen", [1, 2], {}),
        ("breakdown_ms", 4, {}),
        ("kernels", {"name": "gemm"}, ()),
        ("notes", "a note", ()),
        ("no_step", {"forward": 1}, None),  # no wall time: not a no-step record
        ("checkpoint", {"columns": "steps"}, None),
        ("device", None, "cpu"),
    ],
)
def test_a_bad_fact_reads_as_its_default(field, bad, default):
    p = Part.parse({**RANK, field: bad})
    assert getattr(p, field) == default
    assert p.pid == 40  # the rest of the part still reads


def test_a_document_that_is_no_object_is_an_empty_part():
    p = Part.parse(["not", "a", "document"])
    assert (p.rank, p.pid, p.steps, p.exit, p.label) == (None, None, 0, Exit(), "pid None")


def test_a_part_holds_its_table_and_arrays_as_given():
    table, raw = object(), {"step_start_ns": [1]}
    parsed = Part.parse(RANK, table, raw)
    assert parsed.rank == 1 and parsed.table is table and parsed.raw is raw
    assert parsed != Part.parse(RANK)  # a part is itself only: its table is never compared
