"""The documents perfcore writes hold facts, not words: every kind this version writes (run.json of each run
in the golden corpus and of a StepTimer, health, diagnose, sweep and the demo) has no key for words and no
string of words but the names and messages it must keep as they came. Older documents go through the one
migration, which keeps what a note said as its code and figures."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from perfcore.analysis.command_results import DemoResult, DiagnoseResult, HealthResult, SweepResult
from perfcore.analysis.migrate import migrate, migrate_run
from perfcore.analysis.run_context import Note
from perfcore.analysis.run_report import RunReport
from perfcore.report.words.runs import note_words

HERE = Path(__file__).resolve().parent
TYPES = {
    "perfcore.run": RunReport,
    "perfcore.health": HealthResult,
    "perfcore.diagnose": DiagnoseResult,
    "perfcore.sweep": SweepResult,
    "perfcore.experiments.demo": DemoResult,
}
WORDS_KEYS = {"sentence", "text", "evidence", "summary", "plain_summary", "words", "headline", "ended"}
# Strings of several words a document keeps as they came: the user's command and its error, names (of
# experiments, functions, kernels, files), the next command to run, a failed run's message, the notes the
# recording and the instrumented process still word themselves, and the capture's own note.
KEPT = re.compile(
    r"(^|\.)(argv|command|next|workload|exception|error|name|function|file|top|experiment|site|note)(\[\])?$"
    r"|^\.notes\[\]$|\.lines\.labels\[\]\.(lines|functions)\[\]\.inside\[\]$"
)


def words_in(doc, path: str = "") -> list[str]:
    """Where a document keeps words: a key for them, or a string of four words or more outside KEPT."""
    found = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k in WORDS_KEYS:
                found.append(f"{path}.{k} (a key for words)")
            found += words_in(v, f"{path}.{k}")
    elif isinstance(doc, list):
        for v in doc:
            found += words_in(v, f"{path}[]")
    elif isinstance(doc, str) and len(doc.split()) >= 4 and not KEPT.search(path):
        found.append(f"{path} = {doc[:60]!r}")
    return found


def written(doc: dict) -> dict:
    """What this version writes for a document it reads (any version): typed, then its document."""
    kind = str(doc["schema"]).split("/")[0]
    return json.loads(json.dumps(TYPES[kind].from_dict(migrate(doc)).to_dict()))


def corpus() -> list[Path]:
    """Every finished document of the golden corpus and report_docs (a part's run.json is facts the finish
    reads, not a document of its own; report_docs' demo.json holds no stages)."""
    paths = [p for p in sorted((HERE / "golden" / "runs").rglob("*.json")) if "parts" not in p.parts]
    paths += [p for p in sorted((HERE / "report_docs").glob("*.json")) if p.name != "demo.json"]
    return [p for p in paths if str(json.loads(p.read_text()).get("schema", "")).split("/")[0] in TYPES]


@pytest.mark.parametrize("path", corpus(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_document_of_the_corpus_is_written_as_facts(path):
    doc = written(json.loads(path.read_text()))
    assert str(doc["schema"]).endswith("/2")
    assert words_in(doc) == []


def test_the_documents_made_now_hold_facts():
    """A StepTimer's run, and health, diagnose and sweep on given measurements, as their commands write them."""
    import time

    from test_experiment_engine import GivenRunner, measured

    import perfcore
    from perfcore.experiments.diagnose import diagnose
    from perfcore.experiments.health import health
    from perfcore.experiments.measurement import Trial
    from perfcore.experiments.sweep import sweep

    timer = perfcore.StepTimer(device="cpu", warmup=1)
    for _ in timer.load(range(6)):
        with timer.compute():
            time.sleep(0.001)
        timer.step()

    def answer(t: Trial):
        if t.synthetic:
            return measured(0.0, 4.0, synthetic=True)
        return measured(3.0 if t.overrides else 6.0, 4.0, **(t.overrides or {}))

    grid = {"batch_size": [8, 16], "num_workers": [0], "pin_memory": [False], "prefetch_factor": [2]}
    docs = {
        "run": timer.result().to_dict(),
        "health": health(GivenRunner(answer), steps=10, warmup=1).to_dict(),
        "diagnose": diagnose(GivenRunner(answer, decoders=["fast"]), steps=10, warmup=1).to_dict(),
        "sweep": sweep(GivenRunner(answer), grid, steps=4, warmup=1).to_dict(),
    }
    for name, doc in docs.items():
        doc = json.loads(json.dumps(doc))
        assert words_in(doc) == [], name
        assert written(doc) == doc, name  # read back as written: the document is the model's to_dict
    assert docs["diagnose"]["verdict"]["checks"] and docs["diagnose"]["experiments"][0]["experiment"] == "baseline"


def test_a_document_with_words_is_caught():
    # The check itself: a sentence where a figure belongs, and a key for words, are both found.
    doc = {"verdict": {"bound": "load", "summary": "input-bound"}, "loader_plan": {"why": "the loop waits on it"}}
    assert words_in(doc) == [".verdict.summary (a key for words)", ".loader_plan.why = 'the loop waits on it'"]


@pytest.mark.parametrize(
    "note",
    [
        Note("evaluation_only", {"pids": [14533, 14534]}),
        Note("measured_apart", {"processes": [{"pid": 7, "steps": 12}, {"pid": 9, "steps": 0}]}),
        Note("from_checkpoint", {"steps": 340}),
        Note("finished_afterwards", {"exit_code": 137}),
    ],
    ids=lambda n: n.code,
)
def test_a_note_an_older_run_kept_in_words_is_read_as_its_code_and_figures(note):
    said = note_words(note)
    (back,) = RunReport.from_dict(migrate_run({"schema": "perfcore.run/1", **_minimal(), "notes": [said]})).notes
    assert back == note and note_words(back) == said


def test_a_damaged_figure_of_a_note_costs_that_figure_only():
    note = Note("measured_apart", {"processes": [{"pid": 7, "steps": 12}, {"pid": 8}], "pids": "not a list"})
    assert note.facts.pids == () and [(p.pid, p.steps) for p in note.facts.processes] == [(7, 12), (8, 0)]
    assert "(pid 7: 12 steps, pid 8: 0 steps)" in note_words(note)
    assert Note("from_checkpoint", {"steps": "many"}).facts.steps is None


def test_a_note_in_words_of_its_own_is_kept_as_its_words():
    (back,) = RunReport.from_dict(migrate_run({"schema": "perfcore.run/1", **_minimal(), "notes": ["CUPTI x"]})).notes
    assert back.code == "text" and note_words(back) == "CUPTI x"


def _minimal() -> dict:
    labels = ("load", "transfer", "compute", "comm", "host")
    return {
        "steps": 3,
        "warmup_steps": 0,
        "step_time_ms": {"mean": 1.0, "p50": 1.0, "p90": 1.0},
        "breakdown_ms": dict.fromkeys(labels, 0.2),
        "breakdown_fraction": dict.fromkeys(labels, 0.2),
        "backend": "host",
        "device": "cpu",
        "pid": os.getpid(),
    }
