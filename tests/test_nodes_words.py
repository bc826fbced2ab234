"""A job across machines as the reports say it (synthetic parts, tests/job_parts.py, merged by `perfcore
merge`): the brief names the slow node with its rank and cause and the node that waits for it; --explain
shows the nodes first (a waiting node said as waiting, never as slow) and the clocks' uncertainty;
report.html puts a per-node summary before the ranks, which it folds when there are many."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from job_parts import write_job

from perfcore.report.words.runs import ranks_phrase


def _perfcore(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "perfcore", *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def _merged(tmp_path, **job) -> tuple[str, str]:
    folders = write_job(tmp_path / "job", **job)
    out = tmp_path / "merged"
    _perfcore("merge", *map(str, folders), "--out", str(out))
    return _perfcore("report", str(out)), str(out)


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    return _merged(tmp_path_factory.mktemp("two"), ranks=4, per_node=2, steps=120, slow_node=1)


def test_the_brief_names_the_slow_node_its_rank_and_cause_and_who_waits(two_nodes):
    brief, _ = two_nodes
    (line,) = [x for x in brief.splitlines() if x.startswith("nodes: ")]
    m = re.fullmatch(
        r"nodes: node1 \(ranks 2-3\) is slow, rank ([23]) most: it computes ([0-9.]+) ms/step more than the "
        r"other nodes; node0 \(ranks 0-1\) waits for it ([0-9.]+) ms/step",
        line,
    )
    assert m, line
    # job_parts: node1's ranks compute 4 ms longer a step; node0's wait that long in the collective.
    assert abs(float(m.group(2)) - 4.0) < 0.3 and abs(float(m.group(3)) - 4.2) < 0.4, line


def test_explain_says_the_nodes_first_the_waiting_one_as_waiting_and_the_clocks(two_nodes):
    _, out = two_nodes
    text = _perfcore("report", out, "--explain")
    lines = text.splitlines()
    node0 = next(x for x in lines if x.startswith("  node0 (ranks 0-1)"))
    assert node0.startswith("  node0 (ranks 0-1) waits for node1: ") and "slow" not in node0, node0
    assert any(x.startswith("  node1 (ranks 2-3) is the slow node: ") and "excess is compute" in x for x in lines)
    table = [x.split() for x in lines if re.match(r"  node[01] +2 ", x)]
    assert [(row[0], row[-1]) for row in table] == [("node0", "node1"), ("node1", "slow")], table
    clocks = next(x for x in lines if x.startswith("  clocks: on node0's; node1 "))
    assert "by its collectives over 120 steps" in clocks and "offset within ±" in clocks, clocks
    # The straggler is named with its node; each waiting rank is not said again per rank.
    assert re.search(r"straggler: rank [23] on node1 holds up the job", text)
    assert not re.search(r"^  rank [01] waits", text, re.M)
    assert text.index("node0 (ranks 0-1) waits") < text.index("straggler: rank")


def test_report_html_puts_the_nodes_before_the_ranks(two_nodes):
    _, out = two_nodes
    html = (__import__("pathlib").Path(out) / "report.html").read_text()
    assert html.index("<h2>Nodes</h2>") < html.index("<h2>Ranks</h2>")
    assert "node1 ◀ slow" in html and "waiting for node1" in html
    assert "each of the 4 ranks" not in html  # four ranks are shown, not folded


def test_64_ranks_read_per_node_first_with_the_ranks_folded(tmp_path):
    brief, out = _merged(tmp_path, ranks=64, per_node=8, steps=60, slow_node=5)
    assert re.search(r"^nodes: node5 \(ranks 40-47\) is slow, rank 4[0-7] most: .*; 7 nodes wait for it", brief, re.M)
    text = _perfcore("report", out, "--explain")
    assert "  7 nodes (ranks 0-39, 48-63) wait for node5: " in text
    assert "  64 ranks: each one's row is in report.html and run.json; the stragglers':" in text
    rank_rows = re.findall(r"^  (\d+) +[0-9.]+ +[0-9.]+", text, re.M)
    assert len(rank_rows) == 1 and 40 <= int(rank_rows[0]) < 48, rank_rows  # the straggler's row only
    html = (__import__("pathlib").Path(out) / "report.html").read_text()
    nodes, ranks = html.index("<h2>Nodes</h2>"), html.index("<h2>Ranks</h2>")
    fold = html.index("<details><summary>each of the 64 ranks</summary>")
    assert nodes < ranks < fold < html.index("rank 63", fold)


def test_nodes_even_are_said_as_even(tmp_path):
    brief, _ = _merged(tmp_path, ranks=4, per_node=2, steps=60, slow_node=None)
    assert "nodes: 2, none holds the others up (node0 ranks 0-1; node1 ranks 2-3)" in brief, brief


def test_a_node_that_left_nothing_is_said_as_missing_ranks(tmp_path):
    folders = write_job(tmp_path / "job", ranks=4, per_node=2, steps=60, slow_node=1)
    _perfcore("merge", str(folders[0]), "--out", str(tmp_path / "half"))
    brief = _perfcore("report", str(tmp_path / "half"))
    assert "MISSING: rank(s) 2, 3 of 4 left no results" in brief, brief


def test_ranks_are_said_as_runs():
    assert ranks_phrase((3,)) == "rank 3"
    assert ranks_phrase((0, 1, 2, 3)) == "ranks 0-3"
    assert ranks_phrase((0, 1, 2, 3, 8, 10, 11)) == "ranks 0-3, 8, 10-11"
    assert ranks_phrase((None,)) == "no numbered rank"
