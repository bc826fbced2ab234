"""diagnose's and the demo's one result: diagnose.json and demo.json are its serialisation, read back
through the one reader, which checks what the renderers read; old documents still open."""

from __future__ import annotations

import dataclasses
import json

import pytest
from run_docs import measured, typed_run

from perfcore.analysis.checks import Experiment
from perfcore.analysis.codec import BadDocument as BadResult
from perfcore.analysis.command_results import DemoResult, DiagnoseResult, ExperimentRow, HealthResult
from perfcore.analysis.findings import Finding, FindingKind
from perfcore.analysis.results import Loading
from perfcore.analysis.verdict import avoidable, decide
from perfcore.errors import BadResultFile
from perfcore.analysis.reader import stage_document

BD = {"load": 5.0, "transfer": 0.0, "compute": 5.0, "comm": 0.0, "host": 0.0}


def _diagnose(**over) -> DiagnoseResult:
    rows = (
        ExperimentRow(Experiment.BASELINE, "baseline", step_ms=10.0, speedup=1.0),
        ExperimentRow(Experiment.SYNTHETIC, "A: synthetic data", step_ms=5.0, speedup=2.0),
    )
    verdict = dataclasses.replace(decide(avoidable(BD), 10.0), loading=Loading("io", cpu_to_wall=0.2))
    return DiagnoseResult(
        **{
            "workload": "w",
            "device": "cpu",
            "experiments": rows,
            "verdict": verdict,
            "predicted_speedup": 2.1,
            "measured_speedup": 2.0,
            **over,
        }
    )


def test_a_result_round_trips_through_its_document():
    r = _diagnose(findings=(Finding(FindingKind.MORE_WORKERS, cause="load"),), interference=None)
    doc = json.loads(json.dumps(r.to_dict()))
    assert doc["schema"] == "perfcore.diagnose/2" and doc["interference"] is None and doc["script_exit"] is None
    assert doc["experiments"][1]["experiment"] == "A"  # the experiment by its code, not its label
    assert DiagnoseResult.from_dict(doc) == r
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.workload = "x"  # type: ignore[misc]


def test_the_words_are_made_from_the_results_facts():
    from perfcore.report.words.verdict import verdict_long

    doc = json.loads(json.dumps(_diagnose().to_dict()))
    assert "plain_summary" not in json.dumps(doc) and "summary" not in doc["verdict"]  # facts only
    v = DiagnoseResult.from_dict(doc).verdict
    assert verdict_long(v, lead=False).startswith("input-bound (I/O):") and "80% of its time waiting" in verdict_long(v, lead=False)
    assert verdict_long(v) == verdict_long(v, lead=False)  # no material interference: nothing before it


@pytest.mark.parametrize(
    "broken, what",
    [
        ({"experiments": "x"}, "experiments"),
        ({"experiments": [{"speedup": 1.0}]}, "experiment"),
        ({"experiments": [{"experiment": "A", "name": "A", "speedup": "fast"}]}, "speedup"),
        ({"verdict": None}, "verdict"),
        ({"measured_speedup": "2x"}, "measured_speedup"),
        ({"workload": 3}, "workload"),
    ],
)
def test_a_document_without_the_result_is_corrupt(tmp_path, broken, what):
    doc = {**_diagnose().to_dict(), **broken}
    with pytest.raises(BadResult, match=what):
        DiagnoseResult.from_dict(doc)
    (tmp_path / "diagnose.json").write_text(json.dumps(doc))
    with pytest.raises(BadResultFile) as err:
        stage_document(tmp_path)
    assert err.value.exit_code == 2 and "corrupt" in str(err.value)


def test_an_older_diagnose_document_still_opens_and_says_less(tmp_path):
    # Written by /1: its verdict beside its words, rows named by their labels, no `skipped`.
    old = _diagnose().to_dict()
    del old["skipped"]
    old.update(schema="perfcore.diagnose/1", verdict={
        "bound": "load", "level": "critical", "cause": "I/O", "step_ms": 10.0, "avoidable_ms": {"load": 5.0},
        "causes": [{"label": "load", "bound": "input-bound", "ms_per_step": 5.0, "share": 0.5, "level": "critical"}],
        "plain_summary": "input-bound: the sentence it was written with."})
    for e in old["experiments"]:
        del e["experiment"]
    (tmp_path / "diagnose.json").write_text(json.dumps(old))
    name, doc = stage_document(tmp_path)
    assert name == "diagnose.json" and doc.skipped == () and doc.verdict.bound == "load"
    assert [e.experiment for e in doc.experiments] == [Experiment.BASELINE, Experiment.SYNTHETIC]
    assert "the sentence it was written with" not in json.dumps(doc.to_dict())


def test_the_demo_result_holds_one_decision():
    d = _diagnose()
    run = dataclasses.replace(typed_run(10.0, BD), verdict=d.verdict)
    health = HealthResult(workload="demo", steps=3)
    demo = DemoResult(health=health, run=run, diagnose=d, files=("run.json", "demo.json"), elapsed_s=12.0)
    doc = json.loads(json.dumps(demo.to_dict()))
    assert doc["run"]["verdict"] == doc["diagnose"]["verdict"] and doc["files"] == ["run.json", "demo.json"]
    back = DemoResult.from_dict(doc)
    assert back.diagnose == d and back.run.verdict is not None and back.to_dict() == doc
    with pytest.raises(BadResult, match="run"):
        DemoResult.from_dict({**doc, "run": {"verdict": {}}})


def _health_row(busy=0.4):
    bd = {"load": 6.0, "transfer": 0.0, "compute": 4.0, "comm": 0.0, "host": 0.0}
    return measured(10.0, bd, 50, busy_series=(busy, 0.1, 0.9) * 4, busy_spacing_s=0.1, samples_per_s=100.0,
                    cpu_percent=50.0)


def test_health_keeps_its_busy_series_in_its_document_and_its_words_at_the_edge(tmp_path):
    from perfcore.experiments.health import health_report
    from perfcore.report.words.verdict import health_summary
    from perfcore.report.html import stage_page

    result = health_report(_health_row(), "w", "perfcore diagnose w")
    doc = json.loads(json.dumps(result.to_dict()))
    assert doc["busy_series"] == list(_health_row().busy_series) and "plain_summary" not in doc
    assert HealthResult.from_dict(doc) == result
    said = health_summary(result)
    assert said.startswith("input-bound") and "Compute share of each step" in said
    (tmp_path / "health.json").write_text(json.dumps(doc))
    name, back = stage_document(tmp_path)
    assert name == "health.json" and health_summary(back) == said  # the words made again from its facts
    page = stage_page(tmp_path, "perfcore health", back, "", ["health.json"])
    assert "Busy over the run" in page  # the chart, from the document alone
    with pytest.raises(BadResult, match="busy_mean"):
        HealthResult.from_dict({**doc, "busy_mean": "40%"})


def _sweep_rows() -> list[dict]:
    ok = {"batch_size": 8, "num_workers": 2, "pin_memory": False, "prefetch_factor": 2, "step_ms": 10.0,
          "samples_per_s": 800.0, "busy_mean": 0.5, "status": "ok", "error": None}
    crashed = {**ok, "num_workers": 0, "prefetch_factor": None, "step_ms": 40.0, "samples_per_s": 200.0,
               "status": "crashed", "reason": "failed_partway", "exit_code": 1, "ended": "crashed (ValueError: x)",
               "steps": 7}
    warm = {**ok, "num_workers": 1, "step_ms": None, "samples_per_s": None, "status": "crashed",
            "reason": "no_measured_step", "exit_code": 3, "ended": None, "steps": 0}
    return [ok, crashed, warm]


def test_sweep_json_is_its_result_read_back_and_a_failed_row_is_said_from_its_reason(tmp_path):
    import pandas as pd

    from perfcore.analysis.command_results import SweepResult
    from perfcore.experiments.sweep import sweep_doc
    from perfcore.report.stage_text import render_sweep
    from perfcore.report.words.runs import config_failure
    from perfcore.analysis.reader import load_sweep

    grid = {"batch_size": [8], "num_workers": [0, 1, 2], "pin_memory": [False], "prefetch_factor": [2]}
    result = sweep_doc("w", grid, 8, pd.DataFrame(_sweep_rows()), t0=0.0, rounds=[])
    assert result.best["num_workers"] == 2 and result.failed == 2 and "script_settings" not in result.to_dict()
    (tmp_path / "sweep.json").write_text(json.dumps(result.to_dict()))
    assert load_sweep(tmp_path) == result
    name, doc = stage_document(tmp_path)
    assert name == "sweep.json" and doc == result
    said = [config_failure(c) for c in result.configs]
    assert said == ["", "the script crashed (ValueError: x) after 7 measured steps: these results are partial",
                    "the script ended (exit 3) during warm-up: no measured step"]
    assert all(s[:80] in render_sweep(doc) for s in said[1:])  # the table cuts a reason at 80
    # The heatmap reads the rows from a table: numpy scalars (steps in every row: an int64 column), NaN for
    # a fact a row lacks (exit_code: a float column); said the same.
    table = pd.DataFrame([{**c, "steps": int(c["steps"] or 20)} for c in result.configs])
    assert [config_failure(table.iloc[i]) for i in range(len(table))] == said
    own = dataclasses.replace(result, script_settings={"num_workers": 0}, kept={}, patch=None)
    assert SweepResult.from_dict(json.loads(json.dumps(own.to_dict()))) == own


def test_an_older_sweep_json_opens_and_one_without_its_shape_is_corrupt(tmp_path):
    from pathlib import Path

    old = json.loads((Path(__file__).parent / "report_docs" / "sweep.json").read_text())
    (tmp_path / "sweep.json").write_text(json.dumps(old))
    assert list(stage_document(tmp_path)[1].configs) == old["configs"]
    (tmp_path / "sweep.json").write_text(json.dumps({**old, "best": "fast"}))
    with pytest.raises(BadResultFile, match="best is text, not an object"):
        stage_document(tmp_path)
