"""Shares with their uncertainty, on injected per-step timings: preempted steps set apart and reported,
data waits kept, an interval that straddles a tier called borderline (stably, across noisy runs), a
share clearly below a tier never called above it, and evaluation rows out of the training figures."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from perfcore.analysis.attribution import LABELS, summarize
from perfcore.analysis.uncertainty import robust_breakdown, steps_to_settle
from perfcore.report.terminal import outliers_sentence
from perfcore.report.words.verdict import verdict_long as said


def table(load, compute, host, *, warmup=0, evaluation=None):
    """A step table from per-step ms of each label (transfer and comm zero)."""
    n = len(compute)
    ms = {"load": np.asarray(load, float), "transfer": np.zeros(n), "compute": np.asarray(compute, float),
          "comm": np.zeros(n), "host": np.asarray(host, float)}
    cols = {"step": np.arange(n), "warmup": np.arange(n) < warmup}
    for lb in LABELS:
        cols[f"{lb}_ns"] = np.round(ms[lb] * 1e6).astype(np.int64)
    cols["wall_ns"] = sum(cols[f"{lb}_ns"] for lb in LABELS)
    cols["start_ns"] = np.r_[0, np.cumsum(cols["wall_ns"])[:-1]]
    df = pd.DataFrame(cols)
    df["wall_ms"] = df["wall_ns"] / 1e6
    for lb in LABELS:
        df[f"{lb}_ms"] = df[f"{lb}_ns"] / 1e6
    if evaluation is not None:
        df["evaluation"] = evaluation
    return df


def doc_of(df):
    """The run's facts as summarize measures them (it decides nothing)."""
    return summarize(df, on_gpu=False, backend="host", device="cpu")


def run_of(df):
    """The run decided as perfcore run decides it, once, on its facts."""
    from perfcore.analysis.advice import advise_run
    from perfcore.analysis.run_report import RunReport

    facts = doc_of(df)
    return RunReport.of(facts, advise_run(facts, zero_code=True))


def test_preempted_steps_are_set_apart_and_the_verdict_holds():
    # The manual-SGD language model: 13 ms steps (12 ms compute, 1 ms host); on a busy machine three
    # of 40 were preempted inside host code for ~400 ms each, so the mean step read 43 ms, 70% host.
    n = 40
    host = np.full(n, 1.0)
    host[[7, 19, 33]] = [380.0, 420.0, 400.0]
    df = table(np.zeros(n), np.full(n, 12.0), host)
    doc = doc_of(df)
    assert doc["breakdown_fraction"]["host"] > 0.6  # the plain mean is what the earlier verdict judged
    rb = doc["breakdown_robust"]
    assert rb["kept_steps"] == 37 and rb["outliers"]["steps"] == [7, 19, 33]
    assert rb["step_ms"] == pytest.approx(13.0) and rb["share"]["host"] == pytest.approx(1 / 13)
    assert rb["outliers"]["excess_share"]["host"] == pytest.approx(1.0)
    assert rb["outliers"]["excess_label"] == "host" and rb["outliers"]["median_step_ms"] == pytest.approx(13.0)
    assert "sentence" not in rb["outliers"] and "method" not in rb  # figures; the words at the edge
    from perfcore.analysis.codec import from_doc
    from perfcore.analysis.run_parts import Outliers

    assert "3 outlier steps set apart (392 ms to 432 ms against a median of 13.0 ms; 100% of their extra time " \
           "was host)" in outliers_sentence(from_doc(Outliers, rb["outliers"]))
    one = from_doc(Outliers, {**rb["outliers"], "count": 1, "wall_ms": {"min": 160.0, "max": 160.0, "mean": 160.0}})
    assert outliers_sentence(one).startswith("1 outlier step set apart (160 ms against a median")
    v = run_of(df).verdict
    assert v.bound == "compute" and v.healthy and v.outliers == 3
    assert "(3 outlier step(s) set apart)" in said(v)
    assert doc["step_time_ms"]["mean"] > 40 and doc["step_time_ms"]["robust"] == pytest.approx(13.0)
    json.dumps(doc, allow_nan=False)


def test_slow_steps_that_wait_for_data_are_the_loops_own_cost():
    # Every 10th step waits 300 ms for an epoch's workers to start: that is loading, never an outlier.
    n = 50
    load = np.full(n, 0.5)
    load[::10] = 300.0
    df = table(load, np.full(n, 20.0), np.full(n, 0.2))
    rb = doc_of(df)["breakdown_robust"]
    assert "outliers" not in rb and rb["kept_steps"] == n
    v = run_of(df).verdict
    assert v.bound == "load" and v.level.value == "critical"


def test_at_most_a_tenth_of_the_steps_is_set_apart():
    n = 40
    host = np.full(n, 1.0)
    host[::4] = 200.0  # a quarter of the steps: the loop's shape, not accidents
    rb = robust_breakdown(table(np.zeros(n), np.full(n, 12.0), host))
    assert rb["outliers"]["count"] == 4 and rb["kept_steps"] == 36


def _noisy_run(seed, load_ms, compute_ms=20.0, n=60, jitter=0.6):
    """Steps whose load varies (exponential-ish waits) around a mean share."""
    rng = np.random.default_rng(seed)
    load = rng.gamma(2.0, load_ms / 2.0, n)
    compute = compute_ms * (1 + 0.1 * rng.standard_normal(n)).clip(0.5)
    return table(load * jitter / jitter, compute, np.full(n, 0.1))


def test_a_share_on_the_tier_is_borderline_in_every_run_and_one_clearly_below_is_never_named():
    # Truth 10.1% (workers-hide script): five runs, five verdicts "borderline", none flipping.
    levels = []
    for seed in range(5):
        v = run_of(_noisy_run(seed, load_ms=2.25)).verdict
        levels.append(v.level.value)
        if v.level.value == "borderline":
            assert said(v).startswith("compute-bound, waiting for data near the 10% line: it costs")
            assert "would settle it" in said(v)
            assert v.healthy is None and v.bound == "load"
    assert levels == ["borderline"] * 5
    # Truth 3.7%: healthy in every run, never above the tier.
    for seed in range(5):
        v = run_of(_noisy_run(seed, load_ms=0.77)).verdict
        assert v.bound == "compute" and v.healthy, said(v)
    # Clearly above: named at its tier with its interval.
    v = run_of(_noisy_run(0, load_ms=8.0)).verdict
    assert v.bound == "load" and v.level.value == "critical" and "95% interval" in said(v)


def test_the_interval_says_how_many_steps_would_settle_it():
    assert steps_to_settle(60, 0.11, (0.08, 0.14), 0.10) == 540  # 3 points half-width, 1 point away: 9x
    assert steps_to_settle(60, 0.10, (0.08, 0.12), 0.10) is None


def test_evaluation_rows_are_out_of_the_training_figures():
    # A tiny MLP: 0.45 ms training steps, an evaluation pass of 40 ms every 10 steps.
    n = 60
    evaluation = np.zeros(n, dtype=bool)
    evaluation[9::10] = True
    compute = np.where(evaluation, 40.0, 0.4)
    df = table(np.full(n, 0.03), compute, np.full(n, 0.02), warmup=5, evaluation=evaluation)
    doc = doc_of(df)
    train = ~evaluation & (np.arange(n) >= 5)
    assert doc["steps"] == int(train.sum()) and doc["step_time_ms"]["mean"] == pytest.approx(0.45)
    assert doc["step_time_ms"]["p90"] == pytest.approx(0.45)
    ev = doc["evaluation"]
    assert ev["passes"] == 6 and ev["ms_per_pass"] == pytest.approx(40.05)
    assert ev["share_of_wall"] == pytest.approx(6 * 40.05 / (6 * 40.05 + train.sum() * 0.45))
    assert "sentence" not in ev and ev["total_ms"] == pytest.approx(6 * 40.05)
    from perfcore.analysis.findings import FindingKind

    run = run_of(df)
    assert run.verdict.healthy and doc["breakdown_ms"]["compute"] == pytest.approx(0.4)
    (rec,) = [f for f in run.findings if f.kind is FindingKind.EVALUATION]
    assert rec.figures["share_of_wall"] == pytest.approx(ev["share_of_wall"]) and rec.figures["evaluation"]["passes"] == 6


def test_a_robust_breakdown_of_other_rows_than_the_documents_is_ignored():
    # Evaluation rows taken out after the first summary: the document's figures cover 49 steps, the
    # robust breakdown left beside them 55, so the verdict keeps to the document's own figures.
    from perfcore.analysis.verdict import decide_run

    n = 60
    evaluation = np.zeros(n, dtype=bool)
    evaluation[9::10] = True
    load = np.where(evaluation, 30.0, 0.03)
    with_eval = doc_of(table(load, np.where(evaluation, 10.0, 0.4), np.full(n, 0.02), warmup=5))
    training = doc_of(table(load, np.where(evaluation, 10.0, 0.4), np.full(n, 0.02), warmup=5,
                            evaluation=evaluation))
    mixed = {**training, "breakdown_robust": with_eval["breakdown_robust"]}
    assert with_eval["breakdown_robust"]["steps"] == 55 and training["steps"] == 49
    assert decide_run(with_eval).bound == "load"
    assert decide_run(mixed) == decide_run({k: v for k, v in training.items() if k != "breakdown_robust"})


def test_an_interval_across_both_tiers_is_borderline_at_the_first():
    from perfcore.analysis.verdict import decide

    v = decide({"load": 15.0}, 100.0, share_band={"load": (0.05, 0.25)}, steps=20)
    assert v.level.value == "borderline" and v.bound == "load" and v.healthy is None
    assert "near the 10% line" in said(v)
    # Surely past the first tier, straddling the second: named at warn, borderline major.
    w = decide({"load": 19.0}, 100.0, share_band={"load": (0.15, 0.23)}, steps=20)
    assert w.level.value == "warn" and "Near the 20% line, so said as moderate in every run" in said(w)
    # Without an interval the point estimate decides, as before.
    assert decide({"load": 15.0}, 100.0).level.value == "warn"


def test_two_runs_either_side_of_a_tier_are_said_the_same_way():
    # Lightning Fabric's script run twice: load 9.5% (interval 8.7-9.9%, below the line) said "compute-bound
    # (healthy)", then 10% (9.4-10.6%) "input-bound (borderline)". Near a line both runs read alike, at
    # either tier; a share clearly past it is named as before.
    from perfcore.analysis.verdict import decide
    from perfcore.report.words.verdict import verdict_short

    def short(ms, band):
        return verdict_short(decide({"load": ms}, 100.0, share_band={"load": band}, steps=200))

    once, again = short(9.5, (0.087, 0.099)), short(10.0, (0.094, 0.106))
    assert once.startswith("compute-bound; waiting for data 9.5% of a 100 ms step"), once
    assert again.startswith("compute-bound; waiting for data 10% of a 100 ms step"), again
    assert all("near the 10% line" in x and "healthy" not in x and "input-bound" not in x for x in (once, again))
    below, above = short(19.4, (0.185, 0.199)), short(20.6, (0.201, 0.211))
    assert "input-bound (moderate)" in below and "input-bound (moderate)" in above, (below, above)
    assert "near the 20% line" in below and "near the 20% line" in above
    assert "(major)" in short(26.0, (0.24, 0.28)) and "healthy" in short(5.0, (0.04, 0.06))
