"""The words of a verdict's check, made from its status and figures (report.check_words): the few
sentence tests; what a check decides is tested as statuses in test_verdict."""

from __future__ import annotations

import pytest

from perfcore.analysis.checks import CheckResult, confirm
from perfcore.analysis.verdict import avoidable, decide
from perfcore.report.check_words import check_long, check_text, compute_shortfall

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


def test_a_document_check_is_rendered_from_its_figures_or_kept_when_old():
    v = decide(avoidable(DEMO_BD), DEMO_STEP)
    c = confirm(v, "load", 1.80, "synthetic data")
    assert check_text(c.as_dict()) == check_long(c)
    old = {"experiment": "synthetic data", "status": "confirmed", "agrees": True, "sentence": "as it was written"}
    assert check_text(old) == "as it was written"
    assert check_text({"against": "bound", "sentence": "B measured 1.10x"}) == "B measured 1.10x"


def test_experiment_b_against_its_bound_in_words():
    from perfcore.experiments.diagnose import workers_check

    first = {"step_ms": 50.0, "avoidable_ms": {"load": 20.0}, "avoidable_band_ms": {}}
    slower = workers_check(first, first, False, {"step_sem_ms": 1.0}, {"name": "B", "speedup": 0.8, "step_sem_ms": 1.0})
    assert check_text(slower) == "B measured 0.80x (0.77-0.84x) of the 1.67x that removing all loading can give: " \
        "slower, so workers do not help here"
    above = workers_check(first, first, False, {"step_sem_ms": 0.1}, {"name": "B", "speedup": 3.0, "step_sem_ms": 0.1})
    assert above["above_bound"] and check_text(above).endswith("; above that bound: the machine changed between the "
                                                               "runs, not an effect of the workers")
    assert CheckResult.from_dict({"status": "bogus", "agrees": False, "reason": "??"}).reason is None


def test_what_loading_is_decided_as_a_kind_with_its_figures():
    from perfcore.experiments.diagnose import loading_cause
    from perfcore.report.check_words import loading_text

    c = {"name": "C: decoder torchvision", "decoder": "torchvision", "speedup": 1.4}
    assert loading_cause([c], {"cpu_to_wall": 0.9}, None) == {
        "kind": "decoder", "cause": "CPU decode", "decoder": "torchvision", "speedup": 1.4}
    assert loading_cause([], {"cpu_to_wall": 0.3}, 95.0)["kind"] == "crowded"
    io = loading_cause([], {"cpu_to_wall": 0.3}, 40.0)
    assert (io["kind"], io["cause"]) == ("io", "I/O") and loading_text(io).startswith("__getitem__ spends 70% ")
    assert loading_cause([], {}, None)["kind"] == "unprofiled"


def test_health_keeps_its_busy_check_as_figures():
    from perfcore.experiments.health import health_report
    from perfcore.report.health_words import health_summary, say

    bd = {"load": 0.5, "transfer": 0.0, "compute": 9.5, "comm": 0.0, "host": 0.0}
    row = {"busy_mean": 0.4, "busy_source": "gpu_util", "breakdown_ms": bd, "step_ms": 10.0, "device": "cuda",
           "steps": 50, "samples_per_s": 1.0, "busy_std": 0.0, "cpu_percent": 5.0, "busy_series": [],
           "busy_spacing_s": 0.1}
    result = health_report(row, "w", "perfcore diagnose w")
    assert "plain_summary" not in result.to_dict()  # facts; the words are made at the edge
    doc = say(result.to_dict())
    assert doc["healthy"] and doc["busy_check"] == {"threshold": 0.6, "decided": True, "small_work": True,
                                                    "forward_only": False}
    assert doc["plain_summary"] == health_summary(doc) and "the device's work is small" in doc["plain_summary"]


def test_old_and_todays_diagnose_documents_render_their_checks(tmp_path):
    import html
    import json
    from pathlib import Path

    from perfcore.experiments.diagnose import diagnose_verdict as _diagnose_verdict
    from perfcore.report.verdict_words import say_verdict

    def diagnose_verdict(*args, **kwargs):
        v, predicted = _diagnose_verdict(*args, **kwargs)
        return say_verdict(v), predicted
    from perfcore.report.html_parts import Body
    from perfcore.report.html_stages import diagnose_sections

    def page(doc):
        body = Body("diagnose")
        diagnose_sections(doc, body)
        return html.unescape("".join(body.parts))

    # Written before the checks kept their figures: each check keeps the sentence it was written with.
    old = json.loads((Path(__file__).parent / "report_docs" / "diagnose.json").read_text())
    assert all(c["sentence"] in page(old) for c in old["verdict"]["checks"])
    # Written by today's diagnose, through its JSON: the words made from the figures it kept.
    base = {"step_ms": DEMO_STEP, "breakdown_ms": DEMO_BD, "step_sem_ms": 0.5}
    exps = [{"name": "baseline", "speedup": 1.0, "num_workers": 0},
            {"name": "A: synthetic data", "speedup": 1.85, "step_sem_ms": 0.5, "breakdown_ms": {"compute": 12.5}},
            {"name": "B: num_workers=2", "speedup": 1.5, "step_sem_ms": 0.5, "num_workers": 2}]
    v, _ = diagnose_verdict(base, exps, {"cpu_to_wall": 0.9, "top": []}, on_gpu=False)
    doc = json.loads(json.dumps({**old, "verdict": v}))
    a, b = doc["verdict"]["checks"]
    assert "sentence" not in a and "sentence" not in b and a["status"] == "confirmed" and b["against"] == "bound"
    assert check_text(a) in page(doc) and check_text(b) in page(doc)
    assert check_text(a).startswith("synthetic data (no loading) measured 1.85x")


def test_sweep_knees_as_figures_and_as_old_text_outline_the_same_cells(tmp_path):
    from test_html import sweep_doc, write_stage

    from perfcore.report.experiments import knee_text

    old = sweep_doc()
    today = dict(old, knees=[{"batch_size": 8, "workers": 1, "samples_per_s": 311.0, "within": 0.05, "flat": [],
                              "worse": [2]}])
    assert knee_text(today["knees"][0]) == "batch 8: throughput stops improving at 1 worker(s) (311 samples/s; 2 are " \
        "slower (cores shared with the loop))"
    old = dict(old, knees=[knee_text(today["knees"][0])])
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = write_stage(tmp_path / "a", "sweep", old).read_text()
    b = write_stage(tmp_path / "b", "sweep", today).read_text()
    assert a.count("cell knee") == b.count("cell knee") >= 4 and knee_text(today["knees"][0]) in b


def test_the_short_check_line_prints_the_band_its_status_was_judged_on():
    from perfcore.report.experiments import _check_short

    v = decide(avoidable(DEMO_BD), DEMO_STEP)
    c = confirm(v, "load", 1.60, "synthetic data", noise_ms=4.0)
    lo, hi = c.agreement_band
    assert c.status.value == "confirmed" and lo <= 1.60 <= hi
    line = _check_short(c.as_dict())
    assert line.endswith(f"measured 1.60x: confirmed (agreeing: {lo:.2f}-{hi:.2f}x)"), line


def test_the_short_bound_line_never_reads_past_the_bound_as_within_it():
    from perfcore.experiments.diagnose import workers_check
    from perfcore.report.experiments import _check_short

    # The prediction's band reaches past its point (20 of 50 ms saved: 1.67x; up to 26 ms: 2.08x).
    first = {"step_ms": 50.0, "avoidable_ms": {"load": 20.0}, "avoidable_band_ms": {"load": [14.0, 26.0]}}
    seen = set()
    for speedup, sem in [(1.9, 1.0), (1.3, 1.0), (0.8, 1.0), (3.0, 0.1)]:
        c = workers_check(first, first, False, {"step_sem_ms": sem}, {"name": "B", "speedup": speedup, "step_sem_ms": sem})
        line = _check_short(c)
        past = c["measured_speedup"] > c["predicted_speedup"]
        slower = c["change"] == "slower"
        from perfcore.report.label_words import speedups_words

        assert f"({speedups_words(c['measured_band'])}, {c['change']})" in line, line  # the word beside its band
        long = dict(c, experiment="B: num_workers=16 (baseline uses 0)")  # the widest name diagnose gives
        short = _check_short(long)
        assert len(short) <= 120 and c["change"] in short, short  # the band left out before the word
        assert ("within it" in line) == (not past and not c["above_bound"] and not slower), line
        assert ("past it, within noise" in line) == (past and not c["above_bound"]), line
        assert (" slower)" in line or "(slower)" in line) == ("workers do not help here" in line) == slower, line
        seen.add(line.rsplit(": ", 1)[1])
    assert seen == {"within it", "past it, within noise", "above that bound, so not advised", "workers do not help here"}


def test_a_band_of_speedups_with_an_open_top_says_so():
    from perfcore.report.label_words import OPEN_TOP_X, speedups_words

    assert speedups_words([1.7, 1.95]) == "1.70-1.95x"
    assert speedups_words([1.16, None]) == "1.16x or more"  # nothing left at the top
    # A busy demo's agreement band reached 31.86x: a top past OPEN_TOP_X is said as open, not as a figure.
    assert speedups_words([1.16, 31.86]) == "1.16x or more" and speedups_words([1.16, OPEN_TOP_X]) == "1.16-10.00x"


def test_a_shortfall_the_experiments_own_compute_explains_is_said_with_it():
    # The quiet demo: 16.3 ms of loading predicted (1.98x), synthetic data saved 15.0 ms (1.84x, partly) while
    # its compute took 1.31 ms more a step (16.6 -> 17.9 ms): the measured cause of the gap, said beside it.
    from perfcore.analysis.checks import confirm
    from perfcore.analysis.verdict import decide
    from perfcore.report.experiments import _check_short

    step = 33.0
    v = decide({"load": 16.3}, step, share_band={"load": (15.8 / step, 16.8 / step)})
    grew = confirm(v, "load", step / 18.0, "synthetic data", compute_ms=(16.6, 17.91), noise_ms=0.9).as_dict()
    assert grew["status"] == "partly" and compute_shortfall(grew) == pytest.approx(1.31)
    line = _check_short(grew)
    assert line.endswith("partly, its compute took 1.31 ms more a step") and "agreeing" not in line, line
    assert "compute itself took 1.31 ms more per step in that run (16.6 ms -> 17.9 ms), 100% of the shortfall" in (
        check_text(grew)
    )
    # The same shortfall with compute unchanged: no cause named, the agreement band kept.
    same = confirm(v, "load", step / 18.0, "synthetic data", compute_ms=(16.6, 16.6), noise_ms=0.9).as_dict()
    assert compute_shortfall(same) is None and "(agreeing: " in _check_short(same)
    assert "compute itself" not in check_text(same)
