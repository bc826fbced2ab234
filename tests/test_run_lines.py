"""perfcore run's host lines: the capture's facts survive JSON (the raw part's path) and join to a steps
table into run.json's "lines" and "starvation"."""

from __future__ import annotations

import json

from perfcore import jsonio
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfcore.analysis.attribution import CPU_PRECEDENCE
from perfcore.analysis.codec import from_doc
from perfcore.run.lines import LineFacts, lines_document, start

SCRIPTS = Path(__file__).parent / "scripts"


def _tables(starts, ends, warmup=3, load_ms=None):
    s0, s1 = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    n = len(s0)
    full = pd.DataFrame({"start_ns": s0, "wall_ns": s1 - s0, "perfcore_ns": np.zeros(n, np.int64)})
    table = pd.DataFrame(
        {
            "step": np.arange(n),
            "warmup": np.arange(n) < warmup,
            "wall_ms": (s1 - s0) / 1e6,
            "load_ms": np.zeros(n) if load_ms is None else load_ms,
        }
    )
    return table, full


def test_facts_through_json_join_to_the_steps():
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(SCRIPTS))
    try:
        import host_metrics
    finally:
        sys.path.remove(str(SCRIPTS))
    cap, why = start(torch)
    assert why is None
    # A fixed rate: this loop lasts ~0.2 s, and the cost budget would space its few samples out.
    cap.sampler.interval_s, cap.sampler.budget = 0.001, None
    starts, ends, _ = host_metrics.main(150, batch=48)
    facts = from_doc(LineFacts, json.loads(jsonio.dumps(cap.facts())))  # as the raw part's JSON carries them
    assert "item" not in torch.Tensor.__dict__  # the counter is gone once the facts are taken
    table, full = _tables(starts, ends)
    n = len(starts)
    doc = lines_document(facts, table, full, {}, CPU_PRECEDENCE, {"through": n, "window": [], "settled": n})
    json.dumps(doc)
    host = doc["lines"]["labels"][0]
    assert host["label"] == "host" and doc["lines"]["steps"] == n - 3
    assert (host["functions"][0]["function"], Path(host["functions"][0]["file"]).name) == (
        "per_sample_metrics",
        "host_metrics.py",
    )
    calls = host["lines"][0]["calls"]
    assert host["lines"][0]["function"] == "per_sample_metrics" and calls[0]["method"] == "item"
    assert calls[0]["per_step"] == 4 * 48
    assert doc["starvation"]["steps"] == n - 3 and doc["starvation"]["starved"] == 0


def test_steps_without_kept_spans_are_not_joined_and_no_facts_means_no_lines():
    t = np.arange(1, 40) * 10_000_000
    facts = {
        "prefixes": [],
        "interval_ns": 10_000_000,
        "cap_ns": 15_000_000,
        "t_ns": t.tolist(),
        "site": [0] * len(t),
        "sites": [["/u/t.py", "main", 3]],
        "user": [True],
        "missed": 0,
        "dropped": 0,
        "sampler_ns": 1_000_000,
    }
    starts = np.arange(0, 40) * 10_000_000
    table, full = _tables(starts[:-1], starts[1:], warmup=0, load_ms=np.r_[np.zeros(30), np.full(9, 5.0)])
    load = (starts[30:-1], starts[31:])  # steps 30.. wait in the loader for all their time
    # Spans kept for steps < 10 and for 35, then not settled from 38 on: 10..34, 36, 37 are not joined.
    # Sample k (at k x 10 ms) falls in step k: host 1..9 (none at 0), load 35 and 38.
    doc = lines_document(
        from_doc(LineFacts, facts), table, full, {"load": load}, CPU_PRECEDENCE, {"through": 10, "window": [35], "settled": 38}
    )
    labels = {lb["label"]: lb for lb in doc["lines"]["labels"]}
    assert doc["lines"]["steps"] == 12 and labels["load"]["samples"] == 2 and labels["host"]["samples"] == 9
    assert doc["starvation"]["starved"] == 9 and doc["starvation"]["longest_run_first_step"] == 30
    assert "lines" not in lines_document(
        None, table, full, {"load": load}, CPU_PRECEDENCE, {"through": 39, "window": [], "settled": 39}
    )


@pytest.mark.parametrize("flag", ["--lines", "--no-lines"])
def test_perfcore_run_names_the_metrics_line_in_run_json(tmp_path, flag):
    """An unmodified host-bound script under perfcore run: run.json's lines name per_sample_metrics at its
    stats line with its 4 .item() calls per sample; --no-lines leaves lines out, starvation stays."""
    import subprocess

    script = SCRIPTS / "host_metrics.py"
    line = next(i for i, s in enumerate(script.read_text().splitlines(), 1) if "stats.append" in s)
    out = tmp_path / "run"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfcore.cli",
            "run",
            "--out",
            str(out),
            flag,
            "--",
            sys.executable,
            str(script),
            "300",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "run.json").read_text())
    assert doc["starvation"]["steps"] == doc["steps"] and doc["starvation"]["starved"] == 0
    if flag == "--no-lines":
        assert doc.get("lines") is None  # run.json /2 writes an absent fact as null
        return
    host = doc["lines"]["labels"][0]
    assert host["label"] == "host" and doc["lines"]["samples"] > 0
    # 192 counted calls a step: the counter goes off in the step that fills its cap (the metrics follow a
    # step's optimizer step, so they fall after its end), and the self-report reads where.
    from perfcore.capture.sync_calls import MAX_CALLS

    assert MAX_CALLS // 192 <= doc["overhead"]["sync_calls_steps"] <= MAX_CALLS // 192 + 2 < doc["steps"]
    assert doc["overhead"]["sync_call_ns"] > 0
    top = host["functions"][0]
    assert (top["function"], Path(top["file"]).name, top["line"]) == ("per_sample_metrics", "host_metrics.py", line)
    # The terminal names that line with its own time, its .item() count and the change that count asks for.
    said = next(s for s in p.stderr.splitlines() if s.startswith("try: per_sample_metrics at "))
    assert f"host_metrics.py:{line}: " in said and f"{4 * 48} `.item()` a step: keep on device" in said
    # Labelled as attribution labels the instant: forward/backward/optimizer phases are compute on a CPU.
    compute = next(lb for lb in doc["lines"]["labels"] if lb["label"] == "compute")
    assert compute["functions"][0]["function"] == "main"
    at_line = next(x for x in host["lines"] if x["line"] == line)
    assert [(c["method"], c["per_step"]) for c in at_line["calls"]] == [("item", 4 * 48)]
    # On the steps' axis: the same samples, binned by step; summed back they are the join's figure.
    tl = doc["lines"]["timeline"]
    assert tl["functions"][0][:2] == [top["file"], "per_sample_metrics"] and tl["functions"][0][2] == line
    assert sum(tl["steps"]) == doc["lines"]["steps"] and tl["first_step"][0] >= doc["warmup_steps"]
    summed = sum(v * k for v, k in zip(tl["ms_per_step"][0], tl["steps"])) / sum(tl["steps"])
    assert summed == pytest.approx(top["ms_per_step"], rel=1e-9)
    # In trace.json: instant events on the training thread's track (the one its forward spans are on).
    trace = json.loads((out / "trace.json").read_text())
    forward_tids = {e["tid"] for e in trace["traceEvents"] if e.get("name") == "forward" and e.get("cat") == "host"}
    samples = [e for e in trace["traceEvents"] if e.get("cat") == "line"]
    mine = [e for e in samples if e["name"] == f"per_sample_metrics (host_metrics.py:{line})"]
    assert mine and {e["tid"] for e in samples} == forward_tids and {e["ph"] for e in samples} == {"i"}
    assert mine[0]["args"]["file"] == top["file"] and mine[0]["args"]["line"] == line
    assert trace["otherData"]["processes"][0]["line_samples"] == len(samples)
    # In report.html: the function in the host table, and the chart's data.
    page = (out / "report.html").read_text()
    assert "Your code's lines" in page and f"host_metrics.py:{line}</span>" in page
    assert "-run-lines'" in page and f"per_sample_metrics (host_metrics.py:{line})" in page


def test_a_main_process_pil_loader_is_traced_to_its_decode_line(tmp_path):
    """num_workers=0 and PIL decoding in __getitem__: the load label's time is the Dataset's decode line
    (torch's DataLoader frames and PIL's fold into it), and the terminal names it."""
    import subprocess

    script = SCRIPTS / "pil_decode.py"
    line = next(i for i, s in enumerate(script.read_text().splitlines(), 1) if "Image.open" in s)
    out = tmp_path / "run"
    p = subprocess.run(
        [sys.executable, "-m", "perfcore.cli", "run", "--out", str(out), "--", sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "run.json").read_text())
    load = next(lb for lb in doc["lines"]["labels"] if lb["label"] == "load")
    top = load["functions"][0]
    assert (top["function"], Path(top["file"]).name, top["line"], top["user"]) == (
        "__getitem__",
        "pil_decode.py",
        line,
        True,
    )
    assert top["share"] > 0.5
    assert doc["starvation"]["share"] > 0.5
    assert "try: __getitem__ at " in p.stdout + p.stderr
