"""Sweeps survive their configurations: a crash, an OOM or an infeasible configuration is recorded with
its reason and the sweep goes on; such a configuration is never the best; Ctrl-C keeps what finished
and --resume continues it. Logic is tested with stand-in measurements (no timing involved)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from perfcore.cli import cli
from perfcore.errors import UsageError
from perfcore.experiments import runner as runner_mod
from perfcore.experiments import scripts
from perfcore.experiments import sweep as sweep_mod
from perfcore.experiments.measurement import Interrupted, Measurement, Trial
from perfcore.experiments.sweep import grid_configs, run_grid, sweep_doc

HERE = Path(__file__).resolve()
GRID = {"batch_size": [4, 8, 16], "num_workers": [0], "pin_memory": [False], "prefetch_factor": [2]}


def ok_row(cfg, rate):
    return {**cfg, "step_ms": 1e3 * cfg["batch_size"] / rate, "samples_per_s": rate, "busy_mean": 0.5, "busy_std": 0.1,
            "peak_mem_bytes": 1, "oom": False, "status": "ok", "error": None, "steps": 8, "load_share": 0.2}


def test_failures_are_recorded_with_reasons_and_the_sweep_goes_on():
    def measure_one(cfg):
        if cfg["batch_size"] == 4:
            raise ValueError("shape mismatch in the model")
        if cfg["batch_size"] == 8:
            raise UsageError("the loader produced no batch")
        return ok_row(cfg, 100.0)

    rows, interrupted = run_grid(grid_configs(GRID), measure_one)
    assert not interrupted and [r["status"] for r in rows] == ["crashed", "infeasible", "ok"]
    assert "ValueError: shape mismatch" in rows[0]["error"] and "no batch" in rows[1]["error"]
    doc = sweep_doc("w", GRID, 8, pd.DataFrame(rows), t0=0.0, rounds=[]).to_dict()
    assert doc["best"]["batch_size"] == 16 and doc["failed"] == 2 and doc["complete"]


def test_a_crashed_configuration_is_never_best_even_when_its_numbers_are_the_highest():
    cfgs = grid_configs(GRID)
    rows = [ok_row(cfgs[0], 50.0), {**ok_row(cfgs[1], 9999.0), "status": "crashed", "error": "exit 1"},
            {**ok_row(cfgs[2], 8888.0), "status": "oom", "oom": True}]
    doc = sweep_doc("w", GRID, 8, pd.DataFrame(rows), t0=0.0, rounds=[]).to_dict()
    assert doc["best"]["batch_size"] == 4


def test_nothing_measured_gives_no_best_rather_than_an_error():
    rows, _ = run_grid(grid_configs(GRID), lambda cfg: (_ for _ in ()).throw(RuntimeError("boom")))
    doc = sweep_doc("w", GRID, 8, pd.DataFrame(rows), t0=0.0, rounds=[]).to_dict()
    assert doc["best"] is None and doc["knees"] == [] and len(doc["configs"]) == 3


def test_ctrl_c_keeps_the_configurations_finished_so_far():
    seen = []

    def measure_one(cfg):
        if len(seen) == 2:
            raise KeyboardInterrupt
        seen.append(cfg)
        return ok_row(cfg, 10.0 * cfg["batch_size"])

    checkpoints = []
    rows, interrupted = run_grid(grid_configs(GRID), measure_one, on_row=lambda r: checkpoints.append(len(r)))
    assert interrupted and len(rows) == 2 and checkpoints == [1, 2]
    doc = sweep_doc("w", GRID, 8, pd.DataFrame(rows), t0=0.0, rounds=[], interrupted=True, planned=3).to_dict()
    assert not doc["complete"] and doc["best"]["batch_size"] == 8


def test_prefetch_factor_zero_is_refused_not_ignored():
    with pytest.raises(UsageError, match="prefetch_factor must be >= 1"):
        grid_configs({**GRID, "prefetch_factor": [0]})


def _script_doc(steps, rc, step_ms):
    """The run a script's configuration gave: its steps, exit code and step time."""
    from run_docs import typed_run

    return typed_run(step_ms, {}, steps=steps, exit_code=rc)


def _script_measured(monkeypatch, tmp_path, doc):
    """A configuration of a script measured by the script runner, the script's run giving `doc`."""
    monkeypatch.setattr(scripts, "script_run", lambda cmd, out, trial, **k: scripts.script_measurement(
        doc, [], "compute_share", None, None, trial))
    cfg = grid_configs(GRID)[0]
    return cfg, scripts.ScriptRunner(["python", "t.py"], tmp_path).measure(Trial(5, 2, overrides=cfg, tag="config0"))


@pytest.mark.parametrize("doc, measured", [
    (_script_doc(0, 1, 0.0), False),       # was ZeroDivisionError
    (_script_doc(0, 0, 0.0), False),
    (_script_doc(5, 1, 2.0), True),
])
def test_a_script_configuration_that_crashes_is_a_failed_row(monkeypatch, tmp_path, doc, measured):
    cfg, m = _script_measured(monkeypatch, tmp_path, doc)
    row = sweep_mod.config_row(cfg, m)
    assert row["status"] == "crashed" and row["steps"] == doc.steps
    assert row["reason"] == ("failed_partway" if measured else "no_measured_step") and row["exit_code"] == doc.exit_code
    # Crashed part-way: its numbers kept (never best); in warm-up: none.
    assert (row["step_ms"] == 2.0) if measured else (row["step_ms"] is None)
    assert (m.failure.code if m.failure else 0) == doc.exit_code


def test_a_script_ended_by_ctrl_c_stops_the_sweep(monkeypatch, tmp_path):
    with pytest.raises(Interrupted):
        _script_measured(monkeypatch, tmp_path, _script_doc(3, 130, 2.0))


def fake_measure(calls, stop_at=None):
    def measure_workload(workload, trial, progress=None):
        steps, overrides = trial.steps, trial.overrides
        if stop_at is not None and len(calls) == stop_at:
            raise KeyboardInterrupt
        calls.append(overrides["batch_size"])
        return Measurement("cpu", steps, 10.0, samples_per_s=10.0 * overrides["batch_size"], busy_series=(0.4, 0.6),
                           peak_mem_bytes=1, breakdown_fraction={"load": 0.1})
    return measure_workload


def test_cli_ctrl_c_writes_what_finished_and_resume_runs_only_the_rest(monkeypatch, tmp_path):
    out = tmp_path / "s"
    target = f"{HERE.parent / 'workload_factories.py'}:slow_loader"
    args = ["sweep", "--batch-size", "4,8,16", "--num-workers", "0", "--pin-memory", "false", "--steps", "4",
            "--out", str(out), target]
    first: list = []
    monkeypatch.setattr(runner_mod, "measure_workload", fake_measure(first, stop_at=2))
    res = CliRunner().invoke(cli, args, prog_name="perfcore")
    assert res.exit_code == 130, res.output
    assert "--resume" in res.stderr.strip().splitlines()[-1]
    partial = json.loads((out / "sweep.json").read_text())
    assert [c["batch_size"] for c in partial["configs"]] == [4, 8] and partial["interrupted"]

    second: list = []
    monkeypatch.setattr(runner_mod, "measure_workload", fake_measure(second))
    res = CliRunner().invoke(cli, [args[0], "--resume", *args[1:]], prog_name="perfcore")
    assert res.exit_code == 0, res.output
    assert second == [16], "resume measured again what had finished"
    doc = json.loads((out / "sweep.json").read_text())
    assert [c["batch_size"] for c in doc["configs"]] == [4, 8, 16] and doc["complete"]
    assert doc["best"]["batch_size"] == 16


def test_resume_refuses_another_grid_and_a_folder_perfcore_did_not_make(monkeypatch, tmp_path):
    out = tmp_path / "s"
    target = f"{HERE.parent / 'workload_factories.py'}:slow_loader"
    monkeypatch.setattr(runner_mod, "measure_workload", fake_measure([]))
    base = ["sweep", "--num-workers", "0", "--pin-memory", "false", "--steps", "4", "--out", str(out)]
    assert CliRunner().invoke(cli, [*base, "--batch-size", "4", target]).exit_code == 0
    res = CliRunner().invoke(cli, [*base, "--resume", "--batch-size", "8", target], prog_name="perfcore")
    assert res.exit_code == 2 and "another grid" in res.stderr
    (tmp_path / "plain").mkdir()
    res = CliRunner().invoke(cli, [*base[:-1], str(tmp_path / "plain"), "--resume", "--batch-size", "4", target],
                             prog_name="perfcore")
    assert res.exit_code == 2 and "not a folder perfcore made" in res.stderr


def test_a_real_model_crashing_in_one_configuration(tmp_path):
    """In-process and real: batch 16 raises inside forward; the other configurations are measured."""
    from perfcore.experiments.sweep import sweep
    from perfcore.workloads import load_workload

    doc = sweep(load_workload(f"{HERE}:crashes_above_8"), GRID, steps=3, warmup=1).to_dict()
    by_bs = {c["batch_size"]: c for c in doc["configs"]}
    assert by_bs[16]["status"] == "crashed" and "batch 16" in by_bs[16]["error"]
    assert by_bs[4]["status"] == by_bs[8]["status"] == "ok" and doc["best"]["batch_size"] in (4, 8)


def test_a_script_crashing_in_warm_up_is_one_line(tmp_path):
    import subprocess

    script = tmp_path / "crash_early.py"
    script.write_text("import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
                      "dl = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=8)\n"
                      "m = torch.nn.Linear(4, 1)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
                      "for i, (x,) in enumerate(dl):\n    m(x).sum().backward(); opt.step()\n"
                      "    if i == 1:\n        raise SystemExit(3)\n")
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "sweep", "--batch-size", "8", "--num-workers", "0",
                        "--steps", "4", "--warmup", "3", "--out", str(tmp_path / "s"), "--", sys.executable,
                        str(script)], capture_output=True, text=True, timeout=240)
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr and "ZeroDivisionError" not in p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith("perfcore: error: no configuration could be measured")
    assert json.loads((tmp_path / "s" / "sweep.json").read_text())["configs"][0]["status"] == "crashed"


def crashes_above_8():
    import torch
    from torch import nn

    from perfcore.workloads import Workload

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(32, 4)

        def forward(self, x):
            if x.shape[0] > 8:
                raise ValueError(f"batch {x.shape[0]} breaks this model")
            return self.lin(x)

    data = torch.utils.data.TensorDataset(torch.randn(64, 32), torch.randint(0, 4, (64,)))
    model = Net()
    return Workload(dataset=data, model=model, loss_fn=nn.CrossEntropyLoss(),
                    optimizer=torch.optim.SGD(model.parameters(), lr=0.01), batch_size=8, name="crashes_above_8")


@pytest.mark.parametrize("damage, says", [
    (lambda d: d["configs"][0].update(samples_per_s="fast"), "configs[0].samples_per_s is text"),
    (lambda d: d["configs"][0].pop("status"), "configs[0].status is missing"),
    (lambda d: d.update(schema="perfcore.sweep/9"), "newer perfcore"),
])
def test_resume_from_a_damaged_sweep_json_is_one_line(monkeypatch, tmp_path, damage, says):
    out = tmp_path / "s"
    target = f"{HERE.parent / 'workload_factories.py'}:slow_loader"
    monkeypatch.setattr(runner_mod, "measure_workload", fake_measure([]))
    base = ["sweep", "--num-workers", "0", "--pin-memory", "false", "--steps", "4", "--batch-size", "4",
            "--out", str(out)]
    assert CliRunner().invoke(cli, [*base, target]).exit_code == 0
    doc = json.loads((out / "sweep.json").read_text())
    damage(doc)
    (out / "sweep.json").write_text(json.dumps(doc))
    res = CliRunner().invoke(cli, [*base, "--resume", target], prog_name="perfcore")
    lines = res.stderr.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and says in lines[0] and str(out / "sweep.json") in lines[0], lines
