"""Shared fixtures; GPU tests are skipped by marker with the reason (as torchvision does)."""
from __future__ import annotations

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
