"""What a short run costs under `perfcore run`: a 30-step script bare and under perfcore, alternated in
each round (median of N, default 5), the ratio and perfcore's added seconds; with --before TREE, the
same under another checkout's perfcore in the same rounds (before/after side by side), and the
script's own p50 step time under each (finishing work done while the script runs must not slow it).
Then where perfcore's part after the script goes, timed in a fresh process on the run folder it wrote.

    .venv/bin/python bench/bench_short_run.py [REPEATS] [--before /work/main] [--no-warm] [--no-monitor]"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = [sys.executable, str(ROOT / "examples" / "train_small.py"), "30"]
PERFCORE = [sys.executable, "-c", "from perfcore.cli import main; main()"]
# This tree with a warm-up thread that loads only the chart font: the script's own times with
# and without the warm-up beside it, the rest of perfcore the same.
NO_WARM = [
    sys.executable,
    "-c",
    "from perfcore.run.parent import launch, warm\n"
    "launch.WarmUp = lambda: warm.WarmUp(modules=())\n"
    "from perfcore.cli import main; main()",
]

PARTS = r"""
import time, sys
from pathlib import Path
t = [time.perf_counter()]
import pandas
t.append(time.perf_counter())
from perfcore.analysis.reader import load_run
doc, steps = load_run(Path(sys.argv[1]))
t.append(time.perf_counter())
from perfcore.report import plots
from perfcore.report.words.verdict import headline
t.append(time.perf_counter())
plots.plot_breakdown(steps, Path(sys.argv[1]) / "bench_breakdown.png", title=headline(doc.verdict))
t.append(time.perf_counter())
from perfcore.report.html import render_report
render_report(doc, steps)
t.append(time.perf_counter())
from perfcore.report.terminal import render_text
render_text(doc)
t.append(time.perf_counter())
names = ["import pandas", "read the run folder", "import plots", "one PNG (breakdown)", "report.html", "terminal text"]
for n, a, b in zip(names, t, t[1:]):
    print(f"  {n:<22} {1e3 * (b - a):7.0f} ms")
print("  matplotlib imported:", "matplotlib" in sys.modules)
"""


# The parent's part after the script, in a fresh process: what the tree's `perfcore run` has imported
# by the time the script ends (launch before it starts; the warm-up's modules during it, where the
# tree has one) is imported first, untimed; then finish_run and the terminal text are timed.
FINISH = r"""
import importlib, shutil, sys, time
from pathlib import Path
import perfcore, perfcore.run.parent.launch
try:
    from perfcore.run.parent.warm import WarmUp
except ImportError:
    WarmUp = None
if WarmUp is not None:
    w = WarmUp(nice=0).start()
    w._thread.join()
src, dst = Path(sys.argv[1]), Path(sys.argv[2])
shutil.copytree(src, dst)
for f in dst.iterdir():
    if f.is_file() and not f.name.startswith("."):
        f.unlink()
t0 = time.perf_counter()
from perfcore.run.parent.finish import finish_run
from perfcore.report.terminal import render_text
render_text(finish_run(dst, 0, ["python", "train_small.py", "30"]))
import resource
print(time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, perfcore.__file__)
"""


# A short run's process leaves its part raw (nothing settled there): the parent settles it. Timed in a
# fresh process with pandas and the finishing modules loaded first, as the warm-up has them.
REPLAY = r"""
import sys, time
from pathlib import Path
import pandas
import perfcore.recording.replay
from perfcore.run.part_files import finish_raw
(part,) = (Path(sys.argv[1]) / "parts").iterdir()
t0 = time.perf_counter()
finish_raw(part)
print(time.perf_counter() - t0, "torch" in sys.modules)
"""

# The largest peak RSS among a command's processes (the script's, under perfcore run too).
PEAK = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, "
    "stderr=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)"
)


def raw_part_s(folder: Path) -> tuple[float, bool]:
    """The script run alone as perfcore run's child (the boot folder on PYTHONPATH), then its raw part
    settled in a fresh process: (seconds, whether that loaded torch)."""
    from perfcore.run import protocol

    env = env_for(ROOT)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "perfcore" / "run" / "child" / "_boot"), env["PYTHONPATH"]])
    folder.mkdir(parents=True)
    config = protocol.ChildConfig(run_dir=str(folder.resolve()), warmup=5, kernels=False).write()
    env[protocol.ENV_CHILD_CONFIG] = str(config.path)
    subprocess.run(SCRIPT, check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=env)
    r = subprocess.run(
        [sys.executable, "-c", REPLAY, str(folder)],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env_for(ROOT),
    )
    took, torch_loaded = r.stdout.split()
    return float(took), torch_loaded == "True"


def env_for(tree: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def wall(cmd: list[str], tree: Path | None = None) -> float:
    # cwd is the tree: `python -c` puts the working directory first on sys.path, before PYTHONPATH.
    t0 = time.perf_counter()
    subprocess.run(
        cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tree or ROOT, env=env_for(tree)
    )
    return time.perf_counter() - t0


def finish_s(tree: Path, folder: Path, scratch: Path) -> tuple[float, float]:
    r = subprocess.run(
        [sys.executable, "-c", FINISH, str(folder), str(scratch)],
        check=True,
        capture_output=True,
        text=True,
        cwd=tree,
        env=env_for(tree),
    )
    took, peak_mib, where = r.stdout.split()
    assert where.startswith(str(tree)), (where, tree)  # the tree meant, not another on sys.path
    return float(took), float(peak_mib)


def spread(xs: list[float]) -> str:
    return f"median {statistics.median(xs):.2f} (min {min(xs):.2f}, max {max(xs):.2f})"


def script_times(folder: Path) -> tuple[float, float]:
    """The script's own p50 step and its time from launch to the end of its first step (ms): where
    the warm-up overlaps the script (its start-up, importing torch) and where it could slow it."""
    doc = json.loads((folder / "run.json").read_text())
    return float(doc["step_time_ms"]["p50"]), float((doc.get("startup") or {}).get("time_to_first_step_ms", "nan"))


def trees_of(a: argparse.Namespace) -> dict[str, Path]:
    """The trees measured, by name: this one, another checkout as 'before', this one without its warm-up
    thread or its sampler. Each compiled once, as pip does at install: an installed wheel carries its
    bytecode, and a checkout run with PYTHONDONTWRITEBYTECODE set (as this workplace sets it) would compile
    every perfcore module in every process, a cost users never pay."""
    import compileall

    trees = {"after": ROOT}
    if a.before is not None:
        trees["before"] = a.before.resolve()
    if a.no_warm:
        trees["after, no warm-up"] = ROOT
    if a.no_monitor:
        trees["after, no monitor"] = ROOT
    for tree in dict.fromkeys(trees.values()):
        compileall.compile_dir(str(tree / "perfcore"), quiet=1)
    return trees


def one_round(i: int, trees: dict[str, Path], out: Path, step: dict, first: dict) -> dict[str, float]:
    """The script bare and under each tree's `perfcore run`, in an order rotated each round (so drift on a
    shared machine hits all alike): seconds by name; each run's p50 step and time to its first step kept."""
    order = ["bare"] + list(trees)
    order = order[i % len(order) :] + order[: i % len(order)]
    took = {}
    for name in order:
        if name == "bare":
            took[name] = wall(SCRIPT)
            continue
        folder = out / f"{name.replace(', ', '-').replace(' ', '-')}{i}"
        cli = NO_WARM if name == "after, no warm-up" else PERFCORE
        flags = ["--no-monitor"] if name == "after, no monitor" else []
        took[name] = wall(cli + ["run", "--quiet", *flags, "--out", str(folder), "--"] + SCRIPT, trees[name])
        p50, to_first = script_times(folder)
        step[name].append(p50)
        first[name].append(to_first / 1e3)
    return took


def whole_runs(trees: dict[str, Path], repeats: int, out: Path) -> None:
    """The script's wall time bare and under perfcore run, paired per round."""
    bare: list[float] = []
    under: dict[str, list[float]] = {k: [] for k in trees}
    added: dict[str, list[float]] = {k: [] for k in trees}
    step: dict[str, list[float]] = {k: [] for k in trees}
    first: dict[str, list[float]] = {k: [] for k in trees}
    for i in range(repeats):
        took = one_round(i, trees, out, step, first)
        bare.append(took["bare"])
        for name in trees:
            under[name].append(took[name])
            added[name].append(took[name] - took["bare"])  # paired within the round
    print(f"30-step script, {repeats} rounds, seconds: bare {spread(bare)}")
    for name in trees:
        ratio = statistics.median(under[name]) / statistics.median(bare)
        print(f"  under perfcore run ({name}, {trees[name]}): {spread(under[name])}; ratio {ratio:.2f}x")
        print(f"    perfcore's added seconds (paired per round): {spread(added[name])}")
        print(
            f"    the script's own p50 step, ms: {spread(step[name])}; launch to first step end, s: "
            f"{spread(first[name])}"
        )
    if "before" in trees:
        gain = statistics.median(added["before"]) - statistics.median(added["after"])
        print(
            f"  added seconds before/after: {statistics.median(added['before']):.2f} -> "
            f"{statistics.median(added['after']):.2f} ({gain:.2f} s less)"
        )


def finishes(trees: dict[str, Path], finishers: list[str], repeats: int, out: Path) -> None:
    """The same parts finished by each tree, alternated; then a short run's raw part settled by the parent."""
    fin: dict[str, list[float]] = {k: [] for k in trees}
    peak: dict[str, list[float]] = {k: [] for k in trees}
    for i in range(repeats):
        for name in finishers if i % 2 == 0 else finishers[::-1]:
            took, mib = finish_s(trees[name], out / f"after{i}", out / f"fin-{name}{i}")
            fin[name].append(took)
            peak[name].append(mib)
    print(
        "the parent's part after the script (finish_run + terminal text on the same parts, fresh process, what "
        "the tree imports before and during the script already imported), seconds:"
    )
    for name in finishers:
        print(f"  {name}: {spread(fin[name])}; the parent's peak RSS, MiB: {spread(peak[name])}")
    replay = [raw_part_s(out / f"raw{i}") for i in range(repeats)]
    print(
        f"a short run's raw part settled by the parent (fresh process, this tree), seconds: "
        f"{spread([t for t, _ in replay])}; torch loaded there: {any(x for _, x in replay)}"
    )


def peak_rss(trees: dict[str, Path], finishers: list[str], out: Path) -> None:
    """The largest process's peak RSS (the script's), bare and under each tree's perfcore run."""
    peaks = {
        "bare": SCRIPT,
        **{
            name: PERFCORE + ["run", "--quiet", "--out", str(out / f"peak-{i}"), "--"] + SCRIPT
            for i, name in enumerate(finishers)
        },
    }
    mib = {name: [] for name in peaks}
    for _ in range(3):
        for name, cmd in peaks.items():
            r = subprocess.run(
                [sys.executable, "-c", PEAK, *cmd],
                check=True,
                capture_output=True,
                text=True,
                cwd=trees.get(name, ROOT),
                env=env_for(trees.get(name)),
            )
            mib[name].append(float(r.stdout))
            if name != "bare":
                shutil.rmtree(out / f"peak-{finishers.index(name)}")
    print(
        "the largest process's peak RSS (the script's), MiB: " + "; ".join(f"{n} {spread(v)}" for n, v in mib.items())
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("repeats", type=int, nargs="?", default=5)
    ap.add_argument("--before", type=Path, help="another checkout (built) to run as 'before', side by side")
    ap.add_argument("--no-warm", action="store_true", help="also this tree without the warm-up thread")
    ap.add_argument("--no-monitor", action="store_true", help="also this tree with --no-monitor (no sampler)")
    a = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="bench-short-"))
    trees = trees_of(a)
    whole_runs(trees, a.repeats, out)
    finishers = [k for k in trees if not k.startswith("after, no ")]
    finishes(trees, finishers, a.repeats, out)
    peak_rss(trees, finishers, out)
    print("after the script, in a fresh process on the run folder (this tree):")
    subprocess.run([sys.executable, "-c", PARTS, str(out / "after0")], check=True, cwd=ROOT)


if __name__ == "__main__":
    main()
