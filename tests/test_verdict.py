"""The one verdict: thresholds, ranking, its facts (and the words made from them agreeing with its
numbers), and that every command reaches it."""
from __future__ import annotations

import dataclasses
import json

import pytest
from run_docs import measured, typed_run

from perfcore.analysis.checks import Against, Check, Experiment, Reason
from run_docs import confirm
from perfcore.analysis.codec import from_doc, to_doc
from perfcore.analysis.command_results import ExperimentRow, ProfileRow, WorkerProfile
from perfcore.analysis.compare import compare_runs
from perfcore.analysis.status import Agreement, Change
from perfcore.analysis.run_parts import StartupFacts
from perfcore.analysis.units import fmt_x
from perfcore.analysis.verdict import CRITICAL_SHARE, WARN_SHARE, avoidable, decide, decide_run
from perfcore.experiments.diagnose import diagnose_verdict
from perfcore.experiments.health import health_report
from perfcore.report.words import LOADING_CAUSE
from perfcore.report.words.verdict import change_sentence, step_words
from perfcore.report.terminal import render_compare
from perfcore.report.words.verdict import health_summary
from perfcore.report.words.verdict import health_sentence
from perfcore.report.words.verdict import verdict_long as said

# The demo as measured on this machine before the fix: loading ~48% of a training step.
DEMO_BD = {"load": 12.3, "transfer": 0.1, "compute": 12.9, "comm": 0.0, "host": 0.3}
DEMO_STEP = sum(DEMO_BD.values())


def test_thresholds_are_the_published_tiers():
    assert (WARN_SHARE, CRITICAL_SHARE) == (0.10, 0.20)
    step = 100.0
    assert decide({"load": 9.9}, step).healthy
    assert decide({"load": 10.0}, step).level == "warn"
    assert decide({"load": 19.9}, step).level == "warn"
    assert decide({"load": 20.0}, step).level == "critical"


def test_compute_is_healthy_even_when_it_is_most_of_the_step():
    v = decide({"load": 4.0, "transfer": 1.0, "comm": 0.0, "host": 3.0}, 100.0, compute_ms=92.0)
    assert v.bound == "compute" and v.healthy and v.primary is None and v.named == ()
    assert v.compute_ms == 92.0 and v.avoidable_ms["load"] == 4.0
    words = said(v)
    assert words.startswith("compute-bound (healthy)") and "92%" in words and "4.00 ms" in words


def test_demo_shape_names_loading_with_its_numbers():
    v = decide(avoidable(DEMO_BD), DEMO_STEP, compute_ms=DEMO_BD["compute"])
    assert v.bound == "load" and v.level == "critical" and not v.healthy
    c = v.named[0]
    assert c.ms_per_step == pytest.approx(12.3) and c.share == pytest.approx(12.3 / 25.6)
    assert c.gain.speedup == pytest.approx(25.6 / 13.3)
    words = said(v)
    assert words.startswith("input-bound") and all(f in words for f in ("12.3 ms", "25.6 ms", "48%", "major", "1.92x"))
    from perfcore.report.words.verdict import cause_words

    assert "12.3 ms of a 25.6 ms step (48%)" in cause_words(v, c)[1]


def test_several_causes_ranked_each_with_evidence_and_gain():
    v = decide({"load": 12.0, "transfer": 0.0, "comm": 25.0, "host": 15.0}, 100.0, on_gpu=True)
    assert [c.label for c in v.named] == ["comm", "host", "load"]
    assert [c.level for c in v.named] == ["critical", "warn", "warn"]
    assert v.bound == "comm" and said(v).startswith("communication-bound:")
    also = said(v).split("Also ")[1]
    assert also.index("15.0 ms (15%, moderate)") < also.index("12.0 ms (12%, moderate)")  # in the ranked order
    from perfcore.report.words.verdict import cause_words

    for c in v.named:
        assert c.gain.speedup == pytest.approx(100.0 / (100.0 - c.ms_per_step))
        evidence = cause_words(v, c)[1]
        assert "GPU" in evidence or "kernel" in evidence or "copy" in evidence


def test_partial_data_and_degenerate_input():
    assert decide({}, 10.0).healthy
    for nothing in (0.0, float("nan"), None):
        v = decide({"load": 5.0}, nothing)
        assert said(v) == "no steps measured" and v.healthy is None and v.bound == v.level == "unknown"
    v = decide({"load": 10.0}, 10.0)  # a step that is all waiting: no finite gain
    assert v.bound == "load" and "faster" not in said(v) and v.named[0].gain.speedup is None
    json.dumps(to_doc(v), allow_nan=False)  # run.json stays strict JSON
    assert confirm(v, "load", 3.0, "synthetic data").agrees is None


def test_startup_enters_the_verdict_only_when_it_dominates_a_short_run():
    su = StartupFacts(time_to_first_step_ms=9000.0, first_step_ms=900.0, steady_step_ms=25.0)
    short = decide({"load": 1.0}, 25.0, startup=su, steps=20)
    assert short.startup.dominates and short.healthy
    # 9 s to the end of the first step, less one steady step, of a 9 s + 20 x 25 ms run.
    assert short.startup.ms == pytest.approx(8975.0)
    assert short.startup.share_of_run == pytest.approx(8975.0 / (9000.0 + 20 * 25.0))
    assert all(f in said(short) for f in ("Start-up dominates", "9.00 s", "900 ms", "94%", "20 steps"))
    long = decide({"load": 1.0}, 25.0, startup=su, steps=100_000)
    assert not long.startup.dominates and "Start-up" not in said(long)
    assert decide({"load": 1.0}, 25.0).startup is None


def test_confirm_and_correct_as_statuses_and_figures():
    v = decide(avoidable(DEMO_BD), DEMO_STEP)
    ok = confirm(v, "load", 1.80, "synthetic data")
    assert ok.status is Agreement.CONFIRMED and ok.agrees and ok.reason is None and ok.fallback_band
    assert ok.predicted_speedup == pytest.approx(DEMO_STEP / (DEMO_STEP - 12.3))
    assert ok.agreement_band[0] < 1.80 < ok.agreement_band[1]
    # A small predicted gain that the A/B does not show: 1.1 ms of 11.1 predicted, nothing measured.
    small = decide({"load": 1.1}, 11.1)
    assert confirm(small, "load", 1.0, "synthetic data").status is Agreement.NOT_CONFIRMED
    assert confirm(small, "load", 1.08, "synthetic data").agrees
    bad = confirm(v, "load", 1.05, "synthetic data")
    assert bad.agrees is False and bad.measured_ms == pytest.approx(25.6 - 25.6 / 1.05)
    assert bad.predicted_ms == pytest.approx(12.3) and bad.measured_saved_ms == pytest.approx(bad.measured_ms)
    assert confirm(v, "load", None, "synthetic data").reason is Reason.NO_MEASUREMENT
    # The document's form reads back as the same check (an old "no measurement" status, migrated, too).
    assert from_doc(Check, json.loads(json.dumps(to_doc(bad)))) == bad
    from perfcore.analysis.migrate import migrate_check

    old = from_doc(Check, migrate_check({"experiment": "synthetic data", "status": "no measurement", "agrees": None}))
    assert old.status is Agreement.INCONCLUSIVE and old.reason is Reason.NO_MEASUREMENT


def test_a_busy_machine_cannot_correct_the_attribution():
    v = decide(avoidable(DEMO_BD), DEMO_STEP)
    # The synthetic run's compute took 1.6x the baseline's: noise from outside, not an effect of the data.
    c = confirm(v, "load", 1.37, "synthetic data", compute_ms=(12.9, 20.6))
    assert c.agrees is None and c.reason is Reason.COMPUTE_DRIFT and c.compute_ms == (12.9, 20.6)
    assert c.others_cores is None and not c.machine_busy  # nothing measured: no busy machine to blame
    quiet = {"others_cores": 0.1, "cores": 2, "material": False}
    assert not confirm(v, "load", 1.37, "synthetic data", compute_ms=(12.9, 20.6), busy=quiet).machine_busy
    loud = {"others_cores": 1.2, "cores": 2, "material": True}
    assert confirm(v, "load", 1.37, "synthetic data", compute_ms=(12.9, 20.6), busy=loud).machine_busy
    # Faster compute without loading is real (workers no longer compete for cores): that corrects.
    up = confirm(v, "load", 2.6, "synthetic data", compute_ms=(12.9, 9.0))
    assert up.agrees is False and up.status is Agreement.NOT_CONFIRMED and up.measured_ms == pytest.approx(25.6 - 25.6 / 2.6)
    # ... but not when loading never ran beside compute (num_workers=0 on a CPU, or GPU kernels):
    # then a faster compute is the machine getting quieter between the runs.
    calm = confirm(v, "load", 2.6, "synthetic data", compute_ms=(12.9, 9.0), compute_may_gain=False)
    assert calm.agrees is None and calm.reason is Reason.COMPUTE_DRIFT


_CODES = {"baseline": Experiment.BASELINE, "A": Experiment.SYNTHETIC, "B": Experiment.WORKERS, "C": Experiment.DECODER}


def _exp(name, speedup, compute=None, sem=None):
    return ExperimentRow(
        _CODES[name.split(":")[0]], name, speedup=speedup, step_sem_ms=sem,
        breakdown_ms={"compute": compute} if compute else None,
    )


def test_diagnose_confirms_or_corrects_the_attribution():
    base = measured(DEMO_STEP, DEMO_BD)
    prof = WorkerProfile(cpu_to_wall=0.95, top=(ProfileRow("decode (x.py:1)"),))
    v, predicted = diagnose_verdict(base, [_exp("baseline", 1.0), _exp("A", 1.85)], prof)
    assert v.bound == "load" and LOADING_CAUSE[v.loading.kind] == "CPU decode/augment"
    assert predicted == pytest.approx(25.6 / 13.3)
    assert v.checks[0].status == "confirmed" and v.checks[0].measured_speedup == 1.85
    assert said(v).startswith("input-bound (CPU decode/augment): waiting for data costs 12.3 ms")
    assert "1.85x" in said(v) and "confirmed" in said(v)
    io = WorkerProfile(cpu_to_wall=0.39)
    assert diagnose_verdict(base, [_exp("baseline", 1.0), _exp("A", 1.85)], io)[0].loading.kind == "io"
    crowded = dataclasses.replace(base, cpu_percent=100.0)
    busy, _ = diagnose_verdict(crowded, [_exp("baseline", 1.0), _exp("A", 1.85)], io)
    assert busy.loading.kind == "crowded" and "100% busy" in said(busy)
    asleep = diagnose_verdict(crowded, [_exp("baseline", 1.0), _exp("A", 1.85)], WorkerProfile(cpu_to_wall=0.05))[0]
    assert asleep.loading.kind == "io"
    v, _ = diagnose_verdict(base, [_exp("baseline", 1.0), _exp("A", 1.85), _exp("B: num_workers=2", 1.5)], prof)
    b = v.checks[1]
    assert b.against is Against.BOUND and b.measured_speedup == 1.5 and "1.50x" in said(v)
    # Synthetic data barely helps: the measurement wins and the verdict is decided again on it.
    v, _ = diagnose_verdict(base, [_exp("baseline", 1.0), _exp("A", 1.04)], prof)
    # What the attribution said is kept as its figures beside the corrected verdict (decided once).
    assert v.healthy and v.bound == "compute" and v.attributed.label == "load"
    assert v.attributed.share >= 0.10 and v.avoidable_ms["load"] < v.attributed.ms_per_step
    assert v.checks[0].status == "not confirmed" and v.measured_by == {"load": "synthetic"}
    assert "not confirmed" in said(v) and "985 µs" in said(v)
    v, _ = diagnose_verdict(base, [_exp("baseline", 1.0), _exp("A", 1.04, compute=25.0)], prof)
    assert v.bound == "load" and v.attributed is None and v.checks[0].status == "inconclusive"


def _row(bd, busy, device="cpu"):
    return measured(sum(bd.values()), bd, 30, device, busy_source="compute_share" if device == "cpu" else "gpu_util",
                    busy_series=(busy,) * 3, busy_spacing_s=0.1, samples_per_s=1.0, cpu_percent=50.0)


def test_health_run_and_compare_agree_on_the_same_evidence():
    # Health's forward-only loop has the same avoidable wait; compute share is lower (no backward).
    h = health_report(_row({**DEMO_BD, "compute": 4.0}, busy=0.23), "demo", "perfcore diagnose demo")
    run = {"step_time_ms": {"mean": DEMO_STEP}, "breakdown_ms": DEMO_BD, "device": "cpu", "steps": 40}
    assert h.verdict.bound == decide_run(run).bound == "load"
    assert not h.healthy and h.next == "perfcore diagnose demo"
    assert h.busy_mean == 0.23 and h.verdict.avoidable_ms["load"] == 12.3
    summary = health_sentence(h)
    assert summary.startswith("input-bound:") and all(f in summary for f in ("12.3 ms", "16.7 ms", "74%", "23%"))
    ok = health_report(_row({"load": 0.5, "transfer": 0, "compute": 9.0, "comm": 0, "host": 0.5}, busy=0.9),
                       "w", "next")
    assert ok.healthy and ok.next is None and ok.verdict.bound == "compute"


def test_compare_says_when_the_verdict_or_primary_cause_changed():
    a = typed_run(DEMO_STEP, DEMO_BD)
    b_bd = {"load": 0.4, "transfer": 0.1, "compute": 12.9, "comm": 0.0, "host": 0.3}
    b = typed_run(sum(b_bd.values()), b_bd)
    doc = compare_runs(a, b)
    assert doc.verdict_changed and doc.primary_changed and (doc.a.verdict.primary, doc.b.verdict.primary) == ("load", None)
    assert (doc.a.named, doc.a.verdict.level, doc.b.named, doc.b.verdict.healthy) == (
        "input-bound", "critical", None, True)
    said = change_sentence(doc)
    assert said.startswith("verdict changed") and "load -> none" in said and "healthy" in said
    assert doc.labels["load"].delta_ms == pytest.approx(-11.9)
    # No spread in either run: any ratio but 1 counts, and the words follow the status.
    assert doc.change is Change.FASTER and "B faster" in step_words(doc)
    text = render_compare(doc)
    assert "verdict changed" in text and "load" in text
    same = compare_runs(a, a)
    assert not same.verdict_changed and same.change is Change.WITHIN_NOISE
    assert change_sentence(same).startswith("verdict unchanged") and "input-bound (major)" in change_sentence(same)
    # Same cause, lower tier: changed, primary not.
    c_bd = {**DEMO_BD, "load": 2.0}
    tier = compare_runs(a, typed_run(sum(c_bd.values()), c_bd))
    assert tier.verdict_changed and not tier.primary_changed
    assert (tier.a.verdict.level, tier.b.verdict.level) == ("critical", "warn")
    assert "major -> moderate" in change_sentence(tier)
    doc = tier.to_dict()  # compare's JSON keeps facts only: each side's verdict, no words
    assert doc["a"]["verdict"]["bound"] == "load" and "sentence" not in json.dumps(doc)


def test_compare_judges_the_step_change_against_both_runs_noise():
    bd = {**DEMO_BD}
    a = typed_run(10.0, bd, sem=0.5)
    for b_ms, sem, status in ((9.5, 0.5, "within noise"), (8.0, 0.2, "faster"), (12.0, 0.2, "slower")):
        doc = compare_runs(a, typed_run(b_ms, bd, sem=sem))
        assert doc.change == status and doc.noise_ms > 0
        x = doc.speedup
        # The word agrees with the number: faster only above 1 + noise, slower only below its mirror.
        assert (status == "faster") == (x > 1 + doc.noise_ms / 10.0)
        words = step_words(doc)
        assert fmt_x(x) in words and ("faster" in words) == (status == "faster")
        assert ("slower" in words) == (status == "slower")


def test_compare_with_a_run_that_measured_nothing():
    doc = compare_runs(typed_run(0.0, {lb: 0.0 for lb in DEMO_BD}), typed_run(DEMO_STEP, DEMO_BD))
    assert doc.primary_changed and (doc.a.verdict.primary, doc.b.verdict.primary) == (None, "load")
    assert doc.change is None
    assert change_sentence(doc).startswith("verdict changed: no steps measured -> input-bound (major)")


def test_the_runs_own_spread_widens_what_agrees():
    from perfcore.analysis.checks import NOISE_SE, difference_noise_ms, step_sem_ms

    # A healthy 30 ms step whose fetch is 1 ms: removing it predicts ~1.03x. On a busy host the two
    # runs' mean steps differ by 3 ms (10%) with nothing changed, ticks of 4 ms ending the waits.
    v = decide({"load": 1.0}, 30.0)
    assert confirm(v, "load", 30.0 / 27.0, "synthetic data").agrees is False  # read as loading
    walls = [30.0, 34.0, 26.0, 38.0, 30.0, 26.0, 34.0, 30.0, 38.0, 26.0]
    sem = step_sem_ms(walls)
    n = len(walls)
    mean = sum(walls) / n
    assert sem == pytest.approx((sum((w - mean) ** 2 for w in walls) / (n - 1) / n) ** 0.5)
    noise = difference_noise_ms(sem, sem)
    assert noise == pytest.approx(NOISE_SE * 2 ** 0.5 * sem)
    c = confirm(v, "load", 30.0 / 27.0, "synthetic data", noise_ms=noise)
    # That noise (~3.7 ms) is larger than the whole predicted saving (1 ms): the pair cannot tell the
    # predicted gain from none, and says so rather than confirming or correcting anything.
    assert noise > 1.0 and c.agrees is None and c.status is Agreement.INCONCLUSIVE and c.reason is Reason.NOISE
    assert c.measured_noise_ms == pytest.approx(noise) and c.predicted_ms == pytest.approx(1.0)
    # A real effect stays far outside that noise: half the step saved is still a correction.
    assert confirm(v, "load", 2.0, "synthetic data", noise_ms=noise).agrees is False
    # Steady runs (a quiet machine) leave the 5% floor in charge; one run without a spread, no noise.
    assert difference_noise_ms(step_sem_ms([30.0] * 10), 0.0) == 0.0
    assert difference_noise_ms(sem, None) is None and step_sem_ms([30.0]) is None


def test_diagnose_reads_a_noisy_pair_of_runs_as_noise():
    base = measured(30.0, {"load": 1.0, "compute": 28.9, "host": 0.1}, step_sem_ms=1.4)
    prof = WorkerProfile(cpu_to_wall=0.95)
    quiet, _ = diagnose_verdict(dataclasses.replace(base, step_sem_ms=0.05),
                                [_exp("baseline", 1.0), _exp("A", 1.11, sem=0.05)], prof)
    # Steady runs: a 10% gain is real, above the prediction's band, and corrects the attribution.
    assert quiet.checks[0].status == "not confirmed" and quiet.attributed is not None
    exps = [_exp("baseline", 1.0), _exp("A", 1.11, sem=1.4)]
    noisy, _ = diagnose_verdict(base, exps, prof)
    assert noisy.bound == "compute" and noisy.healthy and noisy.checks[0].status == "inconclusive"
    assert noisy.attributed is None


def test_cpu_host_time_says_it_holds_tensor_math_outside_modules():
    # A manual-SGD loop on a CPU: the functional loss, zero_grad and p.data.add_ run outside modules,
    # so they are in host; the words must not call that "Python, logging, syncs".
    v = decide({"host": 30.0}, 100.0, on_gpu=False)
    assert v.bound == "host" and not v.on_gpu and "Python, logging, syncs" not in said(v)
    assert "tensor math run outside modules" in said(v)
    from perfcore.analysis.advice_findings import advise
    from perfcore.analysis.advice_evidence import AdviceEvidence
    from perfcore.report.words.advice import text_of

    rec = advise(AdviceEvidence(v, compute_ms=70.0, zero_code=True))[0]
    assert rec.kind == "host_gaps" and "tensor math outside modules" in text_of(rec)  # the renderer's words
    gpu = decide({"host": 30.0}, 100.0, on_gpu=True)
    assert gpu.on_gpu and said(gpu).startswith("host-bound: host gaps (the GPU idles")


def test_the_typed_verdict_is_the_decision_and_the_document_its_serialisation():
    from perfcore.analysis.results import Level, Verdict
    from perfcore.analysis.verdict import judge_causes

    bd = {"load": 9.0, "transfer": 0.5, "comm": 0.0, "host": 3.0}
    band = {"load": (0.28, 0.34), "transfer": (0.01, 0.02), "comm": (0.0, 0.0), "host": (0.08, 0.12)}
    typed = judge_causes(bd, 30.0, compute_ms=17.5, share_band=band)
    assert typed.bound == "load" and typed.level is Level.CRITICAL and typed.healthy is False
    assert [c.label for c in typed.named] == ["load", "host"] and typed.named[1].level is Level.BORDERLINE
    assert typed.named[0].gain.speedup == 30.0 / 21.0
    doc = json.loads(json.dumps(to_doc(decide(bd, 30.0, compute_ms=17.5, share_band=band))))
    back = from_doc(Verdict, doc)
    assert (back.bound, back.level, back.healthy, back.primary) == ("load", Level.CRITICAL, False, "load")
    assert back.named == typed.named and back.avoidable_ms == typed.avoidable_ms
    # Nothing reaches a tier: healthy, compute-bound, with every cause still ranked.
    calm = judge_causes({"load": 1.0, "host": 0.5}, 30.0)
    assert calm.bound == "compute" and calm.level is Level.HEALTHY and calm.named == ()
    assert [c.label for c in calm.ranked][:2] == ["load", "host"]


def test_a_compute_drift_blames_a_busy_machine_only_when_one_was_measured():
    v = decide({"load": 12.0, "transfer": 0.0, "comm": 0.0, "host": 0.0}, 25.0, compute_ms=13.0)
    quiet = confirm(v, "load", 1.1, "synthetic data", compute_ms=(13.2, 22.0),
                    busy={"others_cores": 0.0, "cores": 2, "material": False})
    assert quiet.status is Agreement.INCONCLUSIVE and quiet.reason is Reason.COMPUTE_DRIFT and not quiet.machine_busy
    assert (quiet.others_cores, quiet.cores) == (0.0, 2)
    busy = confirm(v, "load", 1.1, "synthetic data", compute_ms=(13.2, 22.0),
                   busy={"others_cores": 1.5, "cores": 2, "material": True})
    assert busy.machine_busy and busy.others_cores == 1.5
    unmeasured = confirm(v, "load", 1.1, "synthetic data", compute_ms=(13.2, 22.0))
    assert unmeasured.others_cores is None and not unmeasured.machine_busy
