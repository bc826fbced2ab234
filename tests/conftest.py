"""Shared fixtures; GPU tests are skipped by marker with the reason (as torchvision does)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import perfcore


# Where how perfcore was built (CPU or CUDA mode) can change a test's outcome: the native core, the
# capture layer, CUPTI, the event timer, kernel tracing, the GPU paths that must say "no GPU", and the
# public surface. The test command runs the whole suite on the CPU-mode build and these again on the
# CUDA-mode build (scripts/test.sh: `-m build`), with the end-to-end runs marked `build` one by one
# (tests/test_run.py); a test marked `cuda` or `cupti` is one of them wherever it is. Not
# test_c_api_versions.py: it compiles the hook types against each Python's headers with the same flags
# in either pass (no CUDA define), so its outcome cannot depend on the build mode.
BUILD_MODE_MODULES = frozenset({
    "test_native.py", "test_build.py", "test_capture_failsafe.py",
    "test_cupti_claim.py", "test_cupti_decoder.py", "test_cupti_drain.py", "test_cupti_python.py",
    "test_event_runtime.py", "test_gpu.py", "test_gpu_capture.py", "test_gpu_check.py", "test_launches.py",
    "test_tracing.py", "test_transfer_graph.py", "test_hostile_hardware.py", "test_hostile_api.py",
    "test_public_api.py", "test_hooks.py", "test_cli.py", "test_own_overhead.py",
})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in BUILD_MODE_MODULES or {"cuda", "cupti"} & set(item.keywords):
            item.add_marker(pytest.mark.build)
    caps = perfcore.capabilities()
    no_gpu = None if caps["features"]["cuda_events"] else caps["reasons"].get("cuda_events", "no GPU")
    no_cupti = None if caps["cupti_compiled"] else "perfcore was built in CPU mode (no CUPTI compiled in)"
    for item in items:
        if no_gpu and "cuda" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=f"needs a CUDA GPU: {no_gpu}"))
        if no_cupti and "cupti" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=no_cupti))


@pytest.fixture(scope="session")
def caps():
    return perfcore.capabilities()


@pytest.fixture(scope="session")
def C():
    from perfcore._native import native

    return native()


@pytest.fixture(scope="session")
def demo_quick(tmp_path_factory):
    """`perfcore demo --quick` run once for the session, as a user runs it: (the finished process, its
    folder, its --json file). The demo's own test and the browser test read the same real folder."""
    base = tmp_path_factory.mktemp("demo-quick")
    out, doc = base / "demo", base / "demo.json"
    p = subprocess.run([sys.executable, "-m", "perfcore", "demo", "--quick", "--out", str(out), "--json", str(doc)],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ))
    return p, out, doc


@pytest.fixture(scope="session")
def perfcore_clone(tmp_path_factory):
    """A clone of the working tree at <tmp>/perfcore, as a user has it beside them when typing the README's
    install line (`pip install --no-build-isolation ./perfcore`). One for the session: pip builds a local
    folder in place, so the install and the notebook's reuse one compile."""
    from installs import clone_tree

    return clone_tree(tmp_path_factory.mktemp("clone") / "perfcore")
