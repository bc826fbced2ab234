"""Every CUPTI header set torch has shipped (12.4, 12.6, 12.8, 13.0) against every toolkit cuda.h
(12.4, 12.5, 12.6, 12.8, 13.0), real headers from PyPI's wheels: the files that include CUPTI
compile (g++ -fsyntax-only, as setup.py stages the headers), or setup.py's own checks refuse the
pair with the one line that names both and the fix. Run by `make test-cuda12`."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import cuda_wheels  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(os.environ.get("PERFCORE_CUDA12_SUITE") != "1",
                                reason="compiles 20 header pairs: run by make test-cuda12")
CUPTI_RELEASES = ["12.4", "12.6", "12.8", "13.0"]
CUDA_H_RELEASES = ["12.4", "12.5", "12.6", "12.8", "13.0"]
CUPTI_SOURCES = ["csrc/cupti/decoder.cpp", "csrc/cupti/fake_buffer.cpp", "csrc/cupti/tracer.cpp"]


@pytest.fixture(scope="module")
def setup_mod():
    import importlib.util

    spec = importlib.util.spec_from_file_location("perfcore_setup", ROOT / "setup.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def toolkit(root: Path, release: str) -> Path:
    """A CUDA_HOME whose include/ is that release's real headers (cuda.h, cuda_runtime.h, crt/) and
    whose nvcc says that release: setup.py's checks read no more of a toolkit than that."""
    inc = root / "include"
    inc.mkdir(parents=True)
    for d in cuda_wheels.cuda_includes(release):
        shutil.copytree(d, inc, dirs_exist_ok=True)
    (root / "bin").mkdir()
    (root / "lib64").mkdir()
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.0'\n")
    nvcc.chmod(0o755)
    return root


def site_with_cupti(root: Path, release: str) -> Path:
    """site-packages holding that CUPTI release the way torch's dependency installs it."""
    include, lib = cuda_wheels.cupti(release)
    sub = "cu13" if release.startswith("13") else "cuda_cupti"
    pkg = root / "nvidia" / sub
    pkg.mkdir(parents=True)
    (pkg / "include").symlink_to(include)
    (pkg / "lib").symlink_to(lib.parent)
    dist = "nvidia_cuda_cupti" if release.startswith("13") else "nvidia_cuda_cupti_cu12"
    (root / f"{dist}-{release}.0.dist-info").mkdir()
    return root


@pytest.mark.parametrize("cuda_h", CUDA_H_RELEASES)
@pytest.mark.parametrize("cupti", CUPTI_RELEASES)
def test_header_pair_compiles_or_is_refused_with_its_line(setup_mod, cupti, cuda_h, tmp_path, monkeypatch):
    tk = toolkit(tmp_path / "cuda", cuda_h)
    site = site_with_cupti(tmp_path / "site", cupti)
    monkeypatch.delenv("PERFCORE_CPU_ONLY", raising=False)
    monkeypatch.setenv("CUDA_HOME", str(tk))
    monkeypatch.setattr(setup_mod, "site_dirs", lambda: [site])
    monkeypatch.setattr(setup_mod, "ROOT", tmp_path)  # its staging folders go here
    torch = SimpleNamespace(__version__=f"2.x+cu{cupti.replace('.', '')}", version=SimpleNamespace(cuda=cupti))
    info = setup_mod.decide(torch)
    print(f"CUPTI {cupti} x cuda.h {cuda_h}: {info['mode']} mode {info['reason']}")
    if info["mode"] == "cpu":
        reason = info["reason"]
        assert "\n" not in reason and "; for the CUDA mode " in reason and "--no-build-isolation" in reason
        assert cupti in reason and cuda_h in reason  # names the pair
        return
    assert info["cupti"]["release"] == cupti and info["toolkit_version"] == cuda_h
    staged = setup_mod.stage_cupti_headers(info["cupti"]["include"], tmp_path / "staged")
    for src in CUPTI_SOURCES:
        r = subprocess.run(["g++", "-fsyntax-only", "-std=c++17", f"-I{staged}", f"-I{ROOT / 'csrc'}",
                            f"-I{tk / 'include'}", str(ROOT / src)], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{src} with CUPTI {cupti} and cuda.h {cuda_h}: {r.stderr[-1500:]}"
