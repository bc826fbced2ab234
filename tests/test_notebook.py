"""examples/colab_quickstart.ipynb executed headless on the CPU, as written (nbclient, a real IPython
kernel): the install cell skips itself because perfcore is installed, then perfcore env, %%perfcore on
a training cell, perfcore run on a script, its report inline, and perfcore diagnose; outputs checked."""
from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "colab_quickstart.ipynb"


def text_of(cell) -> str:
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            out.append(o.get("text", ""))
        elif "data" in o:
            out.append(o["data"].get("text/plain", ""))
    return "".join(out)


def html_of(cell) -> str:
    return "".join(o["data"].get("text/html", "") for o in cell.get("outputs", []) if "data" in o)


def test_colab_quickstart_runs_headless_on_the_cpu(tmp_path):
    nbformat = pytest.importorskip("nbformat", reason="nbformat is in the test extra")
    nbclient = pytest.importorskip("nbclient", reason="nbclient is in the test extra")
    pytest.importorskip("ipykernel", reason="ipykernel is in the test extra")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    shutil.copy(NOTEBOOK, tmp_path / NOTEBOOK.name)
    # `perfcore` and `python` in the notebook's shell lines are this environment's, as pip puts them on
    # PATH in Colab; no GPU is used even where one exists, so the outputs are the CPU ones.
    env_path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    saved = {k: os.environ.get(k) for k in ("PATH", "CUDA_VISIBLE_DEVICES")}
    os.environ.update(PATH=env_path, CUDA_VISIBLE_DEVICES="")
    try:
        client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                         resources={"metadata": {"path": str(tmp_path)}})
        client.execute()  # raises CellExecutionError on any cell's error
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    code = [c for c in nb.cells if c.cell_type == "code"]
    by_src = {c.source.splitlines()[0]: c for c in code}
    install = next(c for c in code if "PERFCORE_SOURCE" in c.source)
    assert "already installed: skipping" in text_of(install)
    env = by_src["!perfcore env"]
    assert "build:" in text_of(env) and re.search(r"\d+ ok, \d+ warnings, \d+ failures", text_of(env))
    cell = next(c for c in code if c.source.startswith("%%perfcore"))
    body = html_of(cell)
    assert "class='perfcore'" in body and "id='verdict'" in body and "Over the run" in body
    run = next(c for c in code if c.source.startswith("!perfcore run"))
    assert re.search(r"perfcore: \d+ steps \(\+\d+ warm-up\)", text_of(run)) and "report.html" in text_of(run)
    assert (tmp_path / "runs" / "quickstart" / "report.html").is_file()
    shown = [html_of(c) for c in code if c.source.startswith(("from perfcore.report.html import open_report",
                                                               "open_report("))]
    assert len(shown) == 2
    assert "Causes, ranked" in shown[0] and "Over the run" in shown[0]  # the run's report, inline
    diag = next(c for c in code if c.source.startswith("!perfcore diagnose"))
    assert "verdict:" in text_of(diag)
    assert "Experiments" in shown[1] and "A: synthetic data" in shown[1]
