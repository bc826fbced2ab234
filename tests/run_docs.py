"""Synthetic run folders for tests: run.json and steps.csv built by the real attribution from hand-made
intervals (no training, no clock), so readers and commands are tested on exactly what perfcore writes."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from perfcore.analysis.attribution import step_table, summarize
from perfcore import jsonio


def run_doc_and_steps(steps: int = 6, warmup: int = 1, load_ms: float = 4.0, compute_ms: float = 6.0):
    """Each step: load_ms waiting for data, then compute_ms computing."""
    n = steps + warmup
    step_ns = int((load_ms + compute_ms) * 1e6)
    s0 = np.arange(n, dtype=np.int64) * step_ns
    s1 = s0 + step_ns
    load_end = s0 + int(load_ms * 1e6)
    table = step_table(s0, s1, {"load": (s0, load_end), "compute": (load_end, s1)}, warmup=warmup)
    doc = summarize(table, on_gpu=False, backend="host", device="cpu")
    doc.update(pid=4242, rank=None, host="testhost")
    return doc, table


def write_run_folder(path: Path, decided: bool = True, **kw) -> Path:
    """A finished run's folder (its run.json decided as perfcore run decides one), or with decided=False a
    part's (the facts only: a run is decided once, on all of its parts)."""
    from perfcore.analysis.advice import advise_run
    from perfcore.analysis.run_report import RunReport

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    doc, table = run_doc_and_steps(**kw)
    if decided:
        doc = RunReport.of(doc, advise_run(doc, zero_code=True)).to_dict()
    jsonio.write(path / "run.json", doc)
    table.to_csv(path / "steps.csv", index=False)
    return path


def typed_run(step_ms: float, breakdown_ms: dict, device: str = "cpu", sem: float | None = None, **more):
    """A typed run of the given figures (the rest as a short run would have them), for tests of what reads one."""
    from perfcore.analysis.labels import LABELS
    from perfcore.analysis.run_report import RunReport

    bd = {lb: float(breakdown_ms.get(lb, 0.0)) for lb in LABELS}
    total = sum(bd.values())
    doc = {
        "steps": 40,
        "warmup_steps": 0,
        "step_time_ms": {"mean": step_ms, "p50": step_ms, "p90": step_ms, "sem": sem},
        "breakdown_ms": bd,
        "breakdown_fraction": {lb: (v / total if total else 0.0) for lb, v in bd.items()},
        "backend": "host",
        "device": device,
        **more,
    }
    return RunReport.of(doc)


def measured(step_ms: float, breakdown_ms: dict, steps: int = 0, device: str = "cpu", **more):
    """A measured run of these figures as either runner hands it over (a baseline, health's run): the labels
    not given at 0; `more`: the Measurement's other fields (its spread, busy series, settings, run)."""
    from perfcore.analysis.labels import LABELS
    from perfcore.experiments.measurement import Measurement

    bd = {lb: float(breakdown_ms.get(lb, 0.0)) for lb in LABELS}
    return Measurement(device, steps, step_ms, breakdown_ms=bd, **more)


def exp_rows(*rows: dict):
    """diagnose's rows from plain dicts, each named as diagnose names it ("A: ...", "B: ..."): the experiment's
    code from its name's first letter."""
    from perfcore.analysis.checks import Busy, Experiment
    from perfcore.analysis.command_results import ExperimentRow

    codes = {"baseline": Experiment.BASELINE, "A": Experiment.SYNTHETIC, "B": Experiment.WORKERS, "C": Experiment.DECODER}
    out = []
    for r in rows:
        r = dict(r)
        busy = r.pop("interference", None)
        out.append(ExperimentRow(codes[r["name"].split(":")[0]], **r,
                                 interference=Busy(busy["others_cores"], busy.get("cores"), bool(busy.get("material")))
                                 if busy else None))
    return out


def filled(doc: dict) -> dict:
    """A test's run figures with what every run has and a test leaves out: steps, step percentiles, the
    shares from the breakdown, the backend and device."""
    from perfcore.analysis.labels import LABELS

    bd = {lb: float((doc.get("breakdown_ms") or {}).get(lb, 0.0)) for lb in LABELS}
    total = sum(bd.values())
    mean = float((doc.get("step_time_ms") or {}).get("mean", total))
    return {
        "steps": 40,
        "warmup_steps": 5,
        "backend": "host",
        "device": "cpu",
        **doc,
        "step_time_ms": {"mean": mean, "p50": mean, "p90": mean, **(doc.get("step_time_ms") or {})},
        "breakdown_ms": bd,
        "breakdown_fraction": doc.get("breakdown_fraction")
        or {lb: (v / total if total else 0.0) for lb, v in bd.items()},
    }


def decided(doc: dict, **advice):
    """A test's run decided as perfcore decides one (advice.advise_run's keywords), typed."""
    from perfcore.analysis.advice import advise_run
    from perfcore.analysis.run_report import RunReport

    full = filled(doc)
    return RunReport.of(full, advise_run(full, **advice))


def redecided(doc: dict):
    """An older run document's facts (migrated) decided again by this version, as `perfcore run` decides: its
    verdict and findings made from its figures, not read from what it stored."""
    from perfcore.analysis.migrate import migrate_run

    facts = {k: v for k, v in migrate_run(doc).items() if k not in ("verdict", "findings", "loader_plan")}
    return decided(facts, zero_code=True)


def as_run(doc: dict):
    """A test's hand-built run typed: a few of its facts (the rest filled), its verdict written as the labels
    it names ({"causes": [{"label": ...}]}, each named at the critical tier); none named is a healthy one."""
    from perfcore.analysis.results import BOUNDS
    from perfcore.analysis.run_report import RunReport

    d = dict(doc)
    named = [c["label"] for c in (d.pop("verdict", None) or {}).get("causes", [])]
    full = filled(d)
    step = float(full["step_time_ms"]["mean"])
    ranked = [
        {
            "label": lb,
            "bound": BOUNDS.get(lb, lb),
            "ms_per_step": full["breakdown_ms"].get(lb, 0.0),
            "share": full["breakdown_fraction"].get(lb, 0.0),
            "level": "critical",
            "gain": {"saved_ms": full["breakdown_ms"].get(lb, 0.0), "step_after_ms": step, "speedup": None},
        }
        for lb in named
    ]
    full["verdict"] = {
        "bound": named[0] if named else "compute",
        "level": "critical" if named else "healthy",
        "healthy": not named,
        "primary": named[0] if named else None,
        "step_ms": step,
        "compute_ms": full["breakdown_ms"]["compute"],
        "ranked": ranked,
    }
    return RunReport.from_dict(full)


def run_of_json(doc: dict):
    """A run.json perfcore wrote, read as every reader reads one (migrated, checked, typed)."""
    from perfcore.analysis.reader import parse_run

    return parse_run(doc, Path("run.json"))


def advice_said(run) -> list[tuple[str, str, str]]:
    """Each finding of a typed run as (kind, text, evidence): what the reports say of it."""
    from perfcore.report.words.advice import advice_words

    return [(f.kind.value, *advice_words(f, run.loader_plan)) for f in run.findings]


def confirm(  # noqa: PLR0913
    decision: Any,
    label: str,
    measured_speedup: float | None,
    name: str,
    compute_ms: tuple[float, float] | None = None,
    noise_ms: float | None = None,
    compute_may_gain: bool = True,
    busy: dict | None = None,
    experiment=None,
):
    """analysis.checks.reconcile for an experiment that removed `label`'s cause, against a verdict's figures
    (its step_ms, avoidable_ms and the cause's interval in ms), as diagnose makes its check of experiment A."""
    from perfcore.analysis.checks import Busy, Experiment, Measurement, Prediction, reconcile

    cause, step = decision.cause(label), float(decision.step_ms or 0.0)
    band = cause.share_band if cause is not None else None
    return reconcile(
        Prediction(
            label=label,
            step_ms=step,
            saved_ms=float(decision.avoidable_ms.get(label) or 0.0),
            saved_band_ms=(band[0] * step, band[1] * step) if band else None,
        ),
        Measurement(
            experiment=experiment or Experiment.SYNTHETIC,
            name=name,
            speedup=measured_speedup,
            noise_ms=noise_ms,
            compute_ms=tuple(compute_ms) if compute_ms is not None else None,
            compute_may_gain=compute_may_gain,
            busy=Busy(busy.get("others_cores"), busy.get("cores"), bool(busy.get("material"))) if busy else None,
        ),
    )
