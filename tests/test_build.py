"""setup.py's decisions: where CUDA and CUPTI are found, and what it says when they are not."""
from __future__ import annotations

import importlib.util
import stat
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def setup_mod(monkeypatch):
    spec = importlib.util.spec_from_file_location("perfcore_setup", ROOT / "setup.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # main() only runs under __main__
    return mod


def fake_toolkit(root: Path, cupti_version: int | None = None) -> Path:
    (root / "include").mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "lib64").mkdir()
    (root / "include" / "cuda_runtime.h").write_text("// fake\n")
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.48'\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    if cupti_version:
        (root / "include" / "cupti.h").write_text("#include <cupti_version.h>\n")
        (root / "include" / "cupti_version.h").write_text(f"#define CUPTI_API_VERSION {cupti_version}\n")
        (root / "lib64" / "libcupti.so.13").write_text("")
        (root / "lib64" / "libcupti.so").write_text("")
    return root


def test_wrapper_nvcc_on_path_is_not_trusted(setup_mod, tmp_path, monkeypatch):
    # A wrapper script in bin/ whose parent has no headers, as /usr/local/bin/nvcc here.
    wrapper_dir = tmp_path / "usr" / "bin"
    wrapper_dir.mkdir(parents=True)
    (wrapper_dir / "nvcc").write_text("#!/bin/sh\nexec /elsewhere/nvcc \"$@\"\n")
    (wrapper_dir / "nvcc").chmod(0o755)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("PATH", str(wrapper_dir))
    home, looked = setup_mod.find_cuda_home()
    assert str(tmp_path / "usr") in looked  # looked at the wrapper's prefix, and rejected it
    assert home is None or (home / "include" / "cuda_runtime.h").is_file()


def test_cuda_home_env_wins_and_is_validated(setup_mod, tmp_path, monkeypatch):
    tk = fake_toolkit(tmp_path / "cuda")
    monkeypatch.setenv("CUDA_HOME", str(tk))
    assert setup_mod.find_cuda_home()[0] == tk
    assert setup_mod.nvcc_version(tk) == "13.0"
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "nothing"))
    with pytest.raises(SystemExit, match="has no include/cuda_runtime.h"):
        setup_mod.find_cuda_home()


def test_cupti_from_torch_package_before_toolkit(setup_mod, tmp_path, monkeypatch):
    tk = fake_toolkit(tmp_path / "cuda", cupti_version=130001)
    site = tmp_path / "site"
    pkg = site / "nvidia" / "cu13"
    (pkg / "include").mkdir(parents=True)
    (pkg / "lib").mkdir()
    (pkg / "include" / "cupti.h").write_text("")
    (pkg / "include" / "cupti_version.h").write_text("#define CUPTI_API_VERSION 130500\n")
    (pkg / "lib" / "libcupti.so.13").write_text("")
    monkeypatch.setattr(setup_mod, "site_dirs", lambda: [site])
    found, _ = setup_mod.find_cupti(tk, "13")
    assert found["api_version"] == 130500
    assert found["library"] == str(pkg / "lib" / "libcupti.so.13")
    assert "nvidia/cu13" in found["source"]
    # Without torch's package: the toolkit's, versioned soname preferred.
    monkeypatch.setattr(setup_mod, "site_dirs", lambda: [])
    found, _ = setup_mod.find_cupti(tk, "13")
    assert found["api_version"] == 130001
    assert found["library"].endswith("libcupti.so.13")


def test_no_cupti_anywhere_says_where_it_looked(setup_mod, tmp_path, monkeypatch):
    tk = fake_toolkit(tmp_path / "cuda")
    monkeypatch.setattr(setup_mod, "site_dirs", lambda: [])
    found, looked = setup_mod.find_cupti(tk, "13")
    assert found is None
    assert str(tk / "extras" / "CUPTI" / "include") in looked and str(tk / "include") in looked


def test_default_arch_list_without_gpu(setup_mod, monkeypatch):
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)

    class NoGpuTorch:
        class cuda:
            is_available = staticmethod(lambda: False)

    assert setup_mod.arch_list(NoGpuTorch) == "7.5;8.0;8.6;8.9;9.0+PTX"
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    assert setup_mod.arch_list(NoGpuTorch) == "9.0"


def test_cpu_only_env_forces_cpu_mode(setup_mod, monkeypatch):
    monkeypatch.setenv("PERFCORE_CPU_ONLY", "1")
    info = setup_mod.decide()
    assert info["mode"] == "cpu" and "PERFCORE_CPU_ONLY" in info["reason"]


def test_missing_compiler_is_one_clear_line(setup_mod, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CXX", "no-such-cxx")
    with pytest.raises(SystemExit, match="no C\\+\\+ compiler found .*install one"):
        setup_mod.check_compiler()
