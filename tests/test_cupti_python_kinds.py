"""cupti-python's names and releases, without cupti-python: both naming schemes of its record
classes, and install advice that resolves for every torch it names (or says there is none)."""
from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from perfcore.capture import cupti_python_kinds as cpk

cp = SimpleNamespace(_Kinds=cpk.Kinds)

# torch's CUDA -> what to install: checked against PyPI's releases and torch's own pins (torch
# 2.8.0 with cupti-python 12.8.* keeps nvidia-cuda-cupti-cu12 12.8.90; torch 2.7.1 (cu126) with
# cupti-python 12.6.* is ResolutionImpossible).
ADVICE = {"12.4": None, "12.6": None, "12.8": "cupti-python==12.8.*", "12.9": "cupti-python==12.8.*",
          "13.0": "cupti-python==13.0.*", "13.1": "cupti-python==13.0.*", "13.2": "cupti-python==13.2.*",
          "13.5": "cupti-python==13.4.*", "11.8": None}


@pytest.mark.parametrize("cuda", sorted(ADVICE))
def test_install_advice_per_torch_cuda(cuda):
    assert cpk.install_spec(cuda) == ADVICE[cuda]
    advice = cpk.install_advice(cuda)
    if ADVICE[cuda]:
        assert advice.startswith(f'pip install "{ADVICE[cuda]}"')
    else:
        assert advice.startswith(f"no cupti-python release installs beside torch's CUPTI {cuda}")


@pytest.mark.skipif(os.environ.get("PERFCORE_CUDA12_SUITE") != "1", reason="asks PyPI: run by make test-cuda12")
def test_every_advised_release_exists_on_pypi(tmp_path):
    for spec in sorted({s for s in ADVICE.values() if s}):
        r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                            "-d", str(tmp_path), spec], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"{spec}: {r.stderr[-500:]}"


def test_both_naming_schemes_are_read():
    class Kind:
        CONCURRENT_KERNEL, MEMCPY, RUNTIME, DRIVER = 10, 1, 5, 6

    twelve = SimpleNamespace(ActivityKind=Kind, ActivityKernel9=type("ActivityKernel9", (), {}),
                             c_upti_activity_kernel9_dtype="k9", ActivityMemcpy6=type("ActivityMemcpy6", (), {}),
                             c_upti_activity_memcpy6_dtype="m6", ActivityAPI=type("ActivityAPI", (), {}),
                             c_upti_activity_api_dtype="api", ActivityMemcpyKind=object, ActivityOverheadKind=object)
    thirteen = SimpleNamespace(ActivityKind=Kind, ActivityKernel10=type("ActivityKernel10", (), {}),
                               activity_kernel10_dtype="k10", ActivityMemcpy6=type("ActivityMemcpy6", (), {}),
                               activity_memcpy6_dtype="m6", ActivityAPI=type("ActivityAPI", (), {}),
                               activity_api_dtype="api")
    for mod, kernel_dtype in ((twelve, "k9"), (thirteen, "k10")):
        k = cp._Kinds(mod)
        assert sorted(k.dtype.values()) == sorted([kernel_dtype, "m6", "api"]) and k.missing() == []
        assert k.table[10] == "kernels" and k.driver == 6
    assert cp._Kinds(SimpleNamespace(ActivityKind=Kind)).missing() == ["kernels", "memcpy", "api"]


