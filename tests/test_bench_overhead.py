"""The overhead bench's check of the self-report: each part of it over the time it scales with."""

import importlib.util
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location(
    "bench_run_overhead", Path(__file__).resolve().parents[1] / "bench" / "bench_run_overhead.py"
)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_per_step_parts_count_against_the_bare_step_and_per_second_parts_against_the_runs_own():
    # A 0.2 ms step whose run.json mean step is 1.2 ms (the ring's waits inside its steps): 4 phases x
    # 800 ns and 0.6 us of passed calls a step; 10 us a step of sampler time, over the run's 1.2 ms.
    o = {"phases_per_step": 4.0, "per_phase_ns": 800.0, "passed_ms_per_step": 0.0006, "fetch_ms_per_step": 0.0,
         "sampler_ms_per_step": 0.010, "ms_per_step": 0.0138, "steady_ms_per_step": 0.0128, "mean_step_ms": 1.2}
    per_step = (0.0032 + 0.0006) / 0.2
    assert bench.said_share(o, 0.2, steady=False) == pytest.approx(per_step + 0.010 / 1.2)
    assert bench.said_share(o, 0.2, steady=True) == pytest.approx(per_step + 0.009 / 1.2)
    # Outside a ring (the mean step is the step) it is run.json's own share of the step.
    o["mean_step_ms"] = 0.2
    assert bench.said_share(o, 0.2, steady=False) == pytest.approx(0.0138 / 0.2)


def test_a_steady_sampler_said_as_a_share_of_step_time_counts_as_that_share():
    # The run split the sampler by where its wake-ups fell: 0.4% of the steps' time, 1 us of a 0.25 ms step.
    o = {"phases_per_step": 4.0, "per_phase_ns": 800.0, "passed_ms_per_step": 0.0006, "fetch_ms_per_step": 0.0,
         "sampler_ms_per_step": 0.010, "ms_per_step": 0.0138, "sampler_share": 0.004,
         "sampler_steady_ms_per_step": 0.001, "steady_ms_per_step": 0.0038 + 0.001 + 0.0014, "mean_step_ms": 1.2}
    per_step = (0.0032 + 0.0006) / 0.2
    assert bench.said_share(o, 0.2, steady=True) == pytest.approx(per_step + 0.004 + 0.0014 / 1.2)
    assert bench.said_share(o, 0.2, steady=False) == pytest.approx(per_step + 0.010 / 1.2)


@pytest.mark.parametrize("shape", ["fabric", "hf"])
def test_a_library_shape_runs_its_steps_and_times_each(shape):
    # Lightning Fabric's loop is the script's; the Hugging Face Trainer's is the library's own, timed at its
    # callback's step end: both must reach exactly the steps asked, each timed once.
    import subprocess
    import sys

    pytest.importorskip({"fabric": "lightning", "hf": "transformers"}[shape])
    bench_dir = Path(__file__).resolve().parents[1] / "bench"
    p = subprocess.run([sys.executable, str(bench_dir / "overhead_train.py"), "14", shape], capture_output=True,
                       text=True, timeout=300, cwd=bench_dir)
    assert p.returncode == 0, p.stderr[-2000:]
    lines = dict(ln.split(" ", 1) for ln in p.stdout.splitlines() if ln.startswith(("STEPS", "LOOP_MS_PER_STEP")))
    assert lines["STEPS"] == "14" and float(lines["LOOP_MS_PER_STEP"]) > 0, p.stdout
