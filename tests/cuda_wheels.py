"""NVIDIA's CUDA wheels from PyPI (CUPTI, runtime headers, nvcc's crt headers), fetched once with
pip and unpacked under $PERFCORE_CACHE (default ~/.cache/perfcore)/wheels: real headers and real
libcupti of several releases, for the tests that build against each one."""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

CACHE = Path(os.environ.get("PERFCORE_CACHE") or Path.home() / ".cache" / "perfcore") / "wheels"

# release -> (CUPTI package, runtime package, crt package): CUDA 13 split crt/ out of nvcc.
CUPTI = {"12.4": "nvidia-cuda-cupti-cu12", "12.6": "nvidia-cuda-cupti-cu12", "12.8": "nvidia-cuda-cupti-cu12",
         "13.0": "nvidia-cuda-cupti"}
RUNTIME = {"12.4": "nvidia-cuda-runtime-cu12", "12.5": "nvidia-cuda-runtime-cu12", "12.6": "nvidia-cuda-runtime-cu12",
           "12.8": "nvidia-cuda-runtime-cu12", "13.0": "nvidia-cuda-runtime"}
CRT = {"12.4": "nvidia-cuda-nvcc-cu12", "12.5": "nvidia-cuda-nvcc-cu12", "12.6": "nvidia-cuda-nvcc-cu12",
       "12.8": "nvidia-cuda-nvcc-cu12", "13.0": "nvidia-cuda-crt"}


def unpacked(package: str, release: str) -> Path:
    """The unpacked wheel of package==release.* (its nvidia/<name>/ folder), fetched when missing."""
    dest = CACHE / f"{package}-{release}"
    done = dest / ".unpacked"
    if not done.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        norm = package.replace("-", "_")
        pattern = str(CACHE / f"{norm}-{release}.*.whl")
        if not glob.glob(pattern):
            r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                                "--no-deps", "--only-binary=:all:", "-d", str(CACHE), f"{package}=={release}.*"],
                               capture_output=True, text=True, timeout=600)
            if not glob.glob(pattern):
                raise RuntimeError(f"pip could not fetch {package}=={release}.*: {r.stderr.strip()[-500:]}")
        whl = sorted(glob.glob(pattern))[-1]
        shutil.rmtree(dest, ignore_errors=True)
        with zipfile.ZipFile(whl) as z:
            # crt/ alone from nvcc's wheel: its ptxas and libnvvm are not needed for headers.
            members = [n for n in z.namelist() if package != "nvidia-cuda-nvcc-cu12" or "/include/" in n]
            z.extractall(dest, members)
        for so in dest.rglob("*.so*"):
            so.chmod(0o755)
        done.write_text(whl + "\n")
    [pkg] = [p for p in (dest / "nvidia").iterdir() if p.is_dir() and p.name != "__pycache__"]
    return pkg


def cupti(release: str) -> tuple[Path, Path]:
    """(include dir, libcupti.so.N) of that CUPTI release."""
    pkg = unpacked(CUPTI[release], release)
    [lib] = sorted(glob.glob(str(pkg / "lib" / "libcupti.so.[0-9]*")), key=len)[:1]
    return pkg / "include", Path(lib)


def cuda_includes(release: str) -> list[Path]:
    """A toolkit's include path for that release: cuda.h and cuda_runtime.h, plus crt/."""
    return [unpacked(RUNTIME[release], release) / "include", unpacked(CRT[release], release) / "include"]
