"""Shared fixtures; GPU tests are skipped by marker with the reason (as torchvision does)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import perfcore


def pytest_collection_modifyitems(config, items):
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
