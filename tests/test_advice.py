"""Advice on synthetic run documents: the worker count, why workers still leave the loop waiting, the
user's own DataLoader site, no perfcore API for zero-code users, memory findings."""
from __future__ import annotations

import numpy as np
import pytest

from dataclasses import replace

from perfcore.analysis.advice import advise_run
from perfcore.analysis.advice_findings import advise
from perfcore.analysis.advice_evidence import AdviceEvidence, RunFacts, WorkerTrial, read
from perfcore.analysis.loader_plan import PlanEvidence, batches_per_step, contradicting_trial, loader_plan
from perfcore.analysis.run_context import Loader, Restart
from perfcore.analysis.memory_findings import memory_findings
from perfcore.report.words.advice import text_of


def reason_of(plan) -> str:
    """The plan's reason as the terminal says it (from its kind)."""
    from perfcore.analysis.codec import from_doc
    from perfcore.analysis.run_context import LoaderPlan
    from perfcore.report.words.findings import plan_reason

    return plan_reason(plan if isinstance(plan, LoaderPlan) else from_doc(LoaderPlan, plan))


def run_doc(bd, *, loaders=None, workers=None, device="cpu", steps=40, warmup=5, **extra):
    return {"step_time_ms": {"mean": sum(bd.values())}, "breakdown_ms": bd, "device": device, "steps": steps,
            "warmup_steps": warmup, **({"loaders": loaders} if loaders else {}),
            **({"workers": workers} if workers else {}), **extra}


LOADER = {"site": "train.py:42", "num_workers": 0, "pin_memory": False, "prefetch_factor": None,
          "persistent_workers": False, "batch_size": 32, "worker_startup_ms": [], "batches": 45,
          "worker_batch_ms": 30.0}
LOADER_T = read(Loader, LOADER)  # the loader as the advice reads it


def test_zero_workers_named_at_the_users_construction_site():
    doc = run_doc({"load": 30.0, "transfer": 0.0, "compute": 10.0, "comm": 0.0, "host": 0.0}, loaders=[LOADER])
    d = advise_run(doc, zero_code=True, evidence={"cpu_count": 8})
    r = d.findings[0]
    assert r.kind == "more_workers" and r.cause == "load" and str(r.site) == "train.py:42"
    # 30 ms to make a batch, the loop uses one every 10 ms: 3 workers.
    assert r.change == {"num_workers": 3, "persistent_workers": True}
    assert r.gain.speedup == pytest.approx(4.0)
    plan = d.loader_plan
    assert plan.workers_needed == 3 and plan.kind == "more_workers"
    assert (plan.worker_batch_ms, plan.loop_ms_per_batch) == pytest.approx((30.0, 10.0))
    assert plan.loader == {"site": "train.py:42", "batch_size": 32, "num_workers": 0, "pin_memory": False,
                           "persistent_workers": False}


def test_four_batches_per_step_is_not_four_times_off():
    # Gradient accumulation: 4 batches per optimizer step, 40 ms of compute per step = 10 ms per batch.
    bd = {"load": 40.0, "transfer": 0.0, "compute": 40.0, "comm": 0.0, "host": 0.0}
    ld = {**LOADER, "num_workers": 1, "worker_batch_ms": 40.0, "batches": 180}
    doc = run_doc(bd, loaders=[ld], batches_per_step=4)
    d = advise_run(doc, zero_code=True, evidence={"cpu_count": 16})
    plan = d.loader_plan
    assert plan.loop_ms_per_batch == pytest.approx(10.0) and plan.workers_needed == 4
    assert reason_of(plan) == "too few workers" and plan.kind == "too_few_workers"
    assert plan.wait_ms_per_batch == pytest.approx(10.0)
    assert d.findings[0].change == {"num_workers": 4}
    # Without the run's count, the loader's batches over the steps seen give the same 4.
    del doc["batches_per_step"]
    assert batches_per_step(read(RunFacts, doc)) == (4.0, "estimated")
    assert batches_per_step(RunFacts(steps=45)) == (1.0, "assumed")


def test_workers_that_run_but_start_again_every_epoch():
    ld = replace(LOADER_T, num_workers=2, worker_batch_ms=8.0, worker_startup_ms=(900.0, 880.0, 910.0), batches=60)
    plan = loader_plan(ld, PlanEvidence(step_ms=60.0, load_ms=45.0, per_step=1, cpu_count=8, on_gpu=False))
    assert reason_of(plan) == "start-up each epoch" and plan.kind == "persistent_workers"
    # Restarts after the first epoch: (880 - 8) + (910 - 8) = 1774 ms over 60 batches.
    assert plan.restart == Restart(2, pytest.approx(887.0), pytest.approx(1774.0 / 60))
    assert plan.wait_ms_per_batch == pytest.approx(45.0) and plan.set == {"persistent_workers": True}
    # A smaller share of the wait: named beside the main reason, not instead of it.
    few = loader_plan(replace(ld, num_workers=1, worker_batch_ms=40.0, worker_startup_ms=(500.0, 540.0, 540.0)),
                      PlanEvidence(step_ms=60.0, load_ms=45.0, per_step=1, cpu_count=8, on_gpu=False, measured_batches=57))
    assert reason_of(few) == "too few workers" and few.restart.contributes
    assert few.restart.each_ms == pytest.approx(500.0) and few.set["persistent_workers"] is True
    kept = loader_plan(replace(ld, persistent_workers=True), PlanEvidence(step_ms=60.0, load_ms=45.0, per_step=1, cpu_count=8,
                       on_gpu=False))
    assert reason_of(kept) != "start-up each epoch" and kept.restart is None


def test_workers_too_slow_per_item_for_the_cores():
    ld = replace(LOADER_T, num_workers=2, worker_batch_ms=200.0)
    plan = loader_plan(ld, PlanEvidence(step_ms=100.0, load_ms=90.0, per_step=1, cpu_count=4, on_gpu=False))
    assert reason_of(plan) == "too slow per item" and plan.workers_needed == 20
    assert plan.kind == "cheaper_fetch" and plan.spare_workers == 3 and plan.cpu_count == 4
    assert plan.loop_cores is None and plan.torch_threads is None  # one core assumed for the loop
    # Enough workers in number, but they and the loop share two cores: no worker count hides it.
    two = loader_plan(replace(ld, worker_batch_ms=97.0), PlanEvidence(step_ms=196.0, load_ms=38.0, per_step=2, cpu_count=2,
                      on_gpu=False))
    assert two.workers_needed == 2 and reason_of(two) == "too slow per item" and two.spare_workers == 1
    assert plan.set == {} and plan.decode == "unknown"


def test_enough_workers_yet_waiting_blames_shallow_prefetch_or_pin():
    # Two workers waiting 13% of each step: the earlier advice said "about 1 worker would hide it".
    ld = replace(LOADER_T, num_workers=2, worker_batch_ms=12.0, prefetch_factor=2, pin_memory=True,
                 persistent_workers=True)
    plan = loader_plan(ld, PlanEvidence(step_ms=23.0, load_ms=3.0, per_step=1, cpu_count=8, on_gpu=False))
    assert reason_of(plan) == "prefetch too shallow" and plan.workers_needed == 1
    assert plan.kind == "deeper_prefetch" and plan.wait_ms_per_batch == pytest.approx(3.0)
    assert plan.prefetch_factor == 2 and plan.set == {"prefetch_factor": 4} and not plan.pin_in_main
    gpu = loader_plan(ld, PlanEvidence(step_ms=23.0, load_ms=3.0, per_step=1, cpu_count=8, on_gpu=True))
    assert reason_of(gpu) == "pin in main process" and gpu.pin_in_main


def test_cheap_batches_that_still_keep_the_loop_waiting_are_a_handover_cost():
    # Seen on grad_accum.py with one worker on a saturated 2-core host: 0.8 ms to make, 13 ms waited.
    ld = replace(LOADER_T, num_workers=1, worker_batch_ms=0.8, prefetch_factor=2)
    plan = loader_plan(ld, PlanEvidence(step_ms=212.0, load_ms=52.4, per_step=4, cpu_count=2, on_gpu=False, cpu_percent=100.0))
    assert reason_of(plan) == "handover from workers" and plan.kind == "handover"
    assert plan.wait_ms_per_batch == pytest.approx(13.1) and plan.cpu_percent == 100.0
    assert plan.set == {"num_workers": 0}


def test_zero_code_users_are_never_told_to_call_perfcore():
    bd = {"load": 0.0, "transfer": 0.0, "compute": 5.0, "comm": 0.0, "host": 5.0}
    zero = advise_run(run_doc(bd), zero_code=True, evidence={"cpu_count": 2})
    own = advise_run(run_doc(bd), zero_code=False, evidence={"cpu_count": 2})
    assert [r.kind for r in zero.findings] == ["host_gaps"]
    assert [r.kind for r in own.findings] == ["untimed_host_work"]
    assert "timer." in text_of(own.findings[0])
    for bd2 in (bd, {"load": 5.0, "transfer": 3.0, "compute": 5.0, "comm": 3.0, "host": 5.0}):
        d = advise_run(run_doc(bd2, loaders=[LOADER]), zero_code=True,
                       evidence={"cpu_count": 2, "pageable_h2d_bytes_per_step": 2**20})
        assert d.findings
        for r in d.findings:
            text = text_of(r, d.loader_plan)
            assert text and "timer." not in text and "perfcore." not in text


def test_pageable_copies_first_with_bytes_ms_and_saving():
    bd = {"load": 1.0, "transfer": 6.0, "compute": 10.0, "comm": 0.0, "host": 3.0}
    doc = run_doc(bd, device="NVIDIA H200", loaders=[LOADER])
    d = advise_run(doc, zero_code=True, evidence={"pageable_h2d_bytes_per_step": 48 * 2**20,
                                                  "pageable_h2d_ms_per_step": 4.2})
    r = d.findings[0]
    assert r.kind == "pin_memory" and str(r.site) == "train.py:42"
    assert r.figures["pageable_bytes"] == 48 * 2**20 and r.figures["pageable_ms"] == 4.2
    assert [x.kind for x in d.findings][1:] == ["launch_overhead"]


def test_no_loader_evidence_means_no_worker_count():
    doc = run_doc({"load": 30.0, "transfer": 0.0, "compute": 10.0, "comm": 0.0, "host": 0.0})
    d = advise_run(doc, zero_code=True, evidence={"cpu_count": 8})
    assert d.loader_plan is None and d.findings[0].kind == "more_workers"
    assert d.findings[0].change == {}  # no worker count without a batch's measured cost


def test_a_run_with_workers_and_no_recorded_loader_still_gets_a_plan():
    # The workers' own files time their batches where the child recorded no DataLoader.
    w = {"num_workers": 2, "fetch_ms_mean": 50.0, "getitem_ms_mean": 48.0, "batches": 45, "collate_ms_mean": 1.0}
    doc = run_doc({"load": 15.0, "transfer": 0.0, "compute": 10.0, "comm": 0.0, "host": 0.0}, workers=w)
    plan = advise_run(doc, zero_code=True, evidence={"cpu_count": 8}).loader_plan
    assert plan.workers_needed == 5 and reason_of(plan) == "too few workers"


def test_the_workers_own_timing_sizes_the_plan_of_a_loader_that_recorded_none():
    # A script's loader with workers: the child cannot time their batches, the workers' own files do.
    w = {"num_workers": 2, "fetch_ms_mean": 50.0, "getitem_ms_mean": 48.0, "batches": 45, "collate_ms_mean": 1.0}
    ld = {**LOADER, "num_workers": 2, "worker_batch_ms": None}
    doc = run_doc({"load": 15.0, "transfer": 0.0, "compute": 10.0, "comm": 0.0, "host": 0.0}, loaders=[ld], workers=w)
    plan = advise_run(doc, zero_code=True, evidence={"cpu_count": 8}).loader_plan
    assert plan.worker_batch_ms == 50.0 and plan.workers_needed == 5 and plan.loader["site"] == "train.py:42"
    assert plan.collate_ms is None  # collate is said only for a loader in the main process


def test_leak_with_rate_and_onset():
    steps = np.arange(100)
    flat = np.full(100, 500 * 2**20, dtype=np.float64)
    leak = flat.copy()
    leak[40:] += (steps[40:] - 40) * 2 * 2**20  # 2 MB per step from step 40
    m = memory_findings(steps, leak)
    assert m["probable_leak"] and m["growth_bytes_per_step"] == pytest.approx(2 * 2**20, rel=0.05)
    assert 36 <= m["leak_from_step"] <= 44
    (f,) = m["findings"]
    assert f["id"] == "memory_leak" and f["kind"] == "cuda_allocated" and f["from_step"] == m["leak_from_step"]
    assert f["bytes_per_step"] == pytest.approx(2 * 2**20, rel=0.05) and f["r2"] >= 0.8
    assert not memory_findings(steps, flat)["probable_leak"]
    noisy = flat + np.random.default_rng(0).normal(0, 4 * 2**20, 100)
    assert not memory_findings(steps, noisy)["probable_leak"]
    # A one-off rise (optimizer state made at step 1) that then stays flat is not a leak.
    step_up = flat.copy()
    step_up[1:] += 200 * 2**20
    assert not memory_findings(steps, step_up)["probable_leak"]


def test_memory_pressure_from_retries_or_capacity():
    steps, mem = np.arange(10), np.full(10, 75 * 2**30)
    m = memory_findings(steps, mem, capacity_bytes=80 * 2**30, alloc_retries=3)
    assert m["pressure"] and [f["id"] for f in m["findings"]] == ["memory_pressure", "memory_near_capacity"]
    assert m["findings"][0]["retries"] == 3
    assert m["findings"][1]["peak_bytes"] / m["findings"][1]["capacity_bytes"] == pytest.approx(0.9375)
    doc = run_doc({"load": 0.0, "transfer": 0.0, "compute": 10.0, "comm": 0.0, "host": 0.0})
    d = advise_run(doc, zero_code=True, memory=m)
    assert {"memory_pressure", "memory_near_capacity"} <= {r.kind for r in d.findings}


def test_the_training_loader_is_advised_not_the_validation_one():
    val = {**LOADER, "site": "train.py:50", "batches": 500, "training": False}
    train = {**LOADER, "site": "train.py:42", "batches": 45, "training": True}
    doc = run_doc({"load": 30.0, "transfer": 0.0, "compute": 10.0, "comm": 0.0, "host": 0.0}, loaders=[val, train])
    d = advise_run(doc, zero_code=True, evidence={"cpu_count": 8})
    assert str(d.findings[0].site) == "train.py:42" and d.loader_plan.loader["site"] == "train.py:42"


def test_a_jobs_verdict_is_its_slowest_ranks():
    slow = run_doc({"load": 20.0, "transfer": 0.0, "compute": 10.0, "comm": 0.0, "host": 0.0}, rank=1)
    job = run_doc({"load": 0.0, "transfer": 0.0, "compute": 10.0, "comm": 20.0, "host": 0.0}, rank=0)
    v = advise_run(job, zero_code=True, focus=slow).verdict
    assert v.bound == "load"
    assert v.focus_rank == 1
    from perfcore.report.words.verdict import verdict_long

    assert verdict_long(v, lead=False).endswith("on rank 1; the other ranks wait for it in comm")


# The JPEG imagenet shape on a 2-core machine: num_workers=0, a batch of 8 decoded in ~120 ms, the
# model step ~160 ms with torch's two intra-op threads on both cores.
JPEG_LOADER = {**LOADER, "num_workers": 0, "worker_batch_ms": 120.0, "pin_memory": False}
JPEG_T = read(Loader, JPEG_LOADER)


def test_workers_are_not_advised_when_the_loops_compute_holds_every_core():
    kw = dict(step_ms=282.0, load_ms=120.0, per_step=1, cpu_count=2, on_gpu=False)
    free = loader_plan(JPEG_T, PlanEvidence(**kw))  # nothing known of the loop's threads: one core left for a worker
    assert reason_of(free) == "main process" and free.set["num_workers"] == 1
    assert free.achievable_ms == pytest.approx(120.0)
    held = loader_plan(JPEG_T, PlanEvidence(**kw, torch_threads=2))
    assert held.spare_cores == 0 and reason_of(held) == "no spare cores" and held.achievable_ms == 0
    assert held.kind == "no_free_core" and held.torch_threads == 2 and held.set == {}
    assert held.fewer_threads == 1  # a core left to a worker: torch.set_num_threads(1)
    # Measured CPU of the main process and other processes' share say the same from the run itself.
    # With num_workers=0 the main process made the batches too: 1.3 cores over the loop, of which
    # about one core for the 43% of the step it loads, leaves 1.52 cores while it computes.
    busy = loader_plan(JPEG_T, PlanEvidence(**kw, loop_cores=1.3, other_cores=0.6))
    wait = 120.0 / 282.0
    assert busy.loop_cores == pytest.approx((1.3 - wait) / (1 - wait))
    assert reason_of(busy) == "no spare cores" and busy.spare_cores == 0
    assert busy.other_cores == 0.6
    # A quiet machine and a one-thread loop leave a core: then a worker is the advice.
    quiet = loader_plan(JPEG_T, PlanEvidence(**kw, loop_cores=0.6, other_cores=0.0))
    assert reason_of(quiet) == "main process" and quiet.spare_cores == pytest.approx(1.0)
    # A trace of other CPU (an idle shell, the sampler itself) does not take the worker away.
    trace = loader_plan(JPEG_T, PlanEvidence(**kw, loop_cores=0.4, other_cores=0.0036))
    assert reason_of(trace) == "main process" and trace.set["num_workers"] == 1
    # Half a core of strangers does.
    half = loader_plan(JPEG_T, PlanEvidence(**kw, loop_cores=0.4, other_cores=0.5))
    assert reason_of(half) == "no spare cores"


def test_advice_turns_round_when_an_experiment_measured_the_opposite():
    trials = [WorkerTrial(2, 0.89, experiment="diagnose B")]
    plan = loader_plan(JPEG_T, PlanEvidence(step_ms=282.0, load_ms=120.0, per_step=1, cpu_count=2, on_gpu=False,
                       trials=trials))
    assert reason_of(plan) == "measured: workers do not help" and plan.trial["speedup"] == 0.89
    assert plan.kind == "measured_no_help" and plan.trial["change"] == "slower"
    assert plan.achievable_ms == 0.0 and plan.set == {}
    # A measured gain from more workers is no contradiction: the plan stands.
    ok = loader_plan(JPEG_T, PlanEvidence(step_ms=282.0, load_ms=120.0, per_step=1, cpu_count=2, on_gpu=False,
                     trials=[WorkerTrial(2, 1.3)]))
    assert reason_of(ok) == "main process"
    # A loss within the measurement's own noise is not "faster" either way: 1.02x with 5% noise.
    assert contradicting_trial([WorkerTrial(2, 1.02, noise_share=0.05)], 0, more=True)
    assert contradicting_trial([WorkerTrial(2, 1.10, noise_share=0.05)], 0, more=True) is None


def test_run_advice_leads_with_a_cheaper_batch_and_an_achievable_gain():
    bd = {"load": 120.0, "transfer": 0.0, "compute": 160.0, "comm": 0.0, "host": 2.0}
    doc = run_doc(bd, loaders=[{**JPEG_LOADER, "training": True, "batches": 40}])
    d = advise_run(doc, zero_code=True, evidence={"cpu_count": 2, "torch_threads": 2,
                                                  "worker_trials": [{"experiment": "diagnose B", "num_workers": 2,
                                                                     "speedup": 0.89}]})
    rec = d.findings[0]
    assert rec.kind == "cheaper_batches" and rec.change == {}
    assert rec.figures["cause_gain"]["speedup"] == pytest.approx(282.0 / 162.0)
    assert rec.figures["workers_speedup"] == pytest.approx(1.0)
    # The same evidence without the threads and the trial: the old advice, its gain the whole wait.
    plain = run_doc(bd, loaders=[{**JPEG_LOADER, "training": True, "batches": 40}])
    p = advise_run(plain, zero_code=True, evidence={"cpu_count": 2})
    assert p.findings[0].kind == "more_workers"
    assert p.findings[0].gain.speedup == pytest.approx(282.0 / 162.0)


def test_compute_evidence_is_on_the_verdicts_own_basis():
    # A trimmed step of 76 ms with the mean compute of 122 ms read "compute is 122 ms of a 76 ms step".
    from perfcore.analysis.verdict import decide_run

    doc = {"steps": 50, "device": "cpu", "step_time_ms": {"mean": 124.0},
           "breakdown_ms": {"load": 0.5, "transfer": 0.0, "compute": 122.0, "comm": 0.0, "host": 1.5},
           "breakdown_robust": {"steps": 50, "step_ms": 76.0,
                                "ms": {"load": 0.5, "transfer": 0.0, "compute": 73.5, "comm": 0.0, "host": 2.0}}}
    v = decide_run(doc)
    recs = advise(AdviceEvidence(v, compute_ms=v.compute_ms, zero_code=True))
    (fc,) = [r for r in recs if r.kind == "faster_compute"]
    assert (fc.figures["compute_ms"], fc.figures["step_ms"]) == pytest.approx((73.5, 76.0))
