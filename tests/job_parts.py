"""Synthetic parts of a job across machines, as each rank's process writes its part (run.json, steps.csv,
trace.npz), one folder per node: every step ends in a collective that ends together on every rank (with
wake-up jitter), read on each host's own monotonic clock (hours apart), one node's ranks computing longer.
For the merge's scale (bench/bench_merge_scale.py, tests/test_nodes_scale.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from perfcore.analysis.attribution import step_table, summarize
from perfcore import jsonio

__all__ = ["write_job", "HOUR_NS"]

HOUR_NS = 3600 * 10**9
PHASES = {0: "load", 2: "compute", 3: "comm"}


def _clock(node: int) -> int:
    # Each host booted at its own time: hours apart, and not on a whole millisecond.
    return node * HOUR_NS + node * 1_234_567


def write_job(
    root: Path, *, ranks: int, per_node: int, steps: int, slow_node: int | None = 1, warmup: int = 5, seed: int = 0
) -> list[Path]:
    """One folder per node under root (node0, node1, ...), each with its ranks' parts; returns them. On the
    true clock every step of every rank starts together and ends when its collective ends; each rank
    loads 1 ms, computes 10 ms (the slow node's ranks 14 ms), then waits in the collective for the slowest."""
    rng = np.random.default_rng(seed)
    nodes = (ranks + per_node - 1) // per_node
    compute = np.where(np.arange(ranks) // per_node == slow_node, 14.0, 10.0)[:, None] + rng.gamma(
        20, 0.05, (ranks, steps)
    )
    load = 1.0 + rng.gamma(4, 0.05, (ranks, steps))
    work_ns = ((load + compute) * 1e6).astype(np.int64)
    step_ns = work_ns.max(axis=0) + 200_000  # the collective ends 0.2 ms after the last rank enters it
    start = np.concatenate([[0], np.cumsum(step_ns)[:-1]]) + 10**12
    folders = []
    for node in range(nodes):
        folder = Path(root) / f"node{node}"
        for rank in range(node * per_node, min(ranks, (node + 1) * per_node)):
            _write_part(folder / "parts" / f"rank{rank}", rank, ranks, f"node{node}", start, step_ns,
                        load[rank], work_ns[rank], _clock(node), rng, warmup)
        folders.append(folder)
    return folders


def _write_part(part: Path, rank, world, host, start, step_ns, load_ms, work_ns, clock, rng, warmup) -> None:
    n = len(start)
    # Late wake-ups: a rank records a collective's end late, never early (under the 0.2 ms the collective
    # takes after its last rank enters, so a step's own work still fits before it).
    jitter = np.minimum(rng.gamma(2, 25_000, n), 150_000).astype(np.int64)
    s1 = start + clock + step_ns + jitter
    s0 = np.concatenate([[start[0] + clock], s1[:-1]])  # a rank's next step starts where its last one ended
    load_end = s0 + (load_ms * 1e6).astype(np.int64)
    comm_start = s0 + work_ns
    table = step_table(s0, s1, {"load": (s0, load_end), "compute": (load_end, comm_start), "comm": (comm_start, s1)},
                       warmup=warmup)
    doc = summarize(table, on_gpu=False, backend="host", device="cpu")
    doc.update(pid=1000 + rank, rank=rank, world_size=world, host=host, argv=["train.py"], nested_in=None,
               exit={"reason": "finished", "exception": None}, step_source="optimizer")
    part.mkdir(parents=True)
    table.drop(columns=[c for c in table if c.endswith("_ns")]).to_csv(part / "steps.csv", index=False)
    span_start = np.stack([s0, load_end, comm_start], axis=1).reshape(-1)
    span_end = np.stack([load_end, comm_start, s1], axis=1).reshape(-1)
    np.savez_compressed(
        part / "trace.npz",
        span_phase=np.tile(np.array(list(PHASES), np.int32), n),
        span_start_ns=span_start,
        span_end_ns=span_end,
        span_thread=np.full(3 * n, 1, np.int64),
        span_step=np.repeat(np.arange(n, dtype=np.int64), 3),
        phase_ids=np.array(list(PHASES), np.int32),
        phase_names=np.array(list(PHASES.values())),
        step_start_ns=s0,
        step_wall_ns=s1 - s0,
        detail_through=np.int64(n - 1),
        detail_settled=np.int64(n),
        detail_window=np.zeros(0, np.int64),
        detail_cap_steps=np.int64(10_000),
        detail_cap_rows=np.int64(200_000),
    )
    jsonio.write(part / "run.json", doc)
