"""Stage 3, sweep: batch_size x num_workers x pin_memory x prefetch_factor, N steps each, a fresh
DataLoader per configuration (its workers end with it). A configuration that runs out of memory,
cannot run (infeasible) or crashes is recorded with its status and reason, the sweep goes on, and it
is never the best. Ctrl-C ends the sweep with the configurations finished so far, and a sweep can
continue from them (`done`). With a time budget, successive halving: every configuration gets a
few steps, the better half gets twice as many, and so on."""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import time
from typing import Any, Callable

import pandas as pd

from perfcore.analysis.command_results import SweepResult
from perfcore.errors import RunFailed, UsageError
from perfcore.experiments.measurement import Interrupted, Runner, Trial
from perfcore.experiments.runner import as_runner, resolve_device
from perfcore.experiments.sweep_results import (
    CONFIG_KEYS,
    config_key,
    config_row,
    failed_row,
    gain_over_own,
    sweep_doc,
)
from perfcore.workloads import Workload

__all__ = ["sweep", "default_grid", "grid_configs", "run_grid"]


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
            rows.append(failed_row(cfg, "infeasible", "infeasible", str(e)))
        except Exception as e:  # a crash in the user's model or data: that configuration's result
            first = str(e).splitlines()[0] if str(e) else ""
            rows.append(failed_row(cfg, "crashed", "exception", f"{type(e).__name__}: {first}"))
        measured += 1
        if on_row:
            on_row(rows)
    say(len(rows), len(configs), 0.0, "interrupted" if interrupted else "done")
    return rows, interrupted


def _measure_cfg(runner: Runner, steps: int, warmup: int, axes: tuple, tag: Callable[[dict], str]):
    """measure_one for run_grid: the configuration's row, with the loader's settings on `axes` changed;
    a run that failed with nothing to report is a crashed row with its reason."""

    def one(cfg: dict) -> dict:
        trial = Trial(
            _steps(cfg, steps),
            _warmup(cfg, warmup),
            overrides={k: cfg[k] for k in axes},
            tag=tag(cfg),
            decide=True,
        )
        try:
            return config_row(cfg, runner.measure(trial))
        except RunFailed as e:
            return failed_row(cfg, "crashed", "run_failed", str(e))

    return one


def sweep(
    runner: Runner | Workload,
    grid: dict[str, list] | None = None,
    *,
    steps: int = 50,
    warmup: int = 3,
    budget_s: float | None = None,
    progress: Callable[[int, int, float | None, str], None] | None = None,
    done: list[dict] | None = None,
    on_row: Callable[[list[dict]], None] | None = None,
) -> SweepResult:
    """A grid axis given as [None] keeps the loop's own value (a script's sweep): its own settings are
    read first, and each configuration's `replaced` lists what differs from them."""
    runner = as_runner(runner)
    grid = grid or default_grid(runner.workload)
    swept = tuple(k for k, v in grid.items() if list(v) != [None])
    # A script keeps its own settings on the axes not swept (read from one short run); a workload's
    # loader is rebuilt with every axis set.
    t0 = time.perf_counter()  # the sweep's time is all of it: reading the script's settings and trying the patch too
    own = runner.own_settings()
    axes = swept if own is not None and swept else CONFIG_KEYS
    configs = grid_configs(grid)
    if own is not None:
        configs = [_own_config(c, own, axes) for c in configs]
    index = {config_key(c): i for i, c in enumerate(configs)}
    say = progress or (lambda done_, total, eta, label: None)
    rounds: list = []
    if budget_s is None:
        measure = _measure_cfg(runner, steps, warmup, axes, lambda c: f"config{index[config_key(c)]}")
        rows, interrupted = run_grid(configs, measure, done=done, on_row=on_row, say=say)
        table = pd.DataFrame(rows)
    else:
        table, interrupted = _halving(runner, configs, steps, warmup, budget_s, say, rounds, axes)
    result = sweep_doc(
        runner.name,
        grid,
        steps,
        table,
        t0=t0,
        rounds=rounds,
        interrupted=interrupted,
        planned=None if budget_s else len(configs),
    )
    if own is None:
        return result
    kept = _keep_own(result, grid, own, swept, runner, say)
    return dataclasses.replace(kept, elapsed_s=time.perf_counter() - t0)


def _own_config(cfg: dict, own: dict, axes: tuple) -> dict:
    """The configuration with the script's own values where an axis is not swept (None), and what it
    replaces; prefetch_factor means nothing without workers (None), and torch's default (2) where the script
    had none."""
    full = {k: (own[k] if v is None else v) for k, v in cfg.items()}
    if not full["num_workers"]:
        full["prefetch_factor"] = None
    elif full["prefetch_factor"] is None:
        full["prefetch_factor"] = 2
    replaced = ", ".join(f"{k} {own[k]}->{full[k]}" for k in axes if full[k] is not None and own[k] != full[k])
    return {**full, "replaced": replaced or None}


def _keep_own(result: SweepResult, grid: dict, own: dict, swept: tuple, runner: Runner, say=None) -> SweepResult:
    """A sweep of a loop's own settings says what they were, which it kept, and the patch to the best."""
    from perfcore.experiments.sweep_patch import sweep_patch

    best = result.best
    gain = None
    if best:
        row = next((r for r in result.configs if config_key(r) == config_key(best)), {})
        best = {**best, "replaced": row.get("replaced")}
        gain = gain_over_own(result.configs, best) if row.get("replaced") else None
    if gain is not None and gain["change"] != "faster":
        # Ahead of the script's own settings by less than the runs' noise: no change is offered on it.
        patch = {"status": "unchanged", "reason": "within_noise", **gain}
    else:
        n = len(result.configs)
        out, cmd = getattr(runner, "out", None), getattr(runner, "cmd", None)
        trying = (
            (lambda: say(n, n, None, "trying the best configuration's patch on a copy of the script")) if say else None
        )
        patch = sweep_patch(own["site"], best, own, out, cmd=cmd, on_try=trying)
    return dataclasses.replace(
        result,
        best=best,
        script_settings={k: v for k, v in own.items() if k != "site"},
        kept={k: own[k] for k in grid if k not in swept},
        patch=patch,
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


def _halving(runner, configs, steps, warmup, budget_s, say, rounds, axes) -> tuple[pd.DataFrame, bool]:
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

        index = {config_key(c): i for i, c in enumerate(survivors)}
        tag = lambda c, r=len(rounds): f"round{r}_config{index[config_key(c)]}"  # noqa: E731
        results, interrupted = run_grid(survivors, _measure_cfg(runner, steps_r, warmup, axes, tag), say=tick)
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
        survivors = [{k: v for k, v in r.items() if k in CONFIG_KEYS or k == "replaced"} for r in ok[:keep]]
        steps_r = next_steps
    say(done, done, 0.0, "interrupted" if interrupted else "done")
    return pd.DataFrame(list(final.values())), interrupted
