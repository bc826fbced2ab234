"""A CUDA-mode compile that fails during a plain `pip install` (no -v: pip shows none of the
build's output) still reaches the user: the CPU-mode build that follows records the compiler's own
line, `perfcore env` shows it, and loading the native core warns once. Real pip, real nvcc: the
failure is an nvcc flag that does not exist, passed the way users pass flags (NVCC_APPEND_FLAGS).
Run by `make test-cuda12`, whose torch is a CUDA build and whose toolkit is CUDA_HOME."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(os.environ.get("PERFCORE_CUDA12_SUITE") != "1" or not os.environ.get("CUDA_HOME"),
                                reason="a full pip build against a real toolkit: run by make test-cuda12")


def test_failed_cuda_compile_reason_reaches_a_user_of_plain_pip(tmp_path):
    # A clean copy: pip builds in the tree, and objects left by an earlier build would skip nvcc.
    import shutil

    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns("build", "*.so", "_build_info.json", ".venv", "__pycache__",
                                                             "*.egg-info", "perfcore-runs", ".git"))
    target = tmp_path / "site"
    env = {**os.environ, "NVCC_APPEND_FLAGS": "--no-such-nvcc-flag"}
    env.pop("PERFCORE_CUDA_FALLBACK", None)  # a user's install falls back to CPU mode
    env.pop("PERFCORE_CPU_ONLY", None)
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                          "--no-build-isolation", "--no-deps", "--target", str(target), str(src)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    assert pip.returncode == 0, pip.stdout + pip.stderr  # the install goes on, in CPU mode
    assert "no-such-nvcc-flag" not in pip.stdout + pip.stderr  # what pip hides without -v

    run_env = {**os.environ, "PYTHONPATH": str(target)}
    env_out = subprocess.run([sys.executable, "-c", "import sys; from perfcore.cli import main; sys.argv[0] = 'perfcore'; "
                              "main()", "env"], cwd=tmp_path, env=run_env, capture_output=True, text=True, timeout=300)
    text = env_out.stdout + env_out.stderr
    assert "build: cpu mode (the CUDA-mode compile failed (" in text, text
    assert "Unknown option '--no-such-nvcc-flag'" in text, text  # nvcc's own line, not "Error compiling objects"

    load = subprocess.run([sys.executable, "-c", "import perfcore._native as n; n.native(); n.native()"],
                          cwd=tmp_path, env=run_env, capture_output=True, text=True, timeout=300)
    assert load.returncode == 0, load.stderr
    warned = [ln for ln in load.stderr.splitlines() if "RuntimeWarning" in ln]
    assert len(warned) == 1 and "built in CPU mode although torch" in warned[0] and "no-such-nvcc-flag" in warned[0]
