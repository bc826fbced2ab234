"""Kernel tracing's mode and cost (recording/tracing.py): the calibration's figure, the cost kept out of
each step where the GPU idled, and the figures run.json reports. Pure numbers; the run through a fake
GPU is in test_event_runtime.py."""
from __future__ import annotations

import numpy as np
import pytest

from perfcore.errors import UsageError
from perfcore.recording.tracing import Tracing, kernel_mode


def test_kernels_true_is_the_lean_mode():
    assert kernel_mode(True) == "lean" and kernel_mode(False) is None and kernel_mode("full") == "full"
    with pytest.raises(UsageError, match="'lean' or 'full'"):
        kernel_mode("windows")


def test_one_traced_launch_costs_the_difference_of_the_medians():
    t = Tracing("lean", "native-cupti", [4000.0, 4000.0, 9000.0], [6000.0, 6200.0, 5900.0])  # one block preempted
    assert t.launch_cost_ns == 2000.0 and t.measured
    assert Tracing("lean", "native-cupti", [5000.0] * 3, [4900.0] * 3).launch_cost_ns == 0.0  # never negative
    unmeasured = Tracing("lean", "native-cupti", None, None)
    assert unmeasured.launch_cost_ns == 0.0 and unmeasured.overhead(10, 10)["tracing_ns_per_launch"] is None


def _step_columns(wall, host):
    wall, host = np.array(wall, np.int64), np.array(host, np.int64)
    return {"wall_ns": wall.copy(), "host_ns": host.copy(), "perfcore_ns": np.zeros(len(wall), np.int64)}


def test_the_cost_comes_out_of_host_time_and_no_more():
    # Steps [0, 1000), [1000, 2000), [2000, 3000) us; 4, 2 and 0 launches ending in them, 5 us each. The
    # second step's GPU never idled but 3 us (its launches waited behind GPU work): 3 us taken, not 10.
    t = Tracing("lean", "native-cupti", [4000.0] * 3, [9000.0] * 3)
    s0, s1 = np.array([0, 1_000_000, 2_000_000]), np.array([1_000_000, 2_000_000, 3_000_000])
    raw = {"kernels": {"end_ns": np.array([100, 200, 300, 1_100_000, 1_500_000])},
           "copies": {"end_ns": np.array([400, 3_500_000])}}  # the last copy ends after the slice: later
    cols = _step_columns([1_000_000] * 3, [500_000, 3_000, 800_000])
    t.keep_out(raw, cols, s0, s1)
    assert list(cols["perfcore_ns"]) == [20_000, 3_000, 0]
    assert list(cols["wall_ns"]) == [980_000, 997_000, 1_000_000] and list(cols["host_ns"]) == [480_000, 0, 800_000]
    assert t.launches == 6 and t.taken_ns == 23_000
    o = t.overhead(rows=3, steps_traced=3)
    assert o == {"tracing_ms_per_step": pytest.approx(23_000 / 3 / 1e6), "tracing_ns_per_launch": 5000.0,
                 "launches_per_step": 2.0}


def test_the_facts_say_what_was_traced_and_how_kernels_found_their_phase():
    lean = Tracing("lean", "native-cupti", [4000.0, 4050.0, 3990.0], [9000.0, 9100.0, 8900.0]).facts(steps_traced=40)
    assert lean.mode == "lean" and lean.steps_traced == 40 and lean.placement == "event_windows"
    assert lean.kinds == ("concurrent_kernel", "memcpy", "memset")
    assert lean.calibration.spread_ns == 200.0 and lean.calibration.measured
    full = Tracing("full", "native-cupti", None, None).facts(steps_traced=3)
    assert full.placement == "correlation" and "runtime" in full.kinds and not full.calibration.measured


def test_every_run_says_its_tracing_even_when_nothing_was_traced():
    # The device rows read these figures from every run (--no-kernels, the CPU fallback): nothing traced is
    # zero cost, zero launches and mode "off", never a missing figure.
    import perfcore

    t = perfcore.StepTimer(device="cpu", warmup=0)
    for _ in range(3):
        with t.compute():
            pass
        t.step()
    doc = t.result().to_dict()  # run.json's document: the figures as a reader finds them
    t.close()
    o = doc["overhead"]
    assert (o["tracing_ms_per_step"], o["tracing_ns_per_launch"], o["launches_per_step"]) == (0.0, 0.0, 0.0)
    assert "kernel_tracing" not in o["counted"]
    tracing = {k: v for k, v in doc["capture"]["tracing"].items() if v is not None}  # the figures it has
    assert tracing == {"mode": "off", "steps_traced": 0, "kinds": [], "launches": 0}
