"""Verdict stability: `perfcore run` on unmodified test scripts, N runs each on the machine as it is
("quiet") and N with CPU burners alongside ("busy"), and the verdict each run gave.

    python bench/bench_verdicts.py [--runs 5] [--burners 2] [--cases word_lm,eval_every,meter_low]

A stable tool gives one verdict per case (or "borderline") across all runs, quiet and busy. Prints a
table per case: bound/level, the trimmed share of the named (or largest) cause and its interval,
interference, outliers set apart; and the script's own data-time meter where it prints one.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE.parent / "tests" / "scripts"

CASES = {
    # Manual SGD (p.data.add_), no DataLoader, batches sliced from one tensor: compute plus host.
    "word_lm": [str(SCRIPTS / "word_lm.py"), "--epochs", "2"],
    # Evaluation every 8 steps on a held-out loader: evaluation apart from training.
    "eval_every": [str(SCRIPTS / "eval_every.py"), "--steps", "64", "--eval-every", "8"],
    # A data wait well below the tier: 1 ms per item sleeps in the main process, 16 items against a
    # wide model (the script's own meter gives the truth).
    "meter_low": [str(SCRIPTS / "train_meter.py"), "--delay", "0.0002", "--width", "1536", "--epochs", "2"],
}


def one(cmd: list[str], out: Path) -> dict:
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--warmup", "3", "--out", str(out), "--",
                        sys.executable, *cmd], capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        return {"error": p.stderr.strip().splitlines()[-1:] or ["exit %d" % p.returncode]}
    doc = json.loads((out / "run.json").read_text())
    v = doc["verdict"]
    rb = doc.get("breakdown_robust") or {}
    causes = v.get("causes") or []
    lb = causes[0]["label"] if causes else max(("load", "transfer", "comm", "host"),
                                               key=lambda k: (rb.get("share") or doc["breakdown_fraction"]).get(k, 0))
    share = (rb.get("share") or {}).get(lb, doc["breakdown_fraction"][lb])
    band = (rb.get("share_band") or {}).get(lb)
    meter = next((line.split()[1] for line in p.stdout.splitlines() if line.startswith("DATA_SHARE")), None)
    intf = doc.get("interference") or v.get("interference") or {}
    return {"bound": v["bound"], "level": v["level"], "label": lb, "share": share, "band": band,
            "mean_share": doc["breakdown_fraction"][lb], "steps": doc["steps"],
            "step_ms": doc["step_time_ms"]["mean"], "p50": doc["step_time_ms"]["p50"],
            "outliers": (rb.get("outliers") or {}).get("count", 0), "meter": meter,
            "others_cores": intf.get("others_cores"), "evaluation": (doc.get("evaluation") or {}).get("passes")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--burners", type=int, default=2)
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="perfcore-bench-verdicts-"))
    results: dict[str, dict[str, list[dict]]] = {}
    for mode in ("quiet", "busy"):
        burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                   for _ in range(args.burners if mode == "busy" else 0)]
        try:
            for name in args.cases.split(","):
                for i in range(args.runs):
                    r = one(CASES[name], tmp / f"{name}-{mode}-{i}")
                    results.setdefault(name, {}).setdefault(mode, []).append(r)
                    print(f"{name:<11} {mode:<5} {i}: {r}", flush=True)
        finally:
            for b in burners:
                b.kill()
                b.wait()
    print("\ncase        mode   verdicts (bound/level, trimmed share [interval] of the cause, mean share)")
    for name, modes in results.items():
        for mode, rs in modes.items():
            cells = []
            for r in rs:
                if "error" in r:
                    cells.append(f"error {r['error']}")
                    continue
                band = f"[{100 * r['band'][0]:.1f}-{100 * r['band'][1]:.1f}]" if r["band"] else ""
                cells.append(f"{r['bound']}/{r['level']} {r['label']} {100 * r['share']:.1f}%{band} "
                             f"(mean {100 * r['mean_share']:.1f}%)")
            print(f"{name:<11} {mode:<5}  " + " | ".join(cells))
    print(f"\nrun folders under {tmp}")


if __name__ == "__main__":
    main()
