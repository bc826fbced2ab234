"""report.html's host lines and loader starvation, from run.json's "lines" and "starvation": the figures the
document holds, escaped, and nothing drawn from a damaged document."""

from __future__ import annotations

from run_docs import as_run

from perfcore.report.charts import lines_chart as _lines_chart
from perfcore.report.html.run import lines_section as _lines_section
from perfcore.report.html.run import starvation_block as _starvation_block


# The renderers take the typed run; these tests write its facts by hand.
def lines_section(doc: dict) -> str:
    return _lines_section(as_run(doc))


def starvation_block(doc: dict) -> str:
    return _starvation_block(as_run(doc))


def lines_chart(doc: dict):
    return _lines_chart(as_run(doc))


def _call(method: str, per_step: float) -> dict:
    return {"file": "/home/u/train.py", "function": "per_sample_metrics", "line": 31, "method": method,
            "per_step": per_step, "total": 0}  # fmt: skip


def _doc():
    line = {
        "file": "/home/u/train.py",
        "function": "per_sample_metrics",
        "line": 31,
        "ms_per_step": 2.0,
        "share": 0.75,
        "samples": 30,
        "user": True,
        "calls": [_call("item", 410.0)],
    }
    evil = {
        "file": "/home/u/<b>x</b>.py",
        "function": "<script>alert(1)</script>",
        "line": 7,
        "ms_per_step": 0.5,
        "share": 0.25,
        "samples": 10,
        "user": True,
        "calls": [],
    }
    load = {**line, "function": "__getitem__", "line": 12, "share": 1.0, "calls": []}
    compute = {**line, "function": "main"}
    return {
        "breakdown_ms": {"host": 4.0, "load": 1.0, "compute": 3.0},
        "lines": {
            "steps": 100,
            "samples": 60,
            "interval_ms": 10.0,
            "labels": [
                {"label": "host", "ms_per_step": 3.0, "samples": 40, "lines": [line, evil], "functions": []},
                {"label": "load", "ms_per_step": 0.8, "samples": 10, "lines": [load], "functions": []},
                {"label": "compute", "ms_per_step": 2.0, "samples": 10, "lines": [compute], "functions": []},
            ],
            "timeline": {
                "first_step": [5, 10],
                "last_step": [9, 14],
                "steps": [5, 5],
                "functions": [["/home/u/train.py", "per_sample_metrics", 31]],
                "ms_per_step": [[2.0, 3.0]],
                "other_ms_per_step": [1.0, 0.5],
            },
        },
        "starvation": {
            "steps": 100,
            "starved": 56,
            "share": 0.56,
            "threshold_ms": 0.5,
            "p50_wait_ms": 20.0,
            "p95_wait_ms": 53.0,
            "longest_run": 12,
            "longest_run_first_step": 40,
            "load_ms_per_step": 14.0,
        },
    }


def test_host_then_load_lines_with_the_breakdowns_ms_and_escaped_names():
    html = lines_section(_doc())
    assert html.index("<h3>host: 4.00 ms a step</h3>") < html.index("<h3>load: 1.00 ms a step</h3>")
    assert "main" not in html  # compute's lines are the model's call, not a line to change
    # The line's ms are its share of the breakdown's host ms (0.75 x 4 ms), as the terminal says it.
    assert (
        "<td>per_sample_metrics</td><td><span title='/home/u/train.py'>train.py:31</span></td>"
        "<td class='n'>3.00 ms</td><td class='n'>75.0%" in html
    )
    assert "410 <code>.item()</code> a step" in html
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<b>x</b>" not in html
    assert lines_section({}) == ""
    assert lines_section({"lines": {"labels": [], "steps": 100, "samples": 0, "interval_ms": 10.0}}) == ""
    # Loading in workers: the thread's load samples are its wait, not where the batch is made.
    workers = lines_section({**_doc(), "loaders": [{"num_workers": 2}]})
    assert "<h3>host:" in workers and "<h3>load:" not in workers
    assert "<h3>load:" in lines_section({**_doc(), "loaders": [{"num_workers": 0}]})


def test_a_line_with_too_few_samples_gets_no_ms_and_rare_calls_are_not_rounded_to_zero():
    doc = _doc()
    host = doc["lines"]["labels"][0]
    host["samples"] = 5
    host["lines"] = [{**host["lines"][0], "samples": 2, "share": 0.44, "calls": [_call("item", 0.02)]}]
    html = lines_section(doc)
    assert "few samples" in html and "1.76 ms" not in html and "<code>.item()</code>" not in html
    assert "few samples" not in lines_section(_doc()).split("<h3>load")[0].split("</tr>")[1]  # 30 of 40 at 75%


def test_starvation_in_numbers():
    html = starvation_block(_doc())
    assert "<th>steps that waited &gt; 500 µs</th>" in html
    assert (
        "<td>56.0% (56 of 100)</td><td class='n'>20.0 ms</td><td class='n'>53.0 ms</td>"
        "<td>12 steps from step 40</td><td class='n'>14.0 ms</td>" in html
    )
    calm = {"starvation": {**_doc()["starvation"], "starved": 0, "share": 0.0}}
    assert "No step waited for data longer than 500 µs" in starvation_block(calm)
    assert starvation_block({}) == ""


def test_the_host_lines_chart_and_a_damaged_timeline():
    c = lines_chart(_doc())
    assert c["x"] == [5, 10] and c["x_end"] == 15 and c["stacked"] and c["group"] == "run"
    assert [s["label"] for s in c["series"]] == ["per_sample_metrics (train.py:31)", "other host"]
    assert c["series"][0]["values"] == [2.0, 3.0] and c["series"][1]["values"] == [1.0, 0.5]
    bad = _doc()
    bad["lines"]["timeline"]["ms_per_step"] = [[2.0]]  # one bin short
    assert lines_chart(bad) is None and lines_chart({}) is None


def test_the_reader_takes_the_lines_and_refuses_a_damaged_figure():
    import copy
    from pathlib import Path

    import pytest
    from test_html import run_doc

    from perfcore.errors import BadResultFile
    from perfcore.analysis.reader import parse_run

    doc = {**run_doc().to_dict(), "lines": _doc()["lines"], "starvation": _doc()["starvation"]}
    parse_run(copy.deepcopy(doc), Path("run.json"))  # what the part writer makes passes
    for damage in (
        lambda d: d["lines"]["labels"][0]["lines"][0].update(share="3/4"),
        lambda d: d["lines"]["timeline"]["ms_per_step"][0].__setitem__(0, -1.0),
        lambda d: d["starvation"].update(p95_wait_ms="53 ms"),
    ):
        bad = copy.deepcopy(doc)
        damage(bad)
        with pytest.raises(BadResultFile, match="is corrupt: (lines|starvation)"):
            parse_run(bad, Path("run.json"))
