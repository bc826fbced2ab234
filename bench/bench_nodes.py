"""A job across machines, simulated on this one (tests/nodes.py: a UTS and a time namespace per node, gloo
ranks on loopback, one node slowed from outside): what each node's perfcore said, the clocks the parts
were aligned to against the namespaces' true offsets, and the job per node.

    .venv/bin/python bench/bench_nodes.py [--nodes 2] [--launcher torchrun|srun] [--steps 30] [--shared]

Needs root (or user namespaces) and Linux 5.6+ for time namespaces; says why and exits 2 without them."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from nodes import WORK, namespaces_unavailable, plan_nodes, run_job  # noqa: E402

from perfcore.analysis.labels import LABELS  # noqa: E402
from perfcore.analysis.nodes import RankSteps, align_clocks, job_nodes, rank_events  # noqa: E402
from perfcore.analysis.reader import load_part  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--per-node", type=int, default=2)
    ap.add_argument("--launcher", choices=("torchrun", "srun"), default="torchrun")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--slow", type=int, default=1, help="the node to slow (-1: none)")
    ap.add_argument("--shared", action="store_true", help="one folder for every node (a shared filesystem)")
    ap.add_argument("--keep", help="run in this folder and keep it")
    args = ap.parse_args()
    why = namespaces_unavailable()
    if why:
        print(f"bench_nodes: cannot simulate nodes here: {why}", file=sys.stderr)
        return 2
    tmp = Path(args.keep or tempfile.mkdtemp(prefix="bench-nodes-"))
    tmp.mkdir(parents=True, exist_ok=True)
    nodes = plan_nodes(args.nodes, None if args.slow < 0 else args.slow)
    job = run_job(
        tmp,
        nodes=nodes,
        per_node=args.per_node,
        launcher=args.launcher,
        steps=args.steps,
        shared=args.shared,
        script_args=WORK,
    )
    print(
        f"{len(nodes)} nodes x {args.per_node} ranks, {args.launcher}, {args.steps} steps: {job.wall_s:.1f} s; in {tmp}"
    )
    parts = []
    for la in job.launches:
        who = la.node.hostname + ("" if la.task is None else f" task {la.task}")
        slowed = " (slowed)" if la.node.slowed else ""
        print(f"\n== {who}{slowed}: exit {la.returncode}, monotonic clock +{la.node.offset_s} s")
        print("\n".join(line for line in la.stderr.splitlines() if "Warning" not in line and "W1" not in line[:3]))
    for folder in dict.fromkeys(la.out for la in job.launches):
        parts += [
            load_part(d) for d in sorted(folder.rglob("parts/rank*"))
        ]  # a second run of one folder: in a sub-folder
    if not parts:
        print("no rank left a part", file=sys.stderr)
        return 1
    al = align_clocks([rank_events(raw, doc["host"], doc["rank"]) for doc, _, raw in parts])
    true = {n.hostname: n.offset_s for n in nodes}
    print(f"\nclocks onto {al.reference}'s:")
    for h in al.hosts:
        err_ms = (h.offset_ns + (true[h.host] - true[al.reference]) * 1e9) / 1e6
        print(
            f"  {h.host}: offset {h.offset_ns / 1e9:+.6f} s ({h.source.value}, {h.steps} steps), "
            f"spread {h.spread_ns / 1e6:.3f} ms, error of the median {h.error_ns / 1e6:.3f} ms; "
            f"against the namespaces' true offset: {err_ms:+.3f} ms"
        )
    if al.residual_ns is not None:
        print(
            f"  collective ends of one step across hosts after it: median {al.residual_ns / 1e6:.3f} ms, "
            f"p90 {al.residual_p90_ns / 1e6:.3f} ms over {al.residual_steps} steps"
        )
    ranks = []
    for doc, steps, _ in parts:
        m = steps[~steps["warmup"].to_numpy(dtype=bool)]
        ranks.append(
            RankSteps(
                doc["host"], doc["rank"], m["wall_ms"].to_numpy(), {lb: m[f"{lb}_ms"].to_numpy() for lb in LABELS}
            )
        )
    jn = job_nodes(ranks)
    print(f"\nper node ({jn.steps} steps):")
    for n in jn.nodes:
        shares = " ".join(f"{lb} {100 * n.breakdown_fraction[lb]:.0f}%" for lb in LABELS)
        waits = f", waits for {', '.join(n.waits_for)}" if n.waits_for else ""
        print(f"  {n.host} ranks {list(n.ranks)}: step {n.step_ms:.1f} ms, {shares}; {n.state.value}{waits}")
    if jn.slow_node:
        s = jn.slow_node
        print(
            f"slow node: {s.host} (rank {s.rank}), {s.excess_label} +{s.excess_ms:.1f} ms a step "
            f"(own work {s.work_ms:.1f} ms against {s.others_work_ms:.1f} ms); {s.waiting_host} waits "
            f"{s.wait_ms:.1f} ms of a {s.step_ms:.1f} ms step ({100 * s.wait_share:.0f}%)"
        )
    return max(la.returncode for la in job.launches)


if __name__ == "__main__":
    sys.exit(main())
