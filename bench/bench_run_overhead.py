"""Overhead of `perfcore run` on the loop shapes users have, against the same script uninstrumented and
under torch.profiler (CPU activity), measured side by side in the same rings; and whether the overhead
perfcore reports about itself (run.json `overhead`, per step) agrees with what the ring measured.

    python bench/bench_run_overhead.py [--quick] [--shapes mlp pil0 pil2 host tiny infer] [--rings 4]
                                       [--seconds 4] [--against OTHER_CHECKOUT]

Shapes: bench/overhead_shapes.py (the MLP; a PIL-decode Dataset with num_workers=0 and with 2 workers;
a host-heavy loop with per-sample `.item()` metrics; a tiny 0.25 ms step; a forward-only inference loop;
Lightning Fabric's image_classifier example and a Hugging Face Trainer). Every variant runs on one intra-op
thread (--threads: another count, 0 for torch's default).
Variants in each ring: the script uninstrumented, a second uninstrumented process (the control: what two
processes of the same script differ by), `perfcore run` (defaults: line sampler, sync-call counter and the
monitor on), `perfcore run --no-lines --no-monitor` (samplers off), and torch.profiler.

The variants run at once as processes in lock-step (bench/overhead_train.py, BENCH_RING): each runs a
block of steps, then hands over to the next, so only one computes at a time and each block of one variant
has blocks of the others right before and after it. On a shared machine whose speed drifts by a factor of
two from one second to the next, this is what makes a 2% difference measurable: a ring's overhead is the
median over rounds of (block of the variant / mean of the two uninstrumented blocks of that round) - 1.
A process's own memory layout moves its speed by up to 2% for the whole run, so this is repeated over
rings of fresh processes; the table gives the mean over rings and a 95% interval (t, rings - 1).
What a ring cannot see: work in perfcore's parent process (its monitor) runs while other variants
compute too, so it lands on all of them alike (on 2 cores it mostly takes the idle one).

Targets (issue 37, on a quiet 2-core machine): <= 1% on steps of 5 ms or more, <= 3% on a 1 ms step,
<= 5 us of perfcore time per step on the tiny loop; the self-report within 2 points of the ring.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# A nominal step per shape (ms, quiet machine): blocks are sized to >= 10 ms (a fifo hand-over costs
# ~50 us) and rounds to the seconds each variant gets per ring.
STEP_MS = {"mlp": 2.0, "pil0": 25.0, "pil2": 25.0, "host": 4.0, "tiny": 0.25, "infer": 3.0, "fabric": 120.0, "hf": 8.0}
IMPORTS = "uninstrumented, perfcore's imports first"
NO_MONITOR, NO_LINES = "perfcore run --no-monitor", "perfcore run --no-lines"
BARE, CONTROL, RUN, RUN_OFF, PROF = (
    "uninstrumented",
    "uninstrumented, 2nd process",
    "perfcore run",
    "perfcore run, samplers off",
    "torch.profiler (CPU)",
)
T975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}


def _commands(variants, script: list[str], ring_dir: Path) -> tuple[dict, dict[str, str]]:
    """Each variant's command and extra variables; the run folder (under ring_dir) of each perfcore run."""

    def run(out: str, *opts: str) -> list[str]:
        return [sys.executable, "-m", "perfcore.cli", "run", "-q", *opts, "--out", str(ring_dir / out), "--"] + script

    cmds = {
        BARE: (script, {}),
        CONTROL: (script, {}),  # the control: what two processes differ by
        RUN: (run("run"), {}),
        RUN_OFF: (run("run-off", "--no-lines", "--no-monitor"), {}),
        PROF: (script, {"PROFILE": "torch"}),
        IMPORTS: (script, {"PRELOAD": "perfcore"}),
        NO_MONITOR: (run("run-nomon", "--no-monitor"), {}),
        NO_LINES: (run("run-nolines", "--no-lines"), {}),
    }
    outs = {RUN: "run", RUN_OFF: "run-off", NO_MONITOR: "run-nomon", NO_LINES: "run-nolines"}
    for name in variants:
        if name.startswith("perfcore run @ "):  # another checkout of perfcore, built in place
            cmds[name] = (run("other"), {"PYTHONPATH": name.removeprefix("perfcore run @ ")})
            outs[name] = "other"
    return cmds, {k: v for k, v in outs.items() if k in variants}


def one_ring(
    variants: tuple[str, ...], rounds: int, block: int, warm: int, tmp: Path, shape: str = "mlp", threads: int = 1
) -> tuple[dict[str, list[float]], dict[str, dict]]:
    """Block medians (ms) per variant, and each perfcore run's run.json overhead."""
    steps = warm + rounds * block
    script = [sys.executable, str(HERE / "overhead_train.py"), str(steps), shape]
    fifos = [tmp / f"ring{i}" for i in range(len(variants))]
    for f in fifos:
        if f.exists():
            f.unlink()
        os.mkfifo(f)
    # One intra-op thread by default: one variant computes at a time. With more, a variant's threads wait for
    # each other on a busy machine (two threads on 2 cores: steps 3-50x slower under others' load).
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env["BENCH_THREADS"] = str(threads)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    ring_dir = Path(tempfile.mkdtemp(dir=tmp, prefix="ring-"))
    cmds, outs = _commands(variants, script, ring_dir)
    procs, errs = {}, {}

    def failed(name: str, why: str) -> SystemExit:
        tail = errs[name].read_text().strip().splitlines()[-5:] if name in errs else []
        return SystemExit(f"bench: {name} {why}" + "".join(f"\n  {ln}" for ln in tail))

    try:
        for i, name in enumerate(variants):
            cmd, extra = cmds[name]
            ring = f"{fifos[i]},{fifos[(i + 1) % len(fifos)]},{block},{warm}"
            err = open(ring_dir / f"stderr-{i}.txt", "w")
            procs[name] = subprocess.Popen(
                cmd, env=dict(env, BENCH_RING=ring, **extra), stdout=subprocess.PIPE, stderr=err, text=True
            )
            errs[name] = ring_dir / f"stderr-{i}.txt"
        for name, p in procs.items():  # every variant warmed up and waiting
            for line in p.stdout:
                if line.startswith("READY"):
                    break
            else:
                raise failed(name, f"ended before it was ready (exit {p.wait()})")
        fd = os.open(fifos[0], os.O_RDWR)
        os.write(fd, b"x")  # the first variant's turn
        out = {}
        for name, p in procs.items():
            text, _ = p.communicate(timeout=600)
            line = next((ln for ln in text.splitlines() if ln.startswith("BLOCK_MS")), None)
            if p.returncode != 0 or line is None:
                raise failed(name, f"failed (exit {p.returncode})")
            out[name] = [float(v) for v in line.split()[1:]]
            total = next((ln for ln in text.splitlines() if ln.startswith("TOTAL_MS")), "TOTAL_MS nan")
            out[f"{name} total"] = [float(total.split()[1])]
            faults = next((ln for ln in text.splitlines() if ln.startswith("MINFLT_PER_STEP")), "MINFLT_PER_STEP nan")
            out[f"{name} faults"] = [float(faults.split()[1])]
        os.close(fd)
        docs = {name: ring_dir / sub / "run.json" for name, sub in outs.items()}
        return out, {name: _reported(json.loads(d.read_text())) for name, d in docs.items() if d.exists()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()


def _reported(doc: dict) -> dict:
    """A perfcore run's self-report, with its mean step (said_share needs it)."""
    return {**(doc.get("overhead") or {}), "mean_step_ms": float((doc.get("step_time_ms") or {}).get("mean") or 0.0)}


def said_share(o: dict, bare_ms: float, steady: bool) -> float:
    """perfcore's self-report as a share of the bare step, each part over what it scales with. The parts
    paid per step or per call (phases, calls passed through hooks, batch fetches, counted sync calls) over
    the ring's bare step; the parts paid per second (the line sampler, the upkeep spaced in time) over the
    run's own mean step. run.json's fraction divides everything by the run's mean step, and here each block's
    wait for the other variants' turns (on the fifo) is inside one of its steps: the tiny loop's mean step
    reads ~1.5 ms for a 0.23 ms step, which the per-second parts' time spans as well, the per-step ones not."""

    def f(key: str, default: float = 0.0) -> float:  # run.json /2 writes an absent figure as null
        v = o.get(key)
        return default if v is None else float(v)

    per_step = (
        f("phases_per_step") * f("per_phase_ns") / 1e6
        + f("passed_ms_per_step")
        + f("fetch_ms_per_step")
        + f("sync_calls_ms_per_step")
    )
    total = f("steady_ms_per_step", f("ms_per_step")) if steady else f("ms_per_step")
    mean = f("mean_step_ms") or bare_ms
    if steady and o.get("sampler_share") is not None:  # the steady figure has the sampler already as a share
        per_second = max(0.0, total - per_step - f("sampler_steady_ms_per_step"))
        return per_step / bare_ms + f("sampler_share") + per_second / mean
    per_second = max(0.0, total - per_step)
    return per_step / bare_ms + per_second / mean


def paired(blocks: dict[str, list[float]], name: str, base: list[float]) -> float:
    """Median over rounds of (block / uninstrumented block of the same round) - 1."""
    return statistics.median(a / b - 1 for a, b in zip(blocks[name], base))


def interval(v: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% interval (t with len - 1 degrees of freedom)."""
    if len(v) < 2:
        return statistics.mean(v), float("nan")
    return statistics.mean(v), T975.get(len(v) - 1, 2.0) * statistics.stdev(v) / math.sqrt(len(v))


def one_shape(
    shape: str, variants: tuple[str, ...], rings: int, seconds: float, warm: int, tmp: Path, threads: int = 1
) -> dict:
    """Per variant: the ring overheads, block medians; perfcore run's self-reported fractions."""
    block = max(1, math.ceil(10.0 / STEP_MS[shape]))
    rounds = max(10, int(seconds * 1000 / (block * STEP_MS[shape])))
    per_ring: dict[str, list[float]] = {k: [] for k in variants[1:]}
    ms: dict[str, list[float]] = {k: [] for k in variants}
    whole: list[float] = []
    said: dict[str, list[float]] = {}
    faults: dict[str, list[float]] = {k: [] for k in variants}
    for r in range(rings):
        t0 = time.time()
        blocks, reported = one_ring(variants, rounds, block, warm, tmp, shape, threads)
        base = [(a + b) / 2 for a, b in zip(blocks[BARE], blocks[CONTROL])]
        for k in variants:
            ms[k] += blocks[k]
            faults[k] += blocks[f"{k} faults"]
        per_ring[CONTROL].append(paired(blocks, CONTROL, blocks[BARE]))
        for k in variants[2:]:
            per_ring[k].append(paired(blocks, k, base))
        bare_ring = statistics.median(blocks[BARE])
        for k, o in reported.items():
            said.setdefault(k, []).append(said_share(o, bare_ring, steady=False))
            said.setdefault(k + " steady", []).append(said_share(o, bare_ring, steady=True))
        # The whole measured run against the bare one's, one-off costs included: what a mean per step holds.
        w = 2 * blocks[f"{RUN} total"][0] / (blocks[f"{BARE} total"][0] + blocks[f"{CONTROL} total"][0]) - 1
        whole.append(w)
        print(
            f"  {shape} ring {r + 1}/{rings} ({time.time() - t0:.0f} s): "
            + ", ".join(f"{k} {100 * v[-1]:+.2f}%" for k, v in per_ring.items())
            # A process that maps fresh memory every step (glibc's mmap threshold, set by its own history)
            # pays page faults a process of the same script may not: a cause of spread between processes.
            + "; minor faults a step: "
            + ", ".join(f"{faults[k][-1]:.0f}" for k in variants),
            file=sys.stderr,
            flush=True,
        )
    return {
        "per_ring": per_ring,
        "ms": ms,
        "said": said,
        "whole": whole,
        "block": block,
        "rounds": rounds,
        "faults": faults,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="2 rings, 1.5 s per variant a ring: a few minutes in all")
    ap.add_argument("--shapes", nargs="+", default=list(STEP_MS), choices=list(STEP_MS))
    ap.add_argument("--rings", type=int, default=4, help="rings of fresh processes per shape")
    ap.add_argument("--seconds", type=float, default=4.0, help="measured seconds per variant per ring")
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--no-profiler", action="store_true", help="leave torch.profiler out of the rings")
    ap.add_argument("--threads", type=int, default=1, help="torch's intra-op threads in every variant (0: its default)")
    ap.add_argument(
        "--split",
        action="store_true",
        help="also perfcore run with the monitor off and with the host lines off: which sampler costs what",
    )
    ap.add_argument(
        "--imports",
        action="store_true",
        help="also the script uninstrumented with perfcore's training-process imports made first (memory layout)",
    )
    ap.add_argument(
        "--against",
        metavar="DIR",
        help="also run another perfcore checkout (built in place), "
        "e.g. a git worktree of the previous commit, in the same rings",
    )
    args = ap.parse_args()
    if args.quick:
        args.rings, args.seconds = 2, 1.5
    tmp = Path(tempfile.mkdtemp(prefix="perfcore-bench-"))
    other = f"perfcore run @ {Path(args.against).resolve()}" if args.against else None
    variants = (
        (BARE, CONTROL, RUN, RUN_OFF)
        + (() if args.no_profiler else (PROF,))
        + ((IMPORTS,) if args.imports else ())
        + ((NO_MONITOR, NO_LINES) if args.split else ())
        + ((other,) if other else ())
    )
    results = {
        shape: one_shape(shape, variants, args.rings, args.seconds, args.warmup, tmp, args.threads)
        for shape in args.shapes
    }
    print(
        f"{args.rings} rings per shape, lock-step blocks of >= 10 ms, ~{args.seconds:g} s measured per variant a ring; "
        "overhead: mean over rings [95% interval] of per-block medians; whole: the whole measured run's time against "
        "the bare runs', one-off costs included; said: perfcore run's own run.json overhead.ms_per_step as a share "
        "(said_share: its per-step parts over the bare step, its per-second parts over its own mean step, which "
        "holds the ring's waits), a mean per step like whole, which it is checked against; steady said: "
        "overhead.steady_ms_per_step the same way (its pauses left out, as the per-block medians leave them), "
        "checked against the perfcore run column; said - ring: the steady said less the "
        "perfcore run column, in points (negative: perfcore says less than it costs)"
    )
    print(
        "| shape | bare ms/step | control | "
        + " | ".join(variants[2:])
        + " | perfcore us/step | whole | said | agrees (2 pts) | steady said | said - ring (pts) | agrees (2 pts) |"
    )
    print("|---|---|---|" + "---|" * len(variants[2:]) + "---|---|---|---|---|---|---|")
    for shape, res in results.items():
        bare_ms = statistics.median(res["ms"][BARE])
        cells = []
        for k in variants[1:]:
            m, h = interval(res["per_ring"][k])
            cells.append(f"{100 * m:+.1f}% [{100 * (m - h):+.1f}, {100 * (m + h):+.1f}]")
        run_m, _ = interval(res["per_ring"][RUN])
        said = res["said"].get(RUN, [])
        said_m = statistics.mean(said) if said else float("nan")
        whole_m, whole_h = interval(res["whole"])
        agrees = "yes" if said and abs(said_m - whole_m) <= 0.02 else "no"
        steady = res["said"].get(RUN + " steady", [])
        steady_m = statistics.mean(steady) if steady else float("nan")
        steady_agrees = "yes" if steady and abs(steady_m - run_m) <= 0.02 else "no"
        print(
            f"| {shape} | {bare_ms:.3f} | "
            + " | ".join(cells)
            + f" | {run_m * bare_ms * 1e3:+.1f} | {100 * whole_m:+.1f}% [{100 * (whole_m - whole_h):+.1f}, "
            f"{100 * (whole_m + whole_h):+.1f}] | {100 * said_m:.1f}% | {agrees} | {100 * steady_m:.1f}% | "
            f"{100 * (steady_m - run_m):+.1f} | {steady_agrees} |"
        )
    for shape, res in results.items():
        print(
            f"{shape}: minor page faults a measured step, mean over rings [per ring]: "
            + "; ".join(
                f"{k} {statistics.mean(v):.0f} [{', '.join(f'{x:.0f}' for x in v)}]" for k, v in res["faults"].items()
            )
        )


if __name__ == "__main__":
    main()
