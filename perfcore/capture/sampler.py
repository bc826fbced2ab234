"""A sampler thread like `nvidia-smi dmon`: GPU utilisation, memory, power, temperature and SM
clock through NVML, plus CPU % and RAM, every `interval_s`. CPU-only machines get CPU and RAM."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Mapping

from perfcore._lazy import lazy_module

pd = lazy_module("pandas")  # only frame() needs it: `perfcore run` starts a sampler before pandas loads

__all__ = ["Sampler", "heartbeat", "nvml_handle", "align_samples", "add_per_step", "SAMPLED"]

# Sampler columns that become per-step means in a steps table (monitor_<name>); the GPU's only where
# NVML answered.
SAMPLED = ("cpu_percent", "gpu_util", "gpu_mem_used_bytes", "power_w", "temp_c")


def _uuid(pynvml, h) -> str:
    u = pynvml.nvmlDeviceGetUUID(h)
    return u.decode() if isinstance(u, bytes) else str(u)


def nvml_handle(pynvml, cuda_index: int = 0, env: Mapping[str, str] | None = None, torch_props: Any = None):
    """NVML's handle for CUDA device `cuda_index` as this process numbers it, and how it was found.

    NVML numbers every GPU of the machine in PCI order and ignores CUDA_VISIBLE_DEVICES, while
    CUDA numbers only the visible ones (in its own order), so an index is never passed through:
    the device is matched by UUID (torch's device properties, or a GPU-... entry of
    CUDA_VISIBLE_DEVICES), else by PCI bus id, else through the CUDA_VISIBLE_DEVICES entry.
    """
    env = os.environ if env is None else env
    if torch_props is None:
        torch = sys.modules.get("torch")  # never imported here: the parent process has no torch
        if torch is not None and torch.cuda.is_initialized():
            torch_props = torch.cuda.get_device_properties(cuda_index)
    if torch_props is not None:
        uuid = str(getattr(torch_props, "uuid", "") or "")
        if uuid:
            return pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"), "uuid"
        if getattr(torch_props, "pci_bus_id", None) is not None:
            bus = f"{torch_props.pci_domain_id:08x}:{torch_props.pci_bus_id:02x}:{torch_props.pci_device_id:02x}.0"
            return pynvml.nvmlDeviceGetHandleByPciBusId_v2(bus), "pci bus id"
    visible = (
        [v.strip() for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
        if "CUDA_VISIBLE_DEVICES" in env
        else None
    )
    entry = str(cuda_index) if visible is None else (visible[cuda_index] if cuda_index < len(visible) else None)
    if entry is None:
        raise ValueError(
            f"CUDA device {cuda_index} is not among CUDA_VISIBLE_DEVICES={env.get('CUDA_VISIBLE_DEVICES')}"
        )
    if entry.startswith("MIG-"):
        raise ValueError(f"CUDA device {cuda_index} is a MIG instance ({entry}); NVML samples whole GPUs only")
    if entry.startswith("GPU-"):  # CUDA accepts a unique UUID prefix
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            if _uuid(pynvml, h).startswith(entry):
                return h, "uuid"
        raise ValueError(f"no GPU has a UUID starting with {entry}")
    # A number: CUDA's order, which is NVML's (PCI) order when CUDA_DEVICE_ORDER=PCI_BUS_ID, and
    # CUDA's default (fastest first) otherwise, the same on a machine of identical GPUs.
    how = "index (PCI order)" if env.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID" else "index (assumes identical GPUs)"
    return pynvml.nvmlDeviceGetHandleByIndex(int(entry)), how


class Sampler:
    """with Sampler(0.1) as s: ...; s.frame() -> one row per sample (t_ns on the perfcore clock)."""

    def __init__(self, interval_s: float = 0.1, device_index: int = 0):
        # `not >` also refuses nan, which would make the sampling loop spin without waiting.
        if not (0 < interval_s < float("inf")):
            from perfcore.errors import UsageError

            raise UsageError(f"sampling interval must be a finite number of seconds > 0, got {interval_s}")
        self.interval_s = interval_s
        self.device_index = device_index
        self.rows: list[dict[str, Any]] = []
        self.nvml_error = ""  # why NVML could not be opened ("Type: message"): no GPU sampling, CPU and RAM only
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml = None
        self._handle = None
        self.matched_by = ""  # how the NVML device was matched to the CUDA device

    def _open_nvml(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            self._handle, self.matched_by = nvml_handle(pynvml, self.device_index)
            self._nvml = pynvml
        except Exception as e:  # no driver, no GPU, or nvidia-ml-py missing
            self._nvml = None
            self.nvml_error = f"{type(e).__name__}: {e}"

    def _sample(self) -> dict[str, Any]:
        import psutil

        row: dict[str, Any] = {
            "t_ns": time.perf_counter_ns(),
            "cpu_percent": psutil.cpu_percent(None),
            "ram_used_bytes": psutil.virtual_memory().used,
        }
        if self._nvml is not None:
            n, h = self._nvml, self._handle
            try:
                u = n.nvmlDeviceGetUtilizationRates(h)
                row.update(
                    gpu_util=u.gpu / 100.0,
                    mem_util=u.memory / 100.0,
                    gpu_mem_used_bytes=n.nvmlDeviceGetMemoryInfo(h).used,
                    power_w=n.nvmlDeviceGetPowerUsage(h) / 1000.0,
                    temp_c=n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU),
                    sm_clock_mhz=n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
                )
            except Exception:
                pass
        return row

    def _loop(self) -> None:
        next_t = time.perf_counter()
        while not self._stop.is_set():
            self.rows.append(self._sample())
            next_t += self.interval_s
            self._stop.wait(max(0.0, next_t - time.perf_counter()))

    def start(self) -> "Sampler":
        import psutil

        self._open_nvml()
        psutil.cpu_percent(None)  # the first reading of cpu_percent is meaningless; prime it
        self._thread = threading.Thread(target=self._loop, name="perfcore-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> pd.DataFrame:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass
        return self.frame()

    @property
    def has_gpu(self) -> bool:
        return any("gpu_util" in r for r in self.rows)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows)

    def __enter__(self) -> "Sampler":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def align_samples(samples: "pd.DataFrame", start_ns, wall_ns) -> "pd.DataFrame":
    """Sampler rows -> per-step means (the samples are on the perfcore clock, as the steps are): a
    step that holds no sample reads NaN. The steps' starts in order, each with its wall time (ns)."""
    import numpy as np

    start_ns = np.asarray(start_ns, dtype=np.int64)
    wall_ns = np.asarray(wall_ns, dtype=np.int64)
    cols = [c for c in SAMPLED if c in samples]
    out = pd.DataFrame(index=range(len(start_ns)), columns=cols, dtype=float)
    if not len(samples) or not len(start_ns):
        return out
    t = samples["t_ns"].to_numpy()
    k = np.searchsorted(start_ns, t, side="right") - 1
    inside = (k >= 0) & (t < start_ns[np.clip(k, 0, None)] + wall_ns[np.clip(k, 0, None)])
    grouped = samples[inside].groupby(k[inside])[cols].mean()
    out.loc[grouped.index, cols] = grouped.to_numpy()
    return out


def add_per_step(table: "pd.DataFrame", samples: "pd.DataFrame", start_ns, wall_ns) -> None:
    """The samples' per-step means as the steps table's monitor_<name> columns (steps.csv's)."""
    per_step = align_samples(samples, start_ns, wall_ns)
    for c in per_step.columns:
        table[f"monitor_{c}"] = per_step[c].to_numpy()


def heartbeat(series, spacing_s: float, min_amplitude: float = 0.3, min_corr: float = 0.3) -> dict[str, Any] | None:
    """A regular swing between busy and near-idle (the loader delivering in bursts).

    Returns {period_s, amplitude, correlation} or None. The period is the first autocorrelation
    peak at lag >= 2 samples; the swing must span min_amplitude (p90 - p10, busy is 0..1).
    """
    import numpy as np

    x = np.asarray(series, dtype=np.float64)
    x = x[np.isfinite(x)]
    if len(x) < 12:
        return None
    amp = float(np.percentile(x, 90) - np.percentile(x, 10))
    if amp < min_amplitude:
        return None
    y = x - x.mean()
    denom = float((y * y).sum())
    if denom == 0:
        return None
    acf = np.correlate(y, y, mode="full")[len(y) - 1 :] / denom
    for lag in range(2, len(acf) // 2):
        if acf[lag] > min_corr and acf[lag] >= acf[lag - 1] and acf[lag] >= acf[lag + 1]:
            return {
                "period_s": lag * spacing_s,
                "period_samples": lag,
                "amplitude": amp,
                "correlation": float(acf[lag]),
            }
    return None
