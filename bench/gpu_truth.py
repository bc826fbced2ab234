"""gpu_check's product rows: `perfcore run` on the truth scripts of bench/gpu_scripts, each judged against
the truth the script prints (meter.py): the five shares within 3 points, the verdict naming the truth's
bottleneck, the pinning advice's band against the pinned variant's measured speedup, the overhead
perfcore reports against the one measured side by side, traced runs against torch.profiler, NVML's
utilisation and health's busy share against CUPTI's busy share; `perfcore transfer` and `perfcore graph`
from the command line.

Each check runs in gpu_check's child process for its name and returns rows (gpu_rows.Row). Without a
GPU the scripts run on the CPU (their device falls back), so `gpu_check.py --dry-run` runs every one of
these code paths here.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import gpu_judge as J
from gpu_rows import Row

SCRIPTS = Path(__file__).resolve().parent / "gpu_scripts"
WARMUP = 5
# Steps each script runs on the device, and in the dry run on the CPU (enough for every code path).
# compute_bound: ~19 ms steps on an H100, 100 of them hold ~7 of the monitor's 250 ms samples.
STEPS = {"compute_bound": 100, "input_bound": 50, "transfer_bound": 60, "launch_bound": 80, "cnn": 80}
DRY_STEPS = 12
RUN_LIMIT_S = 150  # one script's run, perfcore's start and finish included


@lru_cache(maxsize=1)
def on_gpu() -> bool:
    import perfcore

    return bool(perfcore.capabilities()["features"]["cuda_events"])


@dataclass
class Ran:
    """One run of a truth script, bare or under perfcore."""

    name: str
    rc: int
    truth: dict | None
    doc: dict | None
    folder: Path
    tail: str

    def why_not(self) -> str | None:
        """None when the run gave both its truth and (under perfcore) its run.json, else what is missing."""
        if self.truth is None:
            return f"{self.name}: exit {self.rc}, no truth line: {self.tail}"
        return None


def _base(name: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"gpu_check_{name}_"))


def run_script(
    name: str, script: str, args: list[str], perfcore: list[str] | None = None, limit: float = RUN_LIMIT_S
) -> Ran:
    """`python gpu_scripts/<script> args` bare (perfcore None) or under `perfcore run <perfcore> --`: its
    exit code, its truth line, run.json, and its folder (the run folder and script.log)."""
    base = _base(name)
    cmd = [sys.executable, str(SCRIPTS / script), *args]
    if perfcore is not None:
        cmd = [sys.executable, "-m", "perfcore", "run", "--warmup", str(WARMUP), "--out", str(base / "run"), *perfcore]
        cmd += ["--", sys.executable, str(SCRIPTS / script), *args]
    rc, out, err = _run(cmd, base, limit)
    truth = next((json.loads(ln)["truth"] for ln in out.splitlines() if ln.startswith('{"truth"')), None)
    doc_path = base / "run" / "run.json"
    doc = json.loads(doc_path.read_text()) if doc_path.is_file() else None
    return Ran(name, rc, truth, doc, base, _tail(err or out))


def _run(cmd: list[str], base: Path, limit: float) -> tuple[int, str, str]:
    """cmd in `base` under `limit` seconds: exit code (124 past the limit), stdout, stderr; both kept
    in base/script.log, which comes back with the folder when the row fails."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, env=env, cwd=base)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = 124, _text(e.stdout), _text(e.stderr) + f"\ntimed out after {limit:.0f} s"
    (base / "script.log").write_text(f"$ {' '.join(cmd)}\n--- stdout\n{out}\n--- stderr\n{err}")
    return rc, out, err


def _text(b: Any) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


def _tail(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "no output"


def _steps(script: str) -> list[str]:
    n = STEPS[script] if on_gpu() else DRY_STEPS
    return ["--steps", str(n), "--warmup", str(WARMUP)]


def _fail(check: str, ran: Ran, target: str) -> Row:
    why = ran.why_not() or (f"{ran.name}: exit {ran.rc}, no run.json: {ran.tail}" if ran.doc is None else "")
    return Row(check, why, target, False, folder=str(ran.folder))


# ---- the rows ------------------------------------------------------------------------------------
SHARES_TARGET = (
    "each of the five within 3 points of the truth's band (claim: perfcore run's shares are the script's own, "
    "timed by its CUDA events)"
)
VERDICT_TARGET = "names the truth's bottleneck (claim: the verdict is the script's bottleneck)"


def shares_rows(what: str, ran: Ran) -> list[Row]:
    """The shares row and the verdict row of one perfcore run of a truth script."""
    check, vcheck = f"{what}: shares vs the script's truth", f"{what}: verdict"
    if ran.truth is None or ran.doc is None:
        return [_fail(check, ran, SHARES_TARGET), _fail(vcheck, ran, VERDICT_TARGET)]
    t, d = ran.truth, ran.doc
    try:
        try:
            own, lacks = J.own_ms_back(d), ""
        except J.Missing as e:  # the shares are still shown, without perfcore's own time given back
            own, lacks = float(d.get("overhead", {}).get("own_ms_per_step") or 0.0), e.args[0]
        gaps = J.share_gaps(d["breakdown_ms"], own, t)
        ok = J.shares_ok(gaps) and not lacks
        measured = (f"run.json has no {lacks}; " if lacks else "") + ", ".join(
            f"{lb} {100 * d['breakdown_ms'][lb] / t['step_ms']:.1f}% vs {_band(t, lb)}"
            + (f" ({gaps[lb]:+.1f})" if gaps[lb] else "")
            for lb in J.LABELS
        )
        measured += (
            f"; step {t['step_ms']:.2f} ms, {d['steps']} steps vs the script's {t['steps']}, backend "
            f"{d.get('backend')}; truth's compute {t['compute_how']}"
            + ("" if t.get("paced_ok") in (True, None) else " (NOT paced: the host fell behind the sleep)")
        )
    except KeyError as e:
        ok, measured = False, f"no {e.args[0]} in the truth or run.json"
    rows = [Row(check, measured, SHARES_TARGET, ok and d["steps"] > 0, folder=str(ran.folder))]
    want = J.bottlenecks(t)
    got = J.verdict_label(d)
    rows.append(
        Row(
            vcheck,
            f"{got} (level {d['verdict'].get('level')}); the truth's: {' or '.join(sorted(want))}",
            VERDICT_TARGET,
            got in want,
            folder=str(ran.folder),
        )
    )
    return rows


def _band(t: dict, lb: str) -> str:
    lo, hi = (100 * x for x in t["band"][lb])
    return f"{lo:.1f}%" if abs(hi - lo) < 0.05 else f"{lo:.1f}-{hi:.1f}%"


def _truth_runs(what: str, script: str, extra: list[str] | None = None) -> list[Ran]:
    """The script under perfcore run with default settings, then with --no-kernels."""
    args = _steps(script) + (extra or [])
    return [
        run_script(f"{what}_default", f"{script}.py", args, perfcore=[]),
        run_script(f"{what}_no_kernels", f"{script}.py", args, perfcore=["--no-kernels"]),
    ]


def _both(what: str, runs: list[Ran]) -> list[Row]:
    return shares_rows(f"{what} (default)", runs[0]) + shares_rows(f"{what} (--no-kernels)", runs[1])


def _busy(doc: dict) -> tuple[float | None, str]:
    """CUPTI's busy share of the run's measured steps: the compute share where kernels were traced."""
    backend = str(doc.get("backend"))
    if "cupti" not in backend:
        return None, f"backend {backend}: no kernels traced"
    return float(doc["breakdown_fraction"]["compute"]), backend


def _util(folder: Path, doc: dict) -> tuple[float | None, str]:
    """NVML's utilisation over the measured steps: steps.csv's per-step samples, else run.json's mean."""
    steps = folder / "run" / "steps.csv"
    if steps.is_file():
        import pandas as pd

        df = pd.read_csv(steps)
        if "monitor_gpu_util" in df:
            v = df.loc[~df["warmup"].astype(bool), "monitor_gpu_util"].dropna()
            if len(v):
                return float(v.mean()), f"{len(v)} measured steps' samples"
    mean = (doc.get("monitor") or {}).get("gpu_util_mean")
    return (float(mean), "the run's samples") if mean is not None else (None, "no GPU utilisation sampled")


def truth_compute() -> list[Row]:
    """The compute-bound script: shares and verdict; NVML's utilisation and health's busy share
    against CUPTI's busy share."""
    runs = _truth_runs("compute-bound", "compute_bound")
    rows = _both("compute-bound", runs)
    d = runs[0].doc or {}
    busy, how = _busy(d) if d else (None, "no run.json")
    util, uhow = _util(runs[0].folder, d) if d else (None, "no run.json")
    target = f"within {J.UTIL_ABS} of CUPTI's busy share (claim: the GPU utilisation perfcore samples is the GPU's)"
    rows.append(
        Row(
            "compute-bound: GPU utilisation vs CUPTI's busy share",
            f"NVML {_num(util)} ({uhow}), CUPTI {_num(busy)} ({how})",
            target,
            util is not None and busy is not None and J.util_ok(util, busy),
            folder=str(runs[0].folder),
        )
    )
    h = health("compute_bound")
    hbusy, hsrc = h.get("busy_mean"), h.get("busy_source")
    rows.append(
        Row(
            "health's busy share vs CUPTI's busy share (compute-bound)",
            f"health {_num(hbusy)} from {hsrc} ({h.get('error') or 'ran'}), CUPTI {_num(busy)}",
            f"from gpu_util, within {J.UTIL_ABS} (claim: health's busy share is the GPU's, sampled by NVML)",
            hsrc == "gpu_util" and busy is not None and hbusy is not None and J.util_ok(hbusy, busy),
            folder=h.get("folder"),
        )
    )
    return rows


def _num(x: Any) -> str:
    return "none" if x is None else f"{float(x):.3f}"


def health(script: str) -> dict:
    """`perfcore health -- python <script>`: its health.json, with its folder and any error."""
    base = _base(f"health_{script}")
    steps = 40 if on_gpu() else 6  # health samples every 100 ms: 40 steps of ~19 ms hold ~8
    cmd = [sys.executable, "-m", "perfcore", "health", "--steps", str(steps), "--out", str(base / "run"), "--"]
    cmd += [sys.executable, str(SCRIPTS / f"{script}.py"), "--steps", str(steps + 2 * WARMUP)]
    rc, out, err = _run(cmd, base, RUN_LIMIT_S)
    path = base / "run" / "health.json"
    out = json.loads(path.read_text()) if path.is_file() else {"error": f"exit {rc}: {_tail(err or out)}"}
    return dict(out, folder=str(base))


def truth_input() -> list[Row]:
    return _both("input-bound", _truth_runs("input-bound", "input_bound"))


def truth_cnn() -> list[Row]:
    runs = _truth_runs("cnn", "cnn")
    rows = _both("cnn", runs)
    d = runs[0].doc
    if d is not None:
        cap = d.get("capture") or {}
        lost = int(cap.get("dropped", 0)) + int(cap.get("overflow", 0))
        rows.append(
            Row(
                "cnn (default): records lost",
                f"{lost} (dropped {cap.get('dropped')}, overflow {cap.get('overflow')}, backend {d.get('backend')})",
                "0",
                lost == 0,
                folder=str(runs[0].folder),
            )
        )
    return rows


def truth_transfer() -> list[Row]:
    """The pageable script: shares and verdict; the advice names pinning, and the pinned variant's
    speedup, measured by the two scripts' own clocks side by side, lies in the advice's band."""
    runs = _truth_runs("transfer-bound", "transfer_bound")
    rows = _both("transfer-bound", runs)
    d = runs[0].doc
    args = _steps("transfer_bound")
    pageable = run_script("transfer_bare", "transfer_bound.py", args)
    pinned = run_script("transfer_pinned_bare", "transfer_bound.py", [*args, "--pin"])
    check = "transfer-bound: pinning advised, pinned speedup in its band"
    target = "advice names pin_memory; the pinned script's measured speedup inside the advice's band"
    if d is None or pageable.truth is None or pinned.truth is None:
        bad = next(r for r in (runs[0], pageable, pinned) if r.truth is None or (r is runs[0] and d is None))
        return rows + [_fail(check, bad, target)]
    named, band, where = J.pin_advice(d)
    speedup = pageable.truth["step_ms"] / pinned.truth["step_ms"]
    rows.append(
        Row(
            check,
            f"advice: {where}, band {_band_x(band)}; measured {speedup:.2f}x ({pageable.truth['step_ms']:.2f} -> "
            f"{pinned.truth['step_ms']:.2f} ms a step; pinned truth: transfer {_band(pinned.truth, 'transfer')}, "
            f"load {_band(pinned.truth, 'load')})",
            target + " (claim: the pinning advice's predicted gain is what pinning gives)",
            named and J.in_band(speedup, band),
            folder=str(runs[0].folder),
        )
    )
    return rows


def _band_x(band: tuple[float, float] | None) -> str:
    return "none" if band is None else f"{band[0]:.2f}-{band[1]:.2f}x"


def truth_launch() -> list[Row]:
    """The launch-bound script bare (twice, around the rest), under perfcore with --no-kernels and with
    default settings, and under torch.profiler: shares and verdict; the overhead perfcore reports
    against the one measured, each way; a traced run's cost and torch.profiler's."""
    args = _steps("launch_bound")
    bare = [run_script("launch_bare", "launch_bound.py", args)]
    runs = _truth_runs("launch-bound", "launch_bound")
    bare.append(run_script("launch_bare_again", "launch_bound.py", args))
    prof = run_script("launch_torch_profiler", "launch_bound.py", [*args, "--torch-profiler"])
    rows = _both("launch-bound", runs)
    target = (
        f"within {J.OVERHEAD_POINTS:g} points each way, bare runs within {J.NOISE_POINTS:g} (claim: the overhead "
        "perfcore reports, kernel tracing included, is what it costs)"
    )
    if any(b.truth is None for b in bare):
        bad = next(b for b in bare if b.truth is None)
        return rows + [_fail("launch-bound: reported overhead vs measured", bad, target)]
    bare_ms = [b.truth["step_ms"] for b in bare]
    base = statistics.mean(bare_ms)
    spread = 100 * abs(bare_ms[0] - bare_ms[1]) / base
    measured: dict[str, float] = {}
    for ran, how in zip(runs, ("default", "--no-kernels")):
        check = f"launch-bound ({how}): reported overhead vs measured"
        if ran.truth is None or ran.doc is None:
            rows.append(_fail(check, ran, target))
            continue
        m = J.overhead_points(ran.truth["step_ms"], base)
        measured[how] = m
        try:
            rep = J.reported_points(ran.doc, base)
            tr = J.need(ran.doc, "capture.tracing")
            text = (
                f"reported {rep:.2f}, measured {m:.2f} points of the bare {base:.3f} ms step (bare runs "
                f"{bare_ms[0]:.3f} / {bare_ms[1]:.3f} ms, {spread:.2f} points apart); tracing "
                f"{J.need(ran.doc, 'overhead.tracing_ns_per_launch')} ns a launch x "
                f"{J.need(ran.doc, 'overhead.launches_per_step')} launches a step, mode {tr.get('mode')}, "
                f"steps traced {tr.get('steps_traced')}"
            )
            ok = J.overhead_ok(rep, m, spread)
        except J.Missing as e:
            text, ok = f"measured {m:.2f} points; run.json has no {e.args[0]}", False
        rows.append(Row(check, text, target, ok, folder=str(ran.folder)))
    if "default" in measured and prof.truth is not None:
        p = J.overhead_points(prof.truth["step_ms"], base)
        cheap, cheaper = J.tracing_ok(measured["default"], p, spread)
        noise = f"; bare runs {spread:.2f} points apart (decides at <= {J.NOISE_POINTS:g})"
        rows += [
            Row(
                "launch-bound: a traced perfcore run's cost",
                f"{measured['default']:.2f}% of the {base:.3f} ms step{noise}",
                f"<= {100 * J.TRACED_MAX:g}% (claim: tracing kernels costs a few percent on a launch-bound step)",
                cheap,
                folder=str(runs[0].folder),
            ),
            Row(
                "launch-bound: traced perfcore run vs torch.profiler",
                f"perfcore {measured['default']:.2f}%, torch.profiler {p:.2f}%{noise}",
                f"torch.profiler >= {J.PROFILER_RATIO:g}x perfcore's cost (claim: cheaper than the profiler it "
                "replaces for this question)",
                cheaper,
                folder=str(runs[0].folder),
            ),
        ]
    elif prof.truth is None:
        rows.append(_fail("launch-bound: traced perfcore run vs torch.profiler", prof, "a torch.profiler run"))
    return rows


def many_kernels_run() -> list[Row]:
    """3,200 kernels a step on the perfcore run path (the launch-bound script with 800 layers), for
    longer than one settle window on a GPU: none dropped, none over the decode cap."""
    steps = 1100 if on_gpu() else DRY_STEPS
    ran = run_script(
        "many_kernels_run",
        "launch_bound.py",
        ["--layers", "800", "--steps", str(steps), "--warmup", str(WARMUP)],
        perfcore=[],
        limit=240,
    )
    check = "3200 kernels a step under perfcore run"
    target = "0 lost, >= 3200 launches a step counted (claim: no kernel lost at any kernels-per-step, zero-code)"
    if ran.doc is None:
        return [_fail(check, ran, target)]
    cap = ran.doc.get("capture") or {}
    lost = int(cap.get("dropped", 0)) + int(cap.get("overflow", 0))
    try:
        per = float(J.need(ran.doc, "overhead.launches_per_step"))
        text = f"{per:.0f} launches a step, {lost} lost (dropped {cap.get('dropped')}, overflow {cap.get('overflow')})"
        ok = lost == 0 and per >= 3200
    except J.Missing as e:
        text, ok = f"{lost} lost; run.json has no {e.args[0]}", False
    text += f", {ran.doc['steps']} steps, backend {ran.doc.get('backend')}"
    return [Row(check, text, target, ok, folder=str(ran.folder))]


def _cli(name: str, args: list[str], written: str, limit: float = 120) -> tuple[int, dict | None, Path, str]:
    """`perfcore <args> --out DIR`: its exit code, the JSON it wrote (`written` in its folder), the folder."""
    base = _base(name)
    out = base / "run" / written
    cmd = [sys.executable, "-m", "perfcore", *args, "--out", str(base / "run")]
    rc, stdout, stderr = _run(cmd, base, limit)
    doc = json.loads(out.read_text()) if out.is_file() else None
    return rc, doc, base, _tail(stderr or stdout)


def cli_transfer_graph() -> list[Row]:
    """`perfcore transfer` and `perfcore graph` from the command line (exit 3 in one line without a GPU)."""
    rows = []
    rc, doc, base, tail = _cli("cli_transfer", ["transfer", "--sizes", "64M", "--repeats", "5"], "transfer.json")
    rows.append(
        Row(
            "perfcore transfer --sizes 64M",
            f"exit {rc}; " + (_transfer_words(doc) if doc else tail),
            "exit 0, pinned and pageable both directions, pinned faster (claim: perfcore transfer runs on a GPU)",
            rc == 0 and doc is not None and _pinned_faster(doc),
            folder=str(base),
        )
    )
    workload = str(SCRIPTS / "graph_workload.py") + ":make"
    rc, doc, base, tail = _cli("cli_graph", ["graph", workload, "--steps", "20"], "graph.json")
    rows.append(
        Row(
            "perfcore graph (a launch-bound MLP)",
            f"exit {rc}; " + (_graph_words(doc) if doc else tail),
            "exit 0, graphed faster, same training (claim: perfcore graph runs on a GPU and checks the result)",
            rc == 0 and doc is not None and _graph_ok(doc),
            folder=str(base),
        )
    )
    return rows


def _transfer_rows(doc: dict) -> list[dict]:
    return [r for r in doc.get("curve") or [] if isinstance(r, dict)]


def _transfer_words(doc: dict) -> str:
    rows = _transfer_rows(doc)
    return ", ".join(f"{r.get('direction')} {r.get('memory')} {float(r.get('gbps', 0)):.1f} GB/s" for r in rows) or (
        f"no rows in {sorted(doc)}"
    )


def _pinned_faster(doc: dict) -> bool:
    rows = _transfer_rows(doc)
    gb = {(r.get("direction"), r.get("memory")): float(r.get("gbps", 0)) for r in rows}
    return all(gb.get((d, "pinned"), 0) > gb.get((d, "pageable"), float("inf")) for d in ("h2d", "d2h"))


def _graph_words(doc: dict) -> str:
    if not doc.get("captured"):
        return f"not captured: {doc.get('error')}"
    return (
        f"eager {doc['eager_step_ms']:.3f} ms, graphed {doc['graph_step_ms']:.3f} ms ({doc['speedup']:.2f}x), "
        f"same results: {doc['check']['match']}"
    )


def _graph_ok(doc: dict) -> bool:
    sp = doc.get("speedup")
    return bool(doc.get("captured")) and isinstance(sp, (int, float)) and sp > 1 and doc["check"]["match"] is True
