"""`perfcore merge` of a large job's node folders: 16, 32 and 64 ranks (8 a node) x 10,000 steps, parts made
synthetically (tests/job_parts.py: every step's intervals kept, as the recording keeps the first 10,000;
hosts' clocks hours apart; one node slower). Per size: the merge's wall time, its peak RSS (the child's
own, from wait4), trace.json's and report.html's sizes, and whether the slow node was named. With
--baseline TREE, the same merges run with TREE's perfcore first (side by side, in one run).

    .venv/bin/python bench/bench_merge_scale.py [--ranks 16,32,64] [--steps 10000] [--baseline /path/to/tree]"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "tests"))

from job_parts import write_job  # noqa: E402


def merge(tree: Path, folders: list[Path], out: Path) -> dict[str, float | str]:
    """One `perfcore merge` in a child process whose perfcore is `tree`'s: wall s, peak RSS MB."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-m", "perfcore", "merge", *map(str, folders), "--out", str(out)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    rc = os.waitstatus_to_exitcode(status)
    row: dict[str, float | str] = {"wall_s": wall, "rss_mb": usage.ru_maxrss / 1024, "rc": rc}
    if rc != 0:
        row["error"] = err.strip().splitlines()[-1] if err.strip() else "?"
        return row
    doc = json.loads((out / "run.json").read_text())
    row["trace_mb"] = (out / "trace.json").stat().st_size / 1e6
    row["html_kb"] = (out / "report.html").stat().st_size / 1e3
    row["slow_node"] = ((doc.get("nodes") or {}).get("slow_node") or {}).get("host") or "-"
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="16,32,64")
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--per-node", type=int, default=8)
    ap.add_argument("--baseline", type=Path, help="another perfcore tree, merged with first")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-merge-scale-"))
    trees = ([("baseline", args.baseline)] if args.baseline else []) + [("this", HERE)]
    print(f"perfcore merge of N ranks x {args.steps} steps ({args.per_node} ranks a node, node1 slower); {tmp}")
    print(f"{'ranks':>5} {'tree':>8} {'wall s':>7} {'peak MB':>8} {'trace MB':>9} {'html kB':>8}  slow node")
    try:
        for n in (int(x) for x in args.ranks.split(",")):
            folders = write_job(tmp / f"r{n}", ranks=n, per_node=args.per_node, steps=args.steps)
            for name, tree in trees:
                out = tmp / f"r{n}" / f"merged-{name}"
                r = merge(tree, folders, out)
                if r["rc"] != 0:
                    print(f"{n:>5} {name:>8} {r['wall_s']:>7.1f} {r['rss_mb']:>8.0f}  failed: {r['error']}")
                    continue
                print(
                    f"{n:>5} {name:>8} {r['wall_s']:>7.1f} {r['rss_mb']:>8.0f} {r['trace_mb']:>9.1f} "
                    f"{r['html_kb']:>8.0f}  {r['slow_node']}"
                )
                shutil.rmtree(out)
            shutil.rmtree(tmp / f"r{n}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
