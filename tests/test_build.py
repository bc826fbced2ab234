"""setup.py's decisions: where CUDA and CUPTI are found, and what it says when they are not."""
from __future__ import annotations

import importlib.util
import stat
from types import SimpleNamespace
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
    (root / "include" / "cuda.h").write_text("#define CUDA_VERSION 13000\n")
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.48'\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    if cupti_version:
        (root / "include" / "cupti.h").write_text("#include <cupti_version.h>\n")
        (root / "include" / "cupti_version.h").write_text(f"#define CUPTI_API_VERSION {cupti_version}\n")
        (root / "lib64" / "libcupti.so.13").write_text("")
        (root / "lib64" / "libcupti.so").write_text("")
    return root


def fake_torch(version="2.5.0", cuda="13.0"):
    return SimpleNamespace(__version__=version, version=SimpleNamespace(cuda=cuda))


def test_wrapper_nvcc_on_path_is_not_trusted(setup_mod, tmp_path, monkeypatch):
    # A wrapper script in bin/ whose parent has no headers, as /usr/local/bin/nvcc here.
    wrapper_dir = tmp_path / "usr" / "bin"
    wrapper_dir.mkdir(parents=True)
    (wrapper_dir / "nvcc").write_text("#!/bin/sh\nexec /elsewhere/nvcc \"$@\"\n")
    (wrapper_dir / "nvcc").chmod(0o755)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    tk = fake_toolkit(tmp_path / "cuda")
    assert setup_mod.find_cuda_home([tmp_path / "usr", tk]) == (tk, "")
    home, why = setup_mod.find_cuda_home([tmp_path / "usr"])
    assert home is None and str(tmp_path / "usr") in why and "no CUDA toolkit found" in why


def test_cuda_home_env_wins_and_is_validated(setup_mod, tmp_path, monkeypatch):
    tk = fake_toolkit(tmp_path / "cuda")
    monkeypatch.setenv("CUDA_HOME", str(tk))
    assert setup_mod.find_cuda_home([]) == (tk, "")
    assert setup_mod.nvcc_version(tk) == "13.0"
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "nothing"))
    assert setup_mod.find_cuda_home([tk]) == (None, f"CUDA_HOME={tmp_path / 'nothing'} has no include/cuda_runtime.h")


def test_headers_without_nvcc_say_no_nvcc(setup_mod, tmp_path, monkeypatch):
    tk = fake_toolkit(tmp_path / "cuda")
    (tk / "bin" / "nvcc").unlink()
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    assert setup_mod.find_cuda_home([tk]) == (None, f"no nvcc: {tk} has the CUDA headers but no bin/nvcc")
    monkeypatch.setenv("CUDA_HOME", str(tk))
    assert setup_mod.find_cuda_home([]) == (None, f"CUDA_HOME={tk} has no bin/nvcc")


def decide_with(setup_mod, monkeypatch, torch, toolkit: Path | None, site: list[Path] = ()):
    """setup.decide() against a fake torch, a fake toolkit (or none) and fake site-packages."""
    monkeypatch.delenv("PERFCORE_CPU_ONLY", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    if toolkit is None:
        monkeypatch.delenv("CUDA_HOME", raising=False)
        monkeypatch.setattr(setup_mod, "find_cuda_home",
                            lambda: (None, "no CUDA toolkit found (looked for include/cuda_runtime.h and bin/nvcc in /x)"))
    else:
        monkeypatch.setenv("CUDA_HOME", str(toolkit))
    monkeypatch.setattr(setup_mod, "site_dirs", lambda: list(site))
    info = setup_mod.decide(torch)
    if info["mode"] == "cpu":
        # One line that says why and how to get the CUDA mode; the install goes on.
        assert "\n" not in info["reason"] and "; for the CUDA mode " in info["reason"]
        assert "--no-build-isolation" in info["reason"]
    return info


def test_torch_cuda_major_differs_from_toolkit_builds_cpu_mode(setup_mod, tmp_path, monkeypatch):
    tk = fake_toolkit(tmp_path / "cuda", cupti_version=130001)  # nvcc says 13.0
    info = decide_with(setup_mod, monkeypatch, fake_torch("2.1.0+cu118", "11.8"), tk)
    assert info["mode"] == "cpu"
    assert info["reason"].startswith(f"torch 2.1.0+cu118 is built for CUDA 11.8 but nvcc at {tk} is CUDA 13.0; ")
    assert "install the CUDA 11.x toolkit" in info["reason"]


def test_missing_nvcc_builds_cpu_mode(setup_mod, tmp_path, monkeypatch):
    tk = fake_toolkit(tmp_path / "cuda", cupti_version=130001)
    (tk / "bin" / "nvcc").unlink()
    info = decide_with(setup_mod, monkeypatch, fake_torch(), tk)
    assert info["mode"] == "cpu" and info["reason"].startswith(f"CUDA_HOME={tk} has no bin/nvcc; ")
    info = decide_with(setup_mod, monkeypatch, fake_torch(), None)
    assert info["mode"] == "cpu" and info["reason"].startswith("no CUDA toolkit found")


def test_missing_cupti_builds_cpu_mode(setup_mod, tmp_path, monkeypatch):
    tk = fake_toolkit(tmp_path / "cuda")  # no cupti.h anywhere
    info = decide_with(setup_mod, monkeypatch, fake_torch(), tk)
    assert info["mode"] == "cpu" and info["reason"].startswith("no CUPTI headers and library found")
    assert str(tk / "extras" / "CUPTI" / "include") in info["reason"]


def test_cpu_torch_builds_cpu_mode(setup_mod, tmp_path, monkeypatch):
    tk = fake_toolkit(tmp_path / "cuda", cupti_version=130001)
    info = decide_with(setup_mod, monkeypatch, fake_torch("2.5.0+cpu", None), tk)
    assert info["mode"] == "cpu" and info["reason"].startswith("torch 2.5.0+cpu is a CPU build; ")


def test_matching_toolkit_and_cupti_build_cuda_mode(setup_mod, tmp_path, monkeypatch):
    tk = fake_toolkit(tmp_path / "cuda", cupti_version=130001)
    info = decide_with(setup_mod, monkeypatch, fake_torch("2.9.0+cu130", "13.0"), tk)
    assert info["mode"] == "cuda" and info["reason"] == ""
    assert info["toolkit_version"] == "13.0" and info["cupti"]["api_version"] == 130001


def test_unreadable_nvcc_version_builds_cpu_mode(setup_mod, tmp_path, monkeypatch):
    tk = fake_toolkit(tmp_path / "cuda", cupti_version=130001)
    (tk / "bin" / "nvcc").write_text("#!/bin/sh\necho garbage\n")
    info = decide_with(setup_mod, monkeypatch, fake_torch(), tk)
    assert info["mode"] == "cpu" and "does not say its release" in info["reason"]


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

    assert setup_mod.arch_list(NoGpuTorch) == "7.5;8.0;9.0+PTX"
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    assert setup_mod.arch_list(NoGpuTorch) == "9.0"


def test_cpu_only_env_forces_cpu_mode(setup_mod, monkeypatch):
    monkeypatch.setenv("PERFCORE_CPU_ONLY", "1")
    info = setup_mod.decide(fake_torch())
    assert info["mode"] == "cpu" and info["reason"].startswith("PERFCORE_CPU_ONLY=1 was set at build time; ")


def test_missing_compiler_is_one_clear_line(setup_mod, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CXX", "no-such-cxx")
    with pytest.raises(SystemExit, match="no C\\+\\+ compiler found .*install one"):
        setup_mod.check_compiler()


def test_torch_hidden_by_build_isolation_says_what_to_type(setup_mod, tmp_path, monkeypatch):
    # pip's isolated build keeps sys.prefix, so the user's site-packages (with torch) is still known.
    (tmp_path / "torch").mkdir()
    monkeypatch.setattr(setup_mod.sysconfig, "get_paths", lambda: {"purelib": str(tmp_path), "platlib": str(tmp_path)})
    msg = setup_mod.torch_missing("No module named 'torch'")
    assert "build isolation hides it" in msg and "pip install --no-build-isolation ." in msg
    (tmp_path / "torch").rmdir()
    monkeypatch.setattr(setup_mod.sys, "path", ["/tmp/pip-build-env-abc/overlay/lib/python3/site-packages"])
    msg = setup_mod.torch_missing("No module named 'torch'")
    assert msg.startswith("torch is not installed in ") and "install torch first" in msg
    monkeypatch.setattr(setup_mod.sys, "path", [])
    msg = setup_mod.torch_missing("No module named 'torch'")
    assert msg.startswith("torch is not importable here") and "pip install --no-build-isolation ." in msg


def test_sources_are_found_and_cuda_only_ones_exist(setup_mod):
    cpu, cuda = setup_mod.sources("cpu"), setup_mod.sources("cuda")
    every_cpp = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "csrc").rglob("*.cpp"))
    assert all((ROOT / f).is_file() for f in setup_mod.CUDA_ONLY_SOURCES)  # a rename must update the list
    assert not set(cpu) & set(setup_mod.CUDA_ONLY_SOURCES) and not any(f.endswith(".cu") for f in cpu)
    assert sorted(f for f in cuda if f.endswith(".cpp")) == every_cpp
    assert "csrc/calib.cu" in cuda and "csrc/bindings.cpp" in cpu


def torch_cupti_package(site: Path, release: str, activity_h: str) -> Path:
    """A pip-installed CUPTI as torch ships it: headers, library and the dist-info saying its release."""
    pkg = site / "nvidia" / "cuda_cupti"
    (pkg / "include" / "Openacc").mkdir(parents=True)
    (pkg / "lib").mkdir()
    (site / f"nvidia_cuda_cupti_cu12-{release}.90.dist-info").mkdir()
    inc = pkg / "include"
    (inc / "cupti.h").write_text('#include "generated_cuda_meta.h"\n')
    (inc / "generated_cuda_meta.h").write_text("#error generated headers need this CUPTI's cuda.h\n")
    (inc / "cupti_version.h").write_text("#include <cuda_stdint.h>\n#define CUPTI_API_VERSION 26\n")
    (inc / "cuda_stdint.h").write_text("#include <stdint.h>\n")
    (inc / "cupti_activity.h").write_text(activity_h)
    (inc / "cupti_callbacks.h").write_text("#include <cuda.h>\n")
    (inc / "cupti_result.h").write_text("")
    (inc / "cupti_runtime_cbid.h").write_text("")
    (inc / "cupti_driver_cbid.h").write_text("")
    (inc / "Openacc" / "cupti_openacc.h").write_text("")
    (pkg / "lib" / "libcupti.so.12").write_text("")
    return pkg


def toolkit_12(root: Path, release: str) -> Path:
    tk = fake_toolkit(root)
    major, minor = release.split(".")
    (tk / "include" / "cuda.h").write_text(f"#define CUDA_VERSION {int(major) * 1000 + int(minor) * 10}\n")
    (tk / "bin" / "nvcc").write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.1'\n")
    return tk


def test_staged_cupti_headers_are_the_used_ones_with_cuda_stdint(setup_mod, tmp_path):
    pkg = torch_cupti_package(tmp_path / "site", "12.8", "#include <Openacc/cupti_openacc.h>\n")
    staged = setup_mod.stage_cupti_headers(str(pkg / "include"), tmp_path / "staged")
    names = sorted(p.relative_to(staged).as_posix() for p in staged.rglob("*.h"))
    assert names == ["Openacc/cupti_openacc.h", "cuda_stdint.h", "cupti_activity.h", "cupti_callbacks.h",
                     "cupti_driver_cbid.h", "cupti_result.h", "cupti_runtime_cbid.h", "cupti_version.h"]  # no cupti.h, no generated_*.h


def test_sources_include_only_the_staged_cupti_headers(setup_mod):
    # cupti.h would pull generated_cuda_meta.h, which needs a cuda.h as new as torch's CUPTI.
    import re

    included = set()
    for f in (ROOT / "csrc").rglob("*"):
        if f.suffix in (".h", ".cpp", ".cu"):
            included |= set(re.findall(r"#include\s*<(cupti[^>]*)>", f.read_text()))
    assert included == set(setup_mod.CUPTI_HEADERS)


def test_newer_cupti_than_toolkit_builds_cuda_mode_when_its_headers_compile(setup_mod, tmp_path, monkeypatch):
    # torch 2.8's CUPTI 12.8 with a 12.4 toolkit: in doubt, so setup try-compiles the four headers.
    site = tmp_path / "site"
    torch_cupti_package(site, "12.8", "#include <cuda.h>\n#include <Openacc/cupti_openacc.h>\n")
    tk = toolkit_12(tmp_path / "cuda", "12.4")
    info = decide_with(setup_mod, monkeypatch, fake_torch("2.8.0+cu128", "12.8"), tk, [site])
    assert info["mode"] == "cuda", info["reason"]
    assert info["cupti"]["release"] == "12.8" and info["toolkit_version"] == "12.4"


def test_refused_header_pair_is_one_line_naming_both_and_the_fix(setup_mod, tmp_path, monkeypatch):
    site = tmp_path / "site"
    torch_cupti_package(site, "12.8", "#include <cuda.h>\nCUmemcpyAttributes needs_cuda_12_8;\n")
    tk = toolkit_12(tmp_path / "cuda", "12.4")
    info = decide_with(setup_mod, monkeypatch, fake_torch("2.8.0+cu128", "12.8"), tk, [site])
    assert info["mode"] == "cpu"
    assert info["reason"].startswith("torch's CUPTI 12.8 needs CUDA toolkit >= 12.8 headers; this nvcc is 12.4 ")
    assert "'CUmemcpyAttributes' does not name a type" in info["reason"]  # the compiler's own line
    assert "set CUDA_HOME to a CUDA 12.8+ toolkit" in info["reason"]


def test_older_cupti_than_toolkit_is_not_in_doubt(setup_mod, tmp_path, monkeypatch):
    # No try-compile: a header that would fail shows it is not run.
    site = tmp_path / "site"
    torch_cupti_package(site, "12.4", "#error not compiled\n")
    tk = toolkit_12(tmp_path / "cuda", "12.8")
    info = decide_with(setup_mod, monkeypatch, fake_torch("2.6.0+cu124", "12.4"), tk, [site])
    assert info["mode"] == "cuda"


def test_failed_cuda_compile_keeps_the_compilers_line(setup_mod):
    out = ("[3/17] /cuda/bin/nvcc ... -c csrc/calib.cu\nFAILED: /b/calib.o\n"
           "csrc/cupti/records.h:13:10: fatal error: cuda_stdint.h: No such file or directory\n"
           "compilation terminated.\nninja: build stopped: subcommand failed.\n")
    reason = setup_mod.compile_failed_reason(RuntimeError("Error compiling objects for extension"), out)
    assert reason.startswith("the CUDA-mode compile failed (csrc/cupti/records.h:13:10: fatal error: cuda_stdint.h: "
                             "No such file or directory); for the CUDA mode fix what it says, ")
    old_gcc = "#error -- unsupported GNU version! gcc versions later than 13 are not supported!"
    assert "set CC/CXX to a gcc this nvcc accepts" in setup_mod.compile_failed_reason(RuntimeError("x"), old_gcc)
    assert "(Error compiling objects for extension)" in setup_mod.compile_failed_reason(
        RuntimeError("Error compiling objects for extension"), "")


def test_tee_catches_what_a_compiler_subprocess_writes(setup_mod, capfd):
    import subprocess

    tee = setup_mod.Tee()
    with tee:
        subprocess.run(["sh", "-c", "echo 'a.cpp:1:1: error: boom' >&2; echo progress"], check=True)
    assert "a.cpp:1:1: error: boom" in tee.text() and "progress" in tee.text()
    out, err = capfd.readouterr()
    assert "progress" in out and "boom" in err  # still reaches the terminal


def test_unwanted_cpu_mode_warns_with_the_build_reason():
    from perfcore import _native

    reason = "the CUDA-mode compile failed (x.cpp:1: error: boom); for the CUDA mode fix what it says"
    info = {"mode": "cpu", "cuda_wanted": True, "torch_version": "2.8.0+cu128", "reason": reason}
    with pytest.warns(RuntimeWarning, match=r"built in CPU mode although torch 2\.8\.0\+cu128 is a CUDA build.*boom"):
        _native.warn_unwanted_cpu_mode(info)
    assert _native.unwanted_cpu_mode({**info, "cuda_wanted": False}) == ""  # PERFCORE_CPU_ONLY=1 or a CPU torch
    assert _native.unwanted_cpu_mode({**info, "mode": "cuda"}) == ""


def test_env_shows_cpu_mode_why_and_how(monkeypatch):
    from perfcore.capture import environment

    reason = ("no nvcc: /opt/cuda has the CUDA headers but no bin/nvcc; for the CUDA mode install the CUDA 12.x "
              "toolkit (nvcc, CUPTI) and set CUDA_HOME to it, then reinstall perfcore with pip's --no-build-isolation")
    monkeypatch.setattr(environment, "build_info", lambda: {"mode": "cpu", "reason": reason})
    monkeypatch.setattr(environment, "capabilities", lambda: {"mode": "cpu", "reasons": {}, "warnings": []})
    [check] = environment.check_build()
    assert (check.status, check.code) == ("warn", "cpu_mode")
    assert check.figures["why"] == "no nvcc: /opt/cuda has the CUDA headers but no bin/nvcc"
    from perfcore.report.words import check_words

    value, fix = check_words(check)
    assert value == "CPU mode: no nvcc: /opt/cuda has the CUDA headers but no bin/nvcc"
    assert fix.endswith("; for the CUDA mode install the CUDA 12.x toolkit (nvcc, CUPTI) and set CUDA_HOME "
                              "to it, then reinstall perfcore with pip's --no-build-isolation")


def test_torch_older_than_supported_stops_the_build_with_one_line(setup_mod, monkeypatch):
    monkeypatch.setattr(setup_mod, "check_compiler", lambda: None)
    monkeypatch.setattr(setup_mod, "import_torch", lambda: fake_torch("2.6.0+cu124", "12.4"))
    monkeypatch.setattr(setup_mod.sys, "argv", ["setup.py", "build_ext", "--inplace"])
    with pytest.raises(SystemExit) as e:
        setup_mod.main()
    msg = str(e.value)
    assert msg.startswith("perfcore build: error: torch 2.6.0+cu124 is older than 2.8") and "\n" not in msg
    assert "pip install 'torch>=2.8'" in msg and "--no-build-isolation" in msg


def test_supported_torch_versions_pass_the_floor(setup_mod):
    # 2.14 is newer than 2.8: the check compares numbers, not strings.
    for version in ("2.8.0+cu128", "2.9.1", "2.14.1+cu130", "2.10.0a0+git1234", "3.0.0"):
        assert setup_mod.torch_too_old(version) == "", version
    for version in ("2.7.1+cu126", "2.1.0", "1.13.1"):
        assert setup_mod.torch_too_old(version), version


def test_pyproject_declares_the_torch_floor_setup_checks(setup_mod):
    pyproject = (ROOT / "pyproject.toml").read_text()
    floor = ".".join(map(str, setup_mod.MIN_TORCH))
    assert f'"torch>={floor}"' in pyproject


def test_the_cuda_mode_pass_names_test_files_that_exist():
    """scripts/test.sh runs `-m build` again on the CUDA-mode build: a renamed test file would drop out of it
    silently."""
    from pathlib import Path

    from conftest import BUILD_MODE_MODULES

    here = Path(__file__).parent
    assert sorted(n for n in BUILD_MODE_MODULES if not (here / n).is_file()) == []
    assert "-m build" in (here.parent / "scripts" / "test.sh").read_text()
