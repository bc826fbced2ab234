"""report.html at 1k, 10k and 100k steps: file size, Python render time (render_report, median of 5)
and, where Chromium and Playwright are installed, the browser's time from navigation to every chart
drawn (median of 5). Printed side by side, with the 100k/1k ratios.

    .venv/bin/python bench/bench_report.py"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_html import run_doc, steps_table  # noqa: E402

from perfcore.report.html import render_report  # noqa: E402


def browser_ms(paths: list[Path], repeats: int = 5) -> list[float | None]:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return [None] * len(paths)
    if exe is None:
        return [None] * len(paths)
    out = []
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        for path in paths:
            times = []
            for _ in range(repeats):
                page = b.new_page(viewport={"width": 1280, "height": 900})
                t0 = time.perf_counter()
                page.goto(path.as_uri(), wait_until="load")
                page.wait_for_function("document.querySelectorAll('.perfcore[data-pc-drawn]').length > 0")
                times.append((time.perf_counter() - t0) * 1e3)
                page.close()
            out.append(statistics.median(times))
        b.close()
    return out


def main() -> None:
    doc = run_doc()
    tmp = Path(tempfile.mkdtemp(prefix="bench-report-"))
    rows = []
    for n in (1_000, 10_000, 100_000):
        steps = steps_table(n)
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            text = render_report(doc, steps)
            times.append((time.perf_counter() - t0) * 1e3)
        path = tmp / f"report_{n}.html"
        path.write_text(text)
        rows.append((n, len(text.encode()), statistics.median(times), path))
    shown = browser_ms([r[3] for r in rows])
    print(f"{'steps':>8} {'bytes':>9} {'render ms':>10} {'browser ms':>11}")
    for (n, size, ms, _), b in zip(rows, shown):
        print(f"{n:>8} {size:>9,} {ms:>10.1f} {('%.0f' % b) if b is not None else 'n/a':>11}")
    (n0, s0, m0, _), (n1, s1, m1, _) = rows[0], rows[-1]
    ratio_b = f", browser {shown[-1] / shown[0]:.2f}x" if shown[0] else ""
    print(f"100k/1k: size {s1 / s0:.2f}x, render {m1 / m0:.2f}x{ratio_b}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
