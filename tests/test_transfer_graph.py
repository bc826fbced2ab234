"""Transfer and CUDA Graph tooling: the parts that need no device run here; the rest is `cuda`."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from perfcore import errors
from perfcore.experiments.graph_capture import CaptureError, _check_optimizer, capture_failure_reason
from perfcore.experiments.transfer import parse_shape, parse_sizes, summarize_curve


def cli(*args):
    return subprocess.run([sys.executable, "-m", "perfcore.cli", *args], capture_output=True, text=True, timeout=120)


def test_size_ranges_and_lists():
    assert parse_sizes("4K..1M") == [4096, 16384, 65536, 262144, 1 << 20]
    assert parse_sizes("4K..1G")[-1] == 1 << 30 and len(parse_sizes("4K..1G")) == 10
    assert parse_sizes("1M,4K,1M") == [4096, 1 << 20]
    assert parse_sizes("1.5K") == [1536]
    for bad in ("", "4X", "0K", "1G..4K", "K"):
        with pytest.raises(errors.UsageError):
            parse_sizes(bad)


def test_shapes():
    assert parse_shape("128,3,224,224") == (128, 3, 224, 224)
    for bad in ("", "3,x", "3,0"):
        with pytest.raises(errors.UsageError):
            parse_shape(bad)


def test_curve_summary_against_nominal():
    curve = pd.DataFrame({"direction": ["h2d"] * 4, "memory": ["pinned", "pinned", "pageable", "pageable"],
                          "size_bytes": [1 << 20, 1 << 30] * 2, "gbps": [20.0, 50.0, 8.0, 12.0]})
    s = summarize_curve(curve, 63.0)
    assert s["h2d_pinned_peak_gbps"] == 50.0 and s["h2d_pageable_peak_gbps"] == 12.0
    assert s["h2d_pinned_of_nominal"] == pytest.approx(50 / 63)


def test_transfer_plot_from_stored_results(tmp_path):
    from perfcore.report.plots import plot_transfer

    sizes = [1 << k for k in range(12, 31, 2)]
    rows = [{"direction": d, "memory": m, "size_bytes": s, "gbps": g * (1 - np.exp(-s / 2**22))}
            for d in ("h2d", "d2h") for m, g in (("pinned", 50), ("pageable", 12)) for s in sizes]
    p = plot_transfer(pd.DataFrame(rows), tmp_path / "t.png", nominal_gbps=63.0)
    assert p.stat().st_size > 10_000


@pytest.mark.parametrize("msg, reason", [
    ("CUDA error: operation not permitted when stream is capturing", "host_sync"),
    ("Attempted to call .item() during capture", "host_sync"),
    ("cudaErrorStreamCaptureInvalidated: operation failed due to a previous error during capture", "invalidated"),
    ("capturable=False optimizer", "not_capturable"),
    ("something else entirely", "unsupported_op"),
])
def test_capture_failures_get_their_reason(msg, reason):
    assert capture_failure_reason(msg) == reason


def test_each_capture_reason_is_said_with_its_fix():
    from perfcore.experiments.graph_capture import CAPTURE_REASONS
    from perfcore.report.words.runs import capture_error_words

    said = {r: capture_error_words({"reason": r, "detail": "boom", "optimizer": "Adam"}) for r in CAPTURE_REASONS}
    assert len(set(said.values())) == len(CAPTURE_REASONS)  # every reason has words of its own
    assert "CPU sync" in said["host_sync"] and said["host_sync"].startswith("capture failed (boom): ")


def test_optimizers_that_cannot_be_captured_are_named():
    torch = pytest.importorskip("torch")
    p = [torch.nn.Parameter(torch.zeros(2))]
    _check_optimizer(torch.optim.SGD(p, lr=0.1))
    _check_optimizer(torch.optim.Adam(p, capturable=True))
    with pytest.raises(CaptureError, match="Adam cannot be captured as created: pass capturable=True"):
        _check_optimizer(torch.optim.Adam(p))
    with pytest.raises(CaptureError, match="LBFGS has no capturable mode"):
        _check_optimizer(torch.optim.LBFGS(p))


def test_graph_comparison_logic():
    from perfcore.experiments.graph_experiment import check_same_training

    same = check_same_training([1.0, 0.9], [1.0, 0.9000001], [np.ones(3)], [np.ones(3)])
    assert same["match"]
    diff = check_same_training([1.0, 0.9], [1.0, 0.8], [np.ones(3)], [np.ones(3) * 1.1])
    assert not diff["match"] and diff["max_loss_rel_error"] > 0.1


def test_gpu_commands_exit_3_in_one_line_without_a_gpu(caps):
    if caps["features"]["cuda_events"]:
        pytest.skip("a GPU is present")
    for args in (["transfer", "--sizes", "4K..1M"], ["graph", "demo"]):
        p = cli(*args)
        assert p.returncode == 3, p.stderr
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and "needs a CUDA GPU" in lines[0]
    bad = cli("transfer", "--sizes", "4X")
    assert bad.returncode == 2 and "not a size" in bad.stderr
    for fn, args in (("measure", ()), ("batch_cost", ((4, 3),))):
        import perfcore.experiments.transfer as t

        with pytest.raises(errors.DeviceUnavailable):
            getattr(t, fn)(*args)
    from perfcore.experiments.graph_capture import capture_step, launch_overhead

    with pytest.raises(errors.DeviceUnavailable):
        launch_overhead()
    with pytest.raises(errors.DeviceUnavailable):
        capture_step(None, None, None, None)


@pytest.mark.cuda
def test_transfer_on_gpu():
    from perfcore.experiments.transfer import batch_cost, measure

    df = measure([1 << 20, 64 << 20], ["h2d"], repeats=3)
    assert set(df["memory"]) == {"pinned", "pageable"} and (df["gbps"] > 0).all()
    b = batch_cost((32, 3, 64, 64))
    assert b["pinned_ms"] > 0 and b["overlap_pinned"] is True


@pytest.mark.cuda
def test_graph_capture_matches_eager():
    from perfcore.experiments.graph_experiment import graph_experiment
    from perfcore.workloads import load_workload

    doc = graph_experiment(load_workload("demo", batch_size=8), steps=10, check_steps=3)
    assert doc["captured"] and doc["check"]["match"]


def test_the_links_words_are_made_from_its_figures_and_reason():
    from perfcore.report.words.runs import NOMINAL, link_words

    assert link_words({"gbps": 31.5, "generation": 4, "width": 16}) == f"link: 31.5 GB/s ({NOMINAL})"
    said = link_words({"gbps": None, "reason": "nvml_unavailable", "error": "NVMLError: Not Supported"})
    assert said == "link: NVML could not tell the link (NVMLError: Not Supported)"
    assert link_words({"gbps": None}) == ""
