"""`sweep -- CMD` over num_workers only keeps the script's own batch size and pin_memory, and lists
every value it replaced."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parent / "scripts" / "loader_settings.py"


def test_a_sweep_over_workers_keeps_the_scripts_batch_size_and_pin_memory(tmp_path):
    out = tmp_path / "s"
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "sweep", "--num-workers", "0,1", "--steps", "8",
                        "--warmup", "2", "--out", str(out), "--", sys.executable, str(SCRIPT)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["script_settings"] == {"batch_size": 8, "num_workers": 0, "pin_memory": True, "prefetch_factor": None}
    assert doc["kept"] == {"batch_size": 8, "pin_memory": True, "prefetch_factor": None}
    rows = {r["num_workers"]: r for r in doc["configs"]}
    assert set(rows) == {0, 1} and all(r["status"] == "ok" for r in rows.values())
    assert all(r["batch_size"] == 8 and r["pin_memory"] is True for r in rows.values())
    assert rows[0]["replaced"] is None and rows[1]["replaced"] == "num_workers 0->1"
    # What each configuration's DataLoader really was, as its own run recorded it.
    for i in range(2):
        (ld,) = json.loads((out / f"config{i}" / "run.json").read_text())["loaders"]
        assert ld["batch_size"] == 8 and ld["pin_memory"] is True and ld["num_workers"] == i
    best = next(line for line in p.stdout.splitlines() if line.startswith("best:"))
    assert "batch_size=8" in best and "pin_memory=True" in best
    if doc["best"]["num_workers"] == 0:
        assert "prefetch_factor" not in best
    else:
        assert "prefetch_factor=2 " in best and "(replaced: num_workers 0->1)" in best
    assert "kept as the script sets them: batch_size=8 pin_memory=True" in p.stdout
    assert "replaced: num_workers 0->1" in p.stdout


def test_asked_settings_replace_the_scripts_positional_ones_in_a_real_dataloader():
    """DataLoader(ds, 8, True, None, None, 0): batch_size, shuffle, sampler, batch_sampler and num_workers
    given by position. A sweep asking batch_size=4 and num_workers=1 must build that DataLoader with 4 and 1
    (folding only the first positional in passed True as the batch size and batch_size twice)."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from perfcore.run.child.batches import LoaderChanges

    ds = TensorDataset(torch.arange(32.0))
    changes = LoaderChanges({"batch_size": 4, "num_workers": 1}, 0)
    args, kwargs = changes.apply((8, True, None, None, 0), {"drop_last": True})
    dl = DataLoader(ds, *args, **kwargs)
    assert (dl.batch_size, dl.num_workers, dl.drop_last, changes.applied) == (4, 1, True, 1)
    assert isinstance(dl.sampler, torch.utils.data.RandomSampler)  # shuffle=True, kept from its position
    assert sorted(int(v) for (b,) in dl for v in b) == list(range(32))
    # Asked nothing: the script's call goes through as written.
    assert LoaderChanges({}, 0).apply((8, True), {}) == ((8, True), {})


def _row(workers, step_ms, sem_ms, replaced, batch=16):
    return {"batch_size": batch, "num_workers": workers, "pin_memory": False, "prefetch_factor": 2 if workers else None,
            "step_ms": step_ms, "step_sem_ms": sem_ms, "samples_per_s": 1e3 * batch / step_ms, "status": "ok",
            "replaced": replaced, "busy_mean": None, "oom": False, "verdict": "compute", "verdict_level": "healthy"}


def test_no_patch_is_offered_for_a_best_within_the_noise_of_the_scripts_own(tmp_path):
    """A sweep offered `git apply` for a configuration 4% ahead of the script's own settings where its own
    rows' noise was far wider; the patch now needs the best to be faster beyond both runs' noise."""
    from perfcore.analysis.command_results import SweepResult
    from perfcore.experiments.sweep import _keep_own
    from perfcore.experiments.sweep_results import gain_over_own
    from perfcore.report.stage_text import render_sweep

    own = {"batch_size": 16, "num_workers": 0, "pin_memory": False, "prefetch_factor": None, "site": None}
    grid = {"num_workers": [0, 2]}

    def kept(best_step, best_sem):
        rows = (_row(0, 100.0, 5.0, None), _row(2, best_step, best_sem, "num_workers 0->2"))
        best = {k: rows[1][k] for k in ("batch_size", "num_workers", "pin_memory", "prefetch_factor", "samples_per_s")}
        result = SweepResult(workload="train.py", grid=grid, steps=20, configs=rows, best=best)
        return gain_over_own(rows, best), _keep_own(result, grid, own, ("num_workers",), runner=object())

    import pytest

    gain, near = kept(96.0, 5.0)  # 1.04x, the noise about +-14%
    assert gain["change"] == "within noise" and gain["speedup"] == pytest.approx(100.0 / 96.0)
    assert near.patch["status"] == "unchanged" and near.patch["reason"] == "within_noise"
    assert "no faster than the script's own beyond the runs' noise (1.04x its rate" in render_sweep(near)
    gain, far = kept(50.0, 1.0)  # 2x, beyond the noise: the patch is tried (no call site here to patch)
    assert gain["change"] == "faster" and far.patch["reason"] == "no_site"
