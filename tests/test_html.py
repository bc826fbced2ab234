"""report.html: one self-contained file per command (run, merge, demo, health, diagnose, sweep,
compare) with its sections, a fixed size at any run length; PNGs that never depend on the user's
matplotlib backend. The pages are also opened in a real Chromium (tests/test_html_browser.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from steps_tables import steps_table as synthetic_steps

from perfcore.analysis.advice import advise_run
from perfcore.analysis.migrate import migrate
from perfcore.analysis.run_report import RunReport
from perfcore.report.words.advice import TEST_WORDS
from perfcore.report.html import render_html, write_folder_report, write_report

LABELS = ("load", "transfer", "compute", "comm", "host")
DOCS = Path(__file__).with_name("report_docs")  # documents an older perfcore wrote on a CPU machine (/1)


def doc_of(name: str) -> dict:
    return json.loads((DOCS / name).read_text())


def result_of(name: str):
    """An older document of report_docs read as this version reads it: migrated, then typed."""
    from perfcore.analysis.command_results import DemoResult, DiagnoseResult, HealthResult, SweepResult

    doc = migrate(doc_of(name))
    kind = doc["schema"].split("/")[0]
    typed = {"perfcore.run": RunReport, "perfcore.health": HealthResult, "perfcore.diagnose": DiagnoseResult,
             "perfcore.sweep": SweepResult, "perfcore.experiments.demo": DemoResult}[kind]
    return typed.from_dict(doc)


def steps_table(n: int, gpu: bool = True) -> pd.DataFrame:
    t = synthetic_steps(n, means=(4.0, 0.5, 3.5, 0.0, 1.0))
    if gpu:  # what --monitor adds per step on a GPU: utilisation, memory, host CPU (sampled, so gaps)
        rng = np.random.default_rng(1)
        util = np.clip(t["compute_ms"] / t["wall_ms"] + rng.normal(0, 0.05, n), 0, 1)
        t["monitor_gpu_util"] = np.where(np.arange(n) % 7 == 0, util, np.nan)
        t["monitor_gpu_mem_used_bytes"] = np.where(np.arange(n) % 7 == 0, 6e9 + 1e5 * np.arange(n), np.nan)
        t["monitor_cpu_percent"] = np.where(np.arange(n) % 7 == 0, 60 + rng.normal(0, 5, n), np.nan)
        t["mem_bytes"] = np.where(np.arange(n) % 8 == 0, 4e9, -1)
    return t


def run_facts() -> dict:
    return {
        "steps": 995,
        "warmup_steps": 5,
        "step_time_ms": {"mean": 9.0, "p50": 8.8, "p90": 10.1},
        "breakdown_ms": {"load": 4.1, "transfer": 0.5, "compute": 3.4, "comm": 0.0, "host": 1.0},
        "breakdown_fraction": {"load": 0.46, "transfer": 0.05, "compute": 0.38, "comm": 0.0, "host": 0.11},
        "kernels": [
            {
                "name": "void at::native::vectorized_elementwise_kernel<4>",
                "count": 1000,
                "total_ms": 12.5,
                "mean_us": 12.5,
            },
            {"name": "sm90_xmma_gemm_f32", "count": 2000, "total_ms": 30.0, "mean_us": 15.0},
        ],
        "kernel_categories": {"gemm": {"ms": 30.0, "share": 0.6}, "elementwise": {"ms": 20.0, "share": 0.4}},
        "memcpy": {
            "by_direction": {
                "h2d": {"count": 1000, "bytes": 2**30, "ms": 80.0, "pageable_bytes": 2**29, "pageable_ms": 50.0}
            }
        },
        "capture": {"backend": "native", "records": 123456, "dropped": 12, "buffers": 8},
        "overhead": {"ms_per_step": 0.02, "fraction": 0.0022, "hooks": "not included"},
        "notes": ["clock: CUPTI timestamps aligned to CLOCK_MONOTONIC"],
        "loaders": [{"site": "<at train.py:12>", "batch_size": 64, "num_workers": 0, "training": True}],
        "backend": "native-cupti",
        "device": "NVIDIA H200",
        "host": "node1",
        "command": ["python", "train.py"],
        "step_source": "optimizer",
        "files": {
            "run.json": "run.json",
            "steps.csv": "steps.csv",
            "trace.json": "trace.json",
            "report.html": "report.html",
        },
    }


def run_doc(**more) -> RunReport:
    """A run decided on its facts as perfcore run decides one (its loader's site is markup, to be escaped)."""
    facts = {**run_facts(), **more}
    return RunReport.of(facts, advise_run(facts, zero_code=True, evidence={"cpu_count": 8}))


def external_refs(text: str) -> list[str]:
    """Anything the page could fetch: an src/href/url() that is not inline data or a local file."""
    refs = re.findall(r"""(?:src|href)\s*=\s*['"]?([^'" >]+)|url\(\s*['"]?([^'")]+)""", text)
    return [
        a or b for a, b in refs if not (a or b).startswith(("data:", "#")) and ("//" in (a or b) or ":" in (a or b))
    ]


def test_run_report_is_one_self_contained_file_with_every_section(tmp_path):
    path = write_report(tmp_path, run_doc(), steps_table(1000))
    text = path.read_text()
    assert external_refs(text) == [] and "<link" not in text and not re.search(r"<script[^>]*\ssrc=", text)
    assert "uPlot" in text and "class='pc-data'" in text  # the chart library and its data, inline
    for section in (
        "Causes, ranked",
        "Where each step goes",
        "Over the run",
        "On the GPU",
        "Top kernels",
        "Kernel categories",
        "Copies by direction",
        "Capture",
        "Warnings and notes",
        "Environment",
    ):
        assert section in text, section
    assert "&lt;at train.py:12&gt;" in text and "<at train.py" not in text  # user text is escaped, never markup
    assert "4.10 ms" in text and "46%" in text and "about 1.84×" in text  # avoidable, share, expected gain
    assert "p50 step" in text and "8.80 ms" in text and "10.1 ms" in text  # as the terminal prints them
    assert "7,111 samples/s" in text  # 64 per batch / 9.0 ms
    assert TEST_WORDS["diagnose"] in text and "123,456" in text and "pageable MiB" in text
    assert "12 CUPTI record(s) were dropped" in text and "href='trace.json'" in text
    assert "href='report.html'" not in text
    spec = json.loads(re.search(r"class='pc-data'>(.*?)</script>", text).group(1).replace("<\\/", "</"))
    ids = {c["id"].split("-", 1)[1] for c in spec["charts"]}
    assert {"run-breakdown", "run-util", "run-memory", "run-load", "run-hist"} <= ids
    util = next(c for c in spec["charts"] if c["id"].endswith("run-util"))
    assert {s["label"] for s in util["series"]} == {"GPU utilisation", "host CPU"}


def test_every_timeline_shares_one_step_axis_and_the_histogram_counts_every_step():
    from perfcore.report.charts import run_charts

    steps = steps_table(5000)
    charts = run_charts(run_doc(), steps)
    lines = [c for c in charts if c["kind"] == "timeline"]
    assert len({(tuple(c["x"]), c["x_end"], c["group"]) for c in lines}) == 1  # the same x for all
    hist = next(c for c in charts if c["kind"] == "histogram")
    assert sum(hist["counts"]) == int((~steps["warmup"]).sum())
    bd = lines[0]
    # binned means still add up: the five labels sum to each bin's mean step
    sums = np.sum([s["values"] for s in bd["series"]], axis=0)
    assert np.allclose(sums, bd["total"], rtol=2e-3)


def test_report_size_stays_flat_with_run_length():
    small = render_html(run_doc(), steps_table(1_000))
    big = render_html(run_doc(), steps_table(100_000))
    assert len(big) < 1.2 * len(small) + 20_000 and len(big) < 350_000, (len(small), len(big))


def test_notebook_body_is_scoped_and_unique_per_output():
    a, b = render_html(run_doc(), steps_table(300)), render_html(run_doc(), steps_table(300))
    assert a.startswith("<div class='perfcore'") and "<html" not in a and ".perfcore .verdict" in a
    ida, idb = re.search(r"id='(pc\d+)'", a).group(1), re.search(r"id='(pc\d+)'", b).group(1)
    assert ida != idb  # two reports in one notebook page draw into their own charts


def test_repr_html_of_a_run_result_is_the_report_body():
    from perfcore.timing import RunResult

    body = RunResult.of(run_doc())._repr_html_()
    assert "id='verdict'" in body and "Causes, ranked" in body


def write_stage(tmp_path: Path, kind: str, doc: dict) -> Path:
    out = tmp_path / kind
    out.mkdir()
    return write_folder_report(out, f"perfcore {kind}", doc, "terminal text <not shown>", [f"{kind}.json"])


def sweep_doc() -> dict:
    doc = doc_of("sweep.json")
    base = dict(doc["configs"][0])
    doc["configs"] += [
        dict(
            base,
            batch_size=64,
            num_workers=0,
            status="oom",
            oom=True,
            step_ms=None,
            samples_per_s=None,
            busy_mean=None,
            error="CUDA out of memory",
        ),
        dict(
            base,
            batch_size=64,
            num_workers=1,
            status="crashed",
            oom=False,
            step_ms=None,
            samples_per_s=None,
            busy_mean=None,
            error="worker 0 exited with signal 9",
        ),
    ]
    doc["failed"] = 2
    return doc


def test_stage_pages_draw_from_their_documents(tmp_path):
    from perfcore.analysis.command_results import SweepResult

    health = write_stage(tmp_path, "health", result_of("health.json")).read_text()
    assert "busy: compute share, no GPU" in health and "next batch → forward → loss" in health
    assert "perfcore diagnose demo" in health and "terminal text" not in health and "<pre" not in health
    # Each label's share of the iteration, as the bar draws it (the table read 0.0% for every label).
    bd = doc_of("health.json")["breakdown_ms"]
    shares = [float(v) for v in re.findall(r"<td class='n'>([\d.]+)%</td>", health)]
    assert len(shares) == 5 and abs(sum(shares) - 100) < 0.5, shares
    assert max(shares) == pytest.approx(100 * max(bd.values()) / sum(bd.values()), abs=0.1)
    diag = write_stage(tmp_path, "diagnose", result_of("diagnose.json")).read_text()
    # An older document's checks kept their words only: it says less (no table of them), never those words.
    for s in ("Experiments", "A: synthetic data", "Inside __getitem__", "self ms/item"):
        assert s in diag, s
    # __getitem__'s functions named as the terminal names them, not as cProfile's raw labels.
    assert "<code>ImagingDecoder.decode</code>" in diag and "of &#x27;ImagingDecoder&#x27; objects" not in diag
    sweep = write_stage(tmp_path, "sweep", SweepResult.from_dict(migrate(sweep_doc()))).read_text()
    assert sweep.count("<table class='heat'>") == 4 * 2  # four metrics x two pin_memory slices
    assert "class='cell bad'" in sweep and ">OOM<" in sweep and ">CRASHED<" in sweep
    assert sweep.count("cell knee") >= 4  # each knee outlined in every metric's map
    assert "data-tip='batch_size=8 num_workers=1 pin_memory=True" in sweep


def test_demo_page_shows_all_three_stages_without_terminal_text(tmp_path):
    from perfcore.analysis.command_results import DemoResult

    out = tmp_path / "demo"
    out.mkdir()
    doc = dict(
        doc_of("demo.json"), health=doc_of("health.json"), run=doc_of("demo_run.json"), diagnose=doc_of("diagnose.json")
    )
    result = DemoResult.from_dict(migrate(doc))
    synthetic_steps(40).to_csv(out / "steps.csv", index=False)
    text = write_folder_report(out, "perfcore demo", result, "health of demo ...", list(result.files)).read_text()
    for s in ("1 · health", "2 · run", "3 · diagnose", "Over the run", "one verdict: input-bound"):
        assert s in text, s
    assert "<pre" not in text and text.count("id='verdict'") == 1
    # The page says its verdict once: the run's and diagnose's sections leave their cards to the page's.
    cards = re.findall(r"<div class='bound'[^>]*>([^<]*)</div>", text)
    assert len(cards) == len(set(cards)) and any("input-bound" in c for c in cards), cards


def test_compare_page_puts_the_two_runs_side_by_side():
    from perfcore.analysis.compare import compare_runs
    from perfcore.report.html import render_compare_page

    a, b = doc_of("run.json"), doc_of("run_b.json")
    text = render_compare_page(compare_runs(result_of("run.json"), result_of("run_b.json")), ("before", "after"))
    assert "A: before" in text and "B: after" in text and "What changed, per label" in text
    change = 100 * (b["breakdown_ms"]["load"] - a["breakdown_ms"]["load"]) / a["breakdown_ms"]["load"]
    assert f"{change:+.0f}%" in text


def test_merged_run_has_a_rank_table_and_straggler_chart(tmp_path):
    bd = run_facts()["breakdown_ms"]
    ranks = [
        {
            "rank": r,
            "host": "n0",
            "steps": 100,
            "step_time_ms": {"mean": 9.0 + 3 * (r == 1), "p50": 9.0, "p90": 9.0},
            "breakdown_ms": {**bd, "load": 4.1 + 3 * (r == 1)},
        }
        for r in range(3)
    ]
    stragglers = [{"rank": 1, "excess_label": "load", "excess_ms": 3.0, "work_ms": 12.0, "others_work_ms": 9.0,
                   "step_ms": 12.0}]
    text = write_report(tmp_path, run_doc(ranks=ranks, stragglers=stragglers), steps_table(200)).read_text()
    assert "<h2>Ranks</h2>" in text and "◀ straggler" in text and "rank 1 holds up the job" in text
    assert "Per-rank breakdown" in text and "data-kind='merge'" in text


def test_the_title_of_each_stage_page():
    from perfcore.report.html import _title
    from perfcore.report.words.verdict import verdict_long

    run = result_of("demo_run.json")
    demo = type("D", (), {})()
    assert _title(result_of("diagnose.json"), "") == verdict_long(result_of("diagnose.json").verdict)
    assert _title(result_of("health.json"), "verdict: other").startswith("input-bound")  # health's verdict
    assert _title(result_of("sweep.json"), "x\nbest: batch_size=64") == "best: batch_size=64"  # sweep's
    assert run.verdict.decided and demo is not None


def test_experiment_commands_write_a_report(tmp_path):
    from click.testing import CliRunner

    from perfcore.cli import cli

    factory = Path(__file__).with_name("workload_factories.py")
    r = CliRunner().invoke(cli, ["health", "--steps", "5", "--out", str(tmp_path / "h"), f"{factory}:slow_loader"])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "h" / "report.html").read_text()
    from perfcore.analysis.command_results import HealthResult
    from perfcore.report.words.verdict import health_summary
    from perfcore.report.words.verdict import health_sentence

    doc = HealthResult.from_dict(json.loads((tmp_path / "h" / "health.json").read_text()))
    summary = health_sentence(doc)
    # The card's headline is the verdict's; the stage's whole summary is its "why" panel.
    page_text = text.replace("&#x27;", "'")
    assert "id='verdict'>" in page_text and f"<summary>why</summary><p>{summary[:40]}" in page_text
    assert "report.html" in r.output


def test_plots_work_under_a_broken_mplbackend_and_leave_it_alone(tmp_path):
    """MPLBACKEND=Qt4Agg makes `import matplotlib` raise; perfcore's plots must still draw, and the
    user's setting must be there afterwards, untouched."""
    code = (
        "import os, sys; sys.path.insert(0, %r)\n"
        "from steps_tables import steps_table\n"
        "from perfcore.report.plots import plot_breakdown\n"
        "plot_breakdown(steps_table(50), %r, title='x' * 400)\n"
        "print(os.environ['MPLBACKEND'])\n"
    ) % (str(Path(__file__).parent), str(tmp_path / "b.png"))
    r = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "MPLBACKEND": "Qt4Agg"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "Qt4Agg" and (tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"


def test_report_command_under_a_broken_mplbackend(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps(doc_of("run.json")))
    synthetic_steps(200).to_csv(run / "steps.csv", index=False)
    r = subprocess.run(
        [sys.executable, "-m", "perfcore.cli", "report", "--html", str(run)],
        env={**os.environ, "MPLBACKEND": "Qt4Agg"},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert (run / "breakdown.png").stat().st_size > 10_000 and "Over the run" in (run / "report.html").read_text()


def test_plots_never_switch_the_users_pyplot_backend(tmp_path):
    code = (
        "import matplotlib; matplotlib.use('svg'); import matplotlib.pyplot as plt\n"
        "import sys; sys.path.insert(0, %r)\n"
        "from steps_tables import steps_table\n"
        "from perfcore.report.plots import plot_breakdown\n"
        "plot_breakdown(steps_table(50), %r)\n"
        "print(matplotlib.get_backend(), len(plt.get_fignums()))\n"
    ) % (str(Path(__file__).parent), str(tmp_path / "b.png"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["svg", "0"]  # still the user's, and no figure left registered with pyplot


def test_png_axes_have_units_not_exponents(tmp_path):
    from perfcore.report import plots

    t = synthetic_steps(300, means=(4000.0, 0.0, 14000.0, 0.0, 300.0))  # ~18 s steps
    fig, ax = plots._subplots()
    ax.plot(t["step"], t["wall_ms"])
    plots._ms_axis(ax)
    fig.canvas.draw()
    labels = [x.get_text() for x in ax.get_yticklabels() if x.get_text()]
    assert labels and all(re.fullmatch(r"(0|[\d.]+ (ms|s))", s) for s in labels), labels
    assert ax.yaxis.get_offset_text().get_text() == ""


def test_breakdown_png_step_ticks_fit_at_100k_steps(tmp_path):
    from perfcore.report import plots

    labels = [plots.step_label(t) for t in plots.nice_ticks(0, 100_000, target=9, integer=True)]
    assert labels[-1] == "100k" and all(len(s) <= 5 for s in labels), labels


def test_the_label_table_quotes_the_terminals_steady_figures_and_a_busy_verdict_says_so():
    # A run whose outlier steps were set apart: the terminal's table and the verdict judge the steady step
    # (10 ms here) while the plain means (in breakdown_ms) hold the outliers; the page quotes the former.
    import dataclasses

    from perfcore.report.terminal import render_brief

    doc = json.loads((Path(__file__).with_name("report_docs") / "run.json").read_text())
    steady = {"load": 4.0, "transfer": 0.0, "compute": 5.0, "comm": 0.0, "host": 1.0}
    doc["breakdown_robust"] = {
        "steps": doc["steps"],
        "step_ms": 10.0,
        "ms": steady,
        "share": {k: v / 10 for k, v in steady.items()},
        "outliers": {"count": 3},
    }
    run = RunReport.from_dict(migrate(doc))
    doc = dataclasses.replace(run, verdict=dataclasses.replace(run.verdict, uncertain=True))
    page = render_html(doc)
    html_share = {
        lb: float(pct)
        for lb, pct in re.findall(r"</i>(\w+)</td><td class='n'>[^<]*</td><td class='n'>([\d.]+)%</td>", page)
    }
    term_share = {}
    for ln in render_brief(doc, "runs/r1").splitlines():
        m = re.match(r"\s+(load|transfer|compute|comm|host)\s+\S+(?: \S+)?\s+(\d+)%", ln)
        if m:
            term_share[m.group(1)] = float(m.group(2))
    assert set(html_share) == set(term_share) == set(steady)
    for lb, v in steady.items():
        assert html_share[lb] == pytest.approx(10 * v) and abs(term_share[lb] - html_share[lb]) <= 0.5
    assert "of a steady 10" in page and "3 outlier step(s)" in page
    assert "uncertain: other processes used the machine" in page


def test_the_breakdown_png_leaves_evaluation_rows_out(tmp_path, monkeypatch):
    import perfcore.analysis.bins as bins
    from perfcore.report.plots import plot_breakdown

    seen = []
    real_bin, real_out = bins.bin_steps, bins.outliers
    monkeypatch.setattr(bins, "bin_steps", lambda s, n: seen.append(len(s)) or real_bin(s, n))
    monkeypatch.setattr(bins, "outliers", lambda s: seen.append(int(s["wall_ms"].max() > 100)) or real_out(s))
    t = steps_table(50, gpu=False)
    t["evaluation"] = np.arange(50) % 10 == 9  # an evaluation pass every 10 rows, each far longer
    t.loc[t["evaluation"], "wall_ms"] = 500.0
    plot_breakdown(t, tmp_path / "b.png")
    assert seen == [45, 0]  # the 45 training rows are binned; no evaluation row is an outlier


def test_a_cause_and_its_advice_with_the_same_evidence_say_it_once():
    from perfcore.report.html.run import causes_list
    from perfcore.report.words.verdict import cause_words

    # A run whose one cause's advice has the load cause's evidence, word for word.
    bd = {"load": 4.1, "transfer": 0.5, "compute": 4.1, "comm": 0.0, "host": 0.3}
    doc = run_doc(breakdown_ms=bd)
    v = doc.verdict
    evidence = cause_words(v, v.named[0])[1]
    html = causes_list(v, doc.findings, doc.loader_plan)
    assert html.count("evidence:") == 1 and html.count(evidence.split(",")[0]) >= 1
