"""perfcore run's self-reported overhead: every cost it adds, counted and measured, and the warning only
when it is material."""

import pytest

from perfcore.capture.sync_calls import SyncCounter
from perfcore.recording.own_work import MATERIAL_OVERHEAD, beside_steps
from perfcore.report.html_parts import warnings_of
from perfcore.run.child.loaders import fetch_cost_ns

TIMER = {"per_phase_ns": 200.0, "phases_per_step": 5.0, "own_ms_per_step": 0.01, "ms_per_step": 0.011}


def test_beside_steps_adds_each_wrapper_and_the_sampler_per_step():
    costs = {"sync_calls": 1000, "sync_call_ns": 1500.0, "fetches": 100, "fetch_ns": 800.0, "sampler_ns": 2_000_000}
    o = beside_steps(TIMER, costs, steps=100, mean_wall_ms=4.0)
    assert o["sync_calls_ms_per_step"] == pytest.approx(0.015)  # 10 calls a step x 1.5 us
    assert o["fetch_ms_per_step"] == pytest.approx(0.0008)
    assert o["sampler_ms_per_step"] == pytest.approx(0.02)
    in_steps = 0.001 + 0.015 + 0.0008 + 0.02  # 5 phases x 200 ns, then the three beside them
    assert o["ms_per_step"] == pytest.approx(in_steps + 0.01)
    # A share of the step without perfcore (the wall time holds everything but the own work).
    assert o["fraction"] == pytest.approx((in_steps + 0.01) / (4.0 - in_steps))
    assert o["material"] is (o["fraction"] >= MATERIAL_OVERHEAD)


def test_a_host_heavy_loop_is_material_and_a_quiet_one_is_not():
    heavy = beside_steps(TIMER, {"sync_calls": 130_000, "sync_call_ns": 1300.0}, steps=1000, mean_wall_ms=4.0)
    quiet = beside_steps(TIMER, {"fetches": 1000, "fetch_ns": 800.0}, steps=1000, mean_wall_ms=30.0)
    assert heavy["fraction"] > 0.04 and heavy["material"]
    assert quiet["fraction"] < 0.001 and not quiet["material"]
    assert any("own overhead" in w for w in warnings_of({"overhead": heavy}))
    assert not any("own overhead" in w for w in warnings_of({"overhead": quiet}))


def test_the_wrappers_costs_are_measured_here():
    # Positive and below a millisecond: a wrapper's own time, not a loop's.
    assert 0 < SyncCounter.call_cost_ns() < 1e6
    assert 0 < fetch_cost_ns() < 1e6


def test_the_short_report_names_a_material_overhead_only():
    import json
    from pathlib import Path

    from perfcore.report.terminal import render_brief

    doc = json.loads((Path(__file__).with_name("report_docs") / "run.json").read_text())
    heavy = beside_steps(TIMER, {"sync_calls": 130_000, "sync_call_ns": 1300.0}, steps=1000, mean_wall_ms=4.0)
    quiet = beside_steps(TIMER, {}, steps=1000, mean_wall_ms=30.0)
    shown = render_brief({**doc, "overhead": heavy}, "runs/r1").splitlines()
    assert len(shown) <= 15 and sum(ln.startswith("overhead: perfcore added") for ln in shown) == 1
    assert "overhead" not in render_brief({**doc, "overhead": quiet}, "runs/r1")


def test_the_counter_takes_its_wrappers_off_at_the_cap():
    import torch

    x = torch.tensor(2.0)
    before = torch.Tensor.__dict__.get("item")
    counter = SyncCounter(torch, methods=("item",), max_calls=5).start()
    for _ in range(8):
        assert x.item() == 2.0  # every call still answers, the ones past the cap straight from torch
    assert torch.Tensor.__dict__.get("item") is before  # off at the cap, not only at stop()
    calls = counter.stop()
    assert len(calls.t_ns) == 5 and calls.dropped == 1 and counter.calls_seen == 6
