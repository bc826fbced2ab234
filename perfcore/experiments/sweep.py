"""Stage 3, sweep: batch_size x num_workers x pin_memory x prefetch_factor, N steps each, a fresh
DataLoader per configuration (its workers end with it); OOM is recorded and the sweep goes on.
With a time budget, successive halving: every configuration gets a few steps, the better half
gets twice as many, and so on."""
from __future__ import annotations

import itertools
import math
import os
import time
from typing import Any, Callable

import pandas as pd

from perfcore.errors import UsageError
from perfcore.workloads import Workload
from perfcore.experiments.runner import measure

__all__ = ["sweep", "default_grid", "knees", "CONFIG_KEYS"]

CONFIG_KEYS = ("batch_size", "num_workers", "pin_memory", "prefetch_factor")


def default_grid(workload: Workload) -> dict[str, list]:
    """Sized to the machine: workers up to the core count, around the common rule of thumb
    min(cores, 2 * batch / 32), which the sweep checks rather than trusts."""
    cores = os.cpu_count() or 1
    bs = workload.batch_size
    rule = max(1, min(cores, round(2 * bs / 32)))
    workers = sorted({0, rule, cores} | ({cores // 2} if cores >= 4 else set()))
    return {"batch_size": sorted({max(1, bs // 2), bs, bs * 2}), "num_workers": workers,
            "pin_memory": [False, True], "prefetch_factor": [2]}


def grid_configs(grid: dict[str, list]) -> list[dict[str, Any]]:
    for k in CONFIG_KEYS:
        if not grid.get(k):
            raise UsageError(f"empty grid: no values for {k}")
    for b in grid["batch_size"]:
        if int(b) <= 0:
            raise UsageError(f"batch sizes must be > 0, got {b}")
    for w in grid["num_workers"]:
        if int(w) < 0:
            raise UsageError(f"num_workers must be >= 0, got {w}")
    out = []
    for bs, nw, pin, pf in itertools.product(*(grid[k] for k in CONFIG_KEYS)):
        if int(nw) == 0 and pf != grid["prefetch_factor"][0]:
            continue  # prefetch_factor means nothing without workers: keep one copy of each such config
        out.append({"batch_size": int(bs), "num_workers": int(nw), "pin_memory": bool(pin),
                    "prefetch_factor": int(pf) if pf else None})
    return out


def _row(cfg: dict, res: dict) -> dict[str, Any]:
    return {**cfg, "step_ms": res.get("step_ms"), "samples_per_s": res.get("samples_per_s", 0.0),
            "busy_mean": res.get("busy_mean"), "busy_std": res.get("busy_std"),
            "peak_mem_bytes": res.get("peak_mem_bytes"), "oom": bool(res.get("oom")),
            "steps": res.get("steps", 0), "load_share": (res.get("breakdown_fraction") or {}).get("load")}


def sweep(workload: Workload, grid: dict[str, list] | None = None, *, steps: int = 50, warmup: int = 3,
          budget_s: float | None = None, progress: Callable[[int, int, float | None, str], None] | None = None
          ) -> dict[str, Any]:
    grid = grid or default_grid(workload)
    configs = grid_configs(grid)
    say = progress or (lambda done, total, eta, label: None)
    t0 = time.perf_counter()
    rounds = []
    if budget_s is None:
        rows = []
        for i, cfg in enumerate(configs):
            elapsed = time.perf_counter() - t0
            eta = elapsed / i * (len(configs) - i) if i else None
            say(i, len(configs), eta, _label(cfg))
            rows.append(_row(cfg, measure(workload, steps=_steps(cfg, steps), warmup=_warmup(cfg, warmup),
                                          overrides=cfg)))
        say(len(configs), len(configs), 0.0, "done")
        table = pd.DataFrame(rows)
    else:
        table = _halving(workload, configs, steps, warmup, budget_s, say, rounds)
    ok = table[~table["oom"]]
    if ok.empty:
        raise UsageError("every configuration ran out of memory; try smaller batch sizes")
    if "round" in ok:
        # Successive halving: the best is among the configurations measured longest (the last
        # round). A configuration dropped after a short round can show a rate its longer runs
        # would not (a prefetched queue, a quiet second), and must not win on it.
        ok = ok[ok["round"] == ok["round"].max()]
    best = ok.loc[ok["samples_per_s"].idxmax()]
    doc = {
        "schema": "perfcore.sweep/1",
        "workload": workload.name,
        "grid": grid,
        "steps": steps,
        "configs": [_clean(r) for r in table.to_dict("records")],
        "best": {**{k: _py(best[k]) for k in CONFIG_KEYS}, "samples_per_s": float(best["samples_per_s"])},
        "knees": knees(ok),
        "elapsed_s": time.perf_counter() - t0,
        "rounds": rounds,
    }
    return doc


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
    return (f"batch {cfg['batch_size']}, workers {cfg['num_workers']}, pin {cfg['pin_memory']}, "
            f"prefetch {cfg['prefetch_factor']}")


def _halving(workload, configs, steps, warmup, budget_s, say, rounds) -> pd.DataFrame:
    """Successive halving inside budget_s: round r runs the survivors for steps_r steps each."""
    t0 = time.perf_counter()
    survivors = list(configs)
    n_rounds = max(1, math.ceil(math.log2(len(configs)))) + 1
    steps_r = max(4, steps // (2 ** (n_rounds - 1)))
    final: dict[tuple, dict] = {}
    done = 0
    while survivors:
        results = []
        for cfg in survivors:
            elapsed = time.perf_counter() - t0
            say(done, done + len(survivors) - len(results), max(0.0, budget_s - elapsed), _label(cfg))
            res = _row(cfg, measure(workload, steps=_steps(cfg, steps_r), warmup=_warmup(cfg, warmup),
                                    overrides=cfg))
            res["round"] = len(rounds)
            results.append(res)
            final[tuple(cfg[k] for k in CONFIG_KEYS)] = res
        done += len(results)
        rounds.append({"steps": steps_r, "configs": len(results)})
        ok = sorted([r for r in results if not r["oom"]], key=lambda r: r["samples_per_s"], reverse=True)
        elapsed = time.perf_counter() - t0
        per_step_s = elapsed / max(1, sum(rd["steps"] * rd["configs"] for rd in rounds))
        keep = max(1, len(ok) // 2)
        next_steps = min(steps, steps_r * 2)
        if len(ok) <= 1 or steps_r >= steps or elapsed + keep * next_steps * per_step_s > budget_s:
            break
        survivors = [{k: r[k] for k in CONFIG_KEYS} for r in ok[:keep]]
        steps_r = next_steps
    say(done, done, 0.0, "done")
    return pd.DataFrame(list(final.values()))


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
        out.append(f"batch {bs}: throughput stops improving at {w} worker(s) ({by_w[w]:.0f} samples/s"
                   + (f"; {'; '.join(tail)})" if tail else ")"))
    return out


def _py(v):
    return v.item() if hasattr(v, "item") else v


def _clean(r: dict) -> dict:
    return {k: (None if isinstance(v, float) and v != v else _py(v)) for k, v in r.items()}
