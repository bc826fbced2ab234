"""--steps N holds exactly N training steps, however long the run: the steps another training thread
ended between the stop and the clock's disarm are dropped, also once settling has let old step ends go
(a run past its first settle)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from perfcore.run.child.stop import trim_past_stop
from perfcore.timing import StepTimer


def stopped_run(steps: int, extra: int, eval_rows=()):
    """A recording of `steps` steps (warm-up 1) settled past its first settle, then `extra` steps
    ended after the stop; the run's side as trim_past_stop reads it."""
    timer = StepTimer(device="cpu", warmup=1)
    engine = timer.engine
    t = engine.started_ns[1]
    for _ in range(steps):
        t += 1_000_000
        engine.end_step(at_ns=t, upkeep=False)
    engine.settling.make_due()
    engine.upkeep(len(engine.boundaries))
    for _ in range(extra):
        t += 1_000_000
        engine.end_step(at_ns=t, upkeep=False)
    inst = SimpleNamespace(timer=timer, stop_at=steps - len(eval_rows), eval_rows=list(eval_rows), notes=[],
                           steps_wanted=steps - 1 - len(eval_rows))
    return timer, inst


@pytest.mark.parametrize("steps", [40, 3000])
def test_steps_past_the_stop_are_dropped_before_and_after_the_first_settle(steps):
    timer, inst = stopped_run(steps, extra=2)
    engine = timer.engine
    assert engine.store.settled > 0 and (engine.boundaries.base > 0) == (steps > 1024)
    assert trim_past_stop(inst) == 2 and not inst.notes
    assert len(engine.boundaries) == steps
    doc = engine.document()
    assert doc["steps"] + doc["warmup_steps"] == steps and len(engine.step_table()) == steps
    assert doc["steps"] == steps - 1


def test_the_steps_kept_are_the_first_ones():
    timer, inst = stopped_run(3000, extra=3)
    trim_past_stop(inst)
    table = timer.engine.summary()
    assert len(table) == 3000
    # Every step lasted 1 ms: the dropped ones were the last three, nothing shifted.
    assert table["wall_ms"].to_numpy() == pytest.approx(1.0)
    assert timer.engine.boundaries[-1] == timer.engine.started_ns[1] + 3000 * 1_000_000


def test_a_run_that_ended_at_the_stop_keeps_every_step():
    timer, inst = stopped_run(3000, extra=0)
    assert trim_past_stop(inst) == 0 and not inst.notes
    assert len(timer.engine.summary()) == 3000


def test_steps_already_settled_past_the_stop_stay_and_are_said():
    timer, inst = stopped_run(3000, extra=0)
    inst.stop_at -= 5  # the stop came 5 steps before a settle ran, which left the newest 2 unsettled
    assert timer.engine.store.settled == 2998
    assert trim_past_stop(inst) == 2
    (note,) = inst.notes
    assert note.startswith("3 step(s) past --steps") and len(timer.engine.summary()) == 2998


def test_the_part_carried_to_the_parent_holds_the_same_steps():
    # A run that settled nothing with CUPTI is finished by the parent from the carried recording.
    from perfcore.recording.replay import can_carry, export, replayed, settled_columns

    timer, inst = stopped_run(3000, extra=2)
    trim_past_stop(inst)
    engine = timer.engine
    assert can_carry(engine)
    meta, arrays = export(engine)
    arrays.update(dict(settled_columns(engine)))
    assert len(replayed(meta, arrays).summary()) == 3000


def test_two_training_threads_stopped_past_the_first_settle_give_exactly_n_steps(tmp_path):
    # Two threads stepping at once past 4096 steps (the first settle): the stop races the other
    # thread's next step; the run still holds exactly N steps, in run.json and steps.csv alike.
    script = Path(__file__).resolve().parent / "scripts" / "two_threads.py"
    out = tmp_path / "r"
    cmd = [sys.executable, "-m", "perfcore.cli", "run", "--quiet", "--out", str(out), "--warmup", "1",
           "--steps", "4200", "--", sys.executable, str(script), "5000"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads((out / "run.json").read_text())
    assert doc["steps"] == 4200 and doc["warmup_steps"] == 1 and doc["exit"]["reason"] == "steps reached"
    assert not any("past --steps" in n for n in doc.get("notes") or [])
    rows = (out / "steps.csv").read_text().strip().splitlines()
    assert len(rows) == 1 + 4201
