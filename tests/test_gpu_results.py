"""bench/RESULTS.md's GPU tables are what the device runs' rows kept in bench/gpu_runs/ make
(bench/gpu_results.py), and every kept run says what it ran on and whether it was recovered."""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import gpu_results  # noqa: E402


def test_results_gpu_tables_are_what_the_kept_rows_make(tmp_path):
    text = (ROOT / "bench" / "RESULTS.md").read_text()
    assert len(gpu_results.BLOCK.findall(text)) >= 3
    assert gpu_results.stale(text) == []
    # a row changed in the kept rows makes its table stale; refresh makes it again
    runs = tmp_path / "runs"
    runs.mkdir()
    name = "2026-12-04-h200-run3"
    lines = (gpu_results.RUNS / f"{name}.rows.jsonl").read_text().splitlines()
    row = json.loads(lines[1])
    row["measured"] = "something else"
    (runs / f"{name}.rows.jsonl").write_text("\n".join([lines[0], json.dumps(row), *lines[2:]]) + "\n")
    block = text[text.index(f"<!-- gpu_run: {name} -->"):]
    block = block[: block.index("<!-- /gpu_run -->") + len("<!-- /gpu_run -->")]
    assert gpu_results.stale(block, runs) == [name]
    assert gpu_results.stale(gpu_results.refresh(block, runs), runs) == []
    assert "| something else |" in gpu_results.refresh(block, runs)


def test_every_kept_run_says_its_stack_and_whether_it_was_recovered():
    for f in sorted(gpu_results.RUNS.glob("*.rows.jsonl")):
        header, rows = gpu_results.load(f.name[: -len(".rows.jsonl")])
        assert {"date", "commit", "device", "torch"} <= set(header) and rows, f
        summary = json.loads(f.with_name(f.name.replace(".rows.jsonl", ".json")).read_text())
        counts = {}
        for r in rows:
            counts[gpu_results.verdict(r)] = counts.get(gpu_results.verdict(r), 0) + 1
        assert summary["counts"] == counts
        assert all(summary["header"][k] == header[k] for k in ("date", "commit", "device", "torch"))
