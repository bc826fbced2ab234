"""report.html: self-contained (no network: inline CSS, SVG and PNG), with the verdict, advice, the
binned breakdown, kernels and copies when traced, warnings, environment and links; rendered in a
real headless Chromium, which must load it with no console error and show the verdict."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from steps_tables import steps_table as synthetic_steps

from perfcore.report.html import headline, render_html, write_folder_report, write_report

LABELS = ("load", "transfer", "compute", "comm", "host")
VERDICT = "input-bound: waiting for data costs 4.1 ms of each 9.0 ms step (46%; critical at >= 20%)"


def steps_table(n: int) -> pd.DataFrame:
    return synthetic_steps(n, means=(4.0, 0.5, 3.5, 0.0, 1.0))


def run_doc() -> dict:
    return {
        "schema": "perfcore.run/1", "steps": 995, "warmup_steps": 5,
        "step_time_ms": {"mean": 9.0, "p50": 8.8, "p90": 10.1},
        "breakdown_ms": {"load": 4.1, "transfer": 0.5, "compute": 3.4, "comm": 0.0, "host": 1.0},
        "breakdown_fraction": {"load": 0.46, "transfer": 0.05, "compute": 0.38, "comm": 0.0, "host": 0.11},
        "verdict": {"bound": "load", "level": "critical", "summary": VERDICT},
        "recommendations": [{"id": "more_workers", "text": "Use DataLoader(num_workers=4) <at train.py:12>",
                             "evidence": "load is 4.1 ms", "test": "perfcore diagnose -- python train.py"}],
        "kernels": [{"name": "void at::native::vectorized_elementwise_kernel<4>", "count": 1000, "total_ms": 12.5,
                     "mean_us": 12.5}],
        "memcpy": {"by_direction": {"h2d": {"count": 1000, "bytes": 2**30, "ms": 80.0, "pageable_bytes": 2**29,
                                            "pageable_ms": 50.0}}},
        "capture": {"dropped": 12},
        "overhead": {"ms_per_step": 0.02, "fraction": 0.0022, "hooks": "not included"},
        "notes": ["clock: CUPTI timestamps aligned to CLOCK_MONOTONIC"],
        "backend": "native-cupti", "device": "NVIDIA H200", "host": "node1", "command": ["python", "train.py"],
        "step_source": "optimizer", "files": {"run.json": "run.json", "steps.csv": "steps.csv",
                                              "trace.json": "trace.json", "report.html": "report.html"},
    }


def test_report_is_self_contained_and_complete(tmp_path):
    path = write_report(tmp_path, run_doc(), steps_table(1000))
    text = path.read_text()
    assert VERDICT.split(":")[0] in text and "critical" in text
    assert "&lt;at train.py:12&gt;" in text  # user text is escaped, never markup
    assert "<svg" in text and "vectorized_elementwise_kernel" in text and "pageable" in text
    assert "12 CUPTI record(s) were dropped" in text and "overhead" in text and "CLOCK_MONOTONIC" in text
    assert "NVIDIA H200" in text and "href='trace.json'" in text and "href='report.html'" not in text
    # nothing fetched from anywhere: no external URL in any src/href, no script or stylesheet link
    assert not re.search(r"(src|href)\s*=\s*['\"]?(https?:)?//", text)
    assert "<script" not in text and "<link" not in text


def test_report_size_does_not_grow_with_the_run(tmp_path):
    small = render_html(run_doc(), steps_table(1_000))
    big = render_html(run_doc(), steps_table(200_000))
    assert len(big) < 1.5 * len(small) and len(big) < 200_000


def test_folder_report_inlines_the_heatmaps(tmp_path):
    import base64

    png = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
    (tmp_path / "heatmap_pin0_pf2.png").write_bytes(png)
    path = write_folder_report(tmp_path, "perfcore sweep", {"configs": []}, "text <report>\nbest: batch_size=64",
                               ["sweep.json", "sweep.csv", "heatmap_pin0_pf2.png"])
    text = path.read_text()
    assert "data:image/png;base64," in text and "heatmap_pin0_pf2.png" in text and "text &lt;report&gt;" in text
    assert "<div class='verdict' id='verdict'>best: batch_size=64</div>" in text
    assert headline({"run": {"verdict": {"summary": "input-bound"}}}) == "input-bound"  # the demo's
    assert headline({"summary": "busy 95%"}, "verdict: other") == "busy 95%"  # health's


def chromium() -> str | None:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed, and CI must render report.html in a real browser "
                        "(scripts/setup.sh installs Debian's chromium)")
        pytest.skip("chromium is not installed here (apt-get install chromium); CI requires it")
    return found


def headless(browser: str, *args: str, url: str) -> subprocess.CompletedProcess:
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           "--no-first-run", "--enable-logging=stderr", "--v=0", *args, url],
                          capture_output=True, text=True, timeout=120)


def console_errors(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]


def test_chromium_loads_the_report_with_no_console_error_and_shows_the_verdict(tmp_path):
    browser = chromium()
    path = write_report(tmp_path, run_doc(), steps_table(5000))
    dom = headless(browser, "--dump-dom", url=path.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "id=\"verdict\"" in dom.stdout and "input-bound" in dom.stdout
    assert console_errors(dom.stderr) == []
    shot = tmp_path / "shot.png"
    r = headless(browser, f"--screenshot={shot}", "--window-size=1000,1400", url=path.as_uri())
    assert r.returncode == 0 and shot.stat().st_size > 20_000  # a page was painted, not a blank one
    # The same check catches a broken page: a script error is reported on the console.
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>undefined_function()</script></body></html>")
    assert console_errors(headless(browser, "--dump-dom", url=bad.as_uri()).stderr)


def test_the_notebook_body_carries_its_own_styles_and_the_binned_plot():
    body = render_html(run_doc(), steps_table(3000))
    assert body.startswith("<div class='perfcore'") and "<style>" in body and ".perfcore .verdict" in body
    assert "<svg" in body and "id='verdict'" in body and "<html" not in body


def test_experiment_commands_write_a_report(tmp_path):
    from click.testing import CliRunner

    from perfcore.cli import cli

    factory = Path(__file__).with_name("workload_factories.py")
    r = CliRunner().invoke(cli, ["health", "--steps", "5", "--out", str(tmp_path / "h"), f"{factory}:slow_loader"])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "h" / "report.html").read_text()
    doc = __import__("json").loads((tmp_path / "h" / "health.json").read_text())
    assert f"id='verdict'>{doc['summary'][:40]}" in text.replace("&#x27;", "'") and "report.html" in r.output
