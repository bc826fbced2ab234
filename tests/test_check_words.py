"""The words of a verdict's check, made from its status and figures (report.words): the few
sentence tests; what a check decides is tested as statuses in test_verdict."""

from __future__ import annotations

import dataclasses

import pytest

from perfcore.analysis.checks import Against, Check, Experiment, Prediction
from run_docs import confirm, measured
from perfcore.analysis.codec import from_doc, to_doc
from perfcore.analysis.command_results import ExperimentRow, WorkerProfile
from perfcore.analysis.status import Change
from perfcore.analysis.verdict import avoidable, decide
from perfcore.report.words import check_long, check_text, compute_shortfall


def _b(speedup, sem):
    return ExperimentRow(Experiment.WORKERS, "B", speedup=speedup, step_sem_ms=sem)

DEMO_BD = {"load": 12.3, "transfer": 0.1, "compute": 12.9, "comm": 0.0, "host": 0.3}
DEMO_STEP = sum(DEMO_BD.values())


def test_each_status_in_words_beside_its_number():
    v = decide(avoidable(DEMO_BD), DEMO_STEP)
    assert check_long(confirm(v, "load", 1.80, "synthetic data")) == (
        "synthetic data measured 1.80x against 1.92x predicted: confirmed, within 1.69-2.23x (the prediction's "
        "interval, or two runs' usual spread: 15% of it or 5% of the step)"
    )
    bad = check_long(confirm(v, "load", 1.05, "synthetic data"))
    assert "not confirmed, waiting for data saves 1.22 ms per step (5%), not 12.3 ms" in bad
    slower = check_long(confirm(v, "load", 0.9, "synthetic data"))
    assert "not confirmed, the step got 2.84 ms slower instead of 12.3 ms faster" in slower


def test_a_drift_names_a_busy_machine_only_when_measured():
    v = decide(avoidable(DEMO_BD), DEMO_STEP)
    quiet = confirm(v, "load", 1.37, "synthetic data", compute_ms=(12.9, 20.6), busy={"others_cores": 0.0, "cores": 2})
    said = check_long(quiet)
    assert "inconclusive, compute itself went from 12.9 ms to 20.6 ms per step" in said
    assert "other processes used 0.0 of 2 cores (measured): not a busy machine" in said
    loud = {"others_cores": 1.3, "cores": 2, "material": True}
    said = check_long(confirm(v, "load", 1.37, "synthetic data", compute_ms=(12.9, 20.6), busy=loud))
    assert "other processes used 1.3 of 2 cores (measured)); the attribution stands" in said


def test_a_document_check_is_rendered_from_its_figures():
    import json

    v = decide(avoidable(DEMO_BD), DEMO_STEP)
    c = confirm(v, "load", 1.80, "synthetic data")
    back = from_doc(Check, json.loads(json.dumps(to_doc(c))))
    assert check_text(back) == check_long(c)


def test_experiment_b_against_its_bound_in_words():
    from perfcore.experiments.diagnose import workers_check

    first = Prediction("load", 50.0, 20.0)
    final = decide({"load": 20.0}, 50.0)
    slower = workers_check(first, final, False, measured(50.0, {}, step_sem_ms=1.0), _b(0.8, 1.0))
    assert check_text(slower) == "B measured 0.80x (0.77-0.84x) of the 1.67x that removing all loading can give: " \
        "slower, so workers do not help here"
    above = workers_check(first, final, False, measured(50.0, {}, step_sem_ms=0.1), _b(3.0, 0.1))
    assert above.above_bound and check_text(above).endswith(
        "; above that bound: more than removing the wait explains; compute per step was not measured in both runs")
    # Past the bound, what else changed is said as measured: compute per step in both runs.
    base = measured(50.0, {"compute": 30.0}, step_sem_ms=0.1)
    moved = workers_check(first, final, False, base, dataclasses.replace(_b(3.0, 0.1), breakdown_ms={"compute": 12.0}))
    assert moved.compute_ms == (30.0, 12.0)
    assert check_text(moved).endswith("; above that bound: compute per step 30.0 ms -> 12.0 ms in that run "
                                      "(measured), which removing the wait alone does not explain"), check_text(moved)
    still = workers_check(first, final, False, base, dataclasses.replace(_b(3.0, 0.1), breakdown_ms={"compute": 29.0}))
    assert "compute per step stayed 30.0 ms -> 29.0 ms" in check_text(still)
    from perfcore.analysis.migrate import migrate_check

    old = from_doc(Check, migrate_check({"status": "bogus", "agrees": False, "reason": "??"}))
    assert old.reason is None and old.status == "inconclusive"


def test_what_loading_is_decided_as_a_kind_with_its_figures():
    from perfcore.analysis.results import Loading
    from perfcore.experiments.diagnose import loading_cause
    from perfcore.report.words import LOADING_CAUSE, loading_text

    c = ExperimentRow(Experiment.DECODER, "C: decoder torchvision", decoder="torchvision", speedup=1.4)
    assert loading_cause([c], WorkerProfile(cpu_to_wall=0.9), None) == Loading("decoder", decoder="torchvision",
                                                                                speedup=1.4)
    assert loading_cause([], WorkerProfile(cpu_to_wall=0.3), 95.0).kind == "crowded"
    io = loading_cause([], WorkerProfile(cpu_to_wall=0.3), 40.0)
    assert (io.kind, LOADING_CAUSE[io.kind]) == ("io", "I/O") and loading_text(io).startswith("__getitem__ spends 70% ")
    assert loading_cause([], WorkerProfile(), None).kind == "unprofiled"


def test_health_keeps_its_busy_check_as_figures():
    from perfcore.analysis.command_results import BusyCheck, HealthResult
    from perfcore.experiments.health import health_report
    from perfcore.report.words.verdict import health_summary

    bd = {"load": 0.5, "transfer": 0.0, "compute": 9.5, "comm": 0.0, "host": 0.0}
    row = measured(10.0, bd, 50, "cuda", busy_source="gpu_util", busy_series=(0.4,) * 3, busy_spacing_s=0.1,
                   samples_per_s=1.0, cpu_percent=5.0)
    result = health_report(row, "w", "perfcore diagnose w")
    doc = result.to_dict()
    assert "plain_summary" not in doc and "summary" not in doc  # facts; the words are made at the edge
    back = HealthResult.from_dict(doc)
    assert back.healthy and back.busy_check == BusyCheck(threshold=0.6, decided=True, small_work=True)
    assert "the device's work is small" in health_summary(back) == health_summary(result)


def test_old_and_todays_diagnose_documents_render_their_checks(tmp_path):
    import html
    import json
    from pathlib import Path

    from perfcore.analysis.command_results import DiagnoseResult
    from perfcore.analysis.migrate import migrate
    from perfcore.experiments.diagnose import diagnose_verdict
    from perfcore.report.html.parts import Body
    from perfcore.report.html import diagnose_sections

    def page(doc):
        body = Body("diagnose")
        diagnose_sections(doc, body)
        return html.unescape("".join(body.parts))

    # Written when the checks kept some figures beside their sentence: the figures read back (B held to the
    # bound it has always been held to), said again from them, and nothing stored is said.
    raw = json.loads((Path(__file__).parent / "report_docs" / "diagnose.json").read_text())
    old = DiagnoseResult.from_dict(migrate(raw))
    assert [(c.experiment, c.against, c.measured_speedup) for c in old.verdict.checks] == [
        (Experiment.SYNTHETIC, Against.PREDICTION, raw["verdict"]["checks"][0]["measured_speedup"]),
        (Experiment.WORKERS, Against.BOUND, raw["verdict"]["checks"][1]["measured_speedup"]),
    ]
    assert not any(c["sentence"] in page(old) for c in raw["verdict"]["checks"])
    assert all(check_text(c) in page(old) for c in old.verdict.checks)
    # Written by today's diagnose, through its JSON: the words made from the figures it kept.
    base = measured(DEMO_STEP, DEMO_BD, step_sem_ms=0.5)
    exps = [ExperimentRow(Experiment.BASELINE, "baseline", speedup=1.0, num_workers=0),
            ExperimentRow(Experiment.SYNTHETIC, "A: synthetic data", speedup=1.85, step_sem_ms=0.5,
                          breakdown_ms={"compute": 12.5}),
            ExperimentRow(Experiment.WORKERS, "B: num_workers=2", speedup=1.5, step_sem_ms=0.5, num_workers=2)]
    v, _ = diagnose_verdict(base, exps, WorkerProfile(cpu_to_wall=0.9))
    doc = DiagnoseResult.from_dict(json.loads(json.dumps({**old.to_dict(), "verdict": to_doc(v)})))
    a, b = doc.verdict.checks
    assert a.status == "confirmed" and b.against is Against.BOUND
    assert "sentence" not in json.dumps(doc.to_dict()["verdict"]["checks"])
    assert check_text(a) in page(doc) and check_text(b) in page(doc)
    assert check_text(a).startswith("synthetic data (no loading) measured 1.85x")


def test_sweep_knees_as_figures_outline_their_cells(tmp_path):
    from test_html import sweep_doc, write_stage

    from perfcore.analysis.command_results import SweepResult
    from perfcore.analysis.migrate import migrate
    from perfcore.report.words.runs import knee_text

    today = dict(sweep_doc(), knees=[{"batch_size": 8, "workers": 1, "samples_per_s": 311.0, "within": 0.05,
                                      "flat": [], "worse": [2]}])
    assert knee_text(today["knees"][0]) == "batch 8: throughput stops improving at 1 worker(s) (311 samples/s; 2 are " \
        "slower (cores shared with the loop))"
    (tmp_path / "b").mkdir()
    b = write_stage(tmp_path / "b", "sweep", SweepResult.from_dict(migrate(today))).read_text()
    assert b.count("cell knee") >= 4 and knee_text(today["knees"][0]) in b


def test_the_short_check_line_prints_the_band_its_status_was_judged_on():
    from perfcore.report.stage_text import _check_short

    v = decide(avoidable(DEMO_BD), DEMO_STEP)
    c = confirm(v, "load", 1.60, "synthetic data", noise_ms=4.0)
    lo, hi = c.agreement_band
    assert c.status.value == "confirmed" and lo <= 1.60 <= hi
    line = _check_short(c)
    assert line.endswith(f"measured 1.60x: confirmed (within {lo:.2f}-{hi:.2f}x)"), line


def test_the_short_bound_line_never_reads_past_the_bound_as_within_it():
    from perfcore.experiments.diagnose import workers_check
    from perfcore.report.stage_text import _check_short

    # The prediction's band reaches past its point (20 of 50 ms saved: 1.67x; up to 26 ms: 2.08x).
    first = Prediction("load", 50.0, 20.0, (14.0, 26.0))
    final = decide({"load": 20.0}, 50.0)
    seen = set()
    for speedup, sem in [(1.9, 1.0), (1.3, 1.0), (0.8, 1.0), (3.0, 0.1)]:
        c = workers_check(first, final, False, measured(50.0, {}, step_sem_ms=sem), _b(speedup, sem))
        line = _check_short(c)
        past = c.measured_speedup > c.predicted_speedup
        slower = c.change is Change.SLOWER
        from perfcore.report.words import speedups_words

        assert f"({speedups_words(c.measured_band)}, {c.change.value})" in line, line  # the word beside its band
        long = dataclasses.replace(c, name="B: num_workers=16 (baseline uses 0)")  # the widest name diagnose gives
        short = _check_short(long)
        assert len(short) <= 120 and c.change.value in short, short  # the band left out before the word
        assert ("within it" in line) == (not past and not c.above_bound and not slower), line
        assert ("past it, within noise" in line) == (past and not c.above_bound), line
        assert (" slower)" in line or "(slower)" in line) == ("workers do not help here" in line) == slower, line
        seen.add(line.rsplit(": ", 1)[1])
    assert seen == {"within it", "past it, within noise", "above that bound", "workers do not help here"}


def test_a_band_of_speedups_with_an_open_top_says_so():
    from perfcore.report.words import OPEN_TOP_X, speedups_words

    assert speedups_words([1.7, 1.95]) == "1.70-1.95x"
    assert speedups_words([1.16, None]) == "1.16x or more"  # nothing left at the top
    # A busy demo's agreement band reached 31.86x: a top past OPEN_TOP_X is said as open, not as a figure.
    assert speedups_words([1.16, 31.86]) == "1.16x or more" and speedups_words([1.16, OPEN_TOP_X]) == "1.16-10.00x"


def test_a_shortfall_the_experiments_own_compute_explains_is_said_with_it():
    # The quiet demo: 16.3 ms of loading predicted (1.98x), synthetic data saved 15.0 ms (1.84x, partly) while
    # its compute took 1.31 ms more a step (16.6 -> 17.9 ms): the measured cause of the gap, said beside it.
    from run_docs import confirm
    from perfcore.analysis.verdict import decide
    from perfcore.report.stage_text import _check_short

    step = 33.0
    v = decide({"load": 16.3}, step, share_band={"load": (15.8 / step, 16.8 / step)})
    grew = confirm(v, "load", step / 18.0, "synthetic data", compute_ms=(16.6, 17.91), noise_ms=0.9)
    assert grew.status == "partly" and compute_shortfall(grew) == pytest.approx(1.31)
    line = _check_short(grew)
    assert line.endswith("partly, its compute took 1.31 ms more a step") and "agreeing" not in line, line
    assert "compute itself took 1.31 ms more per step in that run (16.6 ms -> 17.9 ms), 100% of the shortfall" in (
        check_text(grew)
    )
    # The same shortfall with compute unchanged: no cause named, the agreement band kept.
    same = confirm(v, "load", step / 18.0, "synthetic data", compute_ms=(16.6, 16.6), noise_ms=0.9)
    assert compute_shortfall(same) is None and "(confirmed needs " in _check_short(same)
    assert "compute itself" not in check_text(same)
