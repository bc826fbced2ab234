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


def test_a_monitor_sample_asks_nvml_only_cheap_reads():
    # Each sample (every 100-250 ms through the run) reads counters and sensors; a process list costs
    # milliseconds under the driver's global lock and is never asked for here (interference lists
    # them once a run).
    from perfcore.capture.sampler import Sampler

    asked = []

    class Fake(types.SimpleNamespace):
        def __getattr__(self, name):
            if not name.startswith("nvml"):
                raise AttributeError(name)

            def call(*a):
                asked.append(name)
                return types.SimpleNamespace(gpu=50, memory=20, used=1 << 30)

            return call

    fake = Fake(NVML_TEMPERATURE_GPU=0, NVML_CLOCK_SM=1)
    fake.nvmlDeviceGetPowerUsage = lambda h: asked.append("nvmlDeviceGetPowerUsage") or 100_000
    fake.nvmlDeviceGetTemperature = lambda h, k: asked.append("nvmlDeviceGetTemperature") or 60
    fake.nvmlDeviceGetClockInfo = lambda h, k: asked.append("nvmlDeviceGetClockInfo") or 1980
    s = Sampler(0.1)
    s._nvml, s._handle = fake, ("h", 0)
    row = s._sample()
    assert row["gpu_util"] == 0.5 and row["power_w"] == 100.0
    cheap = {"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetPowerUsage",
             "nvmlDeviceGetTemperature", "nvmlDeviceGetClockInfo"}
    assert set(asked) <= cheap and len(asked) == len(set(asked)), asked
