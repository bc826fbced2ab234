"""What health, diagnose, sweep and the demo each find, as one frozen result: their measurements, the
verdict decided once with its checks, the advice, and (the demo) the files written. health.json,
diagnose.json, sweep.json and demo.json are these results' serialisation (to_dict), read back through
from_dict, which checks the shape a renderer relies on; the words are added at the edge
(report.health_words, diagnose_words, advice_words, failure_words)."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

__all__ = ["HealthResult", "DiagnoseResult", "SweepResult", "DemoResult", "BadResult"]


class BadResult(ValueError):
    """A document that does not hold the result it claims to (what is wrong, in a few words)."""


def _num_or_none(v: Any) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))


def _need(ok: bool, what: str) -> None:
    if not ok:
        raise BadResult(what)


def _dicts(v: Any, what: str) -> tuple[dict[str, Any], ...]:
    _need(isinstance(v, list) and all(isinstance(x, dict) for x in v), f"{what} is not a list of objects")
    return tuple(v)


def _present(doc: dict[str, Any], result: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    """doc with each optional key of `result` that holds something: a document has the key only then."""
    doc.update({k: getattr(result, k) for k in keys if getattr(result, k)})
    return doc


def _opt_dict(d: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    v = d.get(key)
    _need(v is None or isinstance(v, dict), f"{key} is not an object")
    return v


# health.json's figures of the measured run, in the order the document has always had them.
_HEALTH_FIGURES = ("device", "steps", "step_ms", "samples_per_s", "busy_std", "busy_source", "cpu_percent")


@dataclasses.dataclass(frozen=True)
class HealthResult:
    """health's result: one measured run of the minimal loop (its figures and breakdown), the verdict
    (undecided where a later stage decides, the demo's), the seed method's busy check beside it, the
    next command when not healthy, the busy series (for the chart) and the heartbeat found in it."""

    SCHEMA = "perfcore.health/1"

    workload: str
    figures: dict[str, Any]  # _HEALTH_FIGURES
    breakdown_ms: dict[str, float] | None
    busy_mean: float | None
    healthy: bool | None
    verdict: dict[str, Any]
    busy_check: dict[str, Any]
    next: str | None = None
    busy_series: tuple[float, ...] = ()
    busy_spacing_s: float | None = None
    heartbeat: dict[str, Any] | None = None
    interference: dict[str, Any] | None = None
    note: str | None = None
    script_exit: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """health.json: the keys it has always had (the optional ones only where there is one), and the
        busy series its chart is drawn from, which it kept in memory only before."""
        doc: dict[str, Any] = {
            "schema": self.SCHEMA,
            "workload": self.workload,
            **{k: self.figures.get(k) for k in _HEALTH_FIGURES},
            "breakdown_ms": self.breakdown_ms,
            "busy_mean": self.busy_mean,
            "healthy": self.healthy,
            "verdict": self.verdict,
            "busy_check": self.busy_check,
            "next": self.next,
            "busy_series": list(self.busy_series),
            "busy_spacing_s": self.busy_spacing_s,
        }
        if self.verdict.get("uncertain"):
            doc["uncertain"] = True
        return _present(doc, self, ("interference", "heartbeat", "note", "script_exit"))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "HealthResult":
        """The result a health.json holds (this version's or an older one's), or BadResult naming what a
        renderer could not read."""
        _need(isinstance(d, Mapping), "is not an object")
        _need(isinstance(d.get("workload"), str), "has no workload")
        # A figure may be absent (the notebook view shows what there is; the terminal's table says the
        # document is corrupt), never another type.
        for key in ("step_ms", "samples_per_s", "busy_mean", "busy_std", "cpu_percent"):
            _need(_num_or_none(d.get(key)), f"{key} is not a number")
        _need(d.get("breakdown_ms") is None or isinstance(d.get("breakdown_ms"), dict), "breakdown_ms is not an object")
        v = d.get("verdict")
        _need(isinstance(v, dict) and isinstance(v.get("bound"), str), "has no verdict")
        series = d.get("busy_series") or []
        _need(isinstance(series, list) and all(_num_or_none(x) for x in series), "busy_series is not numbers")
        note = d.get("note")
        return cls(
            workload=d["workload"],
            figures={k: d.get(k) for k in _HEALTH_FIGURES},
            breakdown_ms=d.get("breakdown_ms"),
            busy_mean=d.get("busy_mean"),
            healthy=d.get("healthy"),
            verdict=v,
            busy_check=_opt_dict(d, "busy_check") or {},
            next=d.get("next") if isinstance(d.get("next"), str) else None,
            busy_series=tuple(series),
            busy_spacing_s=d.get("busy_spacing_s") if _num_or_none(d.get("busy_spacing_s")) else None,
            heartbeat=_opt_dict(d, "heartbeat"),
            interference=_opt_dict(d, "interference"),
            note=note if isinstance(note, str) else None,
            script_exit=_opt_dict(d, "script_exit"),
        )


@dataclasses.dataclass(frozen=True)
class DiagnoseResult:
    """diagnose's result: each experiment's row against the baseline (speedup = base / this), what was
    skipped and why, __getitem__'s profile, the verdict decided once on the baseline and checked by
    experiment A (its checks and loading cause as facts), the predicted and measured gain of removing
    loading, the advice after what the experiments measured, and the first script failure."""

    SCHEMA = "perfcore.diagnose/1"

    workload: str
    device: str
    experiments: tuple[dict[str, Any], ...]
    verdict: dict[str, Any]
    predicted_speedup: float | None
    measured_speedup: float | None
    skipped: tuple[dict[str, Any], ...] = ()
    worker_profile: dict[str, Any] = dataclasses.field(default_factory=dict)
    recommendations: tuple[dict[str, Any], ...] | None = None
    loader_plan: dict[str, Any] | None = None
    interference: dict[str, Any] | None = None
    script_exit: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """diagnose.json: the keys it has always had; the optional ones only where there is one."""
        doc: dict[str, Any] = {
            "schema": self.SCHEMA,
            "workload": self.workload,
            "device": self.device,
            "experiments": list(self.experiments),
            "skipped": list(self.skipped),
            "worker_profile": self.worker_profile,
            "verdict": self.verdict,
            "predicted_speedup": self.predicted_speedup,
            "measured_speedup": self.measured_speedup,
        }
        if self.recommendations is not None:
            doc["recommendations"] = list(self.recommendations)
        return _present(doc, self, ("loader_plan", "interference", "script_exit"))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "DiagnoseResult":
        """The result a diagnose.json holds (this version's or an older one's), or BadResult naming what a
        renderer could not read."""
        _need(isinstance(d, Mapping), "is not an object")
        _need(isinstance(d.get("workload"), str) and isinstance(d.get("device"), str), "has no workload or device")
        rows = _dicts(d.get("experiments"), "experiments")
        for r in rows:
            _need(isinstance(r.get("name"), str), "an experiment has no name")
            _need(_num_or_none(r.get("speedup")), f"experiment {r['name'][:40]!r} has a speedup that is not a number")
        v = d.get("verdict")
        _need(isinstance(v, dict) and isinstance(v.get("bound"), str), "has no verdict")
        _need(isinstance(v.get("checks", []), list), "the verdict's checks are not a list")
        for key in ("predicted_speedup", "measured_speedup"):
            _need(_num_or_none(d.get(key)), f"{key} is not a number")
        recs = d.get("recommendations")
        return cls(
            workload=d["workload"],
            device=d["device"],
            experiments=rows,
            verdict=v,
            predicted_speedup=d.get("predicted_speedup"),
            measured_speedup=d.get("measured_speedup"),
            skipped=_dicts(d.get("skipped", []), "skipped"),
            worker_profile=_opt_dict(d, "worker_profile") or {},
            recommendations=None if recs is None else _dicts(recs, "recommendations"),
            loader_plan=_opt_dict(d, "loader_plan"),
            interference=_opt_dict(d, "interference"),
            script_exit=_opt_dict(d, "script_exit"),
        )


# What a renderer reads of each sweep configuration, beside its settings: a status, and numbers or none.
_SWEEP_NUMBERS = ("step_ms", "samples_per_s")
# The settings a sweep's script kept or replaced, and its DataLoader patch: present only for a script.
_SWEEP_OWN = ("script_settings", "kept", "patch")


@dataclasses.dataclass(frozen=True)
class SweepResult:
    """sweep's result: the grid and every configuration's row (settings, numbers, status, and for a failed
    one its reason), the best (only from configurations that measured fine; from the last round under a
    budget), each batch size's knee, the worker trials advice checks against, and whether the sweep is
    complete. A script's sweep adds its own settings, the ones it kept and the patch to the best."""

    SCHEMA = "perfcore.sweep/1"

    workload: str
    grid: dict[str, list]
    steps: int
    configs: tuple[dict[str, Any], ...]
    best: dict[str, Any] | None
    knees: tuple[dict[str, Any], ...] = ()
    worker_trials: tuple[dict[str, Any], ...] = ()
    failed: int = 0
    complete: bool = True
    interrupted: bool = False
    elapsed_s: float = 0.0
    rounds: tuple[dict[str, Any], ...] = ()
    script_settings: dict[str, Any] | None = None
    kept: dict[str, Any] | None = None
    patch: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """sweep.json: the keys it has always had; a script's own settings only for a script's sweep."""
        doc: dict[str, Any] = {
            "schema": self.SCHEMA,
            "workload": self.workload,
            "grid": self.grid,
            "steps": self.steps,
            "configs": list(self.configs),
            "best": self.best,
            "knees": list(self.knees),
            "worker_trials": list(self.worker_trials),
            "failed": self.failed,
            "complete": self.complete,
            "interrupted": self.interrupted,
            "elapsed_s": self.elapsed_s,
            "rounds": list(self.rounds),
        }
        if self.script_settings is not None:
            doc.update({k: getattr(self, k) for k in _SWEEP_OWN})
        return doc

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SweepResult":
        """The result a sweep.json holds (this version's or an older one's: a knee may be its text), or
        BadResult naming what a renderer could not read."""
        _need(isinstance(d, Mapping), "is not an object")
        _need(isinstance(d.get("workload"), str), "has no workload")
        _need(isinstance(d.get("steps"), int) and not isinstance(d.get("steps"), bool), "steps is not a count")
        _need(isinstance(d.get("grid"), dict), "grid is not an object")
        configs = _dicts(d.get("configs"), "configs")
        for i, c in enumerate(configs):
            _need(isinstance(c.get("status"), str), f"configs[{i}] has no status")
            for key in _SWEEP_NUMBERS:
                _need(_num_or_none(c.get(key)), f"configs[{i}].{key} is not a number")
        best = d.get("best")
        _need(best is None or (isinstance(best, dict) and _num_or_none(best.get("samples_per_s"))), "best is corrupt")
        knees = d.get("knees") or []
        _need(isinstance(knees, list), "knees is not a list")
        _need(_num_or_none(d.get("elapsed_s")), "elapsed_s is not a number")
        return cls(
            workload=d["workload"],
            grid=d["grid"],
            steps=d["steps"],
            configs=configs,
            best=best,
            knees=tuple(knees),
            worker_trials=_dicts(d.get("worker_trials") or [], "worker_trials"),
            failed=int(d.get("failed") or sum(c.get("status") != "ok" for c in configs)),
            complete=bool(d.get("complete", True)),
            interrupted=bool(d.get("interrupted")),
            elapsed_s=float(d.get("elapsed_s") or 0.0),
            rounds=_dicts(d.get("rounds") or [], "rounds"),
            script_settings=_opt_dict(d, "script_settings"),
            kept=_opt_dict(d, "kept") if "script_settings" in d else None,
            patch=_opt_dict(d, "patch") if "script_settings" in d else None,
        )


@dataclasses.dataclass(frozen=True)
class DemoResult:
    """The demo's result: health's measurement (a forward-only loop; it decides nothing of its own), the
    run as measured with the one verdict and advice (diagnose's, the run checked by its experiments),
    diagnose's result, the files written into the folder and how long it took."""

    SCHEMA = "perfcore.experiments.demo/1"

    health: dict[str, Any]
    run: dict[str, Any]
    diagnose: DiagnoseResult
    files: tuple[str, ...]
    elapsed_s: float

    @property
    def bounds(self) -> dict[str, str]:
        return {"run": self.run["verdict"]["bound"], "diagnose": self.diagnose.verdict["bound"]}

    def to_dict(self) -> dict[str, Any]:
        """demo.json. `agree` is kept for readers of older documents: the run's verdict is diagnose's."""
        return {
            "schema": self.SCHEMA,
            "health": self.health,
            "run": self.run,
            "diagnose": self.diagnose.to_dict(),
            "agree": self.bounds["run"] == self.bounds["diagnose"],
            "bounds": self.bounds,
            "files": {f: f for f in self.files},
            "elapsed_s": self.elapsed_s,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "DemoResult":
        """The result a demo.json holds, or BadResult naming what a renderer could not read."""
        _need(isinstance(d, Mapping), "is not an object")
        for key in ("health", "run"):
            _need(isinstance(d.get(key), dict), f"has no {key} stage")
        _need(isinstance((d["run"].get("verdict") or {}).get("bound"), str), "the run has no verdict")
        files = d.get("files") or {}
        _need(isinstance(files, (dict, list)) and all(isinstance(f, str) for f in files), "files are not names")
        _need(_num_or_none(d.get("elapsed_s")), "elapsed_s is not a number")
        return cls(
            health=d["health"],
            run=d["run"],
            diagnose=DiagnoseResult.from_dict(d.get("diagnose")),
            files=tuple(files),
            elapsed_s=float(d.get("elapsed_s") or 0.0),
        )
