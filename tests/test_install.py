"""The installed package, not the source tree: the sdist and the wheels carry every file of the
tree, and perfcore installed by the README's install lines, as typed, from a clone of the working tree
into an environment that has torch but not the checkout runs every command from a folder outside it.

PERFCORE_WHEEL_MODE=auto (scripts/test.sh sets it) builds the installed wheel as pip would, in
the CUDA mode where it can; the default, cpu, keeps a hand-run of this file short.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest
from installs import (ROOT, WHEEL_MODE, dev_site_packages, env_for, make_env, ok, readme_install_lines, sh,
                      tree_files)

# Made by each build, never shipped from the tree.
BUILD_OUTPUTS = re.compile(r"^perfcore/(_build_info\.json|_C\..*\.so)$")


def shipped_in_wheel(files: list[str]) -> set[str]:
    return {f for f in files if f.startswith("perfcore/") and not BUILD_OUTPUTS.match(f)
            and "__pycache__" not in f}


def shipped_in_sdist(files: list[str]) -> set[str]:
    return shipped_in_wheel(files) | {f for f in files if f.startswith("csrc/")} | {
        "setup.py", "pyproject.toml", "README.md", "MANIFEST.in"}


def broken_toolkit(tk: Path, cuda_version: str) -> Path:
    """A CUDA toolkit at tk whose headers this compiler cannot take (they #error): the CUDA-mode compile fails."""
    for d in ("include", "bin", "lib64"):
        (tk / d).mkdir(parents=True)
    (tk / "include" / "cuda_runtime.h").write_text("#error this toolkit's headers do not compile here\n")
    (tk / "include" / "cupti.h").write_text("")
    (tk / "lib64" / "libcupti.so.1").write_text("")
    nvcc = tk / "bin" / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {cuda_version}, V0'\nexit 1\n")
    nvcc.chmod(0o755)
    return tk


@pytest.fixture(scope="module")
def installed(tmp_path_factory, perfcore_clone):
    """perfcore installed by the README's install lines, run as typed in the folder that holds a clone of
    the working tree (./perfcore), into a venv that has torch and the dependencies but not the checkout;
    plus an sdist and its wheel (`fallback`: where torch is a CUDA build, that wheel's build, whose CUDA-mode
    compile fails, else None)."""
    t = tmp_path_factory.mktemp("install")
    src = perfcore_clone
    py = make_env(t)
    env = env_for(py)
    work = t / "work"  # every command after the install runs here, outside the checkout and the clone
    work.mkdir()

    results = [(cmd, sh(cmd, src.parent, env)) for cmd in readme_install_lines((ROOT / "README.md").read_text())]

    # sdist from the clone (PEP 517, as `python -m build --sdist` does), then a wheel from it.
    sdist_dir, wheel_dir = t / "sdist", t / "wheel"
    ok(sh([str(py), "-c", "import sys; from setuptools import build_meta as b; b.build_sdist(sys.argv[1])",
           str(sdist_dir)], src, env))
    sdist = next(sdist_dir.glob("perfcore-*.tar.gz"))
    # The sdist's wheel is built in CPU mode, once, for two tests: where torch is a CUDA build, by the fallback
    # a user's pip install takes when the CUDA-mode compile fails (a toolkit whose headers do not compile
    # here; test_cuda_compile_failure_falls_back_to_cpu_mode), else by PERFCORE_CPU_ONLY.
    import torch

    cuda = torch.version.cuda
    if cuda:
        tk = broken_toolkit(t / "cuda", cuda)
        wheel_env = {k: v for k, v in env.items() if k not in ("PERFCORE_CPU_ONLY", "PERFCORE_CUDA_FALLBACK")}
        wheel_env.update(CUDA_HOME=str(tk), TORCH_CUDA_ARCH_LIST="8.0")
    else:
        wheel_env = {**env, "PERFCORE_CPU_ONLY": "1"}
    fallback = sh([str(py), "-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps", "-w", str(wheel_dir),
                   str(sdist)], work, wheel_env)
    ok(fallback)
    return {"t": t, "src": src, "py": py, "env": env, "work": work, "files": tree_files(), "readme": results,
            "sdist": sdist, "wheel": next(wheel_dir.glob("perfcore-*.whl")), "fallback": fallback if cuda else None}


def test_readme_install_lines_run_as_typed(installed):
    # As typed: no placeholder for the user to fill in (a `<org>` in a shell is a redirection).
    cmds = [c for c, _ in installed["readme"]]
    assert cmds == ["pip install --no-build-isolation ./perfcore", "perfcore env"], cmds
    for cmd, r in installed["readme"]:
        ok(r)
    # The last documented command is `perfcore env`: it names the mode and, in CPU mode, why.
    assert re.search(r"build: (cuda|cpu) mode", installed["readme"][-1][1].text)


def test_installed_files_match_the_tree(installed):
    out = ok(sh([str(installed["py"]), "-c", textwrap.dedent("""
        import importlib.metadata as md
        for f in md.distribution("perfcore").files: print(f.as_posix())
        """)], installed["work"], installed["env"]))
    got = set(out.split())
    missing = shipped_in_wheel(installed["files"]) - got
    assert not missing, f"the wheel built from the tree lacks {sorted(missing)}"
    assert "perfcore/_build_info.json" in got and any(re.match(r"perfcore/_C\..*\.so$", f) for f in got)


def test_sdist_and_its_wheel_carry_every_file(installed):
    with tarfile.open(installed["sdist"]) as tar:
        in_sdist = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    missing = shipped_in_sdist(installed["files"]) - in_sdist
    assert not missing, f"the sdist lacks {sorted(missing)}"
    assert "perfcore/_build_info.json" not in in_sdist  # each build writes its own
    names = set(zipfile.ZipFile(installed["wheel"]).namelist())
    missing = shipped_in_wheel(installed["files"]) - names
    assert not missing, f"the wheel built from the sdist lacks {sorted(missing)}"
    assert "perfcore/_build_info.json" in names and any(re.match(r"perfcore/_C\..*\.so$", n) for n in names)


def test_installed_package_imports_every_module_apart_from_the_checkout(installed):
    modules = sorted({f[:-3].replace("/", ".").removesuffix(".__init__") for f in shipped_in_wheel(installed["files"])
                      if f.endswith(".py") and "/_boot/" not in f})
    out = ok(sh([str(installed["py"]), "-c", textwrap.dedent(f"""
        import importlib, sys
        import perfcore
        print(perfcore.__file__)
        assert "torch" not in sys.modules, "import perfcore imported torch"
        # The documented API after a bare import.
        perfcore.StepTimer, perfcore.Workload, perfcore.transfer.measure, perfcore.graphs
        for m in {modules!r}:
            importlib.import_module(m)
        print(perfcore.capabilities()["mode"], perfcore.build_info().get("reason", ""))
        """)], installed["work"], installed["env"]))
    first = Path(out.splitlines()[0])
    assert installed["t"] / "venv" in first.parents, f"perfcore came from {first}, not the test's venv"
    mode = out.splitlines()[1].split()[0]
    if WHEEL_MODE == "auto" and os.environ.get("PERFCORE_REQUIRE_CUDA_BUILD") == "1":
        assert mode == "cuda", f"pip built the installed wheel in CPU mode: {out.splitlines()[1]}"


def test_installed_commands_run(installed):
    work, env = installed["work"], installed["env"]
    assert re.search(r"version \d+\.\d+", ok(sh(["perfcore", "--version"], work, env)))
    ok(sh(["perfcore", "demo", "--quick"], work, env))
    demo = sorted((work / "perfcore-runs").glob("demo-*"))
    assert demo and (demo[-1] / "summary.md").is_file() and (demo[-1] / "run.json").is_file()

    script = work / "tiny_train.py"
    script.write_text(textwrap.dedent("""
        import torch
        model = torch.nn.Linear(8, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 2)),
                                           batch_size=8)
        for epoch in range(2):
            for x, y in data:
                loss = torch.nn.functional.mse_loss(model(x), y)
                opt.zero_grad(); loss.backward(); opt.step()
        """))
    ok(sh(["perfcore", "run", "--out", str(work / "tiny-run"), "--", "python", str(script)], work, env))
    assert (work / "tiny-run" / "run.json").is_file()


def test_pip_default_build_isolation_stops_with_one_line(installed, tmp_path):
    # pip's default hides the user's torch from the build; the dev venv has torch where pip looks.
    r = sh([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path), str(installed["src"])],
           tmp_path, {k: v for k, v in os.environ.items() if k != "PERFCORE_CPU_ONLY"}, timeout=300)
    if r.returncode != 0 and "perfcore build:" not in r.text and re.search(
            r"Could not find a version|No matching distribution|Failed to establish|NewConnectionError", r.text):
        pytest.skip("pip could not fetch the build requirements (no route to PyPI): " + r.text.splitlines()[-1])
    assert r.returncode != 0
    lines = [ln.strip() for ln in r.text.splitlines() if "perfcore build:" in ln]
    assert lines == ["perfcore build: error: perfcore compiles against the torch you run with, and build isolation "
                     "hides it: run the same pip command with --no-build-isolation "
                     "(e.g. pip install --no-build-isolation .)"], r.text[-3000:]


def test_no_torch_stops_with_one_line(installed, tmp_path):
    # Only the build tools: what a bare Python with pip has.
    py = make_env(tmp_path, dev_site_packages(), keep=lambda n: re.match(
        r"^(pip|setuptools|wheel|_distutils_hack|pkg_resources|packaging)\b", n) is not None)
    r = sh([str(py), "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", str(tmp_path / "w"),
            str(installed["src"])], tmp_path, env_for(py), timeout=300)
    assert r.returncode != 0
    lines = [ln.strip() for ln in r.text.splitlines() if "perfcore build:" in ln]
    assert len(lines) == 1 and "install torch first (pip install torch), then pip install --no-build-isolation ." \
        in lines[0], r.text[-3000:]


def test_cuda_compile_failure_falls_back_to_cpu_mode(installed):
    # A toolkit whose headers this compiler cannot take (here: they #error) makes the CUDA-mode compile fail;
    # the install of the sdist still succeeds, in CPU mode, and says why in one line.
    r = installed["fallback"]
    if r is None:
        pytest.skip("torch is a CPU build: the build never tries the CUDA mode")
    lines = [ln.strip() for ln in r.text.splitlines() if "perfcore build: CPU mode" in ln]
    assert len(lines) == 1 and lines[0].startswith("perfcore build: CPU mode: the CUDA-mode compile failed ("), lines
    info = json.loads(zipfile.ZipFile(installed["wheel"]).read("perfcore/_build_info.json"))
    assert info["mode"] == "cpu" and info["reason"].startswith("the CUDA-mode compile failed")


def test_setup_installs_what_pyproject_declares(tmp_path):
    # scripts/setup.sh installs whatever this prints: the runtime dependencies and the test and gpu
    # extras that are missing or too old, never torch (set-up installs that itself, once).
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""
        [project]
        name = "x"
        dependencies = ["torch>=999", "click>=1", "perfcore-surely-absent-dep>=1"]
        [project.optional-dependencies]
        test = ["pytest>=1", "click>=999"]
        gpu = ["perfcore-surely-absent-gpu"]
        other = ["perfcore-surely-absent-other"]
        """))
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "missing_deps.py"), str(tmp_path / "pyproject.toml")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["perfcore-surely-absent-dep>=1", "click>=999", "perfcore-surely-absent-gpu"]
