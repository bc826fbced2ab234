"""Stage 3, sweep: batch_size x num_workers x pin_memory x prefetch_factor, N steps each, a fresh
DataLoader per configuration (its workers end with it). A configuration that runs out of memory,
cannot run (infeasible) or crashes is recorded with its status and reason, the sweep goes on, and it
is never the best. Ctrl-C ends the sweep with the configurations finished so far, and a sweep can
continue from them (`done`). With a time budget, successive halving: every configuration gets a
few steps, the better half gets twice as many, and so on."""

from __future__ import annotations

import itertools
import math
import os
import time
from typing import Any, Callable

import pandas as pd

from perfcore.errors import UsageError
from perfcore.workloads import Workload
from perfcore.experiments.runner import measure_workload, resolve_device

__all__ = [
    "sweep",
    "default_grid",
    "knees",
    "worker_trials",
    "grid_configs",
    "run_grid",
    "sweep_doc",
    "config_key",
    "failed_row",
    "resume_rows",
    "CONFIG_KEYS",
    "Interrupted",
]

CONFIG_KEYS = ("batch_size", "num_workers", "pin_memory", "prefetch_factor")


def default_grid(workload: Workload) -> dict[str, list]:
    """Sized to the machine: workers up to the core count, around the common rule of thumb
    min(cores, 2 * batch / 32), which the sweep checks rather than trusts."""
    cores = os.cpu_count() or 1
    bs = workload.batch_size
    rule = max(1, min(cores, round(2 * bs / 32)))
    workers = sorted({0, rule, cores} | ({cores // 2} if cores >= 4 else set()))
    # Pinned memory needs a GPU (torch pins only for an accelerator, and warns): without one,
    # pin_memory=True is the same loader again, so its configurations would measure only noise.
    pins = [False, True] if resolve_device(workload) == "cuda" else [False]
    return {
        "batch_size": sorted({max(1, bs // 2), bs, bs * 2}),
        "num_workers": workers,
        "pin_memory": pins,
        "prefetch_factor": [2],
    }


def grid_configs(grid: dict[str, list]) -> list[dict[str, Any]]:
    for k in CONFIG_KEYS:
        if not grid.get(k):
            raise UsageError(f"empty grid: no values for {k}")
    for b in grid["batch_size"]:
        if b is not None and int(b) <= 0:
            raise UsageError(f"batch sizes must be > 0, got {b}")
    for w in grid["num_workers"]:
        if int(w) < 0:
            raise UsageError(f"num_workers must be >= 0, got {w}")
    for pf in grid["prefetch_factor"]:
        # DataLoader takes prefetch_factor >= 1 (or None without workers); 0 is not "off".
        if pf is not None and int(pf) < 1:
            raise UsageError(f"prefetch_factor must be >= 1, got {pf}")
    out = []
    for bs, nw, pin, pf in itertools.product(*(grid[k] for k in CONFIG_KEYS)):
        if int(nw) == 0 and pf != grid["prefetch_factor"][0]:
            continue  # prefetch_factor means nothing without workers: keep one copy of each such config
        # None (a script's sweep): the script's own value, filled in from its first run.
        out.append(
            {
                "batch_size": None if bs is None else int(bs),
                "num_workers": int(nw),
                "pin_memory": None if pin is None else bool(pin),
                "prefetch_factor": None if pf is None else int(pf),
            }
        )
    return out


def _row(cfg: dict, res: dict) -> dict[str, Any]:
    status = "oom" if res.get("oom") else "ok"
    return {
        **cfg,
        "step_ms": res.get("step_ms"),
        "samples_per_s": res.get("samples_per_s", 0.0),
        "busy_mean": res.get("busy_mean"),
        "busy_std": res.get("busy_std"),
        "peak_mem_bytes": res.get("peak_mem_bytes"),
        "oom": status == "oom",
        "status": status,
        "error": res.get("error"),
        "steps": res.get("steps", 0),
        "load_share": (res.get("breakdown_fraction") or {}).get("load"),
        **verdict_cols(res.get("verdict")),
    }


def verdict_cols(v: dict | None) -> dict[str, Any]:
    """The one verdict of a configuration, as two columns (bound, level)."""
    return {"verdict": (v or {}).get("bound"), "verdict_level": (v or {}).get("level")}


def failed_row(cfg: dict, status: str, reason: str) -> dict[str, Any]:
    """A configuration that gave no measurement: recorded, never best."""
    return {
        **cfg,
        "step_ms": None,
        "samples_per_s": None,
        "busy_mean": None,
        "busy_std": None,
        "peak_mem_bytes": None,
        "oom": status == "oom",
        "status": status,
        "error": reason[:300],
        "steps": 0,
        "load_share": None,
        **verdict_cols(None),
    }


class Interrupted(Exception):
    """Raised by a configuration's run when the user pressed Ctrl-C (a child that ended on SIGINT)."""


def config_key(cfg: dict) -> tuple:
    return tuple(cfg.get(k) for k in CONFIG_KEYS)


def run_grid(
    configs: list[dict],
    measure_one: Callable[[dict], dict],
    *,
    done: list[dict] | None = None,
    on_row: Callable[[list[dict]], None] | None = None,
    say: Callable[[int, int, float | None, str], None] | None = None,
) -> tuple[list[dict], bool]:
    """Each configuration once, in order: measure_one(cfg) -> row. Rows in `done` (from an earlier,
    interrupted sweep of the same grid) are kept, not measured again. A configuration that raises
    is a failed row (UsageError: infeasible, anything else: crashed) and the sweep goes on; Ctrl-C
    stops it. on_row gets the rows so far after each one (a checkpoint). Returns (rows, interrupted)."""
    say = say or (lambda done_, total, eta, label: None)
    before = {config_key(r): r for r in done or []}
    rows: list[dict] = []
    t0, measured = time.perf_counter(), 0
    interrupted = False
    for i, cfg in enumerate(configs):
        if config_key(cfg) in before:
            rows.append(before[config_key(cfg)])
            continue
        eta = (time.perf_counter() - t0) / measured * (len(configs) - i) if measured else None
        say(i, len(configs), eta, _label(cfg))
        try:
            rows.append(measure_one(cfg))
        except (KeyboardInterrupt, Interrupted):
            interrupted = True
            break
        except UsageError as e:
            rows.append(failed_row(cfg, "infeasible", str(e)))
        except Exception as e:  # a crash in the user's model or data: that configuration's result
            rows.append(failed_row(cfg, "crashed", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"))
        measured += 1
        if on_row:
            on_row(rows)
    say(len(rows), len(configs), 0.0, "interrupted" if interrupted else "done")
    return rows, interrupted


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
) -> dict[str, Any]:
    """The perfcore.sweep/1 document; best and knees only from configurations that measured fine."""
    if "status" not in table:
        table = table.assign(status=[] if table.empty else "ok")
    ok = table[(table["status"] == "ok") & (table["samples_per_s"].fillna(0) > 0)] if len(table) else table
    if "round" in ok and len(ok):
        # Successive halving: the best is among the configurations measured longest (the last
        # round). A configuration dropped after a short round can show a rate its longer runs
        # would not (a prefetched queue, a quiet second), and must not win on it.
        ok = ok[ok["round"] == ok["round"].max()]
    best = None
    if len(ok):
        b = ok.loc[ok["samples_per_s"].idxmax()]
        best = {**{k: _py(b[k]) for k in CONFIG_KEYS}, "samples_per_s": float(b["samples_per_s"])}
    failed = [r for r in table.to_dict("records") if r.get("status") != "ok"] if len(table) else []
    return {
        "schema": "perfcore.sweep/1",
        "workload": name,
        "grid": grid,
        "steps": steps,
        "configs": [_clean(r) for r in table.to_dict("records")],
        "best": best,
        "knees": knees(ok) if len(ok) else [],
        "worker_trials": worker_trials(ok, best) if best else [],
        "failed": len(failed),
        "complete": not interrupted and (planned is None or len(table) >= planned),
        "interrupted": interrupted,
        "elapsed_s": time.perf_counter() - t0,
        "rounds": rounds,
    }


def _measure_cfg(workload: Workload, steps: int, warmup: int):
    def one(cfg: dict) -> dict:
        return _row(
            cfg, measure_workload(workload, steps=_steps(cfg, steps), warmup=_warmup(cfg, warmup), overrides=cfg)
        )

    return one


def sweep(
    workload: Workload,
    grid: dict[str, list] | None = None,
    *,
    steps: int = 50,
    warmup: int = 3,
    budget_s: float | None = None,
    progress: Callable[[int, int, float | None, str], None] | None = None,
    done: list[dict] | None = None,
    on_row: Callable[[list[dict]], None] | None = None,
) -> dict[str, Any]:
    grid = grid or default_grid(workload)
    configs = grid_configs(grid)
    say = progress or (lambda done_, total, eta, label: None)
    t0 = time.perf_counter()
    rounds: list = []
    interrupted = False
    if budget_s is None:
        rows, interrupted = run_grid(configs, _measure_cfg(workload, steps, warmup), done=done, on_row=on_row, say=say)
        table = pd.DataFrame(rows)
    else:
        table, interrupted = _halving(workload, configs, steps, warmup, budget_s, say, rounds)
    return sweep_doc(
        workload.name,
        grid,
        steps,
        table,
        t0=t0,
        rounds=rounds,
        interrupted=interrupted,
        planned=None if budget_s else len(configs),
    )


def _warmup(cfg: dict, warmup: int) -> int:
    """Warm-up steps for one configuration: at least the batches its workers load ahead
    (num_workers x prefetch_factor). Until those are consumed the loop runs faster than the
    workers can sustain, and a short measurement (a halving round of a few steps) would reward
    configurations for their head start rather than their rate."""
    return max(warmup, int(cfg["num_workers"]) * int(cfg["prefetch_factor"] or 0))


def _steps(cfg: dict, steps: int) -> int:
    """Measured steps for one configuration: a whole number of worker cycles. Workers started
    together deliver their batches in bursts (one each, then a wait), so a window of 8 steps
    with 3 workers holds 2 or 3 waits depending on where it starts: up to a third off."""
    w = max(1, int(cfg["num_workers"]))
    return -(-steps // w) * w


def _label(cfg: dict) -> str:
    return (
        f"batch {cfg['batch_size']}, workers {cfg['num_workers']}, pin {cfg['pin_memory']}, "
        f"prefetch {cfg['prefetch_factor']}"
    )


def _halving(workload, configs, steps, warmup, budget_s, say, rounds) -> tuple[pd.DataFrame, bool]:
    """Successive halving inside budget_s: round r runs the survivors for steps_r steps each."""
    t0 = time.perf_counter()
    survivors = list(configs)
    n_rounds = max(1, math.ceil(math.log2(len(configs)))) + 1
    steps_r = max(4, steps // (2 ** (n_rounds - 1)))
    final: dict[tuple, dict] = {}
    done = 0
    interrupted = False
    while survivors:

        def tick(i, total, eta, label):
            say(done + i, done + total, max(0.0, budget_s - (time.perf_counter() - t0)), label)

        results, interrupted = run_grid(survivors, _measure_cfg(workload, steps_r, warmup), say=tick)
        for res in results:
            res["round"] = len(rounds)
            final[config_key(res)] = res
        done += len(results)
        rounds.append({"steps": steps_r, "configs": len(results)})
        if interrupted:
            break
        ok = sorted([r for r in results if r["status"] == "ok"], key=lambda r: r["samples_per_s"], reverse=True)
        elapsed = time.perf_counter() - t0
        per_step_s = elapsed / max(1, sum(rd["steps"] * rd["configs"] for rd in rounds))
        keep = max(1, len(ok) // 2)
        next_steps = min(steps, steps_r * 2)
        if len(ok) <= 1 or steps_r >= steps or elapsed + keep * next_steps * per_step_s > budget_s:
            break
        survivors = [{k: r[k] for k in CONFIG_KEYS} for r in ok[:keep]]
        steps_r = next_steps
    say(done, done, 0.0, "interrupted" if interrupted else "done")
    return pd.DataFrame(list(final.values())), interrupted


def knees(ok: pd.DataFrame, within: float = 0.05) -> list[str]:
    """In words: for each batch size (pin/prefetch at their best), the fewest workers that reach
    within 5% of the best throughput at that batch size."""
    out = []
    for bs, g in ok.groupby("batch_size"):
        by_w = g.groupby("num_workers")["samples_per_s"].max().sort_index()
        top = by_w.max()
        enough = by_w[by_w >= (1 - within) * top]
        w = int(enough.index.min())
        more = by_w[by_w.index > w]
        worse = [int(x) for x, v in more.items() if v < by_w[w] * (1 - within)]
        flat = [int(x) for x in more.index if int(x) not in worse]
        tail = []
        if flat:
            tail.append(f"{', '.join(map(str, flat))} add less than {int(within * 100)}%")
        if worse:
            tail.append(f"{', '.join(map(str, worse))} are slower (cores shared with the loop)")
        out.append(
            f"batch {bs}: throughput stops improving at {w} worker(s) ({by_w[w]:.0f} samples/s"
            + (f"; {'; '.join(tail)})" if tail else ")")
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


def _clean(r: dict) -> dict:
    return {k: (None if isinstance(v, float) and v != v else _py(v)) for k, v in r.items()}


def resume_rows(previous: dict[str, Any], grid: dict, steps: int, name: str) -> list[dict]:
    """The finished configurations of an earlier sweep document, when it swept the same thing."""
    if previous.get("workload") != name or previous.get("steps") != steps:
        raise UsageError(
            f"the sweep to resume ran {previous.get('workload')!r} with --steps {previous.get('steps')}; "
            f"this one is {name!r} with --steps {steps}: give the same target and --steps, or a new --out"
        )
    same = {k: [_py(x) for x in v] for k, v in grid.items()} == previous.get("grid")
    if not same:
        raise UsageError(
            "the sweep to resume had another grid; give the same --batch-size/--num-workers/"
            "--pin-memory/--prefetch-factor, or a new --out"
        )
    return [r for r in previous.get("configs", []) if isinstance(r, dict)]
