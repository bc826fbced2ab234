"""A short run's part is settled by the parent: the instrumented process writes its recording's raw
arrays and never imports pandas; what the parent writes from them is what the process would have
written itself."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from perfcore.recording.engine import Recording
from perfcore.recording.replay import can_carry, export, replayed
from perfcore.run.part_files import write_raw, write_steps
from perfcore.run.protocol import RAW_JSON

MS = 1_000_000


def _facts(t_start: int, eval_rows=(), notes=()) -> dict:
    return {"common": {"pid": 1, "rank": None, "loaders": [], "step_source": "timer.step()"},
            "cpu_util_percent": 50.0, "eval_rows": list(eval_rows), "eval_passes": [[t_start, t_start + 3 * MS]],
            "mem_kind": "rss", "memory_limits": {"capacity_bytes": 2 ** 34}, "skipped_boundaries": 0,
            "training_batches": 12, "scaler_skipped_steps": 0, "t_start": t_start, "notes": list(notes),
            "backend_note": None, "requested_backend": "auto"}


def _record(steps: int = 12) -> Recording:
    """A CPU recording with built-in and custom phases, own work and a phase past a step end."""
    rec = Recording(device="cpu", warmup=2)
    load, compute, aug = rec.fetch_scope(), rec.phase("fwd", "compute"), rec.phase("augment", "load")
    for i in range(steps):
        with load:
            with aug:
                time.sleep(0.0005)
        with compute:
            sum(range(2000 + 300 * i))
        if i == 5:
            with rec.own:
                time.sleep(0.001)
        rec.step()
    return rec


def _written(folder: Path) -> tuple[dict, bytes, dict]:
    doc = json.loads((folder / "run.json").read_text())
    with np.load(folder / "trace.npz") as z:
        trace = {k: z[k] for k in z.files}
    return doc, (folder / "steps.csv").read_bytes(), trace


def test_the_parent_writes_what_the_process_would_have(tmp_path):
    rec = _record()
    assert can_carry(rec)
    meta, arrays = export(rec)
    meta = json.loads(json.dumps(meta))  # as raw.json carries it
    # The process's own path, on the very intervals export() drained: _drain would have added them so.
    spans = {c[len("span_"):]: v for c, v in arrays.items() if c.startswith("span_")}
    rec.store.add("spans", pd.DataFrame(spans))
    facts = _facts(int(arrays["step_ends_ns"][0]) - 50 * MS, eval_rows=[7])
    mem_at, mem = np.array([0, 4, 8]), np.array([100, 200, 300]) * 2 ** 20
    (tmp_path / "own").mkdir()
    (tmp_path / "carried").mkdir()
    write_steps(rec, facts, mem_at, mem, tmp_path / "own")
    write_steps(replayed(meta, arrays), facts, mem_at, mem, tmp_path / "carried")
    own, carried = _written(tmp_path / "own"), _written(tmp_path / "carried")
    assert own[0]["steps"] == 9 and own[0]["evaluation"]["rows"] == [7]
    assert "augment_ms" in own[1].decode().splitlines()[0]
    assert own[0]["overhead"]["own_ms_total"] > 0.9  # the own-work stretch, left out of its step
    own[0]["overhead"].pop("per_phase_ns"), carried[0]["overhead"].pop("per_phase_ns")  # measured anew here
    own[0]["overhead"].pop("ms_per_step"), carried[0]["overhead"].pop("ms_per_step")
    own[0]["overhead"].pop("fraction"), carried[0]["overhead"].pop("fraction")
    own[0]["overhead"].pop("material"), carried[0]["overhead"].pop("material")
    assert carried[0] == own[0]
    assert carried[1] == own[1]
    assert carried[2].keys() == own[2].keys()
    for k in own[2]:
        assert np.array_equal(carried[2][k], own[2][k]), k


def test_the_process_own_facts_and_the_facts_its_raw_part_carried_write_one_part(tmp_path):
    # Where kernels were traced the process writes its part from its facts as it made them (arrays); else
    # they reach the parent through raw.json (lists). Both are read once into the same typed facts.
    import torch

    from perfcore import jsonio
    from perfcore.run.lines import start

    capture, why = start(torch)
    assert why is None
    rec = _record()
    until = time.perf_counter() + 0.3  # ~30 samples at 100 Hz to carry
    while time.perf_counter() < until:
        sum(range(1000))
    calibration = {"count": 2, "seconds": 0.25, "pairs": 40, "cut_short": False}
    costs = {"sync_calls": 120, "sync_call_ns": 900.0, "sync_calls_steps": -1, "fetches": 12, "fetch_ns": 700.0,
             "passed_calls": 0, "passed_call_ns": 0.0, "calibration": calibration}
    facts = {**_facts(rec.started_ns[1] - MS), "lines": capture.facts(), "own_costs": costs}
    assert isinstance(facts["lines"]["t_ns"], np.ndarray)
    for d in ("own", "carried"):
        (tmp_path / d).mkdir()
    write_steps(rec, facts, [], [], tmp_path / "own")
    write_steps(rec, json.loads(jsonio.dumps(facts)), [], [], tmp_path / "carried")
    own, carried = _written(tmp_path / "own"), _written(tmp_path / "carried")
    assert own[0] == carried[0] and own[1] == carried[1]
    assert own[0]["overhead"]["calibration"] == calibration and own[0]["overhead"]["sync_calls_ms_per_step"] > 0
    assert own[0]["lines"]["sampler_wakes"] == facts["lines"]["sampler_wakes"] and "line_t_ns" in own[2]
    assert own[2].keys() == carried[2].keys() and all(np.array_equal(own[2][k], carried[2][k]) for k in own[2])


def test_a_recording_that_settled_is_carried_and_written_as_its_process_would(tmp_path):
    """Settled rows, kept detail and running sums travel too: a long run's process writes a raw
    part as well, and the parent's files equal the process's own."""
    from perfcore.run.part_files import finish_raw

    rec = _record(30)
    rec.settling.make_due()
    rec.upkeep(rec.steps)  # settles all but the last few steps, as a tick would
    settled = rec.store.settled
    assert 0 < settled < 30
    for i in range(5):  # more steps after the settle
        with rec.phase("fwd", "compute"):
            sum(range(1000 + 100 * i))
        rec.step()
    assert can_carry(rec)
    facts = _facts(int(rec.started_ns[1]) - 50 * MS, eval_rows=[7])
    mem_at, mem = np.array([0, 4, 8]), np.array([100, 200, 300]) * 2 ** 20
    for d in ("own", "carried"):
        (tmp_path / d).mkdir()
    write_raw(rec, facts, mem_at, mem, tmp_path / "carried")
    with np.load(tmp_path / "carried" / "raw.npz") as z:
        assert len(z["row_wall_ns"]) == settled and len(z["step_ends_ns"]) == 35 - settled
        carried_spans = {c: z[f"span_{c}"] for c in ("phase_id", "step", "start_ns", "end_ns", "thread_id")}
    # The process's own path, on the very intervals export() took: it drained them from the recorder
    # after those pending in the store, as the final settle's _drain would have added them.
    held = sum(len(p["step"]) for p in rec.store.pending["spans"])
    rec.store.add("spans", {c: v[held:] for c, v in carried_spans.items()})
    write_steps(rec, facts, mem_at, mem, tmp_path / "own")
    finish_raw(tmp_path / "carried")
    own, carried = _written(tmp_path / "own"), _written(tmp_path / "carried")
    assert own[0]["steps"] == 32  # 35 less 2 warm-up steps and the evaluation row
    for doc in (own[0], carried[0]):
        for k in ("per_phase_ns", "ms_per_step", "fraction", "material"):
            doc["overhead"].pop(k)
    assert carried[0] == own[0]
    assert carried[1] == own[1]
    assert carried[2].keys() == own[2].keys()
    for k in own[2]:
        assert np.array_equal(carried[2][k], own[2][k]), k


def test_a_recording_that_traced_kernels_is_not_carried():
    rec = _record(3)
    rec.store.kernel_agg["gemm"] = [1, 1000]  # kernels settled: their names are strings, not carried
    assert not can_carry(rec)


def test_events_carried_to_the_parent_label_the_gpu_time(tmp_path):
    """A CUDA recording's event intervals arrive as intervals: compute is the GPU's, load the host's."""
    t0 = 10_000 * MS
    ends = np.array([t0 + 10 * MS, t0 + 20 * MS, t0 + 30 * MS])
    arrays = {"span_phase_id": np.array([0, 0, 0], dtype=np.int32), "span_step": np.arange(3),
              "span_start_ns": ends - 10 * MS, "span_end_ns": ends - 8 * MS, "span_thread_id": np.ones(3, np.int64),
              "event_phase_id": np.full(3, 2, dtype=np.int32), "event_step": np.arange(3),
              "event_start_ns": ends - 6 * MS, "event_end_ns": ends - 1 * MS, "step_ends_ns": ends}
    meta = {"device": "cuda", "device_name": "NVIDIA T4", "backend": "events", "warmup": 0, "step_on": "step",
            "names": {"0": "load", "1": "transfer", "2": "compute", "3": "comm", "15": "perfcore"},
            "labels": {"0": "load", "1": "transfer", "2": "compute", "3": "comm"}, "shared_phase_ids": [],
            "t_first": int(t0), "t_created": int(t0), "settle_ns": 0, "upkeep_errors": 0, "notes": [],
            "capture": {"backend": "events", "event_clock_syncs": 3}, "phase_cost_ns": 150.0}
    rec = replayed(meta, arrays)
    write_steps(rec, _facts(int(t0) - MS), [], [], tmp_path)
    doc = json.loads((tmp_path / "run.json").read_text())
    assert doc["device"] == "NVIDIA T4" and doc["capture"]["event_clock_syncs"] == 3
    steps = pd.read_csv(tmp_path / "steps.csv")
    assert np.allclose(steps["compute_ms"], 5.0) and np.allclose(steps["load_ms"], 2.0)
    assert np.allclose(steps["wall_ms"], 10.0)


def _short_script(tmp_path: Path) -> Path:
    script = tmp_path / "short.py"
    script.write_text(
        "import sys\nimport torch\n"
        "m = torch.nn.Linear(8, 2)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(6):\n"
        "    loss = m(torch.randn(4, 8)).sum()\n    opt.zero_grad()\n    loss.backward()\n    opt.step()\n"
        "print('PANDAS_IN_SCRIPT', 'pandas' in sys.modules)\n")
    return script


def test_a_short_runs_process_never_imports_pandas_and_its_results_are_complete(tmp_path):
    out = tmp_path / "r"
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--out", str(out), "--warmup", "1", "--",
                        sys.executable, str(_short_script(tmp_path))], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "PANDAS_IN_SCRIPT False" in p.stdout
    doc = json.loads((out / "run.json").read_text())
    assert doc["steps"] + doc["warmup_steps"] == 6 and doc["step_source"] == "optimizer"
    (part,) = (out / "parts").iterdir()
    assert sorted(f.name for f in part.iterdir()) == ["run.json", "steps.csv", "trace.npz"]  # raw files gone
    steps = pd.read_csv(out / "steps.csv")
    assert len(steps) == 6 and steps["step"].dtype.kind == "i"  # also with the samples' columns added
    assert (out / "monitor.csv").is_file() and "monitor_cpu_percent" in steps  # sampled by default


def test_a_raw_part_left_by_a_killed_parent_is_finished_by_report(tmp_path):
    """The parent died before reading the part: `perfcore report` finishes the folder from it."""
    from perfcore.run.parent.refinish import finish_unfinished

    out = tmp_path / "r"
    part = out / "parts" / "pid7"
    part.mkdir(parents=True)
    t_start = int(time.perf_counter_ns())
    rec = _record(8)
    facts = _facts(t_start)
    facts["common"].update({"pid": 7, "argv": ["train.py"], "exit": {"reason": "finished"}})
    write_raw(rec, facts, np.array([1]), np.array([2 ** 30]), part)
    run = finish_unfinished(out)
    assert run.steps == 6 and (out / "steps.csv").is_file()
    assert not (part / RAW_JSON).exists()


def test_a_damaged_raw_part_is_one_line_and_the_checkpoint_is_used(tmp_path, capsys):
    from perfcore.run.parent.finish import read_parts

    part = tmp_path / "parts" / "pid9"
    part.mkdir(parents=True)
    (part / RAW_JSON).write_text('{"schema": "perfcore.rawpart/1"}')  # raw.npz missing
    assert read_parts(tmp_path) == []
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "could not finish the part" in err[0] and "pid9" in err[0]



def test_whole_raw_parts_are_finished_ahead_and_others_left_for_read_parts(tmp_path):
    """finish_whole_parts (run while the script's process may still be exiting): a raw part whose raw.json is
    written is finished as read_parts would; one still being written (no raw.json) and a damaged one are
    left as they are, for read_parts to read or to say what failed."""
    from perfcore.run.parent.finish import finish_whole_parts, read_parts

    out = tmp_path / "run"
    whole, writing, damaged = (out / "parts" / f"pid{i}-0123abcd" for i in (1, 2, 3))
    rec = _record()
    facts = _facts(int(rec.started_ns[1]) - 50 * MS)
    for d in (whole, writing, damaged):
        d.mkdir(parents=True)
        write_raw(rec, facts, np.array([0]), np.array([2**20]), d)
    (writing / RAW_JSON).unlink()  # raw.npz there, raw.json (written last) not yet
    (damaged / RAW_JSON).write_text("{")
    finish_whole_parts(out)
    assert (whole / "run.json").is_file() and not (whole / RAW_JSON).exists() and not (whole / "raw.npz").exists()
    assert not (writing / "run.json").exists() and (writing / "raw.npz").is_file()
    assert not (damaged / "run.json").exists() and (damaged / RAW_JSON).read_text() == "{"
    before = (whole / "run.json").read_bytes()
    parts = read_parts(out)
    assert [p.key for p in parts] == [whole.name] and (whole / "run.json").read_bytes() == before
