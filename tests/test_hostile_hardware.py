"""Options that need hardware, on a machine without it: a GPU-only backend asked for with no GPU
says so in one line (what it needs, what was used instead) and run.json records it; the run works on."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import perfcore
from perfcore.errors import UsageError

NO_GPU = not perfcore.capabilities()["features"]["cuda_events"]
needs_no_gpu = pytest.mark.skipif(not NO_GPU, reason="what a machine without a GPU says")
SCRIPT = str(Path(__file__).resolve().parent / "scripts" / "exits.py")


@needs_no_gpu
@pytest.mark.parametrize("backend", ["cupti-python", "native", "auto"])
def test_steptimer_kernels_without_a_gpu_says_so_once_and_times_host_phases(backend):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        t = perfcore.StepTimer(kernels=True, kernel_backend=backend, warmup=0)
    (w,) = [w for w in seen if "needs a GPU" in str(w.message)]
    assert w.filename == __file__ and "\n" not in str(w.message)
    assert f"kernel_backend {backend!r}" in str(w.message) and "timing host phases instead" in str(w.message)
    for _ in range(3):
        with t.compute():
            pass
        t.step()
    res = t.result()
    assert t.backend == "host" and res.backend == "host"
    assert res.capture.stats["note"] == str(w.message).removeprefix("perfcore: ")


def test_a_kernel_backend_that_does_not_exist_is_refused_on_any_machine():
    with pytest.raises(UsageError, match="kernel backend must be"):
        perfcore.StepTimer(device="cpu", kernels=True, kernel_backend="cuptii")


@needs_no_gpu
@pytest.mark.parametrize("backend", ["cupti-python", "native"])
def test_run_with_a_gpu_backend_and_no_gpu_says_so_and_records_it(tmp_path, backend):
    out = tmp_path / "r"
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--backend", backend, "--warmup", "1", "--out",
                        str(out), "--", sys.executable, SCRIPT], capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr
    (line,) = [ln for ln in p.stderr.splitlines() if "needs a GPU" in ln]
    assert line.startswith(f"perfcore: --backend {backend} needs a GPU (") and "timed host phases instead" in line
    doc = json.loads((out / "run.json").read_text())
    assert doc["backend"] == "host" and doc["steps"] == 7
    assert doc["capture"]["requested_backend"] == backend and doc["capture"]["note"] in line


@pytest.mark.parametrize("device", ["cpu", "auto"])
def test_the_default_sweep_leaves_pinned_memory_alone_where_there_is_no_gpu(device):
    # pin_memory=True without a GPU is the same loader again (torch pins only for an accelerator and
    # warns): its configurations doubled the sweep and measured only noise.
    import torch

    from perfcore.experiments.sweep import default_grid
    from perfcore.workloads import Workload

    if device == "auto" and not NO_GPU:
        pytest.skip("what a machine without a GPU sweeps")
    data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.zeros(64, dtype=torch.long))
    w = Workload(model=torch.nn.Linear(4, 2), dataset=data, loss_fn=torch.nn.functional.cross_entropy,
                 batch_size=8, device=device)
    assert default_grid(w)["pin_memory"] == [False]


# ---- a full disk: never "failed before its first step" when the script trained, and nothing deleted next time


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"") for p in sorted(root.rglob("*"))}


def _full_disk_then_next_run(out: Path, *script_args: str) -> str:
    disk_full = str(Path(__file__).resolve().parent / "scripts" / "disk_full.py")
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--no-monitor", "--out", str(out), "--",
                        sys.executable, disk_full, *script_args], capture_output=True, text=True, timeout=300)
    assert p.returncode == 3, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert "before its first step" not in p.stderr, p.stderr
    assert last.startswith("perfcore: error: the script exited with 3 after ") and "steps, but its results could " \
        "not be written" in last, last
    mark = json.loads((out / ".perfcore-folder.json").read_text())
    assert "ended" not in mark  # never offered to the next run as a folder that holds nothing
    kept = _snapshot(out)
    assert any(k.startswith("parts/") for k in kept), kept
    q = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--warmup", "1", "--no-monitor", "--out",
                        str(out), "--", sys.executable, SCRIPT], capture_output=True, text=True, timeout=300)
    assert q.returncode == 0, q.stderr
    assert "leaving it as it is" in q.stderr and "failed before its first step" not in q.stderr
    assert {k: v for k, v in _snapshot(out).items() if not k.startswith("run-")} == kept
    return last


def test_a_full_disk_at_the_part_is_said_as_such_and_the_next_run_deletes_nothing(tmp_path):
    _full_disk_then_next_run(tmp_path / "r", "inject")


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_really_full_tmpfs_is_named_as_the_cause(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("tmpfs cannot be mounted here")
    try:
        out = disk / "r"
        p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--no-monitor", "--out", str(out), "--",
                            sys.executable, str(Path(__file__).resolve().parent / "scripts" / "disk_full.py"),
                            "fill", str(disk)], capture_output=True, text=True, timeout=300)
        assert p.returncode == 3, p.stderr
        last = p.stderr.strip().splitlines()[-1]
        assert f"(the disk holding {out} is full)" in last and "free space and run it again" in last, last
        assert "before its first step" not in p.stderr and "ended" not in (out / ".perfcore-folder.json").read_text()
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)
        assert not os.path.ismount(disk)


def test_a_disk_that_fills_while_the_folder_is_finished_keeps_the_scripts_exit_code(tmp_path, monkeypatch):
    """The script's part is written whole, then the disk fills while perfcore writes the run's own files
    (every replace into the run folder fails with ENOSPC, as on a full disk): the script's exit code
    stands, the line says how to finish the folder without training again, and `perfcore report` does so
    once there is space. It exited 1, "cannot write ...", and the user's exit code was lost."""
    import errno

    from click.testing import CliRunner

    from perfcore.cli import cli

    out = tmp_path / "r"
    replace = os.replace

    def full_for_the_run_files(src, dst, *args, **kw):
        if Path(dst).parent == out:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return replace(src, dst, *args, **kw)

    monkeypatch.setattr(os, "replace", full_for_the_run_files)
    res = CliRunner().invoke(cli, ["run", "--no-monitor", "--warmup", "1", "--out", str(out), "--", sys.executable,
                                   SCRIPT, "sys_exit", "3"])
    monkeypatch.undo()
    assert res.exit_code == 3, res.output
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("perfcore: error: the script exited with 3, but its run folder could not be finished: "
                           "cannot write ") and "the disk is full" in last, last
    assert last.endswith(f"free space, then `perfcore report {out}` finishes it"), last
    assert "before its first step" not in res.stderr
    assert "ended" not in json.loads((out / ".perfcore-folder.json").read_text())
    again = CliRunner().invoke(cli, ["report", str(out)])
    assert again.exit_code == 0, again.output
    assert json.loads((out / "run.json").read_text())["steps"] == 7
