"""examples/colab_quickstart.ipynb executed headless on the CPU, as written (nbclient, a real IPython
kernel) in a fresh environment that has torch but no perfcore: its install cell runs the README's install
line for real, then perfcore env, %%perfcore on a training cell, perfcore run on a script, its report
inline, and perfcore diagnose, all from the perfcore that cell installed; outputs checked."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from installs import ROOT, env_for, make_env, readme_install_lines

NOTEBOOK = ROOT / "examples" / "colab_quickstart.ipynb"


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


def test_colab_quickstart_runs_headless_on_the_cpu(tmp_path, perfcore_clone):
    nbformat = pytest.importorskip("nbformat", reason="nbformat is in the test extra")
    nbclient = pytest.importorskip("nbclient", reason="nbclient is in the test extra")
    pytest.importorskip("ipykernel", reason="ipykernel is in the test extra")
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpecManager

    nb = nbformat.read(NOTEBOOK, as_version=4)
    # The kernel's Python is a venv that sees the dev environment's packages but not its perfcore, as a
    # Colab runtime has torch and not perfcore; its pip installs into the venv.
    py = make_env(tmp_path / "env")
    specs = tmp_path / "kernels"
    (specs / "fresh").mkdir(parents=True)
    (specs / "fresh" / "kernel.json").write_text(json.dumps(
        {"argv": [str(py), "-m", "ipykernel_launcher", "-f", "{connection_file}"], "display_name": "fresh",
         "language": "python"}))
    km = KernelManager(kernel_name="fresh", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(specs)]))
    work = tmp_path / "work"  # the notebook's folder, /content in Colab: the clone is there as ./perfcore
    work.mkdir()
    (work / "perfcore").symlink_to(perfcore_clone)
    # `pip`, `perfcore` and `python` in the notebook's shell lines are the venv's, as pip puts them on PATH
    # in Colab; no GPU is used even where one exists, so the outputs are the CPU ones.
    client = nbclient.NotebookClient(nb, km=km, timeout=900, resources={"metadata": {"path": str(work)}})
    client.execute(env=env_for(py, CUDA_VISIBLE_DEVICES=""))  # raises CellExecutionError on any cell's error
    code = [c for c in nb.cells if c.cell_type == "code"]
    by_src = {c.source.splitlines()[0]: c for c in code}
    # The install cell is the README's first line, typed in a cell, and it installed perfcore into the venv.
    install = code[0]
    assert install.source == "!" + readme_install_lines((ROOT / "README.md").read_text())[0]
    assert "Successfully installed perfcore" in text_of(install), text_of(install)
    site = Path(py.parent.parent, "lib").glob("python*/site-packages/perfcore/__init__.py")
    assert next(site, None) is not None
    env = by_src["!perfcore env"]
    assert "build:" in text_of(env) and re.search(r"\d+ ok, \d+ warnings, \d+ failures", text_of(env))
    cell = next(c for c in code if c.source.startswith("%%perfcore"))
    body = html_of(cell)
    assert "class='perfcore'" in body and "id='verdict'" in body and "Over the run" in body
    run = next(c for c in code if c.source.startswith("!perfcore run"))
    assert re.search(r"perfcore: \d+ steps \(\+\d+ warm-up\)", text_of(run)) and "report.html" in text_of(run)
    assert (work / "runs" / "quickstart" / "report.html").is_file()
    shown = [html_of(c) for c in code if c.source.startswith(("from perfcore.report.html import open_report",
                                                               "open_report("))]
    assert len(shown) == 2
    assert "Causes, ranked" in shown[0] and "Over the run" in shown[0]  # the run's report, inline
    diag = next(c for c in code if c.source.startswith("!perfcore diagnose"))
    assert "verdict:" in text_of(diag)
    assert "Experiments" in shown[1] and "A: synthetic data" in shown[1]
