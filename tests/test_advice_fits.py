"""Advice fits the data and the script: a decoder only where images are decoded, nothing the script
already does (torch.compile, pin_memory=True, persistent workers), and threads that outnumber the free
cores diagnosed with their fix. Statuses and numbers on synthetic documents; one real run for the facts
the child records."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from run_docs import decided

from perfcore.analysis.loader_plan import PlanEvidence, loader_plan
from perfcore.analysis.script_facts import Decode, decode_of, oversubscription
from perfcore.analysis.advice_evidence import read
from perfcore.analysis.run_context import Loader
from dataclasses import replace
from perfcore.report.words.advice import text_of
from perfcore.report.words.findings import plan_words
from perfcore.report.words.verdict import verdict_long
from perfcore.report.words.advice import try_short
from perfcore.report.words.verdict import verdict_short

LOADER = {
    "site": "train.py:42",
    "num_workers": 0,
    "pin_memory": False,
    "prefetch_factor": None,
    "persistent_workers": False,
    "batch_size": 32,
    "worker_startup_ms": [],
    "batches": 45,
    "worker_batch_ms": 30.0,
}
LOADER_T = read(Loader, LOADER)  # the loader as the advice reads it
LOAD_BOUND = {"load": 30.0, "transfer": 0.0, "compute": 10.0, "comm": 0.0, "host": 0.0}
HEALTHY = {"load": 0.0, "transfer": 0.0, "compute": 10.0, "comm": 0.0, "host": 0.2}


def run_doc(bd, **extra):
    return {
        "step_time_ms": {"mean": sum(bd.values())},
        "breakdown_ms": bd,
        "device": "cpu",
        "steps": 40,
        "warmup_steps": 5,
        **extra,
    }


@pytest.mark.parametrize(
    ("ld", "decode"),
    [
        ({"dataset": "torchvision.datasets.mnist.MNIST"}, Decode.NONE),
        ({"dataset": "torch.utils.data.dataset.TensorDataset"}, Decode.NONE),
        ({"dataset": "torchvision.datasets.folder.ImageFolder"}, Decode.PIL),
        ({"decoder": "pil", "dataset": "perfcore.workloads.builtin.JpegDataset"}, Decode.PIL),
        ({"decoder": "torchvision"}, Decode.FAST),
        ({"dataset": "train.MyDataset"}, Decode.UNKNOWN),
        ({}, Decode.UNKNOWN),
    ],
)
def test_how_items_are_made_comes_from_the_loaders_dataset(ld, decode):
    assert decode_of(Loader(**ld)) is decode


def _no_core_plan(ld):
    # The loop holds both cores: workers cannot help, the plan says make a batch cheaper.
    return loader_plan(ld, PlanEvidence(step_ms=40.0, load_ms=30.0, per_step=1, cpu_count=2, on_gpu=False, loop_cores=2.0))


def test_decoder_advice_only_where_images_are_decoded():
    for dataset in ("torchvision.datasets.mnist.MNIST", "torch.utils.data.dataset.TensorDataset", "x.Mine"):
        plan = _no_core_plan(replace(LOADER_T, dataset=dataset))
        assert plan.kind == "no_free_core" and plan.decode in ("none", "unknown")
        text = plan_words(plan)[1]  # the words follow the status
        assert "decode_jpeg" not in text and "PIL" not in text
    plan = _no_core_plan(replace(LOADER_T, dataset="torchvision.datasets.folder.ImageFolder"))
    assert plan.decode == "pil" and "decode_jpeg" in plan_words(plan)[1]
    # The short line follows the same status.
    doc = run_doc(LOAD_BOUND, loaders=[{**LOADER, "dataset": "torchvision.datasets.mnist.MNIST"}])
    run = decided(doc, zero_code=True, evidence={"cpu_count": 2, "loop_cpu_cores": 2.0})
    rec = run.findings[0]
    assert rec.kind == "cheaper_batches" and rec.figures["decode"] == "none"
    line = try_short(rec, run.verdict, "train.py:42")
    assert "cheaper batches" in line and "decode_jpeg" not in line and "PIL" not in line


def test_torch_compile_is_not_proposed_to_a_compiled_model():
    plain = decided(run_doc(HEALTHY), zero_code=True, evidence={"cpu_count": 8})
    assert [r.kind for r in plain.findings] == ["faster_compute"]
    assert {"way": "compile"} in plain.findings[0].figures["ways"]
    done = decided(run_doc(HEALTHY, compiled_graphs=3), zero_code=True, evidence={"cpu_count": 8})
    assert {"way": "compile"} not in done.findings[0].figures["ways"]
    gpu = decided(run_doc({**HEALTHY, "host": 8.0}, device="cuda:0", compiled_graphs=1), zero_code=True,
                  evidence={"cpu_count": 8})
    launch = next(r for r in gpu.findings if r.kind == "launch_overhead")
    assert launch.figures["compiled"] is True and "torch.compile(" not in text_of(launch)


ADAMW_FACT = {
    "optimizer": "torch.optim.AdamW",
    "keyword": "foreach",
    "device": "cpu",
    "share": 0.2,
    "optimizer_ms": 2.0,
    "step_ms": 10.2,
    "saved_ms": [0.0, 0.66],
    "measured": True,
    "snippet": "torch.optim.AdamW(..., foreach=True)",
}


def _compute_advice(**extra):
    run = decided(run_doc(HEALTHY, **extra), zero_code=True, evidence={"cpu_count": 8})
    (rec,) = [r for r in run.findings if r.kind == "faster_compute"]
    return rec, try_short(rec, run.verdict, None)


def test_faster_compute_is_built_from_what_the_script_does():
    # A CPU script updating its parameters by hand, not compiled: torch.compile and a GPU; no optimizer,
    # no bf16 (a CPU), no thread count (nothing measured says fewer threads help).
    rec, line = _compute_advice(seen={"optimizers": 0}, compute_facts={"optimizer": None})
    assert [w["way"] for w in rec.figures["ways"]] == ["compile", "gpu"]
    for text in (text_of(rec), line):
        assert "torch.compile" in text and "GPU" in text
        assert "fused" not in text and "foreach" not in text and "bf16" not in text
        assert "set_num_threads" not in text
    # Compiled (the child saw torch.compile called) and an optimizer whose foreach form pays: named with
    # its class and keyword, the same in the long text and the try line.
    rec, line = _compute_advice(torch_compile=True, compiled_graphs=0, compute_facts={"optimizer": ADAMW_FACT})
    ways = rec.figures["ways"]
    assert [w["way"] for w in ways] == ["optimizer", "gpu"] and ways[0]["keyword"] == "foreach"
    for text in (text_of(rec), line):
        assert "torch.compile" not in text and "torch.optim.AdamW(..., foreach=True)" in text
    assert line == "try: faster compute: torch.optim.AdamW(..., foreach=True), a GPU"
    # bf16 only on a GPU that has it; a GPU not recorded hears it as a condition.
    gpu = {"device": "cuda:0", "compiled_graphs": 1}
    assert _compute_advice(device="cuda:0", bf16_supported=False)[1] == "try: faster compute: torch.compile"
    assert _compute_advice(**gpu, bf16_supported=True)[1] == "try: faster compute: bf16 autocast"
    assert "bf16 autocast if the GPU has bf16" in _compute_advice(**gpu)[1]
    assert "GPU" not in text_of(_compute_advice(**gpu, bf16_supported=True)[0]).split(":", 1)[1]
    # Nothing left to propose from what was measured: no generic sentence.
    doc = run_doc(HEALTHY, device="cuda:0", compiled_graphs=1, bf16_supported=False)
    run = decided(doc, zero_code=True, evidence={"cpu_count": 8})
    assert all(r.kind != "faster_compute" for r in run.findings)


def test_an_evaluation_share_of_the_wall_time_reaches_the_short_report():
    from perfcore.report.terminal import render_brief

    ev = {"passes": 1, "share_of_wall": 0.2084, "total_ms": 17500.0, "ms_per_pass": 17500.0}
    busy = {"material": True, "reasons": ["others"], "others_cores": 1.4, "cores": 2}
    doc = run_doc(
        HEALTHY,
        evaluation=ev,
        threads={"torch": 2, "omp_env": None, "cpus": 2},
        interference=busy,
        backend="host",
        step_time_ms={"mean": 10.2, "p50": 10.2, "p90": 10.5},
        breakdown_fraction={k: v / 10.2 for k, v in HEALTHY.items()},
    )
    run = decided(doc, zero_code=True, evidence={"cpu_count": 2})
    ids = [r.kind for r in run.findings]
    assert ids.index("evaluation") < ids.index("faster_compute")  # measured before generic
    tries = [ln for ln in render_brief(run).splitlines() if ln.startswith("try:")]
    assert tries[0] == "try: evaluation took 21% of the run, outside the steps above: evaluate less often, on fewer batches"
    # Under a tenth of the wall time it is said only in the long form.
    small = decided(run_doc(HEALTHY, evaluation={**ev, "share_of_wall": 0.05}), zero_code=True,
                    evidence={"cpu_count": 8})
    assert all(r.kind != "evaluation" for r in small.findings)


def test_pin_memory_is_not_proposed_when_set():
    bd = {"load": 0.0, "transfer": 6.0, "compute": 10.0, "comm": 0.0, "host": 0.0}
    pinned = {**LOADER, "pin_memory": True}
    doc = run_doc(bd, device="cuda:0", loaders=[pinned])
    ev = {"cpu_count": 8, "pageable_h2d_bytes_per_step": 4 * 2**20, "pageable_h2d_ms_per_step": 2.0}
    run = decided(doc, zero_code=True, evidence=ev)
    ids = [r.kind for r in run.findings]
    assert ids[0] == "pageable_despite_pin" and "pin_memory" not in ids
    assert all("set pin_memory=True" not in text_of(r) for r in run.findings)
    # No pageable copies, still transfer-bound: overlap, without proposing the pinning it has.
    run = decided(run_doc(bd, device="cuda:0", loaders=[pinned]), zero_code=True, evidence={"cpu_count": 8})
    (rec,) = run.findings
    assert rec.kind == "overlap_copies" and rec.figures["pinned"] is True
    run = decided(run_doc(bd, device="cuda:0", loaders=[LOADER]), zero_code=True, evidence={"cpu_count": 8})
    assert run.findings[0].figures["pinned"] is False


def test_fewer_torch_threads_not_proposed_when_already_that_few():
    ld = replace(LOADER_T, dataset="x.Mine")
    args = dict(step_ms=40.0, load_ms=30.0, per_step=1, cpu_count=2, on_gpu=False, loop_cores=1.0, other_cores=1.0)
    assert loader_plan(ld, PlanEvidence(**args, torch_threads=2)).fewer_threads == 1
    assert loader_plan(ld, PlanEvidence(**args, torch_threads=1)).fewer_threads is None


def test_persistent_workers_not_proposed_when_set():
    # No per-batch time: the generic advice, worded from the loader's own settings.
    ld = {**LOADER, "num_workers": 4, "persistent_workers": True, "worker_batch_ms": None}
    run = decided(run_doc(LOAD_BOUND, loaders=[ld]), zero_code=True, evidence={"cpu_count": 8})
    rec = run.findings[0]
    assert rec.kind == "more_workers" and rec.figures["persistent_workers"] is False
    run = decided(run_doc(LOAD_BOUND, loaders=[{**ld, "persistent_workers": False}]), zero_code=True,
                  evidence={"cpu_count": 8})
    assert run.findings[0].figures["persistent_workers"] is True


def test_threads_outnumbering_free_cores_are_diagnosed_with_the_fix():
    assert oversubscription(2, 2, 0.0) is None  # two threads, two free cores
    assert oversubscription(2, 2, 0.1) is None  # measurement noise is not a taken core
    assert oversubscription(2, 2, 0.45) is None  # nor is less than the interference finding's half core
    assert oversubscription(2, 2, 0.6).fits == 1
    o = oversubscription(2, 2, 1.0)
    assert (o.threads, o.free_cores, o.fits, o.own) == (2, 1.0, 1, False)  # others' load took the cores
    o = oversubscription(8, 4, 0.0)  # more threads than CPUs, on a quiet machine too: the script's own
    assert (o.fits, o.own) == (4, True)
    o = oversubscription(4, 2, 1.0)  # its own excess, on a busy machine: fixed by its own CPU count
    assert (o.fits, o.own) == (2, True)
    assert oversubscription(1, 2, 1.9) is None  # one thread cannot oversubscribe
    busy = {"material": True, "reasons": ["others"], "others_cores": 1.0, "cores": 2}
    doc = run_doc(HEALTHY, threads={"torch": 4, "omp_env": None, "cpus": 2}, interference=busy)
    run = decided(doc, zero_code=True, evidence={"cpu_count": 2})
    v = run.verdict
    assert v.oversubscribed.fits == 2 and "torch.set_num_threads(2)" in verdict_long(v)
    rec = run.findings[0]
    assert rec.kind == "set_num_threads" and rec.figures["fits"] == 2
    assert "torch.set_num_threads(2): 4 threads on 2 CPU(s)" in try_short(rec, v, None)
    assert "threads" not in verdict_short(v)  # said once, with its fix
    # A cause of its own keeps its advice first; the threads' fix follows it.
    doc = run_doc(LOAD_BOUND, loaders=[LOADER], threads={"torch": 4, "omp_env": None, "cpus": 2}, interference=busy)
    ids = [r.kind for r in decided(doc, zero_code=True, evidence={"cpu_count": 2}).findings]
    assert ids[0] != "set_num_threads" and ids[1] == "set_num_threads"


def test_cores_taken_by_other_processes_are_said_as_theirs_not_as_the_scripts_fix():
    # Two threads on two CPUs while other processes used 1.4 cores: on the quiet machine one thread was
    # 1.5x slower, so fewer threads is not the script's fix; the load at the time is named as the reason.
    busy = {"material": True, "reasons": ["others"], "others_cores": 1.4, "cores": 2}
    doc = run_doc(HEALTHY, threads={"torch": 2, "omp_env": None, "cpus": 2}, interference=busy)
    run = decided(doc, zero_code=True, evidence={"cpu_count": 2})
    v = run.verdict
    assert v.oversubscribed is None and v.threads_busy.own is False
    assert "while other processes used 1.4 of 2 cores" in verdict_long(v)
    assert "torch.set_num_threads(" not in verdict_long(v)
    assert all(r.kind != "set_num_threads" for r in run.findings)
    assert "threads on" not in verdict_short(v) and "[uncertain: busy]" in verdict_short(v)
    # OMP_NUM_THREADS alone (torch not imported when the run ended) says as much.
    doc = run_doc(HEALTHY, threads={"torch": None, "omp_env": "4", "cpus": 2})
    assert decided(doc, zero_code=True, evidence={"cpu_count": 2}).verdict.oversubscribed.source == "OMP_NUM_THREADS"
    quiet = decided(run_doc(HEALTHY, threads={"torch": 2, "omp_env": None, "cpus": 2}), zero_code=True,
                    evidence={"cpu_count": 2})
    assert quiet.verdict.oversubscribed is None
    assert all(r.kind != "set_num_threads" for r in quiet.findings)


def test_the_child_records_threads_compile_and_the_dataset(tmp_path):
    script = Path(__file__).parent / "scripts" / "compiled_train.py"
    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    p = subprocess.run(
        [sys.executable, "-m", "perfcore.cli", "run", "--out", str(out), "--", sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    from perfcore.analysis.reader import load_run

    doc = load_run(out)[0]
    assert doc.threads.torch == 1 and doc.threads.omp_env == "1" and doc.threads.cpus >= 1
    assert doc.compiled_graphs >= 1
    assert doc.loaders[0].dataset == "torch.utils.data.dataset.TensorDataset"
    assert all("torch.compile," not in text_of(r, doc.loader_plan) for r in doc.findings)


def test_the_try_line_names_the_settings_with_their_numbers():
    run = decided(run_doc(LOAD_BOUND, loaders=[LOADER]), zero_code=True, evidence={"cpu_count": 8})
    rec = run.findings[0]
    assert rec.kind == "more_workers" and rec.change == {"num_workers": 3, "persistent_workers": True}
    line = try_short(rec, run.verdict, LOADER["site"])
    assert line.startswith("try: train.py:42: set num_workers=3, persistent_workers=True: about 4.00x faster")
    # Enough workers, the queue runs dry: the prefetch factor, doubled from the loader's own.
    ld = replace(LOADER_T, num_workers=4, prefetch_factor=3, worker_batch_ms=20.0, persistent_workers=True)
    plan = loader_plan(ld, PlanEvidence(step_ms=40.0, load_ms=10.0, per_step=1, cpu_count=16, on_gpu=False))
    assert plan.kind == "deeper_prefetch" and plan.set == {"prefetch_factor": 6}


def test_each_piece_of_advice_carries_its_own_gain_and_site():
    # Two cores, the loop holds one: one worker fits where three are needed, so a third of the wait is
    # what the advice can gain, not the whole of it.
    run = decided(run_doc(LOAD_BOUND, loaders=[LOADER]), zero_code=True,
                  evidence={"cpu_count": 2, "loop_cpu_cores": 1.0})
    rec, cause = run.findings[0], run.verdict.named[0]
    assert rec.kind == "more_workers" and str(rec.site) == "train.py:42" and rec.change["num_workers"] == 1
    assert run.loader_plan.achievable_ms == pytest.approx(10.0)
    assert rec.gain.saved_ms == pytest.approx(10.0) and rec.gain.speedup == pytest.approx(40 / 30)
    assert cause.gain.speedup == pytest.approx(4.0)
    line = try_short(rec, run.verdict, "train.py:42")
    assert "about 1.33x faster" in line and "4.00x" not in line
    # A cause's advice without a plan gains what removing the cause does.
    gpu = decided(run_doc({**HEALTHY, "host": 8.0}, device="cuda:0"), zero_code=True, evidence={"cpu_count": 8})
    launch = next(r for r in gpu.findings if r.kind == "launch_overhead")
    assert launch.gain.saved_ms == pytest.approx(8.0) and launch.site is None


@pytest.mark.parametrize("decode", ["pil", "fast", "none", "unknown"])
def test_a_cheaper_batch_try_line_fits_the_terminal(decode):
    from perfcore.analysis.findings import Finding, FindingKind
    from perfcore.analysis.results import UNDECIDED, Gain

    rec = Finding(FindingKind.CHEAPER_BATCHES, cause="load", figures={"decode": decode},
                  gain=Gain(saved_ms=1.0, step_after_ms=1.0, speedup=22.46, band=(20.2, 28.81)))
    line = try_short(rec, UNDECIDED, None)
    assert line.startswith("try: cheaper batches") and len(line) <= 120, line
    assert ("decode_jpeg" in line) == (decode == "pil")


def test_an_evaluation_share_keeps_its_try_line_over_startup():
    """The HF Trainer trial: start-up dominated a short run and 19% of the wall was evaluation; the
    evaluation's measured share comes before "measure a longer run" (which evaluates as often)."""
    ev = {"passes": 4, "share_of_wall": 0.19, "total_ms": 400.0, "ms_per_pass": 100.0}
    doc = run_doc(HEALTHY, evaluation=ev, startup={"time_to_first_step_ms": 60_000.0, "first_step_ms": 50.0})
    run = decided(doc, zero_code=True, evidence={"cpu_count": 8})
    ids = [r.kind for r in run.findings]
    assert run.verdict.startup.dominates and ids.index("evaluation") < ids.index("startup")


def test_the_optimizers_fused_form_is_said_once_in_the_try_lines():
    """forward_forward (two layers, each with Adam): the named optimizer line gives the fused form with what it
    saves; the faster-compute line then names only its other ways, and none when it has no other."""
    from perfcore.report.terminal import render_brief

    fact = {**ADAMW_FACT, "optimizer": "torch.optim.Adam", "keyword": "fused", "snippet": "torch.optim.Adam(..., fused=True)"}
    doc = run_doc(HEALTHY, torch_compile=True, compiled_graphs=0, compute_facts={"optimizer": fact},
                  step_time_ms={"mean": 10.2, "p50": 10.2, "p90": 10.5}, backend="host",
                  breakdown_fraction={k: v / 10.2 for k, v in HEALTHY.items()})
    run = decided(doc, zero_code=True, evidence={"cpu_count": 8})
    tries = [ln for ln in render_brief(run).splitlines() if ln.startswith("try:")]
    assert sum("fused=True" in t for t in tries) == 1 and tries[0].startswith("try: torch.optim.Adam(..., fused=True)")
    assert tries[1] == "try: faster compute: a GPU"
    (rec,) = [r for r in run.findings if r.kind == "faster_compute"]
    assert try_short(rec, run.verdict, None, ("try: torch.optim.Adam(..., fused=True): saves",)) == (
        "try: faster compute: a GPU"
    )
    rec.figures["ways"] = [w for w in rec.figures["ways"] if w["way"] == "optimizer"]
    assert try_short(rec, run.verdict, None, ("try: torch.optim.Adam(..., fused=True): saves",)) == ""


# The user's loader: 2 workers, each item sleeps 10 ms (a remote read), 16 items a batch: a batch takes
# 170 ms to make, the loop computes 11 ms of an 85 ms step, the workers used 0.1 of a core in all, and
# other processes 1.7 of the 2 cores. Measured on that machine: num_workers=6 made the step 3.5x faster.
SLEEPY = replace(LOADER_T, num_workers=2, worker_batch_ms=170.0)
SLEEPY_EV = dict(step_ms=85.0, load_ms=74.0, per_step=1, cpu_count=2, on_gpu=False, loop_cores=0.2, other_cores=1.7)


def test_workers_that_wait_are_advised_where_the_cores_look_taken():
    """Workers sized by a core each found none free and said "cheaper batches, not workers"; their measured
    CPU says each is on a core 5% of its batch time, so the free quarter core holds five of them."""
    plan = loader_plan(SLEEPY, PlanEvidence(**SLEEPY_EV, workers_cores=0.1))
    assert plan.kind == "too_few_workers" and plan.worker_cpu_share == pytest.approx(0.05)
    assert 2 < plan.set["num_workers"] <= plan.workers_needed and plan.achievable_ms > 0
    sentence, text = plan_words(plan)
    assert f"set num_workers={plan.set['num_workers']}" in text and "waits on the rest" in sentence
    # Without the workers' CPU, a worker is taken to need a core: none is free, nothing is promised.
    blind = loader_plan(SLEEPY, PlanEvidence(**SLEEPY_EV))
    assert blind.kind == "cheaper_fetch" and blind.achievable_ms == 0.0 and not blind.set
    # Workers that compute all the time fit no better than before.
    busy = loader_plan(SLEEPY, PlanEvidence(**SLEEPY_EV, workers_cores=2.0))
    assert busy.worker_cpu_share == 1.0 and busy.kind == "cheaper_fetch"


def test_enough_workers_are_never_said_to_fall_short():
    """2 workers making a 206 ms batch give one every 103 ms against the loop's 139 ms: they keep up, so the
    wait is not for want of workers ("2 cannot keep up ... about 2 would be needed" said both)."""
    ld = replace(LOADER_T, num_workers=2, worker_batch_ms=206.0)
    plan = loader_plan(ld, PlanEvidence(step_ms=171.0, load_ms=32.0, per_step=1, cpu_count=2, on_gpu=False,
                                         loop_cores=1.0, other_cores=1.7))
    assert plan.workers_needed <= 2 and plan.kind != "too_few_workers"
    said = " ".join(plan_words(plan))
    assert "cannot keep up" not in said and "enough in number" in said
