"""The one definition of attribution, on hand-built intervals."""
from __future__ import annotations

import numpy as np
import pytest

from perfcore.analysis.attribution import LABELS, attribute, kernel_category, step_table, summarize

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
    assert doc["schema"] == "perfcore.run/2"
    assert doc["steps"] == 2 and doc["warmup_steps"] == 1
    assert set(doc["breakdown_ms"]) == set(LABELS) == set(doc["breakdown_fraction"])
    assert doc["breakdown_fraction"]["compute"] == pytest.approx(150 / 200)
    # summarize measures and decides nothing: the decision is made once, on all of a run's evidence.
    assert "verdict" not in doc and "findings" not in doc
    for key in ("step_time_ms", "kernels", "memcpy", "backend", "device", "overhead"):
        assert key in doc
    from perfcore.analysis.advice import advise_run
    from perfcore.analysis.results import Level
    from perfcore.analysis.run_report import RunReport
    from perfcore.report.words.verdict import verdict_long

    run = RunReport.of(doc, advise_run(doc, zero_code=True))
    # host is the other 25% of each step: an avoidable cause past the critical tier, so it is named.
    assert run.verdict.bound == "host" and run.verdict.level is Level.CRITICAL and run.verdict.on_gpu
    assert verdict_long(run.verdict).startswith("host-bound: host gaps")


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


def test_warmup_only_table_says_so():
    df = step_table([0, 100], [100, 200], {"load": ([0], [150])}, warmup=5)
    doc = summarize(df, on_gpu=False, backend="host", device="cpu")
    from perfcore.analysis.advice import advise_run
    from perfcore.analysis.run_report import RunReport

    run = RunReport.of(doc, advise_run(doc, zero_code=True))
    assert run.steps == 0 and run.findings == () and not run.measured
    assert run.verdict.bound == run.verdict.level.value == "unknown" and run.verdict.step_ms == 0.0


def test_perfcore_own_work_is_left_out_of_every_label_and_the_wall():
    from perfcore.analysis.attribution import OWN

    iv = {"compute": ([10, 120], [50, 180]), "load": ([0], [10])}
    # Own work inside step 0 (over compute and host), inside step 1's compute, and across 1 -> 2.
    own = {OWN: ([30, 150, 190], [60, 170, 210])}
    ns = attribute([0, 100, 200], [100, 200, 300], {**iv, **own})
    assert ns.dtype == np.int64 and ns.shape == (3, len(LABELS) + 1)
    assert ns[:, len(LABELS)].tolist() == [30, 30, 10]
    assert ns[0, L["load"]] == 10 and ns[0, L["compute"]] == 20 and ns[0, L["host"]] == 40
    assert ns[1, L["compute"]] == 40 and ns[1, L["host"]] == 30
    assert ns[2, L["host"]] == 90
    assert attribute([0, 100, 200], [100, 200, 300], iv).shape == (3, len(LABELS))  # without own work: five
    df = step_table([0, 100, 200], [100, 200, 300], {**iv, **own})
    assert df["perfcore_ns"].tolist() == [30, 30, 10]
    assert df["wall_ns"].tolist() == [70, 70, 90]  # the boundary span less perfcore's work in it
    assert (df[[f"{lb}_ns" for lb in LABELS]].sum(axis=1) == df["wall_ns"]).all()  # still exact
