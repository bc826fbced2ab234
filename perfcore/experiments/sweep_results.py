"""A sweep's rows and its result: one configuration's row from its measurement (or the reason it has
none), and the SweepResult (sweep.json) with the best, the knees and the worker trials, from the rows
that measured fine; an earlier document's finished rows, to resume it."""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

import pandas as pd

from perfcore.analysis.checks import difference_noise_ms
from perfcore.analysis.command_results import SweepResult
from perfcore.analysis.status import change_of
from perfcore.errors import UsageError
from perfcore.experiments.measurement import SETTINGS, Measurement

__all__ = [
    "CONFIG_KEYS",
    "config_key",
    "config_row",
    "failed_row",
    "sweep_doc",
    "knees",
    "worker_trials",
    "resume_rows",
    "setting_value",
    "gain_over_own",
]

CONFIG_KEYS = SETTINGS  # a configuration is the loader's settings

# The figures of a configuration's row, in the table's order (none where it gave no measurement).
_FIGURES = ("step_ms", "samples_per_s", "busy_mean", "busy_std", "peak_mem_bytes")


def _row(
    cfg: Mapping[str, Any],
    status: str,
    m: Measurement | None = None,
    error: str | None = None,
    reason: str | None = None,
    exit_code: int | None = None,
    ended: str | None = None,
) -> dict[str, Any]:
    """One configuration of a sweep as its row in the table (sweep.json's configs): its settings (and, for a
    script, what they replace), its status (ok, oom, crashed, infeasible), the reason when not ok, and the
    measurement's figures, where it gave one. A status other than ok is never best; a script that failed
    part-way keeps its numbers beside its status. error: the exception's own message, where there was one;
    exit_code and ended: how a script's run ended (its document's words).

    The reasons (report.words.runs says each): out_of_memory; no_measured_step (a run that ended in warm-up);
    failed_partway (a script that failed after measured steps: its numbers kept, partial); infeasible
    (settings the loop cannot take); exception (in the user's model or data); run_failed (a run that failed
    with nothing to report)."""
    if m is None:
        figures, rest = dict.fromkeys(_FIGURES), {"steps": 0, "load_share": None, "step_sem_ms": None}
    else:
        figures = {k: getattr(m, k) for k in _FIGURES}
        # step_sem_ms: the noise a best configuration must beat the script's own by
        rest = {"steps": m.steps, "load_share": m.breakdown_fraction.get("load"), "step_sem_ms": m.step_sem_ms}
    v = m.verdict if m is not None else None
    failed = {"reason": reason, "exit_code": exit_code, "ended": ended} if reason else {}
    return {
        **cfg,
        **figures,
        "oom": status == "oom",
        "status": status,
        "error": error[:300] if error else None,
        **failed,
        **rest,
        # The one verdict of the configuration, as two columns.
        "verdict": v.bound if v else None,
        "verdict_level": v.level.value if v else None,
    }


def config_row(cfg: Mapping[str, Any], m: Measurement) -> dict[str, Any]:
    """The row of one measured configuration: failed when it gave no measured step (out of memory, or a
    script that ended in warm-up)."""
    if m.oom and not m.steps:
        return _row(cfg, "oom", error=m.error, reason="out_of_memory")
    if not m.steps or not m.step_ms or m.step_ms != m.step_ms:
        return _row(cfg, "crashed", reason="no_measured_step", exit_code=m.exit_code, ended=m.ended)
    if m.failure:
        # Numbers from a run that crashed part-way describe a different job: kept, never best.
        f = m.failure
        return _row(cfg, "oom" if f.oom else "crashed", m, reason="failed_partway", exit_code=f.code, ended=m.ended)
    return _row(cfg, "ok", m)


def failed_row(cfg: Mapping[str, Any], status: str, reason: str, error: str | None = None) -> dict[str, Any]:
    """A configuration that gave no measurement (status, reason, the exception's own message): recorded,
    never best."""
    return _row(cfg, status, error=error, reason=reason)


def config_key(cfg: dict) -> tuple:
    return tuple(cfg.get(k) for k in CONFIG_KEYS)


def sweep_doc(
    name: str,
    grid: dict,
    steps: int,
    table: pd.DataFrame,
    *,
    t0: float,
    rounds: list,
    interrupted: bool = False,
    planned: int | None = None,
) -> SweepResult:
    """The sweep's result (sweep.json is its to_dict); best and knees only from configurations that
    measured fine."""
    rows = table.to_dict("records")
    ok = table[(table["status"] == "ok") & (table["samples_per_s"].fillna(0) > 0)] if rows else table
    if "round" in ok and len(ok):
        # Successive halving: the best is among the configurations measured longest (the last
        # round). A configuration dropped after a short round can show a rate its longer runs
        # would not (a prefetched queue, a quiet second), and must not win on it.
        ok = ok[ok["round"] == ok["round"].max()]
    best = None
    if len(ok):
        b = ok.loc[ok["samples_per_s"].idxmax()]
        best = {**{k: setting_value(k, b[k]) for k in CONFIG_KEYS}, "samples_per_s": float(b["samples_per_s"])}
    return SweepResult(
        workload=name,
        grid=grid,
        steps=steps,
        configs=tuple(_clean(r) for r in rows),
        best=best,
        knees=tuple(knees(ok)) if len(ok) else (),
        worker_trials=tuple(worker_trials(ok, best)) if best else (),
        failed=sum(r["status"] != "ok" for r in rows),
        complete=not interrupted and (planned is None or len(table) >= planned),
        interrupted=interrupted,
        elapsed_s=time.perf_counter() - t0,
        rounds=tuple(rounds),
    )


def knees(ok: pd.DataFrame, within: float = 0.05) -> list[dict[str, Any]]:
    """For each batch size (pin/prefetch at their best), the fewest workers that reach within 5% of the
    best throughput at that batch size: {batch_size, workers, samples_per_s, within, flat (more workers
    adding less than `within`), worse (more workers measured slower beyond it)}; report.sweep words."""
    out = []
    for bs, g in ok.groupby("batch_size"):
        by_w = g.groupby("num_workers")["samples_per_s"].max().sort_index()
        top = by_w.max()
        enough = by_w[by_w >= (1 - within) * top]
        w = int(enough.index.min())
        more = by_w[by_w.index > w]
        worse = [int(x) for x, v in more.items() if v < by_w[w] * (1 - within)]
        flat = [int(x) for x in more.index if int(x) not in worse]
        out.append(
            {
                "batch_size": int(bs),
                "workers": w,
                "samples_per_s": float(by_w[w]),
                "within": within,
                "flat": flat,
                "worse": worse,
            }
        )
    return out


def worker_trials(ok: pd.DataFrame, best: dict[str, Any]) -> list[dict[str, Any]]:
    """At the best configuration's batch size and pin_memory, each worker count's speed against every
    other's (throughput ratio: the same batch, so the step-time ratio): the measured evidence advice
    checks a workers change against (analysis.advice.contradicting_trial)."""
    g = ok[(ok["batch_size"] == best["batch_size"]) & (ok["pin_memory"] == best["pin_memory"])]
    by_w = g.groupby("num_workers")["samples_per_s"].max().sort_index()
    return [
        {
            "experiment": f"sweep (batch {best['batch_size']})",
            "relative_to": int(base),
            "num_workers": int(w),
            "speedup": float(v / by_w[base]),
        }
        for base in by_w.index
        for w, v in by_w.items()
        if w != base and by_w[base] > 0
    ]


def _py(v):
    return v.item() if hasattr(v, "item") else v


# The settings DataLoader takes as integers. Their table column is float wherever a row has none (a
# prefetch_factor of the rows without workers): read back as 2.0, which DataLoader refuses at its first batch.
_INTEGER_SETTINGS = ("batch_size", "num_workers", "prefetch_factor")


def setting_value(key: str, v: Any) -> Any:
    """A configuration's setting as DataLoader takes it: an integer setting as an int, a missing one None."""
    v = _py(v)
    if isinstance(v, float) and v != v:
        return None
    if key in _INTEGER_SETTINGS and isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _clean(r: dict) -> dict:
    return {k: setting_value(k, v) for k, v in r.items()}


def resume_rows(previous: SweepResult, grid: dict, steps: int, name: str) -> list[dict]:
    """The finished configurations of an earlier sweep, when it swept the same thing."""
    if previous.workload != name or previous.steps != steps:
        raise UsageError(
            f"the sweep to resume ran {previous.workload!r} with --steps {previous.steps}; "
            f"this one is {name!r} with --steps {steps}: give the same target and --steps, or a new --out"
        )
    same = {k: [_py(x) for x in v] for k, v in grid.items()} == previous.grid
    if not same:
        raise UsageError(
            "the sweep to resume had another grid; give the same --batch-size/--num-workers/"
            "--pin-memory/--prefetch-factor, or a new --out"
        )
    return list(previous.configs)


def gain_over_own(configs: Sequence[Mapping[str, Any]], best: Mapping[str, Any]) -> dict[str, Any] | None:
    """The best configuration's rate against the script's own settings, measured in the same sweep (its row
    replaces nothing), with the runs' noise as a share: {speedup, noise_share, change}. None where the
    script's own configuration gave no measured row, or a row lacks its noise."""
    own = [r for r in configs if r.get("status") == "ok" and not r.get("replaced") and r.get("samples_per_s")]
    mine = next((r for r in configs if config_key(dict(r)) == config_key(dict(best)) and r.get("status") == "ok"), None)
    if not own or mine is None:
        return None
    o = max(own, key=lambda r: r.get("round") or 0)  # measured longest, as the best is
    rel = [
        r["step_sem_ms"] / r["step_ms"] if r.get("step_sem_ms") is not None and r.get("step_ms") else None
        for r in (o, mine)
    ]
    noise = difference_noise_ms(*rel)
    if noise is None:
        return None
    x = float(mine["samples_per_s"]) / float(o["samples_per_s"])
    return {"speedup": x, "noise_share": noise, "change": change_of(x, noise).value}
