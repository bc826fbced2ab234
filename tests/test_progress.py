"""A run while it happens: the child's progress file and checkpoints (injected clock), the parent's
status line (rich, forced terminal / not a terminal / quiet), and a SIGKILLed run that still leaves
valid results from its last checkpoint."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

import perfcore
from perfcore.run.child.progress import ProgressWriter
from perfcore.run.protocol import read_progress
from perfcore.run.status import LiveStatus, status_text

LABELS = ("load", "transfer", "compute", "comm", "host")


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def run_steps(timer, n):
    for _ in timer.load(range(n)):
        with timer.compute():
            sum(range(200))
        timer.step()


def test_progress_is_written_only_when_due_and_checkpoints_append(tmp_path, monkeypatch):
    import perfcore.run.child.progress as progress_mod

    clock = Clock()
    timer = perfcore.StepTimer(device="cpu", warmup=2)
    w = ProgressWriter(tmp_path, "pid1", steps_wanted=500, warmup=2, clock=clock, checkpoint_s=30.0)
    run_steps(timer, 50)
    w.tick(timer)
    assert read_progress(tmp_path) is None  # not due yet: nothing written
    clock.t += progress_mod.SETTLE_EVERY_S + 0.5
    # Settling is due too: the first one waits FIRST_COMPACT_S of the timer's own clock.
    timer.engine.settling.make_due()
    w.tick(timer)
    p = read_progress(tmp_path)
    assert p["steps"] == 50 and p["steps_wanted"] == 500 and p["step_ms"] > 0
    assert set(p["breakdown_fraction"]) == set(LABELS)
    assert abs(sum(p["breakdown_fraction"].values()) - 1) < 1e-9
    assert p["verdict"]["summary"]
    assert not (tmp_path / "parts").exists()  # no checkpoint before 30 s

    monkeypatch.setattr(progress_mod, "CHECKPOINT_SLICE", 20)
    asked = []
    settled_rows = timer.engine.settled_rows
    timer.engine.settled_rows = lambda since=0, upto=None: asked.append((since, upto)) or settled_rows(since, upto)
    clock.t += 30
    w.tick(timer)
    ck = tmp_path / "parts" / "pid1" / "checkpoint"
    first = (ck / "steps.i64").read_bytes()
    ncols = len(json.loads((ck / "run.json").read_text())["checkpoint"]["columns"])
    assert len(first) == 8 * ncols * p["settled_steps"] and not (ck / "steps.csv").exists()  # binary, no text
    run_steps(timer, 40)
    timer.engine.settling.make_due()
    clock.t += 31
    w.tick(timer)
    table = (ck / "steps.i64").read_bytes()
    assert table[: len(first)] == first  # appended, not rewritten
    n1, n2 = len(first) // (8 * ncols), len(table) // (8 * ncols)
    assert n2 == read_progress(tmp_path)["settled_steps"]
    from perfcore.analysis.reader import load_part

    # Each checkpoint read only the rows it had not written, 20 at a time: the training process
    # never pays for the whole run's rows again, nor holds them all at once.
    data = [(a, b) for a, b in asked if b is not None]
    assert data[0][0] == 0 and data[-1][1] == n2 and all(b - a <= 20 for a, b in data)
    assert all(x[1] == y[0] for x, y in zip(data, data[1:]))  # contiguous, none read twice
    assert (n1, n1 + 20) in data or (n1, n2) in data  # the second began where the first ended
    doc, steps, _ = load_part(ck)  # a valid part for finish_run
    assert doc["checkpoint"]["steps"] == len(steps) == n2
    # The rows read back are the timer's, to the nanosecond, under steps.csv's names and types.
    settled = timer.engine.settled_rows(since=0, upto=n2)
    assert (steps["step"].to_numpy() == settled["step"]).all() and steps["step"].dtype.kind == "i"
    assert (steps["wall_ms"].to_numpy() == settled["wall_ns"] / 1e6).all() and steps["warmup"].dtype == bool
    assert list(steps["warmup"]) == [bool(x) for x in settled["warmup"]]
    # Its figures are the rows' (summarised by the reader, not by the training process).
    measured = steps[~steps["warmup"].astype(bool)]
    assert doc["steps"] == len(measured) and doc["warmup_steps"] == 2
    assert abs(doc["step_time_ms"]["mean"] - measured["wall_ms"].mean()) < 1e-6
    assert abs(doc["step_time_ms"]["p90"] - measured["wall_ms"].quantile(0.9)) < 1e-6
    assert abs(sum(doc["breakdown_fraction"].values()) - 1) < 1e-6
    assert "verdict" not in doc  # a part's facts: the run is decided once, on all of its parts
    assert w.failed is None

    # Killed while appending the next rows: the half-written rows lie beyond the bytes the
    # checkpoint's run.json vouches for, and the part still reads as the last checkpoint.
    with open(ck / "steps.i64", "ab") as fh:
        fh.write(table[-8 * ncols :] + table[: 8 * ncols // 2])
    doc, steps, _ = load_part(ck)
    assert len(steps) == doc["checkpoint"]["steps"] == n2


def test_status_line_on_a_terminal_and_silent_elsewhere(tmp_path):
    from rich.console import Console

    (tmp_path / "progress").mkdir()
    doc = {"key": "pid1", "steps": 120, "warmup": 5, "steps_wanted": 1000, "step_ms": 12.5,
           "breakdown_fraction": {"load": 0.5, "transfer": 0.1, "compute": 0.3, "comm": 0.0, "host": 0.1},
           "verdict": {"summary": "input-bound: waiting for data costs 6.2 ms; more"}}
    (tmp_path / "progress" / "pid1.json").write_text(json.dumps(doc))
    buf = io.StringIO()
    live = LiveStatus(tmp_path, console=Console(file=buf, force_terminal=True, width=200)).start()
    line = live.refresh()
    live.stop()
    out = buf.getvalue()
    assert line and "step 120/1005" in out and "12.5 ms/step" in out and "ETA 11 s" in out
    assert "load 50%" in out and "input-bound" in out
    for console, quiet in ((Console(file=io.StringIO(), force_terminal=False), False),
                           (Console(file=io.StringIO(), force_terminal=True), True)):
        s = LiveStatus(tmp_path, quiet=quiet, console=console).start()
        assert s.enabled is False and s.refresh() is None
        s.stop()
        assert console.file.getvalue() == ""


def test_status_text_before_shares_are_known():
    t = status_text({"steps": 3, "warmup": 5, "steps_wanted": 0, "step_ms": None})
    assert t.startswith("perfcore: step 3") and "ETA" not in t and "shares after" in t


KILLED = textwrap.dedent("""
    import os, signal, time
    import torch
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(4, 8)
    t0 = time.time()
    while True:
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if time.time() - t0 > 6:
            os.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer would: no exit handler runs
""")


def test_a_sigkilled_run_leaves_its_last_checkpoint_as_results(tmp_path):
    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--quiet", "--out", str(out),
                        "--test-setting", "checkpoint_s=0.5", "--", sys.executable, str(script)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 128 + 9, p.stderr[-2000:]
    doc = json.loads((out / "run.json").read_text())
    assert doc["checkpoint"]["steps"] > 0
    assert doc["steps"] + doc["warmup_steps"] == doc["checkpoint"]["steps"]
    assert any(isinstance(n, dict) and n["code"] == "from_checkpoint" for n in doc["notes"])
    assert (out / "report.html").is_file() and "checkpoint" in (out / "report.html").read_text()


SLOW = textwrap.dedent("""
    import time
    import torch
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    t0 = time.time()
    while time.time() - t0 < 13:  # past the first settle (10 s in), when the shares appear
        loss = model(torch.randn(4, 8)).sum()
        opt.zero_grad(); loss.backward(); opt.step()
        time.sleep(0.002)
""")


def test_perfcore_run_shows_a_live_status_line_on_a_terminal(tmp_path):
    import pty
    import select

    script = tmp_path / "slow.py"
    script.write_text(SLOW)
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "perfcore.cli", "run", "--out", str(tmp_path / "r"), "--",
                             sys.executable, str(script)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=slave)
    os.close(slave)
    seen = b""
    while True:
        r, _, _ = select.select([master], [], [], 1.0)
        if r:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=300)
    os.close(master)
    text = seen.decode(errors="replace")
    assert proc.returncode == 0, text[-2000:]
    assert "perfcore: step" in text and "ms/step" in text, text[-2000:]
    assert "compute" in text and "%" in text  # the shares, once steps were settled


def test_notebook_status_updates_one_output_in_place(tmp_path):
    from perfcore.run.status import NotebookStatus

    class Handle:  # what IPython's display(..., display_id=True) returns
        def __init__(self):
            self.shown = []

        def update(self, obj):
            self.shown.append(getattr(obj, "data", obj))

    (tmp_path / "progress").mkdir()
    (tmp_path / "progress" / "pid1.json").write_text(json.dumps(
        {"key": "pid1", "steps": 40, "warmup": 5, "steps_wanted": 0, "step_ms": 3.0,
         "breakdown_fraction": {"load": 0.1, "transfer": 0.0, "compute": 0.8, "comm": 0.0, "host": 0.1}}))
    h = Handle()
    s = NotebookStatus(tmp_path, handle=h, every_s=0.05).start()
    deadline = time.time() + 30
    while not h.shown and time.time() < deadline:
        time.sleep(0.05)
    s.stop()
    assert "perfcore: step 40" in h.shown[0] and "compute 80%" in h.shown[0]
    assert h.shown[-1] == ""  # cleared at the end: the report takes its place
    assert NotebookStatus(tmp_path).start().handle is None  # outside a kernel: nothing shown


def test_a_checkpoint_claiming_any_size_reads_only_what_its_file_holds(tmp_path):
    from perfcore.errors import PerfcoreError
    from perfcore.analysis.reader import load_part

    hdr = "step,wall_ms,load_ms,transfer_ms,compute_ms,comm_ms,host_ms,warmup\n"
    rows = "".join(f"{k},1.0,0.5,0.0,0.4,0.0,0.1,{k < 1}\n" for k in range(4))
    (tmp_path / "steps.csv").write_text(hdr + rows)
    for claimed in (10**12, 2**62):  # a damaged number, not a memory request
        (tmp_path / "run.json").write_text(json.dumps({"schema": "perfcore.run/1", "steps": 3, "warmup_steps": 1,
                                                       "checkpoint": {"steps": 4, "csv_bytes": claimed}}))
        doc, steps, _ = load_part(tmp_path)
        assert len(steps) == 4 and doc["steps"] == 3 and doc["step_time_ms"]["mean"] == 1.0
    (tmp_path / "run.json").write_text(json.dumps({"schema": "perfcore.run/1", "steps": 3, "warmup_steps": 1,
                                                   "checkpoint": {"steps": 4, "csv_bytes": 5}}))
    with pytest.raises(PerfcoreError) as e:
        load_part(tmp_path)
    assert "steps.csv" in str(e.value) and "\n" not in str(e.value)


def test_a_tick_settles_at_most_every_settle_interval_and_decides_only_on_new_rows(tmp_path, monkeypatch):
    import perfcore.run.child.progress as progress_mod

    decided = []
    decide = progress_mod._decide
    monkeypatch.setattr(progress_mod, "_decide", lambda *a: decided.append(a) or decide(*a))
    clock = Clock()
    timer = perfcore.StepTimer(device="cpu", warmup=2)
    w = ProgressWriter(tmp_path, "pid1", warmup=2, clock=clock, checkpoint_s=1000.0)
    run_steps(timer, 50)
    clock.t += 2.5
    timer.engine.settling.make_due()
    w.tick(timer)  # the live count from the first tick; no settling before the settle interval
    early = read_progress(tmp_path)
    assert early["steps"] == 50 and early["step_ms"] > 0 and "settled_steps" not in early and not decided
    assert timer.engine.settled_totals()["settled"] == 0
    clock.t += progress_mod.SETTLE_EVERY_S
    timer.engine.settling.make_due()
    w.tick(timer)
    first = read_progress(tmp_path)
    assert first["settled_steps"] > 0 and first["verdict"]["summary"] and len(decided) == 1
    run_steps(timer, 30)
    clock.t += 2.5
    timer.engine.settling.make_due()  # the engine would settle; the tick does not ask it yet
    w.tick(timer)
    p = read_progress(tmp_path)
    assert p["steps"] == 80 and p["settled_steps"] == first["settled_steps"]  # the count is live, no settling
    assert p["verdict"] == first["verdict"] and len(decided) == 1  # same rows: the verdict is not decided again
    clock.t += progress_mod.SETTLE_EVERY_S
    timer.engine.settling.make_due()
    w.tick(timer)
    p = read_progress(tmp_path)
    assert p["settled_steps"] > first["settled_steps"] and len(decided) == 2


def test_a_binary_checkpoint_reads_only_what_it_vouches_for_and_refuses_a_damaged_description(tmp_path):
    import numpy as np

    from perfcore.errors import PerfcoreError
    from perfcore.analysis.reader import load_part

    cols = ["step", "wall_ms", "load_ms", "transfer_ms", "compute_ms", "comm_ms", "host_ms", "warmup"]
    kinds = ["i", "ms", "ms", "ms", "ms", "ms", "ms", "b"]
    rows = np.array([[k, 1_000_000, 500_000, 0, 400_000, 0, 100_000, k < 1] for k in range(4)], dtype="<i8")
    (tmp_path / "steps.i64").write_bytes(rows.tobytes() + rows[0].tobytes()[:12])  # a row cut short by a kill

    def doc(**ck):
        base = {"steps": 4, "table": "steps.i64", "columns": cols, "kinds": kinds, "table_bytes": rows.nbytes}
        (tmp_path / "run.json").write_text(json.dumps({"schema": "perfcore.run/1", "steps": 3, "warmup_steps": 1,
                                                       "checkpoint": {**base, **ck}}))
        return load_part(tmp_path)

    d, steps, _ = doc()
    assert len(steps) == 4 and d["steps"] == 3 and d["step_time_ms"]["mean"] == 1.0 and steps["warmup"].sum() == 1
    assert len(doc(table_bytes=rows.nbytes - 64)[1]) == 3  # only the rows the checkpoint vouches for
    # A damaged number is not a memory request: more rows than the steps it declares, part of a row, or no
    # number at all is a damaged description, refused in one line.
    for bad in ({"table_bytes": 10**12}, {"table_bytes": 2**62}, {"table_bytes": None}, {"table_bytes": 5 * 64},
                {"table_bytes": rows.nbytes - 1}, {"table_bytes": True},
                {"columns": cols[:-1]}, {"kinds": ["x"] * 8}, {"columns": "step"}, {"columns": ["step"] * 8},
                {"columns": [c for c in cols if c != "wall_ms"] + ["x_ms"]}):
        with pytest.raises(PerfcoreError) as e:
            doc(**bad)
        assert "run.json" in str(e.value) and "\n" not in str(e.value), bad
