"""The CUPTI decoder and the fabricated buffers against the real libcupti of each release torch has
shipped for CUDA 12 and 13 (PyPI's nvidia-cuda-cupti wheels): its cuptiActivityGetNextRecord walks
buffers with no device, so a layout that differs from what the library writes fails here.

The extension links one libcupti, so tests/cupti_real/harness.cpp is built once per release with
that release's headers and library. Run by `make test-cuda12` (a few compiles, wheels cached)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import cuda_wheels  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(os.environ.get("PERFCORE_CUDA12_SUITE") != "1",
                                reason="builds against four CUPTI releases: run by make test-cuda12")

# The newest struct of each kind in each release's headers: what its library writes.
NEWEST = {
    "12.4": {"kernel": "Kernel9", "memcpy": "Memcpy5", "sync": "Synchronization", "overhead": "Overhead3"},
    "12.6": {"kernel": "Kernel9", "memcpy": "Memcpy5", "sync": "Synchronization", "overhead": "Overhead3"},
    "12.8": {"kernel": "Kernel9", "memcpy": "Memcpy6", "sync": "Synchronization2", "overhead": "Overhead3"},
    "13.0": {"kernel": "Kernel10", "memcpy": "Memcpy6", "sync": "Synchronization2", "overhead": "Overhead3"},
}


def load_setup():
    import importlib.util

    spec = importlib.util.spec_from_file_location("perfcore_setup", ROOT / "setup.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module", params=sorted(NEWEST))
def harness(request, tmp_path_factory):
    """(release, {key: [values]}) from the harness built against that CUPTI release."""
    release = request.param
    include, lib = cuda_wheels.cupti(release)
    work = tmp_path_factory.mktemp(f"cupti{release}")
    staged = load_setup().stage_cupti_headers(str(include), work / "include")  # as setup.py stages them
    exe = work / "harness"
    cmd = [shutil.which("g++") or "c++", "-O1", "-std=c++17", f"-I{staged}", f"-I{ROOT / 'csrc'}"]
    cmd += [f"-I{d}" for d in cuda_wheels.cuda_includes(release)]
    cmd += [str(ROOT / "tests" / "cupti_real" / "harness.cpp"), str(ROOT / "csrc" / "cupti" / "decoder.cpp"),
            str(ROOT / "csrc" / "cupti" / "fake_buffer.cpp"), str(lib), f"-Wl,-rpath,{lib.parent}", "-o", str(exe)]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600)
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    out: dict[str, list[str]] = {}
    for line in r.stdout.splitlines():
        key, *rest = line.split()
        if key in ("stride", "sizeof"):
            out[f"{key}.{rest[0]}"] = rest[1:]
        else:
            out[key] = rest
    return release, out


def test_the_real_library_is_the_one_compiled_against(harness):
    release, out = harness
    loaded, compiled = out["api"]
    assert loaded == compiled and int(loaded) > 0


def test_the_library_strides_by_its_newest_structs(harness):
    release, out = harness
    for kind, struct in NEWEST[release].items():
        assert out[f"stride.{kind}"] == out[f"sizeof.{struct}"], (release, kind, struct)
    assert out["stride.memset"] == out["sizeof.Memset4"]
    assert out["stride.external"] == out["sizeof.ExternalCorrelation"]
    assert out["stride.runtime"] == out["sizeof.API"]


def test_fabricated_records_decode_field_by_field(harness):
    release, out = harness
    assert out["records"] == ["14", "other", "0", "invalid", "0"], out["records"]
    expect = {
        "kernel.start_ns": ["1000", "1001"], "kernel.end_ns": ["2000", "2001"], "kernel.stream_id": ["7", "8"],
        "kernel.correlation_id": ["11", "12"], "kernel.grid_x": ["64", "65"], "kernel.block_x": ["128", "129"],
        "kernel.graph_id": ["5", "6"], "kernel.graph_node_id": [str((1 << 40) + 0), str((1 << 40) + 1)], "names": ["relu_kernel", "gemm()"],
        "memcpy.start_ns": ["3000", "3001"], "memcpy.size_bytes": ["4096", "4097"], "memcpy.copy_kind": ["1", "1"],
        "memcpy.src_kind": ["2", "2"], "memcpy.dst_kind": ["3", "3"], "memcpy.correlation_id": ["21", "22"],
        "memset.size_bytes": ["512", "513"], "memset.value": ["9", "10"], "memset.correlation_id": ["31", "32"],
        "sync.end_ns": ["5200", "5201"], "sync.sync_type": ["3", "3"], "sync.correlation_id": ["41", "42"],
        "external.external_id": ["900", "901"], "external.correlation_id": ["11", "12"],
        "overhead.start_ns": ["6000", "6001"], "overhead.overhead_kind": ["1", "1"],
        "api.start_ns": ["700", "701"], "api.thread_id": ["1234", "1235"], "api.cbid": ["211", "212"],
        "api.driver": ["0", "1"],
    }
    assert {k: out[k] for k in expect} == expect
