"""health, diagnose and sweep are written once, over the Runner interface: driven here by a runner whose
measurements are given, they ask for the trials they need and report statuses and numbers from what
came back; both real runners hand over the same Measurement."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from perfcore.analysis.checks import Experiment
from perfcore.analysis.run_report import RunReport
from perfcore.analysis.command_results import ScriptExit, Skipped, WorkerProfile
from perfcore.errors import RunFailed
from perfcore.experiments import scripts
from perfcore.experiments.diagnose import diagnose
from perfcore.experiments.health import health
from perfcore.experiments.measurement import Measurement, Settings, Trial
from perfcore.experiments.sweep import sweep

LABELS = ("load", "transfer", "compute", "comm", "host")
OWN = {"batch_size": 16, "num_workers": 0, "pin_memory": False, "prefetch_factor": None}


def measured(load_ms: float, compute_ms: float, *, steps: int = 20, failure: ScriptExit | None = None,
             synthetic: bool = False, **settings) -> Measurement:
    """A run whose every step waited load_ms for data and computed compute_ms, on a CPU."""
    bd = {"load": load_ms, "transfer": 0.0, "compute": compute_ms, "comm": 0.0, "host": 0.0}
    step = load_ms + compute_ms
    return Measurement(
        device="cpu", steps=steps, step_ms=step, settings=Settings(**{**OWN, **settings}), step_sem_ms=0.01,
        samples_per_s=16 / step * 1e3, busy_series=(compute_ms / step,) * steps, busy_spacing_s=step / 1e3,
        cpu_percent=50.0, breakdown_ms=bd, breakdown_fraction={k: v / step for k, v in bd.items()},
        failure=failure, ended="exited with 1", synthetic=synthetic,
    )


class GivenRunner:
    """A runner whose measurements are given by a function of the trial; it records every trial."""

    forward_only = False
    health_note = "given"
    decoder_skip = "no decoders given"

    def __init__(self, answer, *, keeps_own_settings=False, decoders=()):
        self.name, self.target = "given", "-- given"
        self.answer, self.trials = answer, []
        self.keeps_own_settings = keeps_own_settings
        self.decoders = list(decoders)

    def measure(self, trial: Trial, progress=None) -> Measurement:
        self.trials.append(trial)
        return self.answer(trial)

    def own_settings(self):
        return {**OWN, "site": None} if self.keeps_own_settings else None

    def other_decoders(self):
        return self.decoders

    def worker_profile(self, baseline):
        return WorkerProfile(items=8, ms_per_item=1.0, cpu_to_wall=0.95)


def test_health_judges_the_one_measurement_it_asked_for():
    runner = GivenRunner(lambda t: measured(6.0, 4.0))
    doc = health(runner, steps=30, warmup=4, interval_s=0.2)
    assert [(t.steps, t.warmup, t.train, t.interval_s) for t in runner.trials] == [(30, 4, False, 0.2)]
    assert doc.verdict.bound == "load" and not doc.healthy and doc.next == "perfcore diagnose -- given"
    assert doc.step_ms == 10.0 and doc.busy_mean == pytest.approx(0.4) and doc.note == "given"
    assert doc.script_exit is None


def test_health_carries_a_failed_scripts_exit_code():
    doc = health(GivenRunner(lambda t: measured(0.1, 9.9, failure=ScriptExit(3, steps=1))))
    assert doc.script_exit.code == 3 and doc.verdict.bound == "compute"


def test_diagnose_asks_for_the_baseline_synthetic_data_and_other_workers():
    def answer(t: Trial) -> Measurement:
        if t.synthetic:
            return measured(0.0, 4.0, synthetic=True)
        if t.overrides:
            return measured(3.0, 4.0, **t.overrides)
        return measured(6.0, 4.0)

    runner = GivenRunner(answer)
    doc = diagnose(runner, steps=12, warmup=2)
    assert [(t.tag, t.synthetic, dict(t.overrides or {})) for t in runner.trials] == [
        ("baseline", False, {}), ("synthetic", True, {}), ("workers", False, {"num_workers": os.cpu_count() or 1})]
    base, a, b = doc.experiments
    assert [e.experiment for e in doc.experiments] == [Experiment.BASELINE, Experiment.SYNTHETIC, Experiment.WORKERS]
    assert base.speedup == 1.0 and a.speedup == pytest.approx(10 / 4) and b.speedup == pytest.approx(10 / 7)
    assert a.synthetic and b.num_workers == (os.cpu_count() or 1)
    assert doc.measured_speedup == pytest.approx(2.5) and doc.verdict.bound == "load"
    assert doc.verdict.checks[0].agrees is True
    assert doc.skipped == (Skipped("C: other decoder", "no decoders given"),)
    assert doc.script_exit is None


def test_diagnose_rows_carry_what_else_used_the_machine_as_each_run_measured_it():
    from dataclasses import replace

    from run_docs import typed_run

    def answer(t: Trial) -> Measurement:
        m = measured(0.0 if t.synthetic else 6.0, 4.0, synthetic=t.synthetic, **(t.overrides or {}))
        busy = {"material": bool(t.overrides), "reasons": ["others"] if t.overrides else [],
                "others_cores": 1.5 if t.overrides else 0.2, "cores": 2}
        return replace(m, run=typed_run(m.step_ms, dict(m.breakdown_ms), interference=busy))

    doc = diagnose(GivenRunner(answer), steps=12, warmup=2)
    base, a, b = doc.experiments
    assert (base.interference.others_cores, a.interference.others_cores, b.interference.others_cores) == (0.2, 0.2, 1.5)
    assert b.interference.material and not base.interference.material and b.interference.cores == 2
    assert doc.interference.others_cores == 0.2  # the baseline's, typed as its run keeps it
    assert doc.verdict.checks[0].others_cores == 0.2  # A's check: the busier of the baseline and A


def test_diagnose_keeps_going_when_the_workers_run_fails_and_reports_the_first_failure():
    def answer(t: Trial) -> Measurement:
        if t.overrides:
            raise RunFailed("the command exited with 1 before perfcore saw a training step", exit_code=1)
        return measured(0.0 if t.synthetic else 6.0, 4.0, failure=ScriptExit(2, steps=12, run="synthetic") if t.synthetic else None)

    doc = diagnose(GivenRunner(answer, decoders=["fast"]), steps=12, warmup=2)
    names = [e.experiment for e in doc.experiments]
    assert names == [Experiment.BASELINE, Experiment.SYNTHETIC, Experiment.WORKERS, Experiment.DECODER]
    assert not doc.skipped
    b = doc.experiments[2]
    assert b.speedup is None and b.error and b.step_ms != b.step_ms
    # How it ended is kept as facts (its code, steps, which run); its words are said from them.
    assert doc.script_exit == ScriptExit(code=2, steps=12, run="synthetic", settings=None, oom=False)


def test_a_sweep_of_a_loop_that_keeps_its_own_settings_changes_only_the_swept_axes():
    runner = GivenRunner(lambda t: measured(2.0, 4.0, **t.overrides), keeps_own_settings=True)
    grid = {"batch_size": [None], "num_workers": [0, 2], "pin_memory": [None], "prefetch_factor": [None]}
    doc = sweep(runner, grid, steps=6, warmup=1).to_dict()
    assert [dict(t.overrides) for t in runner.trials] == [{"num_workers": 0}, {"num_workers": 2}]
    assert [t.tag for t in runner.trials] == ["config0", "config1"] and all(t.decide for t in runner.trials)
    assert [c["replaced"] for c in doc["configs"]] == [None, "num_workers 0->2"]
    assert [c["prefetch_factor"] for c in doc["configs"]] == [None, 2]  # torch's default, with workers
    assert doc["kept"] == {"batch_size": 16, "pin_memory": False, "prefetch_factor": None}
    assert doc["script_settings"]["num_workers"] == 0 and doc["best"] is not None


def test_a_sweep_of_a_workload_sets_every_axis_and_a_crashed_run_is_a_row_not_an_end():
    def answer(t: Trial) -> Measurement:
        if t.overrides["batch_size"] == 32:
            raise RunFailed("out of luck", exit_code=1)
        return measured(2.0, 4.0 * t.overrides["batch_size"] / 16, **t.overrides)

    runner = GivenRunner(answer)
    grid = {"batch_size": [16, 32], "num_workers": [0], "pin_memory": [False], "prefetch_factor": [2]}
    doc = sweep(runner, grid, steps=6, warmup=1).to_dict()
    assert [set(t.overrides) for t in runner.trials] == [{"batch_size", "num_workers", "pin_memory", "prefetch_factor"}] * 2
    assert [c["status"] for c in doc["configs"]] == ["ok", "crashed"] and doc["best"]["batch_size"] == 16
    assert "script_settings" not in doc and doc["failed"] == 1


def test_a_script_run_is_measured_with_its_typed_run_and_the_settings_it_was_asked_for():
    from run_docs import typed_run

    workers = {"num_workers": 2, "items_per_batch": 8, "fetch_ms_mean": 2.0, "getitem_ms_mean": 0.2, "collate_ms_mean": 0.1}
    interference = {"material": True, "reasons": ["others"], "others_cores": 1.5, "cores": 2}
    doc = typed_run(10.0, dict.fromkeys(LABELS, 2.0), workers=workers, exit_code=0, steps=4, interference=interference,
                    dataloader_overrides={"asked": {"pin_memory": True}})
    m = scripts.script_measurement(doc, [0.5] * 4, "compute_share", None, 0.1, Trial(4, 1))
    assert (m.step_ms, m.steps, m.busy_mean, m.breakdown_ms["load"]) == (10.0, 4, 0.5, 2.0)
    assert m.samples_per_s == pytest.approx(800.0) and m.failure is None
    assert m.settings == Settings(batch_size=8, num_workers=2, pin_memory=True)
    assert m.run is doc and m.interference is doc.interference and m.interference.others_cores == 1.5
    # Its verdict is the run's where the run was decided (a sweep's configuration), none where it was not.
    assert m.verdict is None and not doc.verdict.decided
    from perfcore.analysis.advice import advise_run

    decided = RunReport.of(doc.to_dict(), advise_run(doc.to_dict(), zero_code=True))
    assert scripts.script_measurement(decided, [], "compute_share", None, None, Trial(4, 1)).verdict is decided.verdict
    # What a verdict on it is judged on: its figures, and what else used the machine as measured.
    ev = m.verdict_evidence()
    assert ev.step_ms == 10.0 and ev.avoidable_ms["load"] == 2.0 and ev.interference.material is True


def test_a_script_run_without_a_worker_profile_takes_its_training_loaders_batch_size():
    # diagnose B on an unmodified Hogwild script: num_workers=2 ran, the workers were not profiled, and its
    # row read "samples/s 0" beside a 92.9 ms step.
    from run_docs import typed_run

    doc = typed_run(80.0, dict.fromkeys(LABELS, 2.0), steps=4, exit_code=0,
                    dataloader_overrides={"asked": {"num_workers": 2}},
                    loaders=[{"training": False, "batch_size": 1000}, {"training": True, "batch_size": 64}])
    m = scripts.script_measurement(doc, [0.5] * 4, "compute_share", None, 0.1, Trial(4, 1))
    assert m.settings.batch_size == 64 and m.samples_per_s == pytest.approx(800.0)
