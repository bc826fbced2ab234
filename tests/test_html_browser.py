"""Every command's report.html opened in a real browser (Debian's Chromium, driven by Playwright with
the system browser: no browser download): no console error, no network request of any kind, the
verdict and each section present, the charts drawn, hovering shows numbers. A screenshot of each
page is kept in build/report-screens/ (printed; PERFCORE_SCREENSHOT_DIR chooses another folder). Skipped, with the reason,
only where there is no Chromium or Playwright; where PERFCORE_WITH_CHROMIUM=1 (CI) they must exist."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_html import doc_of, result_of, run_doc, steps_table, sweep_doc

from perfcore.report.html import write_folder_report, write_report

REQUIRED = os.environ.get("PERFCORE_WITH_CHROMIUM") == "1"


def _missing(what: str) -> None:
    if REQUIRED:
        pytest.fail(f"{what}, and PERFCORE_WITH_CHROMIUM=1 requires rendering the reports in a real browser "
                    "(scripts/setup.sh installs chromium and the test extra installs playwright)")
    pytest.skip(f"{what} (apt-get install chromium; pip install playwright)")


@pytest.fixture(scope="module")
def browser():
    exe = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if exe is None:
        _missing("no chromium here")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def shots() -> Path:
    # Kept after the run (build/ is ignored by git), where CI can keep it as an artefact.
    d = Path(os.environ.get("PERFCORE_SCREENSHOT_DIR") or Path(__file__).resolve().parents[1] / "build" / "report-screens")
    d.mkdir(parents=True, exist_ok=True)
    return d


class Opened:
    def __init__(self, page, errors, requests):
        self.page, self.errors, self.requests = page, errors, requests


def open_page(browser, path: Path, width: int = 1280) -> Opened:
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda ex: errors.append(f"uncaught: {ex}"))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.as_uri(), wait_until="load")
    page.wait_for_function("document.querySelectorAll('.perfcore[data-pc-drawn]').length > 0", timeout=10_000)
    return Opened(page, errors, requests)


def check_page(o: Opened, path: Path, sections: list[str], shots: Path, name: str, capsys) -> None:
    page = o.page
    # The one request is the page itself: nothing from the network, nothing from other files.
    assert [u for u in o.requests if u != path.as_uri()] == []
    assert o.errors == []
    verdict = page.locator("#verdict")
    assert verdict.count() == 1 and len(verdict.inner_text().strip()) > 10
    heads = page.locator("h2, h3").all_inner_texts()
    for s in sections:
        assert any(s in h for h in heads), (s, heads)
    n_specs = page.evaluate("JSON.parse(document.querySelector('script.pc-data').textContent).charts.length")
    assert page.locator("[data-chart] canvas").count() == n_specs  # every chart drawn by the library
    page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
    with capsys.disabled():
        print(f"\n  screenshot: {shots / (name + '.png')}")


def page_charts(page) -> dict[str, dict]:
    """The charts' data as the page holds it, by id without the page's own prefix."""
    specs = json.loads(page.evaluate("document.querySelector('script.pc-data').textContent"))["charts"]
    return {re.sub(r"^.*?(run-)", r"\1", c["id"]): c for c in specs}


def hover_chart(page, chart_suffix: str, at: float = 0.6) -> str:
    box = page.locator(f"[data-chart$='{chart_suffix}']")
    over = box.locator(".u-over")
    over.scroll_into_view_if_needed()
    bb = over.bounding_box()
    page.mouse.move(bb["x"] + bb["width"] * at, bb["y"] + bb["height"] * 0.5)
    return box.locator(".pc-readout").inner_text()


def test_run_report_in_chromium(browser, shots, tmp_path, capsys):
    path = write_report(tmp_path, run_doc(), steps_table(100_000))
    o = open_page(browser, path)
    check_page(o, path, ["Causes, ranked", "Where each step goes", "Over the run", "On the GPU", "Top kernels",
                         "Kernel categories", "Copies by direction", "Capture", "Data loading", "Environment"],
               shots, "run_gpu_100k_steps", capsys)
    text = hover_chart(o.page, "run-breakdown")
    # the bin under the cursor: its steps and each label's ms
    assert re.search(r"steps [\d,]+–[\d,]+", text) and re.search(r"load \d[\d.]* ms", text), text
    util = hover_chart(o.page, "run-util")
    assert re.search(r"GPU utilisation \d+%", util), util
    assert re.search(r"\d+ – \d+|\d[\d.]* ms–\d", hover_chart(o.page, "run-hist")), "histogram hover"
    # above the fold on a laptop screen: the verdict and the numbers sizing it
    assert o.page.locator("#verdict").bounding_box()["y"] < 400
    # zoom: dragging across the breakdown narrows every chart on the step axis
    over = o.page.locator("[data-chart$='run-breakdown'] .u-over")
    bb = over.bounding_box()
    o.page.mouse.move(bb["x"] + bb["width"] * 0.2, bb["y"] + 20)
    o.page.mouse.down()
    o.page.mouse.move(bb["x"] + bb["width"] * 0.4, bb["y"] + 20, steps=5)
    o.page.mouse.up()
    ranges = o.page.evaluate("""Array.from(document.querySelectorAll("[data-chart*='run-'] .u-wrap"))
        .map(w => w.parentElement.parentElement.getAttribute('data-chart'))""")
    assert ranges  # charts present after the zoom
    assert o.errors == []


def test_real_cpu_run_report_in_chromium(browser, shots, tmp_path, capsys):
    """The report.html a real `perfcore run` wrote for a real DataLoader loop: its tiles and its charts
    read the same steps (the histogram counts every measured step, its median bin holds the p50 tile)."""
    script = Path(__file__).resolve().parents[1] / "examples" / "train_small.py"
    out = tmp_path / "r"
    p = subprocess.run([sys.executable, "-m", "perfcore", "run", "--quiet", "--out", str(out), "--",
                        sys.executable, str(script), "200", "0"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    path = out / "report.html"
    o = open_page(browser, path)
    check_page(o, path, ["Causes, ranked", "Over the run", "Data loading", "Step details"], shots, "run_cpu", capsys)
    assert o.page.locator("h2", has_text="On the GPU").count() == 0  # no GPU, no empty GPU section
    doc = json.loads((out / "run.json").read_text())
    tiles = dict(zip(o.page.locator(".tile span").all_inner_texts(), o.page.locator(".tile b").all_inner_texts()))
    measured = int(tiles["steps measured"].split()[0].replace(",", ""))
    assert measured == doc["steps"]
    charts = page_charts(o.page)
    hist = charts["run-hist"]
    assert sum(hist["counts"]) == measured
    cum = np.cumsum(hist["counts"])
    i = int(np.searchsorted(cum, measured / 2))
    p50 = float(tiles["p50 step"].split()[0])
    assert hist["edges"][i] - 0.01 <= p50 <= hist["edges"][i + 1] + 0.01, (p50, hist["edges"][i:i + 2])
    totals = np.asarray(charts["run-breakdown"]["total"], dtype=float)
    warm = np.asarray(charts["run-breakdown"]["warm"], dtype=bool)
    assert np.median(totals[~warm]) == pytest.approx(p50, rel=0.02, abs=0.01)  # one bar a step at 200 steps
    assert "host CPU" in o.page.content()  # sampled by default, on the steps' axis


def test_stage_reports_in_chromium(browser, shots, tmp_path, capsys):
    health = doc_of("health.json")
    # health.json keeps the busy series it sampled: the chart is drawn from the file alone
    health.update(busy_series=[0.2, 0.3, 0.1, 0.6, 0.2, 0.25, 0.3, 0.1, 0.5, 0.2], busy_spacing_s=0.1)
    from perfcore.analysis.command_results import HealthResult, SweepResult
    from perfcore.analysis.migrate import migrate

    cases = {"health": (HealthResult.from_dict(migrate(health)), ["Where each iteration goes"]),
             "diagnose": (result_of("diagnose.json"), ["Experiments", "Predicted vs measured", "Inside __getitem__"]),
             "sweep": (SweepResult.from_dict(migrate(sweep_doc())),
                       ["Heatmaps", "samples/s (higher is better)", "step ms (lower is better)"])}
    for kind, (doc, sections) in cases.items():
        out = tmp_path / kind
        out.mkdir()
        path = write_folder_report(out, f"perfcore {kind}", doc, "", [f"{kind}.json"])
        o = open_page(browser, path)
        check_page(o, path, sections, shots, kind, capsys)
        if kind == "sweep":
            cell = o.page.locator("td.cell.knee").first
            cell.hover()
            tip = o.page.locator(".pc-tip")
            assert tip.is_visible() and re.search(r"[\d,]+ samples/s", tip.inner_text()), tip.inner_text()
            o.page.locator("td.cell.bad").first.hover()
            assert "OOM" in tip.inner_text() or "CRASHED" in tip.inner_text()
        if kind == "health":
            assert re.search(r"compute share, no GPU \d+%", hover_chart(o.page, "busy"))
        if kind == "diagnose":
            text = hover_chart(o.page, "experiments")
            assert re.search(r"compute \d[\d.]* ms", text), text
        assert o.errors == []


def test_demo_and_compare_and_merge_in_chromium(browser, shots, tmp_path, capsys, demo_quick):
    from perfcore.analysis.compare import compare_runs
    from perfcore.report.html import write_compare_report

    p, out, _ = demo_quick  # the report.html a real `perfcore demo --quick` wrote
    assert p.returncode == 0, p.stderr
    path = out / "report.html"
    o = open_page(browser, path)
    check_page(o, path, ["1 · health", "2 · run", "3 · diagnose", "Over the run", "Experiments"], shots, "demo", capsys)
    run = json.loads((out / "run.json").read_text())
    charts = page_charts(o.page)
    assert sum(charts["run-hist"]["counts"]) == run["steps"]  # the run stage's charts read its own steps
    assert "run-util" in charts  # host CPU sampled during the run stage, on its steps' axis
    assert o.page.locator("pre").count() == 0  # every stage drawn, no terminal text dumped
    cmp_path = tmp_path / "compare.html"
    write_compare_report(cmp_path, compare_runs(result_of("run.json"), result_of("run_b.json")), ("run A", "run B"))
    o = open_page(browser, cmp_path)
    check_page(o, cmp_path, ["What changed, per label"], shots, "compare", capsys)
    assert re.search(r"load \d[\d.]* ms", hover_chart(o.page, "ab"))
    from test_html import run_facts

    facts = run_facts()
    ranks = [{"rank": r, "host": "n0", "steps": 100,
              "step_time_ms": {"mean": 9.0 + 3 * (r == 1), "p50": 9.0 + 3 * (r == 1), "p90": 9.0 + 3 * (r == 1)},
              "breakdown_ms": {**facts["breakdown_ms"], "load": 4.1 + 3 * (r == 1)}} for r in range(4)]
    stragglers = [{"rank": 1, "excess_label": "load", "excess_ms": 3.0, "work_ms": 12.0, "others_work_ms": 9.0,
                   "step_ms": 12.0}]
    doc = run_doc(ranks=ranks, stragglers=stragglers)
    (tmp_path / "merge").mkdir()
    path = write_report(tmp_path / "merge", doc, steps_table(2000))
    o = open_page(browser, path)
    check_page(o, path, ["Ranks", "Over the run"], shots, "merge", capsys)
    text = hover_chart(o.page, "ranks", at=1.6 / 4.2)  # rank 1's bar (x from -0.6 to 3.6)
    assert "rank 1 · 12.0 ms" in text and "load 7.1 ms" in text, text  # units.fmt_ms, as the terminal prints it


def test_narrow_notebook_width_keeps_charts_inside(browser, shots, tmp_path, capsys):
    """A Colab output cell is ~700 px wide: the grid folds to one column, no chart overflows."""
    path = write_report(tmp_path, run_doc(), steps_table(3000))
    o = open_page(browser, path, width=720)
    wide = o.page.evaluate("""Array.from(document.querySelectorAll('[data-chart] canvas'))
        .filter(c => c.getBoundingClientRect().right > document.documentElement.clientWidth + 1).length""")
    assert wide == 0
    o.page.screenshot(path=str(shots / "run_narrow.png"), full_page=True)
    assert o.errors == []


def test_the_checks_catch_a_broken_page(browser, tmp_path):
    """The same listeners see a script error and a request out: the checks above can fail."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><div class='perfcore' data-pc-drawn='1'></div><img src='http://192.0.2.1/x.png'>"
                   "<script>undefined_function()</script></body></html>")
    o = open_page(browser, bad)
    assert any("undefined_function" in x for x in o.errors)
    assert any(u.startswith("http://192.0.2.1") for u in o.requests)


def test_host_lines_in_chromium(browser, shots, tmp_path, capsys):
    """A host-bound script's report: the user's lines table names per_sample_metrics, and its sampled host
    time is drawn on the steps' axis with the other charts (hovering it reads the function's ms)."""
    script = Path(__file__).resolve().parent / "scripts" / "host_metrics.py"
    out = tmp_path / "r"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfcore",
            "run",
            "--quiet",
            "--out",
            str(out),
            "--",
            sys.executable,
            str(script),
            "400",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    path = out / "report.html"
    o = open_page(browser, path)
    check_page(o, path, ["Your code's lines", "host:", "Over the run"], shots, "run_host_lines", capsys)
    first = o.page.locator("h3:has-text('host:') + table tr").nth(1).locator("td").all_inner_texts()
    assert first[0] == "per_sample_metrics" and first[1].startswith("host_metrics.py:")
    charts = page_charts(o.page)
    assert charts["run-lines"]["group"] == charts["run-breakdown"]["group"]
    assert re.search(r"per_sample_metrics \(host_metrics\.py:\d+\) \d", hover_chart(o.page, "run-lines", 0.5))
    assert o.errors == []
