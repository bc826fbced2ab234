"""analysis.processes: trainers that ran side by side (Hogwild) merged on hand-built tables: every row
counted once, the figures over all of them, rows in the order they started, no rank or straggler."""
from __future__ import annotations

import numpy as np
import pytest
from steps_tables import LABELS, steps_table

from perfcore.analysis.process_part import Part
from perfcore.analysis.processes import merge_trainers


def _part(pid: int, n: int, means, t0_ns: int, seed: int) -> dict:
    steps = steps_table(n, means, seed=seed)
    wall_ns = np.rint(steps["wall_ms"].to_numpy() * 1e6).astype(np.int64)
    start = t0_ns + np.concatenate(([0], np.cumsum(wall_ns)[:-1]))
    doc = {
        "pid": pid, "steps": n - 5, "warmup_steps": 5, "device": "cpu", "backend": "host",
        "step_time_ms": {"mean": float(steps["wall_ms"][5:].mean())},
        "breakdown_ms": {lb: float(steps[f"{lb}_ms"][5:].mean()) for lb in LABELS},
        "breakdown_fraction": {lb: 0.2 for lb in LABELS},
        "kernels": [{"name": "gemm", "count": n, "total_ms": 2.0 * n, "mean_us": 2000.0}],
        "starvation": {"steps": n - 5},
        "loaders": [{"site": "t.py:3", "role": "train", "dataset": "D", "batches": n, "made": 1, "worker_startup_ms": [5.0]}],
    }
    return Part.parse(doc, steps, {"step_start_ns": start, "step_wall_ns": wall_ns})


def test_every_trainers_rows_are_the_run():
    a = _part(11, 40, (1.0, 0.0, 3.0, 0.0, 0.5), t0_ns=0, seed=1)
    b = _part(12, 30, (4.0, 0.0, 3.0, 0.0, 0.5), t0_ns=1_000_000, seed=2)  # a slower loader
    fields, table, raw = merge_trainers([b, a])
    assert fields["steps"] == 35 + 25 and fields["warmup_steps"] == 10 and len(table) == 70
    # The shares are over every measured row, not one trainer's nor a mean of their means.
    both = [t.table[~t.table["warmup"]] for t in (a, b)]
    load = sum(float(t["load_ms"].sum()) for t in both)
    wall = sum(float(t["wall_ms"].sum()) for t in both)
    assert fields["breakdown_fraction"]["load"] == pytest.approx(load / wall, rel=1e-6)
    assert fields["step_time_ms"]["mean"] == pytest.approx(wall / 60, rel=1e-6)
    # In the order they started, numbered anew; each row keeps its process; the starts follow the rows.
    assert (np.diff(raw["step_start_ns"]) >= 0).all() and list(table["step"]) == list(range(70))
    assert sorted(table["pid"].value_counts().items()) == [(11, 40), (12, 30)]
    assert table.loc[0, "pid"] == 11 and len(raw["step_wall_ns"]) == 70
    assert [p["pid"] for p in fields["processes"]["training"]] == [11, 12]
    assert fields["kernels"] == [{"name": "gemm", "count": 70, "total_ms": 140.0, "mean_us": 2000.0, "category": None}]
    # Each trainer's DataLoader made at one place is one loader with all of their batches.
    (ld,) = fields["loaders"]
    assert (ld["batches"], ld["made"], ld["worker_startup_ms"]) == (70, 2, [5.0, 5.0])
    assert not {"ranks", "stragglers", "world_size"} & set(fields)


def test_a_starved_run_is_one_processes_own():
    a = _part(11, 25, (1.0, 0.0, 3.0, 0.0, 0.5), t0_ns=0, seed=1)
    b = _part(12, 25, (1.0, 0.0, 3.0, 0.0, 0.5), t0_ns=500_000, seed=2)
    a.table["load_ms"] = np.where(a.table["step"] >= 5, 6.0, 0.0)  # a starves on every measured step
    a.table["wall_ms"] = a.table[[f"{lb}_ms" for lb in LABELS]].sum(axis=1)
    b.table["load_ms"] = 0.0
    b.table["wall_ms"] = b.table[[f"{lb}_ms" for lb in LABELS]].sum(axis=1)
    fields, table, _ = merge_trainers([a, b])
    st = fields["starvation"]
    assert (st["steps"], st["starved"], st["longest_run"]) == (40, 20, 20)  # interleaved with b's, still a's 20
    assert table.loc[st["longest_run_first_step"], "pid"] == 11


def test_parts_without_their_step_starts_are_kept_part_after_part():
    a = _part(11, 10, (1.0, 0.0, 3.0, 0.0, 0.5), t0_ns=0, seed=1)
    b = _part(12, 10, (1.0, 0.0, 3.0, 0.0, 0.5), t0_ns=0, seed=2)
    b.raw.clear()
    fields, table, raw = merge_trainers([a, b])
    assert raw == {} and list(table["pid"]) == [11] * 10 + [12] * 10 and fields["steps"] == 10


def _doc(pid, steps, nested_in=1, source="optimizer", comm=0.0, started_by="multiprocessing"):
    return Part.parse({"pid": pid, "steps": steps, "warmup_steps": 1, "nested_in": nested_in, "step_source": source,
                       "started_by": started_by, "breakdown_ms": {"comm": comm}})


def test_which_processes_are_the_run():
    from perfcore.run.parent.trainers import the_run

    parent = _doc(1, 9, nested_in=None, source="forward")
    a, b = _doc(2, 20), _doc(3, 20)
    # Hogwild: the trainers together, the parent that only evaluated apart; without a test pass too.
    assert the_run([parent, a, b]) == ([a, b], [parent], [], True)
    assert the_run([a, b]) == ([a, b], [], [], True)
    # A parent that trains itself: its Pool's side jobs are measured apart, as before.
    trainer = _doc(1, 30, nested_in=None)
    assert the_run([trainer, a, b]) == ([trainer], [], [a, b], False)
    # Collectives: the ranks of one job (DDP by mp.spawn), never summed; nor Pythons started by subprocess.
    r0, r1 = _doc(2, 20, comm=1.5), _doc(3, 18, comm=0.2)
    assert the_run([r0, r1])[3] is False
    s0, s1 = _doc(2, 20, started_by=None), _doc(3, 18, started_by=None)
    assert the_run([s0, s1]) == ([s0], [], [s1], False)


def test_a_process_that_only_evaluated_is_the_runs_evaluation():
    from perfcore.analysis.processes import evaluation_apart

    a = _part(11, 25, (1.0, 0.0, 3.0, 0.0, 0.5), t0_ns=0, seed=1).table
    b = _part(12, 15, (1.0, 0.0, 3.0, 0.0, 0.5), t0_ns=0, seed=2).table
    parent = {"pid": 1, "steps": 3, "step_time_ms": {"mean": 10.0}, "evaluation": {"passes": 2, "total_ms": 30.0}}
    ev = evaluation_apart([Part.parse(parent)], [a, b])
    # Against the wall time the trainers took side by side (the longer one's), never their sum.
    training = float(a["wall_ms"][5:].sum())
    assert ev["passes"] == 2 and ev["ms_per_pass"] == 15.0 and ev["processes"] == [1]
    assert ev["share_of_wall"] == pytest.approx(30.0 / (30.0 + training))
    # A part from before the passes were kept: its rows are one pass.
    older = Part.parse({"pid": 1, "steps": 3, "step_time_ms": {"mean": 10.0}})
    assert evaluation_apart([older], [a])["total_ms"] == 30.0
    assert evaluation_apart([], [a]) is None


def test_a_part_without_a_column_has_none_of_its_rows():
    # One trainer's table has evaluation and memory columns, the other's not: its rows are training rows.
    a = _part(11, 10, (1.0, 0.0, 3.0, 0.0, 0.5), t0_ns=0, seed=1)
    b = _part(12, 10, (1.0, 0.0, 3.0, 0.0, 0.5), t0_ns=10**9, seed=2)
    a.table["evaluation"] = False
    a.table["mem_bytes"] = 100
    fields, table, _ = merge_trainers([a, b])
    assert fields["steps"] == 10 and not table["evaluation"].any()
    assert table["evaluation"].dtype == bool and list(table["mem_bytes"][10:]) == [-1] * 10
