"""Diagnose's advice follows what its experiments measured, and its report reads on its own: the try
lines, the busy flag, the library frame in __getitem__'s line, and the command's help and streams."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
from run_docs import exp_rows

from perfcore.analysis.checks import Against, Check, Experiment
from perfcore.analysis.command_results import DiagnoseResult, ProfileRow, WorkerProfile
from perfcore.analysis.findings import Finding, FindingKind
from perfcore.analysis.results import UNDECIDED, Gain, Level
from perfcore.analysis.status import Agreement, Change
from perfcore.analysis.units import fmt_x
from perfcore.experiments.diagnose import MATERIAL_X, measured_first
from perfcore.experiments.measurement import Measurement, Settings
from perfcore.report.words.advice import text_of
from perfcore.report.words import readable_frame
from perfcore.report.stage_text import busy_note, render_diagnose_brief
from perfcore.report.words.advice import WIDTH

# The demo's diagnose as a new user saw it: B (two workers) measured 2.23x, C (the other decoder) 1.08x,
# while the advice was "cheaper batches (decode_jpeg ...): up to 2.25x".
CHEAPER = Finding(
    FindingKind.CHEAPER_BATCHES,
    level=Level.CRITICAL,
    cause="load",
    figures={"decode": "pil"},
    gain=Gain(saved_ms=465.0, step_after_ms=372.0, speedup=2.25, band=(2.05, 2.49)),
)
THREADS = Finding(FindingKind.SET_NUM_THREADS, cause="threads", figures={"threads_fit": 1})
B_CHECK = Check(
    label="load",
    experiment=Experiment.WORKERS,
    name="B: num_workers=2 (baseline uses 0)",
    against=Against.BOUND,
    status=Agreement.BOUND,
    change=Change.FASTER,
    above_bound=False,
    num_workers=2,
    measured_speedup=2.23,
    measured_band=(2.0, 2.5),
    predicted_speedup=2.25,
)


def _rows(c_speedup=1.08, busy=None):
    rows = [
        {"name": "baseline", "step_ms": 837.0, "samples_per_s": 19.0, "speedup": 1.0, "step_sem_ms": 98.0},
        {"name": "A: synthetic data", "step_ms": 122.0, "samples_per_s": 131.0, "speedup": 6.86, "step_sem_ms": 12.0},
        {"name": B_CHECK.name, "step_ms": 375.0, "samples_per_s": 43.0, "speedup": 2.23, "step_sem_ms": 59.0},
        {"name": "C: decoder torchvision", "step_ms": 837.0 / c_speedup, "samples_per_s": 21.0, "speedup": c_speedup},
    ]
    for r, f in zip(rows, busy or []):
        if f is not None:
            r["interference"] = {"others_cores": f, "cores": 2, "material": f >= 0.5}
    return rows


def _base(step_ms: float, steps: int, step_sem_ms: float, **breakdown_ms: float) -> Measurement:
    """A CPU baseline with no workers: its step, measured steps, spread and breakdown."""
    bd = {"load": 0.0, "transfer": 0.0, "compute": 0.0, "comm": 0.0, "host": 0.0, **breakdown_ms}
    return Measurement("cpu", steps, step_ms, Settings(num_workers=0), step_sem_ms, cpu_percent=50.0, breakdown_ms=bd)


# A CPU run whose loading is 60% of the step, and experiment A measuring it without loading.
CPU_BASE = _base(1000.0, 20, 5.0, load=600.0, compute=400.0)


def _cpu_rows():
    return [
        {"name": "baseline", "speedup": 1.0, "step_sem_ms": 5.0, "num_workers": 0},
        {"name": "A: synthetic data", "speedup": 2.5, "step_sem_ms": 5.0, "breakdown_ms": {"compute": 400.0}},
    ]


def _verdict(*checks):
    """A verdict (its causes beside the point here) with experiment B's check of it."""
    return dataclasses.replace(UNDECIDED, checks=tuple(checks))


def _diagnose(rows, verdict=None, findings=None, workload="demo", **more) -> DiagnoseResult:
    """diagnose's result of these rows, as the report reads it."""
    return DiagnoseResult(
        workload, "cpu", tuple(exp_rows(*rows)), verdict or _verdict(),
        findings=tuple(findings) if findings is not None else None, **more,
    )  # fmt: skip


def _first(findings, verdict, rows):
    return measured_first(tuple(findings), verdict, exp_rows(*rows))


def test_a_measured_workers_gain_leads_and_an_immaterial_decoder_says_its_measured_figure():
    recs = _first([CHEAPER, THREADS], _verdict(B_CHECK), _rows())
    assert [r.kind for r in recs] == [
        FindingKind.WORKERS_MEASURED,
        FindingKind.CHEAPER_BATCHES,
        FindingKind.SET_NUM_THREADS,
    ]
    assert recs[0].change == {"num_workers": 2} and recs[0].measured(Against.ADVICE).measured_speedup == 2.23
    c = recs[1].measured(Against.ADVICE)
    assert (c.experiment, c.name, c.measured_speedup, c.material, c.change) == (
        Experiment.DECODER,
        "C: decoder torchvision",
        1.08,
        False,
        Change.FASTER,
    )
    assert CHEAPER.checks == ()  # the advice handed in is not changed
    doc = _diagnose(_rows(), _verdict(B_CHECK), recs)
    tries = [ln for ln in render_diagnose_brief(doc).splitlines() if ln.startswith("try:")]
    assert "num_workers=2" in tries[0] and "up to" not in tries[0], tries
    assert tries[0].endswith(": measured 2.23x (2.00-2.50x) (B: num_workers=2 (baseline uses 0))"), tries
    # C's 1.08x (no spread: below MATERIAL_X) is no gain above 1x: the decoder is not named, and the gain
    # offered is what A measured with no loading at all, never the model's 2.25x.
    assert "decode_jpeg" not in tries[1] and "2.25" not in tries[1], tries
    assert tries[1].endswith(": up to 6.86x (A, measured with no loading)"), tries


def test_advice_no_experiment_measured_keeps_its_bound_and_order():
    slower = dataclasses.replace(B_CHECK, change=Change.SLOWER, measured_speedup=0.82)
    no_c = [r for r in _rows() if not r["name"].startswith("C:")]
    no_c[1] = {**no_c[1], "speedup": 3.0}  # A above the prediction: no ceiling either
    recs = _first([CHEAPER, THREADS], _verdict(slower), no_c)
    assert [r.kind for r in recs] == [FindingKind.CHEAPER_BATCHES, FindingKind.SET_NUM_THREADS]
    # A measured above the prediction: the measurement outranks the model.
    (ceiling,) = recs[0].checks
    assert ceiling.against is Against.CEILING and recs[0].offered.speedup == 3.0
    # A measurement outranks the model: B's band above 1x is advised with its figure even above what removing
    # all loading can give (the newcomer's CNN: 1.69x measured, 1.09x possible), and never where its band
    # reaches 1x, whatever its point.
    for b in (
        dataclasses.replace(B_CHECK, status=Agreement.INCONCLUSIVE),
        dataclasses.replace(B_CHECK, above_bound=True),
    ):
        lead = _first([CHEAPER], _verdict(b), _rows(c_speedup=1.4))[0]
        assert lead.kind is FindingKind.WORKERS_MEASURED and lead.offered.speedup == 2.23
    for band in ((0.95, 1.9), (1.0, 3.0)):
        straddles = dataclasses.replace(B_CHECK, measured_band=band, change=Change.WITHIN_NOISE)
        assert _first([CHEAPER], _verdict(straddles), _rows(c_speedup=1.4))[0].kind is FindingKind.CHEAPER_BATCHES


@pytest.mark.parametrize("c_speedup", [1.08, 1.20, 1.4, 2.0])
def test_a_decoder_change_quotes_what_experiment_c_measured_never_the_prediction(c_speedup):
    rows = _rows(c_speedup=c_speedup)
    rows[3]["step_sem_ms"] = 40.0  # C's spread: its band comes from both runs' noise
    slower = dataclasses.replace(B_CHECK, change=Change.SLOWER, measured_speedup=0.9)
    (rec,) = _first([CHEAPER], _verdict(slower), rows)
    m = rec.measured(Against.ADVICE)
    assert m.measured_speedup == pytest.approx(c_speedup) and m.material is (c_speedup >= MATERIAL_X)
    # both quoted, with their band
    assert m.change is (Change.FASTER if c_speedup > 1.3 else Change.WITHIN_NOISE)
    lo, hi = m.measured_band
    assert lo < c_speedup < hi  # a band around the measured figure, from the two runs' noise
    (line,) = [
        ln for ln in render_diagnose_brief(_diagnose(rows, _verdict(slower), [rec])).splitlines() if "try:" in ln
    ]
    assert "2.25" not in line and len(line) <= WIDTH, line  # the measurement outranks the prediction
    if lo > 1.0:  # C's band lies above 1x: its own figure is offered
        assert rec.offered.speedup == pytest.approx(c_speedup) and m.above_1x
        assert f"measured {fmt_x(c_speedup)}" in line and "up to" not in line, line
        # The long words say the same figure (the HTML and --explain): measured, never the prediction.
        assert f"gave {fmt_x(c_speedup)}" in text_of(dataclasses.replace(rec, figures={"plan": True}))
    else:  # within the noise around 1x: no gain of C's, and no decoder named; A's ceiling instead
        assert not m.above_1x and rec.offered.speedup == pytest.approx(6.86)
        assert "decode_jpeg" not in line and line.endswith("up to 6.86x (A, measured with no loading)"), line


def test_loading_advice_no_experiment_measured_is_bounded_by_what_synthetic_data_measured():
    # The trial's demo: A measured 1.60x with no loading, C not run, the decoder advice said "up to 2.11x".
    rows = [r for r in _rows() if not r["name"].startswith("C:")]
    rows[1] = {**rows[1], "speedup": 1.60}
    cheaper = dataclasses.replace(CHEAPER, gain=dataclasses.replace(CHEAPER.gain, speedup=2.11, band=(1.88, 2.38)))
    slower = dataclasses.replace(B_CHECK, change=Change.SLOWER, measured_speedup=0.9)
    (rec,) = _first([cheaper], _verdict(slower), rows)
    ceiling = rec.measured(Against.CEILING)
    assert (ceiling.measured_speedup, ceiling.name, ceiling.experiment) == (
        1.60,
        "A: synthetic data",
        Experiment.SYNTHETIC,
    )
    (line,) = [
        ln
        for ln in render_diagnose_brief(_diagnose(rows, _verdict(slower), [rec])).splitlines()
        if ln.startswith("try:")
    ]
    assert "up to 1.60x (" in line and "measured with" in line and len(line) <= WIDTH, line
    assert "2.11" not in line and len(line) <= 120
    # A measured above the prediction: the measurement outranks the model.
    rows[1] = {**rows[1], "speedup": 2.5}
    assert _first([cheaper], _verdict(slower), rows)[0].offered.speedup == 2.5
    # A at or below 1x (a busy machine, compute slower in that run): no gain offered, the model's neither.
    rows[1] = {**rows[1], "speedup": 0.73, "step_sem_ms": 12.0}
    (rec,) = _first([cheaper], _verdict(slower), rows)
    assert rec.measured(Against.CEILING).measured_speedup == 0.73 and rec.offered is None
    (line,) = [
        ln
        for ln in render_diagnose_brief(_diagnose(rows, _verdict(slower), [rec])).splitlines()
        if ln.startswith("try:")
    ]
    assert "up to" not in line and "faster" not in line and "0.73" not in line, line


def test_a_busy_machine_during_any_experiment_is_flagged_in_the_header():
    assert busy_note(_diagnose(_rows(busy=[0.1, 0.2, 0.1]))) == ""
    assert busy_note(_diagnose(_rows())) == ""  # not measured: nothing claimed
    note = busy_note(_diagnose(_rows(busy=[1.4, 0.2, 0.9])))
    assert note == "; BUSY: others used up to 1.4 of 2 cores (baseline, B); the speedups are uncertain"
    doc = _diagnose(_rows(busy=[1.4, 1.2, 0.9, 0.7]), workload="w")
    head = render_diagnose_brief(doc).splitlines()[0]
    assert head == "diagnose w on cpu; BUSY: others used up to 1.4 of 2 cores (all runs); the speedups are uncertain"


def test_library_frames_read_as_class_and_method():
    assert readable_frame("<method 'float' of 'torch._C.TensorBase' objects>") == "Tensor.float (torch)"
    assert readable_frame("<method 'read' of '_io.BufferedReader' objects>") == "BufferedReader.read (io)"
    assert readable_frame("<built-in method torch.stack>") == "torch.stack (built-in)"
    assert readable_frame("__getitem__ (data.py:42)") == "__getitem__ (data.py:42)"
    profile = WorkerProfile(
        ms_per_item=32.0, cpu_to_wall=0.46, top=(ProfileRow("<method 'float' of 'torch._C.TensorBase' objects>"),)
    )
    doc = _diagnose(_rows(), workload="w", worker_profile=profile)
    line = next(ln for ln in render_diagnose_brief(doc).splitlines() if "__getitem__" in ln)
    assert line.endswith("; top: Tensor.float (torch)") and "<" not in line, line


def test_diagnose_help_explains_target_without_importing_torch():
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom perfcore.cli.triage import diagnose_cmd\n"
        "r = CliRunner().invoke(diagnose_cmd, ['--help'])\nprint(r.output)\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "TARGET, what to measure" in p.stdout and "-- python train.py" in p.stdout
    assert "FILE.py:FUNCTION" in p.stdout and "stderr" in p.stdout


def test_the_verdicts_cpu_bound_sentence_names_the_library_frame_readably():
    from perfcore.experiments.diagnose import diagnose_verdict
    from perfcore.report.words.verdict import verdict_long

    prof = WorkerProfile(cpu_to_wall=0.9, top=(ProfileRow("<method 'float' of 'torch._C.TensorBase' objects>"),))
    v, _ = diagnose_verdict(CPU_BASE, exp_rows(*_cpu_rows()), prof)
    assert v.bound == "load" and "(top: Tensor.float (torch))" in verdict_long(v, lead=False), verdict_long(v, lead=False)


def test_the_verdict_is_decided_as_facts_and_said_once_from_them():
    from perfcore.experiments.diagnose import diagnose_verdict
    from perfcore.report.words import LOADING_CAUSE, check_text
    from perfcore.report.words.verdict import verdict_long

    rows = _cpu_rows() + [
        {"name": "B: num_workers=2 (baseline uses 0)", "speedup": 1.2, "step_sem_ms": 5.0, "num_workers": 2}
    ]
    v, _ = diagnose_verdict(CPU_BASE, exp_rows(*rows), WorkerProfile(cpu_to_wall=0.9))
    # The analysis keeps its findings as facts: the checks and the loading cause, not their words.
    assert [c.status for c in v.checks][0] is Agreement.CONFIRMED
    assert v.loading.kind == "cpu" and LOADING_CAUSE[v.loading.kind] == "CPU decode/augment"
    said = verdict_long(v, lead=False)
    assert said.startswith("input-bound (CPU decode/augment):")
    for c in v.checks:
        t = check_text(c)
        assert t[0].upper() + t[1:] in said
    # The measured workers advice is facts too: its words come from them.
    recs = _first([CHEAPER], _verdict(B_CHECK), _rows())
    assert recs[0].figures["speedup"] == 2.23
    assert text_of(recs[0]).startswith("Set num_workers=2 in the DataLoader") and "2.23x faster" in text_of(recs[0])


def test_a_decoder_experiment_c_measured_slower_is_not_advised():
    # A busy demo: the other decoder measured 0.69x beyond its noise, and the try line still said "decode_jpeg".
    rows = _rows(c_speedup=0.69)
    rows[3]["step_sem_ms"] = 20.0
    slower = dataclasses.replace(B_CHECK, change=Change.SLOWER, measured_speedup=0.9)
    (rec,) = _first([CHEAPER], _verdict(slower), rows)
    c = rec.measured(Against.ADVICE)
    assert c.below_1x and c.measured_speedup == pytest.approx(0.69) and c.measured_band[1] < 1.0
    assert rec.offered.speedup == 6.86  # nothing below 1x is offered: what A measured without loading is
    (line,) = [
        ln for ln in render_diagnose_brief(_diagnose(rows, _verdict(slower), [rec])).splitlines() if "try:" in ln
    ]
    assert "decode_jpeg" not in line and "0.69" not in line and "cheaper batches" in line, line
    assert "Not the decoder" in text_of(dataclasses.replace(rec, figures={"plan": True}))
    # Below 1x inside its noise C is no gain: not quoted as the change's gain (the demo's try line read
    # "decode_jpeg ...: measured 0.71x"), and said as "no faster", not "slower".
    noisy = _rows(c_speedup=0.95)
    noisy[3]["step_sem_ms"] = 200.0
    (rec,) = _first([CHEAPER], _verdict(slower), noisy)
    c = rec.measured(Against.ADVICE)
    assert c.below_1x and c.change is Change.WITHIN_NOISE and rec.offered.speedup == 6.86
    (line,) = [
        ln for ln in render_diagnose_brief(_diagnose(noisy, _verdict(slower), [rec])).splitlines() if "try:" in ln
    ]
    assert "decode_jpeg" not in line and "0.95" not in line and "up to 6.86x (A" in line, line
    assert "made steps no faster (0.95x)" in text_of(dataclasses.replace(rec, figures={"plan": True}))


def test_the_newcomers_cnn_is_advised_as_measured_and_what_else_changed_is_said():
    # The newcomer's CNN: the loader in the training process, loading 9% of a 100 ms step (at most 1.10x
    # without it); B (two workers) measured 1.69x and A (synthetic data) 2.38x, compute faster in both once
    # decoding left the process. Before: "at most 1.10x possible: above that bound, so not advised" and
    # "inconclusive, compute drifted between the runs", with no try line on the workers.
    from perfcore.experiments.diagnose import diagnose_verdict

    base = _base(100.0, 30, 1.0, load=9.0, compute=91.0)
    rows = [
        {"name": "baseline", "speedup": 1.0, "step_ms": 100.0, "step_sem_ms": 1.0, "num_workers": 0,
         "samples_per_s": 320.0, "breakdown_ms": dict(base.breakdown_ms)},
        {"name": "A: synthetic data", "speedup": 2.38, "step_ms": 42.0, "step_sem_ms": 1.0,
         "samples_per_s": 760.0, "breakdown_ms": {"compute": 42.0}},
        {"name": "B: num_workers=2 (baseline uses 0)", "speedup": 1.69, "step_ms": 59.2, "step_sem_ms": 1.5,
         "num_workers": 2, "samples_per_s": 540.0, "breakdown_ms": {"compute": 55.0, "load": 4.0}},
    ]  # fmt: skip
    v, _ = diagnose_verdict(base, exp_rows(*rows), WorkerProfile(cpu_to_wall=0.9))
    a, b = v.checks
    assert b.above_bound and b.above_1x and b.compute_ms == (91.0, 55.0)
    recs = measured_first((CHEAPER,), v, exp_rows(*rows))
    assert recs[0].kind is FindingKind.WORKERS_MEASURED and recs[0].offered.speedup == pytest.approx(1.69)
    brief = render_diagnose_brief(_diagnose(rows, v, recs)).splitlines()
    tries = [ln for ln in brief if ln.startswith("try:")]
    assert tries[0].startswith("try: set num_workers=2: measured 1.69x"), tries
    assert "not advised" not in "\n".join(brief)
    (bline,) = [ln for ln in brief if ln.startswith("  B: ") and ": measured" in ln]
    assert bline.endswith("above that bound; compute per step 91.0 ms -> 55.0 ms"), bline
    # A's drift is said as what it measured, not guessed.
    (aline,) = [ln for ln in brief if ln.startswith("  synthetic data")]
    assert "compute drifted" not in aline and aline.endswith("; compute per step 91.0 ms -> 42.0 ms"), aline
    assert all(len(ln) <= WIDTH for ln in brief), "\n".join(brief)


def test_a_rerun_never_gives_the_opposite_advice_on_workers():
    # The same B measured three ways by noise: above 1x it is advised with its figure, across 1x it is
    # neither advised nor called unhelpful (within noise), and only below 1x do workers "not help".
    def said(x, band, change):
        b = dataclasses.replace(B_CHECK, measured_speedup=x, measured_band=band, change=change)
        lead = _first([CHEAPER], _verdict(b), _rows())[0]
        line = next(
            ln
            for ln in render_diagnose_brief(_diagnose(_rows(), _verdict(b), [lead])).splitlines()
            if ln.startswith("  B:") and ": measured" in ln
        )
        return lead.kind, line

    up, up_line = said(1.55, (1.2, 2.0), Change.FASTER)
    mid, mid_line = said(1.2, (0.9, 1.7), Change.WITHIN_NOISE)
    assert up is FindingKind.WORKERS_MEASURED and mid is FindingKind.CHEAPER_BATCHES
    assert "do not help" not in up_line + mid_line and "within noise" in mid_line
