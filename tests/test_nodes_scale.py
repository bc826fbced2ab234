"""A job of 64 ranks on 8 machines x 10,000 steps (synthetic parts, tests/job_parts.py) merged by `perfcore
merge` from its nodes' folders: bounded memory and outputs, every host's clock aligned, the slow node
named. Times: bench/bench_merge_scale.py, bench/RESULTS.md."""

from __future__ import annotations

import json
import subprocess
import sys

from job_parts import HOUR_NS, write_job

# Measured: 310 MB peak for the merge, trace.json 119 MB (its caps: 400k intervals and 160k step events,
# whatever the ranks and steps), report.html 150 kB. The bounds leave room for another machine's allocator.
PEAK_MB, TRACE_MB, HTML_KB = 900, 160, 1000
MEASURED = (
    "import runpy, sys\n"
    "sys.argv = ['perfcore', *sys.argv[1:]]\n"
    "try:\n"
    "    runpy.run_module('perfcore', run_name='__main__')\n"
    "finally:\n"
    "    sys.stderr.write(next(s for s in open('/proc/self/status') if s.startswith('VmHWM')))\n"
)


def test_a_merge_of_64_ranks_x_10k_steps_is_bounded_and_names_the_slow_node(tmp_path):
    folders = write_job(tmp_path / "job", ranks=64, per_node=8, steps=10_000, slow_node=5)
    out = tmp_path / "merged"
    # The merge's own peak, VmHWM of its process read as it exits: wait4's ru_maxrss keeps the high-water
    # mark across exec, so a child forked from a test process of 1.2 GB (late in a full suite) "peaked" at 1.2 GB.
    p = subprocess.run([sys.executable, "-c", MEASURED, "merge", *map(str, folders), "--out", str(out)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace")
    assert p.returncode == 0, p.stderr[-3000:]
    peak_kb = int(p.stderr.rsplit("VmHWM", 1)[1].split()[1])
    assert peak_kb / 1024 < PEAK_MB, peak_kb
    assert (out / "trace.json").stat().st_size < TRACE_MB * 1e6
    assert (out / "report.html").stat().st_size < HTML_KB * 1e3
    doc = json.loads((out / "run.json").read_text())
    assert len(doc["ranks"]) == 64 and doc["missing_ranks"] == []
    clocks = {h["host"]: h for h in doc["clocks"]["hosts"]}
    assert len(clocks) == 8
    for k in range(1, 8):
        truth = -(k * HOUR_NS + k * 1_234_567)  # job_parts' host clocks
        assert abs(clocks[f"node{k}"]["offset_ns"] - truth) < 1_000_000, clocks[f"node{k}"]
    nodes = doc["nodes"]
    assert nodes["slow_node"]["host"] == "node5" and nodes["slow_node"]["excess_label"] == "compute"
    assert nodes["slow_node"]["rank"] in range(40, 48)
    assert [n["state"] for n in nodes["nodes"]].count("waiting") == 7
