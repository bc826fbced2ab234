"""GPU power and temperature per step (from the NVML sampler's rows) and kernel categories in run.json:
written by finishing, validated by the reader, shown in report.html; absent without NVML readings.
Hand-built sampler frames stand in for NVML (no GPU here)."""
from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from steps_tables import steps_table

from perfcore.capture.sampler import align_samples
from perfcore.errors import BadResultFile
from perfcore.analysis.reader import parse_run
from perfcore.run.parent.evidence import monitor_summary

MS = 1_000_000


def nvml_samples(start_ns: int, n: int, every_ms: float, gpu: bool = True) -> pd.DataFrame:
    """Rows as Sampler._sample makes them: CPU/RAM always, the GPU's fields where NVML answered."""
    t = start_ns + (np.arange(n) * every_ms * MS).astype(np.int64)
    d = {"t_ns": t, "cpu_percent": np.full(n, 50.0), "ram_used_bytes": np.full(n, 2.0**31)}
    if gpu:
        d.update(gpu_util=np.full(n, 0.9), mem_util=np.full(n, 0.3), gpu_mem_used_bytes=np.full(n, 4e9),
                 power_w=100.0 + np.arange(n), temp_c=50.0 + np.arange(n) / 10, sm_clock_mhz=np.full(n, 1980))
    return pd.DataFrame(d)


def test_power_and_temperature_become_per_step_means():
    # Three 10 ms steps from t=0; samples every 4 ms: step 0 holds samples 0,1,2 (0, 4, 8 ms), step 1
    # holds 3,4 (12, 16), step 2 holds 5,6,7 (20, 24, 28); the sample at 32 ms is after the run.
    start = np.array([0, 10, 20], dtype=np.int64) * MS
    wall = np.full(3, 10 * MS, dtype=np.int64)
    per = align_samples(nvml_samples(0, 9, 4.0), start, wall)
    assert per["power_w"].tolist() == [101.0, 103.5, 106.0]
    assert per["temp_c"].tolist() == pytest.approx([5.01e1, 5.035e1, 5.06e1])
    assert per["gpu_util"].tolist() == [0.9] * 3


def test_a_step_without_a_sample_has_no_power_rather_than_a_made_up_one():
    start = np.array([0, 10, 100], dtype=np.int64) * MS
    wall = np.array([10, 10, 5], dtype=np.int64) * MS
    per = align_samples(nvml_samples(0, 5, 4.0), start, wall)  # samples up to 16 ms: none in step 2
    assert np.isnan(per.loc[2, "power_w"]) and not np.isnan(per.loc[1, "power_w"])


def test_without_nvml_the_gpu_fields_are_absent():
    samples = nvml_samples(0, 9, 4.0, gpu=False)
    per = align_samples(samples, np.array([0], dtype=np.int64), np.array([40 * MS], dtype=np.int64))
    assert list(per.columns) == ["cpu_percent"]
    steps = steps_table(1)
    steps["monitor_cpu_percent"] = per["cpu_percent"].to_numpy()
    doc = monitor_summary(samples, steps)
    assert doc == {"samples": 9, "cpu_percent_mean": 50.0}


def test_run_json_monitor_holds_the_spread_of_per_step_power_over_measured_steps():
    steps = steps_table(8)  # steps 0-4 are warm-up
    steps["monitor_power_w"] = [500.0] * 5 + [200.0, np.nan, 260.0]
    steps["monitor_temp_c"] = [90.0] * 5 + [60.0, np.nan, 64.0]
    samples = nvml_samples(0, 4, 10.0)
    doc = monitor_summary(samples, steps)
    assert doc["per_step"] == {"power_w": {"mean": 230.0, "min": 200.0, "max": 260.0, "steps": 2},
                               "temp_c": {"mean": 62.0, "min": 60.0, "max": 64.0, "steps": 2}}
    assert doc["power_w_mean"] == 101.5 and doc["power_w_max"] == 103.0 and doc["temp_c_max"] == 50.3
    parse_run({**base_doc(), "monitor": doc}, Path("run.json"))


def base_doc() -> dict:
    from test_html import run_doc

    return run_doc().to_dict()


@pytest.mark.parametrize("field, value", [
    (("monitor", "power_w_mean"), "hot"),
    (("monitor", "per_step", "temp_c", "max"), float("nan")),
    (("monitor", "per_step", "power_w"), {"mean": 1.0}),
    (("kernel_categories", "gemm", "share"), 1.7),
    (("kernel_categories", "gemm", "ms"), -3.0),
    (("kernels", 0, "category"), 5),
])
def test_the_reader_refuses_a_damaged_new_field(field, value):
    doc = base_doc()
    doc["monitor"] = {"samples": 10, "power_w_mean": 300.0,
                      "per_step": {"power_w": {"mean": 1.0, "min": 1.0, "max": 1.0, "steps": 1},
                                   "temp_c": {"mean": 1.0, "min": 1.0, "max": 1.0, "steps": 1}}}
    doc["kernels"][0]["category"] = "elementwise"
    parse_run(copy.deepcopy(doc), Path("run.json"))  # the undamaged one passes
    at = doc
    for k in field[:-1]:
        at = at[k]
    at[field[-1]] = value
    with pytest.raises(BadResultFile, match=field[0]):
        parse_run(doc, Path("run.json"))


def test_older_documents_without_the_new_fields_still_read():
    doc = base_doc()
    doc["kernel_categories"] = {"gemm": {"share": 1.0}}  # no ms, as earlier writers had it
    doc.pop("monitor", None)
    parse_run(doc, Path("run.json"))


def test_report_shows_power_and_temperature_per_step(tmp_path):
    from test_html import steps_table as gpu_steps

    from perfcore.report.html import render_report

    doc = base_doc()
    doc["monitor"] = {"samples": 50, "per_step": {"power_w": {"mean": 612.5, "min": 480.0, "max": 690.0, "steps": 40}}}
    steps = gpu_steps(300)
    steps["monitor_power_w"] = np.where(np.arange(300) % 7 == 0, 600.0, np.nan)
    steps["monitor_temp_c"] = np.where(np.arange(300) % 7 == 0, 71.0, np.nan)
    html = render_report(parse_run(doc, Path("run.json")), steps)
    assert "Power and temperature" in html and "612.5 W" in html and "690.0 W" in html
    assert '"GPU power"' in html and '"GPU temperature"' in html  # the two charts on the steps' axis
    plain = render_report(parse_run(base_doc(), Path("run.json")), gpu_steps(300))
    assert "Power and temperature" not in plain and '"GPU power"' not in plain
