"""perfcore.summary(run): one flat dict of the key figures from a result, a run folder or a StepTimer."""
from __future__ import annotations

import json

import pytest

import perfcore
from perfcore import jsonio

LABELS = ("load", "transfer", "compute", "comm", "host")
DOC = {"schema": "perfcore.run/1", "steps": 90, "warmup_steps": 10,
       "step_time_ms": {"mean": 10.0, "p50": 9.0, "p90": 14.0},
       "breakdown_ms": {"load": 5.0, "transfer": 1.0, "compute": 3.0, "comm": 0.0, "host": 1.0},
       "breakdown_fraction": {"load": 0.5, "transfer": 0.1, "compute": 0.3, "comm": 0.0, "host": 0.1},
       "verdict": {"bound": "load", "summary": "input-bound: ..."}, "recommendations": [], "kernels": [],
       "memcpy": {}, "backend": "host", "device": "cpu", "overhead": {"ms_per_step": 0.01, "fraction": 0.001}}


def test_flat_dict_of_the_key_figures():
    s = perfcore.summary(DOC)
    assert s["perfcore/step_ms"] == 10.0 and s["perfcore/step_ms_p90"] == 14.0
    assert s["perfcore/steps"] == 90 and s["perfcore/warmup_steps"] == 10
    assert [s[f"perfcore/{lb}_share"] for lb in LABELS] == [0.5, 0.1, 0.3, 0.0, 0.1]
    assert s["perfcore/load_ms"] == 5.0 and s["perfcore/overhead_ms"] == 0.01
    # An older document's verdict is said again from its figures, never from the words it stored.
    assert s["perfcore/bound"] == "load" and s["perfcore/verdict"] == (
        "input-bound (major): waiting for data, 5.00 ms of a 10.0 ms step (50%)"
    )
    assert all(not isinstance(v, (dict, list)) for v in s.values())  # flat
    n = perfcore.summary(DOC, prefix="", numeric=True)  # mlflow.log_metrics: numbers only
    assert "bound" not in n and all(isinstance(v, (int, float)) for v in n.values()) and n["step_ms"] == 10.0


def test_from_a_run_folder_and_from_a_step_timer(tmp_path):
    jsonio.write(tmp_path / "run.json", DOC)
    assert perfcore.summary(tmp_path)["perfcore/host_share"] == 0.1
    assert perfcore.summary(str(tmp_path / "run.json"))["perfcore/steps"] == 90
    timer = perfcore.StepTimer(device="cpu", warmup=1)
    for _ in timer.load(range(6)):
        with timer.compute():
            sum(range(1000))
        timer.step()
    s = perfcore.summary(timer)
    assert s["perfcore/steps"] == 5 and s["perfcore/step_ms"] > 0
    assert abs(sum(s[f"perfcore/{lb}_share"] for lb in LABELS) - 1) < 1e-9
    json.dumps(s)  # ready for any logger


def test_anything_else_is_refused_with_what_it_takes():
    with pytest.raises(TypeError, match="run folder or a StepTimer"):
        perfcore.summary(42)


def test_the_steady_figures_are_the_verdicts():
    import numpy as np
    from test_uncertainty import run_of, table

    n = 40
    host = np.full(n, 1.0)
    host[[7, 19, 33]] = [380.0, 420.0, 400.0]  # three preempted steps: the mean reads host-bound
    run = run_of(table(np.zeros(n), np.full(n, 12.0), host))
    s = perfcore.summary(run, prefix="")
    assert s["host_share"] > 0.6 and s["step_ms"] > 40  # every step
    assert s["step_ms_steady"] == pytest.approx(run.verdict.step_ms) == pytest.approx(13.0)
    assert s["host_steady_share"] == pytest.approx(1 / 13) and s["compute_steady_share"] == pytest.approx(12 / 13)
    assert perfcore.summary(DOC)["perfcore/load_steady_share"] == 0.5  # no robust figures: the mean
