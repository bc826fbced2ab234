"""The sweep's best settings as dataloader.patch in the sweep's folder, checked by git apply in the user's
project and tried before it is offered: the patched copy runs a few steps under perfcore run, and a patch
whose try fails is not offered, with the reason. The user's file is read, never written."""
from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from perfcore.experiments.sweep_patch import PATCH_NAME, TRY_FOLDER, sweep_patch
from perfcore.experiments.sweep_patch import sweep_patch as _sweep_patch

OWN = {"batch_size": 32, "num_workers": 0, "pin_memory": False, "prefetch_factor": None}
# A real DataLoader script, as a user runs it; its loader call wrapped over two lines.
SRC = ("import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n\n"
       "ds = TensorDataset(torch.randn(256, 4))\n"
       "loader = DataLoader(ds, batch_size=32,\n                    shuffle=True)\n"
       "model = torch.nn.Linear(4, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
       "for (x,) in loader:\n    model(x).sum().backward()\n    opt.step()\n    opt.zero_grad()\n")


def _project(tmp_path: Path, src: str = SRC) -> tuple[Path, Path]:
    proj, out = tmp_path / "proj", tmp_path / "sweep"
    (proj / "src").mkdir(parents=True)
    out.mkdir()
    (proj / "src" / "train.py").write_text(src)
    return proj, out


def _apply(proj: Path, out: Path) -> str:
    for args in (["--check"], []):
        p = subprocess.run(["git", "apply", *args, str(out / PATCH_NAME)], cwd=proj, capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
    return (proj / "src" / "train.py").read_text()


def test_the_best_settings_become_a_patch_that_is_tried_then_git_applies(tmp_path, monkeypatch):
    proj, out = _project(tmp_path)
    monkeypatch.chdir(proj)  # where the sweep runs its command
    best = {"batch_size": 16, "num_workers": 2, "pin_memory": False, "prefetch_factor": 4}
    tries = []
    r = sweep_patch(f"{proj / 'src' / 'train.py'}:5", best, OWN, out, cwd=str(proj),
                    cmd=[sys.executable, "src/train.py"], on_try=lambda: tries.append(1))
    assert r["status"] == "written", r
    assert tries == [1]  # progress says "trying" once, as the try starts
    assert r["at"] == "src/train.py:5" and r["calls"] == 1
    assert r["call"] == "DataLoader(ds, batch_size=16, shuffle=True, num_workers=2, prefetch_factor=4)"
    assert (proj / "src" / "train.py").read_text() == SRC
    assert (out / TRY_FOLDER / "run.json").is_file()  # the try's own run, kept beside the sweep's
    assert "num_workers=2, prefetch_factor=4" in _apply(proj, out)


def test_a_patch_whose_try_fails_is_not_offered_and_says_why(tmp_path, monkeypatch):
    # Fine with no workers; with workers, its worker_init_fn fails at the first batch: only running it shows it.
    src = SRC.replace("shuffle=True)", "shuffle=True, worker_init_fn=lambda i: 1 / 0)")
    proj, out = _project(tmp_path, src)
    monkeypatch.chdir(proj)
    best = {**OWN, "num_workers": 1, "prefetch_factor": 2}
    r = sweep_patch(f"{proj / 'src' / 'train.py'}:5", best, OWN, out, cwd=str(proj),
                    cmd=[sys.executable, "src/train.py"])
    assert r["status"] == "not_possible" and r["reason"] == "failed_try", r
    assert "the patched script failed its try" in r["error"] and "ZeroDivisionError" in r["error"], r["error"]
    assert not (out / PATCH_NAME).exists() and (proj / "src" / "train.py").read_text() == src
    from perfcore.report.words.findings import patch_text

    (line,) = patch_text(r, str(out))
    assert line.startswith("  no DataLoader patch: not offered: the patched script failed its try") and \
        "git apply" not in line
    # A command the copy cannot stand in for is not tried, so not offered either.
    tries = []
    r = sweep_patch(f"{proj / 'src' / 'train.py'}:5", best, OWN, out, cwd=str(proj),
                    cmd=[sys.executable, "-c", "pass"], on_try=lambda: tries.append(1))
    assert r["reason"] == "failed_try" and "could not be run" in r["error"]
    assert tries == []  # nothing ran, so progress never said it was trying


def test_positional_settings_and_integer_types_make_a_script_that_runs(tmp_path, monkeypatch):
    """DataLoader(ds, 4, True) passes batch_size by position: the patch changes it in place (a batch_size=
    beside it is a TypeError), and a float from a table column (2.0) is written as the integer DataLoader takes."""
    src = SRC.replace("DataLoader(ds, batch_size=32,\n                    shuffle=True)",
                      "DataLoader(ds, 4, True)\n")
    proj, out = _project(tmp_path, src)
    monkeypatch.chdir(proj)
    own = {**OWN, "batch_size": 4}
    best = {"batch_size": 8.0, "num_workers": 2.0, "pin_memory": False, "prefetch_factor": 3.0}
    r = sweep_patch(f"{proj / 'src' / 'train.py'}:5", best, own, out, cwd=str(proj),
                    cmd=[sys.executable, "src/train.py"])
    assert r["status"] == "written", r
    assert r["call"] == "DataLoader(ds, 8, True, num_workers=2, prefetch_factor=3)"
    after = _apply(proj, out)
    p = subprocess.run([sys.executable, "src/train.py"], cwd=proj, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "DataLoader(ds, 8, True, num_workers=2, prefetch_factor=3)" in after


def test_no_patch_when_nothing_changes_or_the_file_is_not_the_users(tmp_path, monkeypatch):
    proj, out = _project(tmp_path)
    monkeypatch.chdir(proj)
    site = f"{proj / 'src' / 'train.py'}:5"
    tries = []
    sweep_patch = functools.partial(_sweep_patch, cmd=[sys.executable, "src/train.py"], on_try=lambda: tries.append(1))
    assert sweep_patch(site, dict(OWN), OWN, out, cwd=str(proj))["status"] == "unchanged"
    # prefetch_factor without workers is no setting DataLoader takes: dropped, so nothing is left to change.
    assert sweep_patch(site, {**OWN, "prefetch_factor": 4}, OWN, out, cwd=str(proj))["status"] == "unchanged"
    best = {**OWN, "num_workers": 2}
    assert sweep_patch(site, best, OWN, out, cwd=str(proj / "src" / "sub"))["status"] == "not_possible"
    outside = tmp_path / "elsewhere.py"
    outside.write_text(SRC)
    os.symlink(outside, proj / "link.py")
    for s in (f"{outside}:5", f"{proj / 'link.py'}:5", f"{proj / 'missing.py'}:5", "nonsense", None):
        assert sweep_patch(s, best, OWN, out, cwd=str(proj))["status"] == "not_possible", s
    r = sweep_patch(f"{proj / 'src' / 'train.py'}:1", best, OWN, out, cwd=str(proj))
    assert r["status"] == "not_possible" and r["reason"] == "cannot_patch" and "no DataLoader" in r["error"]
    assert sweep_patch(None, best, OWN, out) == {"status": "not_possible", "reason": "no_site"}
    assert not (out / PATCH_NAME).exists()
    assert tries == []  # no patch to try: progress never says "trying"


def test_a_documents_patch_name_is_never_printed_as_a_git_apply_line():
    from perfcore.report.words.findings import patch_text

    doc = {"status": "written", "patch": "../../x.patch; rm -rf ~", "at": "t.py:3", "call": "DataLoader(ds)"}
    lines = patch_text(doc, "/sweep")
    assert not any("git apply" in ln for ln in lines) and len(lines) == 1 and "rm -rf" in lines[0]
    assert "git apply /sweep/dataloader.patch" in patch_text({**doc, "patch": PATCH_NAME}, "/sweep")[1]


def test_the_best_configuration_keeps_integer_settings_where_other_rows_have_none():
    """prefetch_factor is empty for the rows without workers: its column is float, and the best row's 2 was
    read back as 2.0, which DataLoader refuses at its first batch."""
    from perfcore.experiments.sweep_results import sweep_doc

    table = pd.DataFrame([
        {"batch_size": 8, "num_workers": 0, "pin_memory": False, "prefetch_factor": None, "samples_per_s": 10.0,
         "step_ms": 1.0, "status": "ok"},
        {"batch_size": 8, "num_workers": 2, "pin_memory": False, "prefetch_factor": 2, "samples_per_s": 20.0,
         "step_ms": 0.5, "status": "ok"},
    ])
    assert table["prefetch_factor"].dtype == float
    res = sweep_doc("w", {}, 4, table, t0=0.0, rounds=[])
    assert res.best["prefetch_factor"] == 2 and type(res.best["prefetch_factor"]) is int
    assert [type(r["prefetch_factor"]) for r in res.configs] == [type(None), int]


def test_perfcore_sweep_on_a_script_writes_the_patch_for_its_loader(tmp_path):
    """`perfcore sweep --num-workers 1` on a script with num_workers left at 0: the only configuration, so the
    best, changes the call; the sweep folder gets dataloader.patch, tried first, which applies to the script's
    folder. torch's default prefetch_factor (2) is not written."""
    import json
    import shutil

    proj = tmp_path / "proj"
    proj.mkdir()
    shutil.copy(Path(__file__).parent / "scripts" / "loader_settings.py", proj / "train.py")
    before = (proj / "train.py").read_text()
    out = tmp_path / "sweep"
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "sweep", "--num-workers", "1", "--steps", "6",
                        "--warmup", "1", "--out", str(out), "--", sys.executable, "train.py"],
                       cwd=proj, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["patch"]["status"] == "written" and doc["patch"]["at"].startswith("train.py:")
    assert "site" not in doc["script_settings"]
    assert (proj / "train.py").read_text() == before
    assert f"change at {doc['patch']['at']}: DataLoader(" in p.stdout
    # The try is a run of the script: said while it runs, and the line to paste names the sweep's folder.
    assert "trying the best configuration's patch on a copy of the script" in p.stderr
    assert f"  git apply {out / PATCH_NAME}" in p.stdout.splitlines()
    r = subprocess.run(["git", "apply", str(out / PATCH_NAME)], cwd=proj, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    after = (proj / "train.py").read_text()
    assert "pin_memory=True, num_workers=1)" in after and "prefetch_factor" not in after
