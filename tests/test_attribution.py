"""The one definition of attribution, on hand-built intervals."""
from __future__ import annotations

import numpy as np
import pytest

from perfcore.analysis.attribution import LABELS, attribute, kernel_category, recommendations, step_table, summarize, verdict

L = {lb: i for i, lb in enumerate(LABELS)}


def test_precedence_and_remainder():
    got = attribute([0, 100], [100, 250], {
        "compute": ([10, 90], [30, 120]),
        "load": ([0, 20, 150], [25, 50, 200]),
        "transfer": ([95], [110]),
    })
    # step 0: compute [10,30)+[90,100)=30; load [0,50) less compute = 30; transfer hidden under compute.
    assert list(got[0]) == [30, 0, 30, 0, 40]
    # step 1: compute [100,120)=20; load [150,200)=50; host the rest.
    assert list(got[1]) == [50, 0, 20, 0, 80]


def test_comm_only_where_no_compute_and_transfer_only_where_no_kernel():
    got = attribute([0], [100], {"compute": ([0], [40]), "comm": ([30], [70]), "transfer": ([60], [90])})
    assert got[0, L["compute"]] == 40
    assert got[0, L["comm"]] == 30      # [40,70)
    assert got[0, L["transfer"]] == 20  # [70,90)
    assert got[0, L["host"]] == 10


def test_identity_holds_exactly_on_random_intervals():
    rng = np.random.default_rng(7)
    bounds = np.cumsum(rng.integers(1, 10_000_000, size=201))
    iv = {}
    for lb in ("compute", "comm", "transfer", "load"):
        a = rng.integers(0, int(bounds[-1]) + 1000, size=500)
        iv[lb] = (a, a + rng.integers(0, 3_000_000, size=500))
    got = attribute(bounds[:-1], bounds[1:], iv)
    assert got.dtype == np.int64
    assert np.array_equal(got.sum(axis=1), np.diff(bounds))
    assert (got >= 0).all()


def test_intervals_outside_steps_and_gaps_between_steps_are_ignored():
    got = attribute([100, 300], [200, 400], {"load": ([0, 200], [150, 300])})  # gap [200,300) between steps
    assert list(got[:, L["load"]]) == [50, 0]
    assert list(got.sum(axis=1)) == [100, 100]


def test_bad_steps_and_labels_are_refused():
    with pytest.raises(ValueError):
        attribute([0, 50], [100, 150], {})  # overlapping steps
    with pytest.raises(ValueError):
        attribute([0], [10], {"host": ([0], [5])})


def test_step_table_and_summary_schema():
    df = step_table([0, 100, 200], [100, 200, 300], {"compute": ([0, 100, 200], [60, 170, 280])}, warmup=1)
    assert list(df["warmup"]) == [True, False, False]
    doc = summarize(df, on_gpu=True, backend="events", device="GPU")
    assert doc["schema"] == "perfcore.run/1"
    assert doc["steps"] == 2 and doc["warmup_steps"] == 1
    assert set(doc["breakdown_ms"]) == set(LABELS) == set(doc["breakdown_fraction"])
    assert doc["breakdown_fraction"]["compute"] == pytest.approx(150 / 200)
    assert doc["verdict"]["bound"] == "compute"
    assert doc["verdict"]["summary"].startswith("compute-bound: 75%")
    for key in ("step_time_ms", "recommendations", "kernels", "memcpy", "backend", "device", "overhead"):
        assert key in doc


def test_verdict_sentence_for_input_bound_gpu():
    v = verdict({"load": 0.63, "compute": 0.3, "host": 0.07}, on_gpu=True)
    assert v == {"bound": "load", "summary": "input-bound: 63% of each step the GPU waits for data"}


def test_recommendations_follow_evidence():
    frac = {"load": 0.5, "transfer": 0.05, "compute": 0.4, "comm": 0.0, "host": 0.05}
    ms = {k: v * 100 for k, v in frac.items()}
    ids = [r["id"] for r in recommendations(frac, ms, on_gpu=True)]
    assert ids == ["more_workers"]
    ids = [r["id"] for r in recommendations(frac, ms, on_gpu=True, evidence={"pageable_h2d_bytes_per_step": 2**24})]
    assert ids[0] == "pin_memory"
    host_heavy = {"load": 0.0, "transfer": 0.0, "compute": 0.5, "comm": 0.0, "host": 0.5}
    assert "launch_overhead" in [r["id"] for r in recommendations(host_heavy, ms, on_gpu=True)]
    for r in recommendations(frac, ms, on_gpu=True):
        assert r["evidence"] and r["text"]


def test_kernel_categories():
    assert kernel_category("ncclDevKernel_AllReduce_Sum_f32_RING_LL") == "nccl"
    assert kernel_category("flash_fwd_kernel<...>") == "attention"
    assert kernel_category("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n") == "gemm/conv"
    assert kernel_category("void at::native::vectorized_elementwise_kernel<4, ...>") == "elementwise"
    assert kernel_category("void at::native::reduce_kernel<512, 1>") == "norm/softmax/reduce"
    assert kernel_category("my_custom_thing") == "other"


def test_cpu_precedence_puts_comm_over_compute():
    from perfcore.analysis.attribution import CPU_PRECEDENCE

    iv = {"compute": ([0], [100]), "comm": ([60], [90])}
    gpu = attribute([0], [100], iv)
    cpu = attribute([0], [100], iv, CPU_PRECEDENCE)
    assert gpu[0, L["compute"]] == 100 and gpu[0, L["comm"]] == 0
    assert cpu[0, L["compute"]] == 70 and cpu[0, L["comm"]] == 30
    with pytest.raises(ValueError):
        attribute([0], [100], iv, ("compute", "comm"))


def test_pageable_advice_carries_bytes_ms_and_saving():
    frac = {"load": 0.1, "transfer": 0.3, "compute": 0.5, "comm": 0.0, "host": 0.1}
    ms = {k: v * 20 for k, v in frac.items()}
    r = recommendations(frac, ms, on_gpu=True, evidence={"pageable_h2d_bytes_per_step": 48 * 2**20,
                                                         "pageable_h2d_ms_per_step": 4.2})[0]
    assert r["id"] == "pin_memory"
    assert "48.0 MiB per step" in r["evidence"] and "4.20 ms per step" in r["evidence"]
    assert "up to 4.20 ms per step" in r["text"]
