"""The advice's words are made at the edge: analysis.advice, advice_findings and loader_plan return facts
(kinds, numbers, the loader's settings) and report.words.advice says them; documents hold the facts only.
A few sentences are pinned here, for the renderer only."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from perfcore.analysis.advice import advise_run
from perfcore.analysis.loader_plan import PlanEvidence, loader_plan
from perfcore.analysis.memory_findings import memory_findings
from perfcore.analysis.run_context import Loader
from perfcore.analysis.run_parts import Evaluation
from perfcore.analysis.run_report import RunReport
from perfcore.report.words.advice import evidence_of, text_of
from perfcore.report.words.findings import evaluation_sentence, memory_sentence
from perfcore.report.words.findings import plan_sentence, plan_words



ANALYSIS = Path(__file__).resolve().parents[1] / "perfcore" / "analysis"
# The modules whose words moved to report.words.advice.
CLEANED = ("advice.py", "advice_evidence.py", "loader_plan.py", "advice_findings.py", "memory_findings.py")
# Commands to run are the one string of several words allowed in a cleaned module. Anything else of four
# words or more is a sentence.

LOADER = {"site": "train.py:42", "num_workers": 0, "pin_memory": False, "persistent_workers": False,
          "batch_size": 32, "worker_startup_ms": [], "batches": 45, "worker_batch_ms": 30.0}
LOADER_T = Loader(**LOADER)


def _prose(tree: ast.AST) -> list[str]:
    """f-strings and string literals of four words or more that are not docstrings, statuses or commands."""
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.JoinedStr):
            found.append(f"line {n.lineno}: an f-string")
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings:
            if len(n.value.split()) >= 4 and not n.value.startswith("perfcore "):
                found.append(f"line {n.lineno}: {n.value[:60]!r}")
    return found


@pytest.mark.parametrize("name", CLEANED)
def test_cleaned_analysis_modules_compose_no_sentence(name):
    """An AST check, not a grep: an f-string anywhere, or a literal of four words or more (a sentence
    split over literals has one), fails; splitting a sentence into one-word literals to pass it would
    be a deliberate act a reviewer sees."""
    assert _prose(ast.parse((ANALYSIS / name).read_text())) == []


def test_the_check_catches_a_sentence():
    assert _prose(ast.parse('x = f"{n} workers"')) and _prose(ast.parse('x = "set more workers now"'))
    assert not _prose(ast.parse('x = "more_workers"'))


def _run(bd, **extra):
    step = sum(bd.values())
    return {"step_time_ms": {"mean": step, "p50": step, "p90": step}, "breakdown_ms": bd, "device": "cpu", "steps": 40,
            "warmup_steps": 5, "backend": "host", "breakdown_fraction": {k: v / sum(bd.values()) for k, v in bd.items()},
            **extra}


@pytest.mark.parametrize(
    "bd",
    [
        {"load": 30.0, "transfer": 0.0, "compute": 10.0, "comm": 0.0, "host": 0.0},
        {"load": 1.0, "transfer": 6.0, "compute": 10.0, "comm": 4.0, "host": 3.0},
        {"load": 0.0, "transfer": 0.0, "compute": 30.0, "comm": 0.0, "host": 0.1},
    ],
)
def test_the_advice_holds_facts_and_the_renderer_says_them(bd):
    doc = _run(bd, loaders=[LOADER])
    d = advise_run(doc, zero_code=True, evidence={"cpu_count": 8, "pageable_h2d_bytes_per_step": 2**20})
    assert d.findings
    run = RunReport.of(doc, d)
    back = RunReport.from_dict(run.to_dict())  # the document of facts alone reads back whole
    assert back.findings == run.findings and back.loader_plan == run.loader_plan
    for f in run.to_dict()["findings"]:
        assert not {"text", "evidence", "sentence"} & set(f) and isinstance(f["figures"], dict)
    for r in back.findings:
        assert text_of(r, back.loader_plan)  # said from the figures alone
        assert evidence_of(r, back.loader_plan) == evidence_of(r, d.loader_plan)


def test_the_renderer_says_the_plan_as_before():
    doc = _run({"load": 30.0, "transfer": 0.0, "compute": 10.0, "comm": 0.0, "host": 0.0}, loaders=[LOADER])
    d = advise_run(doc, zero_code=True, evidence={"cpu_count": 8})
    assert text_of(d.findings[0], d.loader_plan) == (
        "In the DataLoader made at train.py:42 (batch_size=32, num_workers=0, pin_memory=False, "
        "persistent_workers=False): set num_workers=3 and persistent_workers=True; a batch takes 30.0 ms to make "
        "and the loop uses one every 10.0 ms. Expected: steps about 4.00x faster, 10.0 ms a step."
    )
    cheap = loader_plan(replace(LOADER_T, num_workers=1, worker_batch_ms=0.8, prefetch_factor=2),
                        PlanEvidence(step_ms=212.0, load_ms=52.4, per_step=4, cpu_count=2, on_gpu=False, cpu_percent=100.0))
    assert plan_sentence(cheap) == (
        "1 worker(s) make a batch in 800 µs but the loop waits 13.1 ms for each: the handover from the worker "
        "processes costs the rest (host CPU 100%: processes wait for a core)"
    )
    few = loader_plan(replace(LOADER_T, num_workers=1, worker_batch_ms=40.0, worker_startup_ms=(500.0, 540.0, 540.0)),
                      PlanEvidence(step_ms=60.0, load_ms=45.0, per_step=1, cpu_count=8, on_gpu=False, measured_batches=57))
    sentence, text = plan_words(few)
    assert "; besides, the workers start again every epoch: 500 ms each time" in sentence
    assert text.endswith("also set persistent_workers=True.")


def test_an_old_document_says_less_never_its_stored_words():
    from perfcore.analysis.migrate import migrate_run

    old = _run({"load": 30.0, "transfer": 0.0, "compute": 10.0, "comm": 0.0, "host": 0.0})
    old.update(schema="perfcore.run/1", recommendations=[
        {"id": "more_workers", "cause": "load", "text": "Feed the loop faster.", "evidence": "load is 75%"}
    ], loader_plan={"reason": "main process", "sentence": "loading runs in the main process"})
    run = RunReport.from_dict(migrate_run(old))
    assert run.findings == () and run.loader_plan is None  # kept only their words: nothing to say them from
    assert "Feed the loop" not in str(run.to_dict())


def test_memory_findings_are_said_from_their_figures():
    steps = np.arange(100)
    leak = np.full(100, 500 * 2**20, dtype=np.float64)
    leak[40:] += (steps[40:] - 40) * 2 * 2**20
    (f,) = memory_findings(steps, leak)["findings"]
    assert memory_sentence(f).startswith("probable leak: device memory rises 2.00 MB per step from step")
    m = memory_findings(np.arange(10), np.full(10, 75 * 2**30), capacity_bytes=80 * 2**30, alloc_retries=3)
    assert [memory_sentence(x) for x in m["findings"]] == [
        "memory pressure: the CUDA caching allocator had to free and retry 3 time(s)",
        "memory pressure: peak device memory 75.0 GB is 94% of 80.0 GB",
    ]
    doc = _run({"load": 0.0, "transfer": 0.0, "compute": 10.0, "comm": 0.0, "host": 0.0})
    d = advise_run(doc, zero_code=True, memory=m)
    rec = next(r for r in d.findings if r.kind == "memory_near_capacity")
    assert evidence_of(rec) == memory_sentence(m["findings"][1]) == memory_sentence(rec.figures)
    assert text_of(rec).startswith("One larger batch or a longer sequence will not fit")


def test_the_evaluation_finding_is_said_from_its_figures():
    ev = Evaluation(passes=6, ms_per_pass=40.05, total_ms=240.3, share_of_wall=0.92)
    assert evaluation_sentence(ev) == (
        "6 evaluation pass(es) of 40.0 ms each took 92% of the wall time (240 ms in all); they are reported "
        "apart and are not in the step time, the breakdown or the verdict"
    )
    # The HF Trainer's three passes of 5.19, 2.39 and 0.40 s: their range, not one "each".
    ev = Evaluation(passes=3, ms_per_pass=2660.0, min_ms_per_pass=400.0, max_ms_per_pass=5190.0, total_ms=7980.0,
                    share_of_wall=0.12)
    said = evaluation_sentence(ev)
    assert said.startswith("3 evaluation pass(es) of 400 ms to 5.19 s (2.66 s mean) took 12% of the wall time")
    assert evaluation_sentence(None) == ""


def test_the_command_that_tests_advice_is_a_code_said_at_the_edge():
    from perfcore.report.words.advice import TEST_WORDS, test_of
    from perfcore.report.html.run import advice_item

    doc = _run({"load": 30.0, "transfer": 0.0, "compute": 10.0, "comm": 0.0, "host": 0.0}, loaders=[LOADER])
    d = advise_run(doc, zero_code=True, evidence={"cpu_count": 8})
    load = d.findings[0]
    assert load.test == "diagnose"  # analysis keeps the code alone
    assert test_of(load) == TEST_WORDS["diagnose"] and test_of(load).startswith("perfcore diagnose")
    assert f"<code>{TEST_WORDS['diagnose']}</code>" in advice_item(load, d.loader_plan)
    # A code this version does not know says nothing.
    import dataclasses

    assert test_of(dataclasses.replace(load, test="no-such-command")) == "" and test_of(dataclasses.replace(load, test=None)) == ""


def test_every_kind_of_advice_has_its_phrase():
    """A kind of advice lives in two places, its rule and its phrase: a kind the rules can give with no phrase
    would be said as nothing."""
    from perfcore.analysis.findings import FindingKind
    from perfcore.report.words.advice import PHRASES

    said_beside = {FindingKind.STRAGGLER, FindingKind.WAITING, FindingKind.INTERFERENCE, FindingKind.THREADS_BUSY,
                   FindingKind.OUTLIERS, FindingKind.STARVATION}  # facts of the run, said by the verdict's words
    assert set(FindingKind) - said_beside == set(PHRASES)
