"""The one expected-gain model and how diagnose judges a measurement against it, on injected numbers:
the cases seen on real runs (the demo's four different gains, a noisy host's 0.88x "confirmed" and a
workers gain above what removing all loading can give), and numbers that print at their size."""
from __future__ import annotations

import dataclasses

import pytest
from run_docs import exp_rows, measured, typed_run

from run_docs import confirm
from perfcore.analysis.command_results import WorkerProfile
from perfcore.analysis.gain import expected_gain, judge, measured_gain
from perfcore.analysis.units import fmt_band, fmt_ms, fmt_share, fmt_x
from perfcore.analysis.verdict import decide, decide_run
from perfcore.experiments.diagnose import diagnose_advice
from perfcore.experiments.diagnose import diagnose_verdict as _diagnose_verdict
from perfcore.experiments.health import health_report
from perfcore.report.words import check_long, check_text
from perfcore.report.words.verdict import health_summary
from perfcore.report.words import gain_words, interference_sentence
from perfcore.report.words.verdict import health_sentence, verdict_long


def diagnose_verdict(base, exps, *args, **kwargs):
    return _diagnose_verdict(base, exp_rows(*exps), *args, **kwargs)


def _diagnose_doc(verdict):
    """diagnose's result around a verdict, for its rendered lines."""

    from perfcore.analysis.command_results import DiagnoseResult, WorkerProfile

    return DiagnoseResult("w", "cpu", (), verdict, worker_profile=WorkerProfile(ms_per_item=1.0))


def test_numbers_print_with_units_that_fit_their_size():
    assert fmt_ms(0.15) == "150 µs" and fmt_ms(0.0004) == "400 ns" and fmt_ms(0.0123) == "12.3 µs"
    assert fmt_ms(4.69) == "4.69 ms" and fmt_ms(25.0) == "25.0 ms" and fmt_ms(282.4) == "282 ms"
    assert fmt_ms(5300.0) == "5.30 s" and fmt_ms(0) == "0 ms" and fmt_ms(None) == fmt_ms(float("nan")) == "n/a"
    assert fmt_share(0.48) == "48%" and fmt_share(0.037) == "3.7%" and fmt_share(0.0004) == "<0.1%"
    assert fmt_share(0.0) == "0%" and fmt_x(1.8249) == "1.82x" and fmt_x(None) == "n/a"
    assert fmt_band(1.7, 1.95) == "1.70-1.95x" and fmt_band(0.071, 0.123, fmt_share) == "7.1-12%"
    assert fmt_band(0.5, 2.0, fmt_ms) == "500 µs to 2.00 ms" and fmt_band(None, 1.0) == ""
    # A 0.15 ms step never reads "0.0 ms of each 0.1 ms step".
    v = decide({"host": 0.05}, 0.15)
    assert "50.0 µs of each 150 µs step" in verdict_long(v)


def test_every_command_gives_the_same_gain_from_the_same_evidence():
    bd = {"load": 12.3, "transfer": 0.1, "compute": 12.9, "comm": 0.0, "host": 0.3}
    step = sum(bd.values())
    run = decide_run({"step_time_ms": {"mean": step}, "breakdown_ms": bd, "device": "cpu", "steps": 40})
    row = measured(step, bd, 40, busy_series=(0.5,) * 3, busy_spacing_s=0.1, samples_per_s=1.0, cpu_percent=50.0)
    health = health_report(row, "w", "next").verdict
    diag, predicted = diagnose_verdict(measured(step, bd),
                                       [{"name": "baseline", "speedup": 1.0}, {"name": "A", "speedup": None}],
                                       WorkerProfile(cpu_to_wall=0.9))
    g = expected_gain(step, 12.3)
    for v in (run, health, diag):
        assert v.named[0].gain.speedup == pytest.approx(g["speedup"])
        assert gain_words(g["speedup"], g["band"]) in verdict_long(v)
    assert predicted == pytest.approx(g["speedup"])
    # Health of a workload runs forward only: same function, and it says whose steps the gain is for.
    fwd = health_report(row, "w", "next", forward_only=True)
    summary = health_sentence(fwd)
    assert fwd.verdict.named[0].gain.speedup == pytest.approx(g["speedup"])
    assert fwd.verdict.forward_only and "forward-only loop's steps about 1.92x faster" in summary
    assert "(a training step, with backward and the optimizer, gains less" in summary


def test_a_predicted_gain_carries_the_band_of_its_interval():
    g = expected_gain(25.6, 12.3, saved_band_ms=(11.0, 13.5))
    assert g["band"] == pytest.approx((25.6 / 14.6, 25.6 / 12.1)) and "text" not in g
    assert gain_words(g["speedup"], g["band"]) == "about 1.92x faster (1.75-2.12x)"  # the one renderer
    assert expected_gain(10.0, 10.0)["speedup"] is None and gain_words(None) == ""


def _judge(step, predicted_ms, measured_x, noise_ms=None, band=None):
    p = expected_gain(step, predicted_ms, saved_band_ms=band)
    m = measured_gain(step, step / measured_x)
    if noise_ms is not None:
        m["noise_ms"] = noise_ms
    return judge({**p, "saved_band_ms": band}, m, step_ms=step, experiment="A")


def test_judge_confirms_only_within_the_noise_band():
    # The demo: 2.44x predicted, synthetic data measured 1.82x with steady runs: partly, with numbers.
    step = 25.6
    pred_ms = step - step / 2.44
    partly = _judge(step, pred_ms, 1.82, noise_ms=0.6, band=(pred_ms - 0.5, pred_ms + 0.5))
    assert partly["status"] == "partly" and partly["agrees"] is False
    assert partly["measured"]["saved_ms"] == pytest.approx(step - step / 1.82) and "sentence" not in partly
    ok = _judge(step, pred_ms, 2.40, noise_ms=0.6, band=(pred_ms - 0.5, pred_ms + 0.5))
    assert ok["status"] == "confirmed" and ok["agrees"] is True
    none = _judge(step, pred_ms, 1.01, noise_ms=0.6)
    assert none["status"] == "not confirmed" and none["agrees"] is False
    slower = _judge(step, pred_ms, 0.9, noise_ms=0.6)
    assert slower["status"] == "not confirmed" and slower["measured"]["saved_ms"] == pytest.approx(-step / 9)


def test_a_saving_inside_the_noise_around_none_confirms_nothing():
    # A busy demo: 32 ms of a 64.6 ms step predicted (2.00x), synthetic data saved 13 ms (1.25x) with 25 ms of
    # noise: within the prediction's widened band, and as much within the noise around no effect at all.
    from run_docs import confirm
    from perfcore.report.words import check_long

    step, pred_ms = 64.6, 32.3
    j = _judge(step, pred_ms, 1.25, noise_ms=25.0, band=(pred_ms - 3.0, pred_ms + 3.0))
    assert j["status"] == "inconclusive" and j["agrees"] is None
    # The same saving with less noise than it: told from none, and within the band: confirmed.
    assert _judge(step, pred_ms, 1.25, noise_ms=10.0, band=(pred_ms - 3.0, pred_ms + 5.0))["status"] == "partly"
    assert _judge(step, pred_ms, 1.9, noise_ms=10.0, band=(pred_ms - 3.0, pred_ms + 3.0))["status"] == "confirmed"
    v = decide({"load": pred_ms}, step)
    c = confirm(v, "load", 1.25, "synthetic data", noise_ms=25.0)
    said = check_long(c)
    assert said.startswith("synthetic data measured 1.25x") and ": inconclusive, its saving (12.9 ms per step)" in said
    assert "is as large as the predicted" not in said  # 25 ms of noise is not as large as 32 ms predicted


@pytest.mark.parametrize("noise_ms", [None, 0.6, 2.5])
def test_confirmed_exactly_when_the_measurement_lies_in_the_printed_agreement_band(noise_ms):
    # The demo printed "measured 1.85x (1.39-2.75x) against 2.15x (2.02-2.33x) predicted: confirmed": the
    # band the judgement used (the prediction's interval widened by the noise) was not printed, so a
    # reader could not tell a confirmation from a flip. It is printed now, and it is the rule.
    from perfcore.report.words import check_long
    from perfcore.report.stage_text import render_diagnose

    step = 25.6
    pred_ms = step - step / 2.44
    v = decide({"load": pred_ms}, step, share_band={"load": ((pred_ms - 0.5) / step, (pred_ms + 0.4) / step)})
    for x in (1.30, 1.60, 1.82, 2.00, 2.20, 2.44, 2.70, 3.00, 3.40):
        j = _judge(step, pred_ms, x, noise_ms=noise_ms, band=(pred_ms - 0.5, pred_ms + 0.4))
        lo, hi = j["agreement_band"]
        inside = lo <= x <= (hi if hi is not None else float("inf"))
        assert (j["status"] == "confirmed") == inside, (x, j["status"], j["agreement_band"])
        # The words (report.words, from confirm's check on the same figures) print that band.
        agreeing = fmt_band(lo, hi) if hi is not None else f"{fmt_x(lo)} or more"
        said = check_long(confirm(v, "load", x, "A", noise_ms=noise_ms))
        if j["status"] == "confirmed":
            assert f"predicted: confirmed, within {agreeing} (the prediction's interval" in said
        elif j["status"] in ("partly", "not confirmed"):
            assert f"; agreeing would be {agreeing} (the prediction's interval" in said
    # diagnose's check line prints the same band beside the two it compares.
    import dataclasses

    c = confirm(v, "load", 1.82, "synthetic data (no loading)", noise_ms=0.6)
    doc = _diagnose_doc(dataclasses.replace(v, checks=(c,)))
    line = next(ln for ln in render_diagnose(doc).splitlines() if ln.startswith("  synthetic data"))
    assert line == (f"  synthetic data (no loading): predicted 2.44x ({fmt_band(*c.predicted_band)}), measured 1.82x "
                    f"({fmt_band(*c.measured_band)}): partly (confirmed needs {fmt_band(*c.agreement_band)})")


def test_noise_larger_than_the_effect_is_inconclusive_and_a_gain_past_its_bound_is_flagged():
    # The noisy host: a 5.3 s step, standard error 1.3 s in each run; removing loading predicts 1.18x.
    # Synthetic data measured 0.88x: nothing can be read from that pair.
    step, sem = 5300.0, 1300.0
    v = decide({"load": step - step / 1.18}, step)
    from perfcore.analysis.checks import difference_noise_ms

    noise = difference_noise_ms(sem, sem)
    c = confirm(v, "load", 0.88, "synthetic data", noise_ms=noise)
    assert c.status.value == "inconclusive" and c.agrees is None
    assert "inconclusive, the runs' noise (3.68 s per step) is as large as the predicted saving (808 ms" \
        in check_long(c)
    # Diagnose B measured 2.38x with workers: more than removing all loading (1.18x) could give.
    base = measured(step, {"load": step - step / 1.18, "compute": step / 1.18}, step_sem_ms=sem)
    exps = [{"name": "baseline", "speedup": 1.0}, {"name": "A", "speedup": 0.88, "step_sem_ms": sem},
            {"name": "B: num_workers=2", "speedup": 2.38, "step_sem_ms": sem, "num_workers": 2}]
    final, _ = diagnose_verdict(base, exps, WorkerProfile(cpu_to_wall=0.9))
    a, b = final.checks
    assert a.status == "inconclusive" and final.attributed is None
    assert b.above_bound and b.measured_speedup == 2.38 and b.predicted_speedup == pytest.approx(1.18)
    assert "above that bound" in check_text(b)
    # Far past the bound with steady runs: said as more than the wait explains, with what was measured.
    steady = [{"name": "baseline", "speedup": 1.0}, {"name": "A", "speedup": 1.18, "step_sem_ms": 5.0},
              {"name": "B: num_workers=2", "speedup": 2.38, "step_sem_ms": 5.0, "num_workers": 2}]
    steady_v, _ = diagnose_verdict(dataclasses.replace(base, step_sem_ms=5.0), steady, WorkerProfile(cpu_to_wall=0.9))
    _, b2 = steady_v.checks
    assert b2.above_bound and "more than removing the wait explains" in check_text(b2)
    # Its line beside the others says what it was judged against (it predicts nothing).
    from perfcore.report.stage_text import render_diagnose

    def line(check):
        return render_diagnose(_diagnose_doc(dataclasses.replace(final, checks=(check,)))).splitlines()[-1]

    assert line(b) == "  B: num_workers=2: at most 1.18x (removing all loading), measured 2.38x: inconclusive"
    assert line(b2) == (f"  B: num_workers=2: at most 1.18x (removing all loading), measured 2.38x "
                        f"({fmt_band(*b2.measured_band)}): above that bound")


def test_diagnose_advice_leads_with_what_helps_when_b_measured_workers_slower():
    # JPEG imagenet on 2 cores, num_workers=0, torch computing on both: diagnose B (2 workers) 0.89x.
    bd = {"load": 120.0, "transfer": 0.0, "compute": 160.0, "comm": 0.0, "host": 2.0}
    step = sum(bd.values())
    loader = {"site": "main.py:240", "num_workers": 0, "batch_size": 8, "worker_batch_ms": 120.0, "training": True,
              "batches": 33}
    run = typed_run(step, bd, steps=30, warmup_steps=3, loaders=[loader],
                    advice_facts={"cpu_count": 2, "torch_threads": 2})
    base = measured(step, bd, step_sem_ms=2.0)
    exps = [{"name": "baseline", "speedup": 1.0},
            {"name": "A", "speedup": step / 162.0, "step_sem_ms": 2.0},
            {"name": "B: num_workers=2", "speedup": 0.89, "step_sem_ms": 2.0, "num_workers": 2}]
    verdict, _ = diagnose_verdict(base, exps, WorkerProfile(cpu_to_wall=0.95))
    b = verdict.checks[1]
    assert b.measured_speedup == 0.89 and b.change == "slower" and "0.89x" in verdict_long(verdict)
    advised = diagnose_advice(run, verdict)
    r, plan = advised.findings[0], advised.loader_plan
    assert r.kind == "cheaper_batches" and str(r.site) == "main.py:240" and r.change == {}
    assert plan.kind == "measured_no_help" and plan.fewer_threads == 1
    assert plan.trial["num_workers"] == 2 and plan.trial["speedup"] == 0.89 and plan.trial["change"] == "slower"


def test_a_sweep_that_ranks_zero_workers_best_turns_the_advice_round():
    import pandas as pd

    from dataclasses import replace

    from perfcore.analysis.advice_evidence import WorkerTrial, read
    from perfcore.analysis.loader_plan import PlanEvidence, loader_plan
    from perfcore.analysis.run_context import Loader
    from perfcore.experiments.sweep import sweep_doc

    rows = [{"batch_size": 8, "num_workers": w, "pin_memory": True, "prefetch_factor": 2, "samples_per_s": sps,
             "step_ms": 8000 / sps, "status": "ok"} for w, sps in ((0, 28.4), (1, 24.5), (2, 24.0))]
    doc = sweep_doc("imagenet", {}, 10, pd.DataFrame(rows), t0=0.0, rounds=[]).to_dict()
    assert doc["best"]["num_workers"] == 0
    trials = doc["worker_trials"]
    one = next(t for t in trials if t["relative_to"] == 0 and t["num_workers"] == 1)
    assert one["speedup"] == pytest.approx(24.5 / 28.4)
    trials = [read(WorkerTrial, t) for t in trials]  # the sweep's trials as the advice reads them
    ld = Loader(site="main.py:240", num_workers=0, worker_batch_ms=120.0, batch_size=8)
    plan = loader_plan(ld, PlanEvidence(step_ms=282.0, load_ms=120.0, per_step=1, cpu_count=2, on_gpu=False, trials=trials))
    assert plan.kind == "measured_no_help" and plan.trial["experiment"] == "sweep (batch 8)"
    assert plan.trial["num_workers"] == 2 and plan.trial["speedup"] == pytest.approx(0.85, abs=0.005)
    # A run with one worker is judged on the ratios against one worker: there, none was faster.
    one_w = loader_plan(replace(ld, num_workers=1, worker_batch_ms=400.0), PlanEvidence(step_ms=282.0, load_ms=120.0,
                        per_step=1, cpu_count=2, on_gpu=False, trials=trials))
    assert one_w.kind == "measured_no_help" and one_w.trial["relative_to"] == 1
    assert one_w.trial["num_workers"] == 0 and one_w.trial["change"] == "faster"
    assert one_w.trial["speedup"] == pytest.approx(1.16, abs=0.005)


def test_diagnose_names_the_cause_in_the_printed_summary_on_a_busy_machine_too():
    # The interference preface capitalises the verdict; the cause must still reach the summary.
    bd = {"load": 12.3, "transfer": 0.1, "compute": 12.9, "comm": 0.0, "host": 0.3}
    step = sum(bd.values())
    busy = {"material": True, "reasons": ["others"], "others_cores": 1.6, "cores": 2, "main_cores": 0.3}
    exps = [{"name": "baseline", "speedup": 1.0}, {"name": "A", "speedup": step / bd["compute"]}]
    base = measured(step, bd, run=typed_run(step, bd, interference=busy))
    final, _ = diagnose_verdict(base, exps, WorkerProfile(cpu_to_wall=0.9))
    from perfcore.analysis.verdict import interference_of

    said = verdict_long(final)
    assert final.uncertain and final.loading.kind == "cpu"
    assert said.startswith(interference_sentence(interference_of(busy)) + ". Input-bound (CPU decode/augment):"), said
    assert verdict_long(final, lead=False).startswith("input-bound (CPU decode/augment):")


def test_a_measured_saving_past_the_changes_bound_is_flagged():
    step = 100.0
    m = measured_gain(step, 70.0, noise_ms=1.0)  # 30 ms saved a step
    assert judge(expected_gain(step, 20.0), m, step_ms=step, experiment="A", bound_ms=25.0)["above_bound"]
    assert not judge(expected_gain(step, 20.0), m, step_ms=step, experiment="A", bound_ms=40.0)["above_bound"]
    assert not judge(expected_gain(step, 20.0), m, step_ms=step, experiment="A")["above_bound"]
