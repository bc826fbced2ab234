"""The hook types (csrc/hooks/*.cpp) use the CPython C API directly: they must compile against the
headers of every Python perfcore supports (3.9 ... 3.13), not only the one that builds here."""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = ["3.9", "3.10", "3.11", "3.12", "3.13"]


def python_includes(version: str) -> list[str]:
    """Header folders of that Python found on this machine: the running one, pyenv's builds, and
    the interpreter scripts/py313_trial.sh builds."""
    cache = Path(os.environ.get("PERFCORE_CACHE", Path.home() / ".cache" / "perfcore"))
    patterns = [str(Path.home() / ".pyenv" / "versions" / f"{version}.*" / "include" / f"python{version}"),
                str(cache / f"py{version.replace('.', '')}" / "include" / f"python{version}")]
    found = [d for p in patterns for d in sorted(glob.glob(p))]
    here = sysconfig.get_paths()["include"]
    if Path(here).name == f"python{version}":
        found.insert(0, here)
    return [d for d in dict.fromkeys(found) if (Path(d) / "Python.h").is_file()]


@pytest.mark.parametrize("version", VERSIONS)
def test_hook_types_compile_against_each_supported_python(version):
    cxx = shutil.which(os.environ.get("CXX", "g++")) or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler on PATH")
    includes = python_includes(version)
    if not includes:
        pytest.skip(f"no Python {version} headers on this machine (pyenv or scripts/py313_trial.sh provide them)")
    sources = sorted(str(p) for p in (ROOT / "csrc" / "hooks").glob("*.cpp"))
    for include in includes:
        p = subprocess.run([cxx, "-std=c++17", "-fsyntax-only", "-Wall", "-Wno-unused-function", "-Werror",
                            f"-I{include}", f"-I{ROOT / 'csrc'}", *sources],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, f"against {include}:\n{p.stderr[-3000:]}"
