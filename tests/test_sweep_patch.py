"""The sweep's best settings as dataloader.patch in the sweep's folder, checked by git apply in the user's
project; the user's file is read, never written."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from perfcore.experiments.sweep_patch import PATCH_NAME, sweep_patch

KEYS = ("batch_size", "num_workers", "pin_memory", "prefetch_factor")
OWN = {"batch_size": 32, "num_workers": 0, "pin_memory": False, "prefetch_factor": None}
SRC = "from torch.utils.data import DataLoader\n\nloader = DataLoader(ds, batch_size=32,\n                    shuffle=True)\n"


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
    assert r["status"] == "not_possible" and "no DataLoader" in r["reason"]
    assert not (out / PATCH_NAME).exists()
