"""Every rendered comparison agrees with its number: the word (faster, slower, within noise) is chosen
from the status decided beside the figure, over random measurements and noise bands."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from run_docs import exp_rows, measured, typed_run

from perfcore.analysis.loader_plan import PlanEvidence, loader_plan
from perfcore.analysis.advice_evidence import WorkerTrial
from perfcore.analysis.run_context import Loader
from run_docs import confirm
from perfcore.analysis.checks import Prediction
from perfcore.analysis.compare import compare_runs
from perfcore.analysis.gain import judge, measured_gain
from perfcore.analysis.status import Change, change_of
from perfcore.analysis.verdict import decide
from perfcore.experiments.diagnose import workers_check
from perfcore.report.words import check_long, check_text
from perfcore.report.words.verdict import step_words
from perfcore.report.words.findings import plan_words

speedups = st.floats(min_value=0.05, max_value=20.0, allow_nan=False)
noises = st.one_of(st.none(), st.floats(min_value=0.0, max_value=1.0, allow_nan=False))


@given(speedups, noises)
def test_change_agrees_with_the_ratio(x, noise):
    c = change_of(x, noise)
    assert (c is Change.FASTER) == (x > 1 + (noise or 0.0))
    if c is Change.SLOWER:
        assert x < 1
    if c is Change.WITHIN_NOISE:
        assert 1 / (1 + (noise or 0.0)) <= x <= 1 + (noise or 0.0)


@settings(max_examples=300, deadline=None)
@given(speedups, noises, st.integers(0, 4), st.integers(0, 8))
def test_a_workers_trial_is_said_as_measured(x, noise, n, w):
    ld = Loader(num_workers=n, worker_batch_ms=40.0, site="train.py:12")
    trial = WorkerTrial(w, x, noise_share=noise, experiment="diagnose B")
    plan = loader_plan(ld, PlanEvidence(step_ms=60.0, load_ms=30.0, per_step=1, cpu_count=4, on_gpu=False, trials=[trial]))
    if plan is None or plan.trial is None:
        return
    words = plan_words(plan)[0]  # the renderer's words, chosen from the trial's status
    assert f"at {x:.2f}x" in words
    if "made steps slower" in words:
        assert x < 1 and plan.trial["change"] == "slower"
    if "made steps faster" in words:
        assert x > 1 and plan.trial["change"] == "faster"
    if "no faster beyond the runs' noise" in words:
        assert plan.trial["change"] == "within noise" and x <= 1 + (noise or 0.0)


@settings(max_examples=300, deadline=None)
@given(speedups, st.floats(min_value=0.1, max_value=0.9), st.one_of(st.none(), st.floats(0.01, 30.0)))
def test_diagnose_b_is_said_as_measured(x, load_share, sem):
    step = 50.0
    first = Prediction("load", step, load_share * step)
    (row,) = exp_rows({"name": "B: num_workers=2", "speedup": x, "step_sem_ms": sem, "num_workers": 2})
    c = workers_check(first, decide({"load": load_share * step}, step), False, measured(step, {}, step_sem_ms=sem), row)
    words = check_text(c)
    assert f"measured {x:.2f}x" in words
    if ": slower" in words:
        assert x < 1 and c.change == "slower"
    if "within the runs' noise" in words and "above that bound" not in words:
        assert c.change == "within noise"


@settings(max_examples=300, deadline=None)
@given(speedups, st.floats(min_value=0.0, max_value=0.9), st.one_of(st.none(), st.floats(0.0, 20.0)))
def test_a_check_is_said_as_measured(x, predicted_share, noise):
    step = 40.0
    p = predicted_share * step
    c = confirm(decide({"load": p}, step), "load", x, "synthetic data", noise_ms=noise)
    j = judge(
        {"saved_ms": p, "speedup": step / (step - p), "band": None},
        measured_gain(step, step / x, noise_ms=noise),
        step_ms=step,
        experiment="synthetic data",
    )
    assert c.status.value == j["status"]  # the check is gain.judge's status on the same figures
    words = check_long(c)
    if "got" in words and "slower" in words:
        assert x < 1
    if "saves" in words:
        assert x >= 1
    assert words.split(": ")[1].startswith(j["status"])


def test_one_number_formatter_for_terminal_and_html():
    from perfcore.analysis.units import fmt_ms
    from perfcore.report.html.parts import dur

    for v in (0.0, 0.0004, 0.05, 0.5, 1.0, 12.345, 150.0, 999.4, 1500.0, 72_000.0):
        assert dur(v) == fmt_ms(v), v
    assert dur(0.5) == "500 \u00b5s" and dur(1500) == "1.50 s" and dur(None) == "-" and dur(float("nan")) == "-"


@settings(max_examples=200, deadline=None)
@given(
    st.floats(min_value=1.0, max_value=500.0),
    st.floats(min_value=1.0, max_value=500.0),
    st.one_of(st.none(), st.floats(min_value=0.0, max_value=50.0)),
)
def test_compare_says_the_step_change_as_measured(a_ms, b_ms, sem):
    bd = {"load": 0.0, "transfer": 0.0, "compute": 1.0, "comm": 0.0, "host": 0.0}
    doc = compare_runs(typed_run(a_ms, bd, sem=sem), typed_run(b_ms, bd, sem=sem))
    words = step_words(doc)
    noise = (doc.noise_ms or 0.0) / a_ms
    assert ("B faster" in words) == (a_ms / b_ms > 1 + noise) == (doc.change == "faster")
    assert ("B slower" in words) == (a_ms / b_ms < 1 / (1 + noise)) == (doc.change == "slower")
    assert f"speedup {a_ms / b_ms:.2f}x" in words


def test_compare_quotes_each_run_as_its_own_header_does():
    """A run whose outlier steps were set apart reads "mean step 167 ms less outliers" in its header: compare
    says the same step for it (the plain mean, 177 ms with them, read as another figure)."""
    from perfcore.report.terminal import brief_table

    def run(mean_ms, steady_ms, sem):
        bd = {"load": 0.0, "transfer": 0.0, "compute": mean_ms * 0.9, "comm": 0.0, "host": mean_ms * 0.1}
        ms = {"load": 0.0, "transfer": 0.0, "compute": steady_ms * 0.9, "comm": 0.0, "host": steady_ms * 0.1}
        robust = {"step_ms": steady_ms, "ms": ms, "steps": 40, "kept_steps": 37, "step_sem_ms": sem,
                  "outliers": {"count": 3, "steps": [4, 9, 30]}}
        return typed_run(mean_ms, bd, sem=sem * 5, breakdown_robust=robust)

    a, b = run(254.0, 250.0, 1.0), run(177.0, 167.0, 1.0)
    c = compare_runs(a, b)
    for side, r in ((c.a, a), (c.b, b)):
        assert f"mean step {side.step_ms:.0f} ms less outliers" in brief_table(r)[0]
    assert (c.a.step_ms, c.b.step_ms) == (250.0, 167.0) and c.speedup == 250.0 / 167.0
    assert c.labels["compute"].a_ms == 225.0 and c.noise_ms is not None and c.noise_ms < 5.0
    assert f"speedup {250 / 167:.2f}x" in step_words(c)


def test_compare_takes_the_noise_of_the_statistic_it_quotes():
    """Each side's standard error is the one of the step it quotes: the steady step's where the trimmed
    breakdown was used, the mean's where it was not, even where the two steps happen to be equal."""
    bd = {"load": 0.0, "transfer": 0.0, "compute": 90.0, "comm": 0.0, "host": 10.0}
    robust = {"step_ms": 100.0, "ms": bd, "steps": 40, "kept_steps": 37, "step_sem_ms": 0.5,
              "outliers": {"count": 3, "steps": [4, 9, 30]}}
    used = typed_run(110.0, bd, sem=4.0, breakdown_robust=robust, steps=40)
    # Computed over other steps than the run's 50 (evaluation rows taken out after it): not used, though
    # its step equals the mean to the last bit.
    other = typed_run(100.0, bd, sem=4.0, breakdown_robust=robust, steps=50)
    c = compare_runs(used, other)
    assert (c.a.step_ms, c.a.step_sem_ms) == (100.0, 0.5)
    assert (c.b.step_ms, c.b.step_sem_ms) == (100.0, 4.0)

def test_b_that_took_the_workers_away_and_ran_slower_says_they_help():
    """diagnose's B sets num_workers=0 where the baseline has workers: slower without them means the workers
    help ("workers do not help here" said the opposite of what was measured); where B added workers to a
    baseline of 0, slower means those do not."""
    from perfcore.analysis.checks import Against, Agreement, Check, Experiment
    from perfcore.report.stage_text import _check_short
    from perfcore.report.words import bound_long

    def b(n):
        return Check(label="load", experiment=Experiment.WORKERS, name=f"B: num_workers={n}", against=Against.BOUND,
                     status=Agreement.BOUND, change=Change.SLOWER, step_ms=171.0, predicted_speedup=4.7,
                     measured_speedup=0.73, measured_band=(0.6, 0.93), measured_noise_ms=5.0, num_workers=n,
                     bound_ms=135.0, measured_saved_ms=-63.0)

    took, added = b(0), b(2)
    for said in (_check_short(took), bound_long(took)):
        assert "the workers help here" in said and "do not help" not in said
    for said in (_check_short(added), bound_long(added)):
        assert "workers do not help here" in said
