"""The sweep's best settings as dataloader.patch in the sweep's folder, checked by git apply in the user's
project; the user's file is read, never written."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from perfcore.experiments.sweep_patch import PATCH_NAME, sweep_patch

KEYS = ("batch_size", "num_workers", "pin_memory", "prefetch_factor")
OWN = {"batch_size": 32, "num_workers": 0, "pin_memory": False, "prefetch_factor": None}
SRC = ("from torch.utils.data import DataLoader\n\n"
       "loader = DataLoader(ds, batch_size=32,\n                    shuffle=True)\n")


def _project(tmp_path: Path) -> tuple[Path, Path]:
    proj, out = tmp_path / "proj", tmp_path / "sweep"
    (proj / "src").mkdir(parents=True)
    out.mkdir()
    (proj / "src" / "train.py").write_text(SRC)
    return proj, out


def test_the_best_settings_become_a_patch_git_applies(tmp_path):
    proj, out = _project(tmp_path)
    best = {"batch_size": 32, "num_workers": 4, "pin_memory": True, "prefetch_factor": 4}
    r = sweep_patch(f"{proj / 'src' / 'train.py'}:3", best, OWN, KEYS, out, cwd=str(proj))
    assert r["status"] == "written" and r["at"] == "src/train.py:3"
    assert r["call"] == "DataLoader(ds, batch_size=32, shuffle=True, num_workers=4, pin_memory=True, prefetch_factor=4)"
    assert (proj / "src" / "train.py").read_text() == SRC
    for args in (["--check"], []):
        p = subprocess.run(["git", "apply", *args, str(out / PATCH_NAME)], cwd=proj, capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
    assert "num_workers=4, pin_memory=True, prefetch_factor=4" in (proj / "src" / "train.py").read_text()


def test_no_patch_when_nothing_changes_or_the_file_is_not_the_users(tmp_path):
    proj, out = _project(tmp_path)
    site = f"{proj / 'src' / 'train.py'}:3"
    assert sweep_patch(site, dict(OWN), OWN, KEYS, out, cwd=str(proj))["status"] == "unchanged"
    # prefetch_factor without workers is no setting DataLoader takes: dropped, so nothing is left to change.
    assert sweep_patch(site, {**OWN, "prefetch_factor": 4}, OWN, KEYS, out, cwd=str(proj))["status"] == "unchanged"
    best = {**OWN, "num_workers": 2}
    assert sweep_patch(site, best, OWN, KEYS, out, cwd=str(proj / "src" / "sub"))["status"] == "not_possible"
    outside = tmp_path / "elsewhere.py"
    outside.write_text(SRC)
    os.symlink(outside, proj / "link.py")
    for s in (f"{outside}:3", f"{proj / 'link.py'}:3", f"{proj / 'missing.py'}:3", "nonsense", None):
        assert sweep_patch(s, best, OWN, KEYS, out, cwd=str(proj))["status"] == "not_possible", s
    r = sweep_patch(f"{proj / 'src' / 'train.py'}:1", best, OWN, KEYS, out, cwd=str(proj))
    assert r["status"] == "not_possible" and r["reason"] == "cannot_patch" and "no DataLoader" in r["error"]
    assert sweep_patch(None, best, OWN, KEYS, out) == {"status": "not_possible", "reason": "no_site"}
    assert not (out / PATCH_NAME).exists()


def test_perfcore_sweep_on_a_script_writes_the_patch_for_its_loader(tmp_path):
    """`perfcore sweep --num-workers 1` on a script with num_workers left at 0: the only configuration, so the
    best, changes the call; the sweep folder gets dataloader.patch, which applies to the script's folder."""
    import json
    import shutil
    import sys

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
    r = subprocess.run(["git", "apply", str(out / PATCH_NAME)], cwd=proj, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "num_workers=1, prefetch_factor=2" in (proj / "train.py").read_text()
