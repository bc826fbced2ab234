"""NVML device for a CUDA device: NVML numbers all GPUs in PCI order and ignores
CUDA_VISIBLE_DEVICES, so the mapping goes through UUIDs / PCI bus ids (fake NVML, no GPU needed)."""
from __future__ import annotations

import types

import pytest

from perfcore.capture.sampler import nvml_handle

UUIDS = ["GPU-aaaa-0000", "GPU-bbbb-1111", "GPU-cccc-2222", "GPU-dddd-3333"]
PCI = ["00000000:17:00.0", "00000000:65:00.0", "00000000:B1:00.0", "00000000:CA:00.0"]


def fake_nvml():
    n = types.SimpleNamespace()
    n.nvmlDeviceGetCount = lambda: len(UUIDS)
    n.nvmlDeviceGetHandleByIndex = lambda i: ("h", i)
    n.nvmlDeviceGetUUID = lambda h: UUIDS[h[1]].encode()
    n.nvmlDeviceGetHandleByUUID = lambda u: ("h", UUIDS.index(u))
    n.nvmlDeviceGetHandleByPciBusId_v2 = lambda b: ("h", [p.lower() for p in PCI].index(b.lower()))
    return n


def test_visible_devices_by_index_are_not_nvml_indices():
    # A rank given CUDA_VISIBLE_DEVICES=2,3 sees GPU 2 as its cuda:0.
    h, how = nvml_handle(fake_nvml(), 0, env={"CUDA_VISIBLE_DEVICES": "2,3", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert h == ("h", 2) and "PCI order" in how
    assert nvml_handle(fake_nvml(), 1, env={"CUDA_VISIBLE_DEVICES": "2,3"})[0] == ("h", 3)


def test_visible_devices_by_uuid_prefix():
    h, how = nvml_handle(fake_nvml(), 0, env={"CUDA_VISIBLE_DEVICES": "GPU-cccc"})
    assert h == ("h", 2) and how == "uuid"


def test_torch_properties_win_by_uuid_then_pci():
    props = types.SimpleNamespace(uuid="bbbb-1111")
    assert nvml_handle(fake_nvml(), 0, env={"CUDA_VISIBLE_DEVICES": "0"}, torch_props=props) == (("h", 1), "uuid")
    props = types.SimpleNamespace(uuid="", pci_domain_id=0, pci_bus_id=0xCA, pci_device_id=0)
    assert nvml_handle(fake_nvml(), 0, env={}, torch_props=props) == (("h", 3), "pci bus id")


def test_unknown_or_mig_devices_say_why():
    with pytest.raises(ValueError, match="not among"):
        nvml_handle(fake_nvml(), 2, env={"CUDA_VISIBLE_DEVICES": "1"})
    with pytest.raises(ValueError, match="MIG"):
        nvml_handle(fake_nvml(), 0, env={"CUDA_VISIBLE_DEVICES": "MIG-xyz"})
