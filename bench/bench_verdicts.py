"""Verdict stability: `perfcore run` on unmodified test scripts, N runs each on the machine as it is
("quiet") and N with CPU burners alongside ("busy"), and the verdict each run gave.

    python bench/bench_verdicts.py [--runs 5] [--burners 2] [--cases word_lm,eval_every,meter_low,workers_hide]

A stable tool gives one verdict per case (or "borderline") across all runs, quiet and busy. Prints a
table per case: bound/level, the trimmed share of the named cause (else the case's own, else the
largest) and its interval, the script's own data-time meter where it prints one, the other processes'
cores perfcore measured during the run, outliers set apart, and the 1-minute load average before and
after the run (the machine is shared: "quiet" is the machine as it is).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE.parent / "tests" / "scripts"

# name: (command, the label reported when no cause is named: the one the case is about)
CASES = {
    # Manual SGD (p.data.add_), no DataLoader, batches sliced from one tensor: compute plus host.
    "word_lm": ([str(SCRIPTS / "word_lm.py"), "--epochs", "2"], None),
    # Evaluation every 8 steps on a held-out loader: evaluation apart from training.
    "eval_every": ([str(SCRIPTS / "eval_every.py"), "--steps", "64", "--eval-every", "8"], None),
    # Compute-bound with a data wait below the tier (the script's meter read 7.2% on a loaded machine):
    # 0.2 ms per item sleeps in the main process, 16 items against a wide model.
    "meter_low": ([str(SCRIPTS / "train_meter.py"), "--delay", "0.0002", "--width", "1536", "--epochs", "2"], "load"),
    # Two workers whose reads are mostly hidden behind compute, ~9% of each step exposed (the meter; more
    # where the machine is so crowded that the workers wake late even with no read at all).
    "workers_hide": ([str(SCRIPTS / "workers_hide.py"), "--steps", "160", "--batch-size", "64"], "load"),
}


def one(cmd: list[str], out: Path, cause: str | None = None) -> dict:
    load_before = os.getloadavg()[0]
    p = subprocess.run(
        [sys.executable, "-m", "perfcore.cli", "run", "--warmup", "3", "--out", str(out), "--", sys.executable, *cmd],
        capture_output=True,
        text=True,
        timeout=900,
    )
    load = (load_before, os.getloadavg()[0])
    if p.returncode != 0:
        return {"error": p.stderr.strip().splitlines()[-1:] or ["exit %d" % p.returncode], "load": load}
    doc = json.loads((out / "run.json").read_text())
    v = doc["verdict"]
    rb = doc.get("breakdown_robust") or {}
    causes = [c for c in v.get("ranked") or [] if c.get("level") != "minor"]  # the causes it names
    lb = (
        causes[0]["label"]
        if causes
        else cause
        or max(
            ("load", "transfer", "comm", "host"), key=lambda k: (rb.get("share") or doc["breakdown_fraction"]).get(k, 0)
        )
    )
    share = (rb.get("share") or {}).get(lb, doc["breakdown_fraction"][lb])
    band = (rb.get("share_band") or {}).get(lb)
    meter = next((line.split()[1] for line in p.stdout.splitlines() if line.startswith("DATA_SHARE")), None)
    intf = doc.get("interference") or v.get("interference") or {}
    # A cause surely past 10% whose interval straddles 20% is "warn" and said to be borderline critical.
    level = v["level"] + (" (borderline critical)" if causes and causes[0].get("borderline_tier") == 0.2 else "")
    return {
        "bound": v["bound"],
        "level": level,
        "label": lb,
        "share": share,
        "band": band,
        "mean_share": doc["breakdown_fraction"][lb],
        "steps": doc["steps"],
        "step_ms": doc["step_time_ms"]["mean"],
        "p50": doc["step_time_ms"]["p50"],
        "outliers": (rb.get("outliers") or {}).get("count", 0),
        "meter": meter,
        "others_cores": intf.get("others_cores"),
        "evaluation": (doc.get("evaluation") or {}).get("passes"),
        "material": bool(intf.get("material")),
        "load": load,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--burners", type=int, default=2)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument(
        "--from-log",
        type=Path,
        help="print the tables from the per-run lines of an earlier run's output "
        "(one cut short too) instead of running",
    )
    args = ap.parse_args()
    if args.from_log:
        results: dict[str, dict[str, list[dict]]] = {}
        for line in args.from_log.read_text().splitlines():
            head, _, rest = line.partition(": ")
            if rest.startswith("{") and len(head.split()) == 3:
                name, mode, _ = head.split()
                results.setdefault(name, {}).setdefault(mode, []).append(ast.literal_eval(rest))
        for name, modes in results.items():
            print(f"\n{name}\n\n{table(modes)}")
        return
    tmp = Path(tempfile.mkdtemp(prefix="perfcore-bench-verdicts-"))
    results = {}
    for mode in ("quiet", "busy"):
        burners = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.burners if mode == "busy" else 0)
        ]
        try:
            for name in args.cases.split(","):
                for i in range(args.runs):
                    cmd, cause = CASES[name]
                    r = one(cmd, tmp / f"{name}-{mode}-{i}", cause)
                    results.setdefault(name, {}).setdefault(mode, []).append(r)
                    print(f"{name:<11} {mode:<5} {i}: {r}", flush=True)
        finally:
            for b in burners:
                b.kill()
                b.wait()
    for name, modes in results.items():
        print(f"\n{name}\n")
        print(table(modes))
    print(f"\nrun folders under {tmp}")


def table(modes: dict[str, list[dict]]) -> str:
    """One case's runs as a Markdown table, a row per run."""
    rows = [
        "| mode | run | verdict (bound/level) | trimmed share of the cause [95% interval] | script's meter | "
        "others' cores (perfcore) | outliers | steps, mean/p50 step | load avg before/after |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for mode, rs in modes.items():
        for i, r in enumerate(rs):
            ld = "%.1f/%.1f" % r["load"]
            if "error" in r:
                rows.append(f"| {mode} | {i} | error: {r['error']} | | | | | | {ld} |")
                continue
            band = f" [{100 * r['band'][0]:.1f}-{100 * r['band'][1]:.1f}]" if r["band"] else ""
            meter = f"{100 * float(r['meter']):.1f}%" if r["meter"] else "-"
            oc = (
                "-"
                if r["others_cores"] is None
                else f"{r['others_cores']:.2f}" + (" (material)" if r["material"] else "")
            )
            rows.append(
                f"| {mode} | {i} | {r['bound']}/{r['level']} | {r['label']} {100 * r['share']:.1f}%{band} | "
                f"{meter} | {oc} | {r['outliers']} | {r['steps']}, {r['step_ms']:.1f}/{r['p50']:.1f} ms | {ld} |"
            )
    return "\n".join(rows)


if __name__ == "__main__":
    main()
