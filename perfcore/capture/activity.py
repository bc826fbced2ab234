"""Traced GPU records -> the two tables a step is attributed from: device work and transfers.

Device work ("kernels") is what keeps the device busy: kernels, and also memsets and copies that
stay on the device (device-to-device, arrays, peer), which the host link plays no part in.
Transfers ("copies") are copies between host and device memory only, by direction, with the
host side's pageable/pinned kind. Each device-work row carries the phase that launched it.
"""

from __future__ import annotations

import numpy as np

from perfcore._lazy import lazy_module
from perfcore.capture.columns import TRANSFER_COPY_KINDS
from perfcore.capture.launches import LaunchPhases

pd = lazy_module("pandas")  # imported on first use: settling needs it, recording does not

__all__ = ["device_tables", "MEMSET_NAME", "PROBE_KERNEL"]

MEMSET_NAME = "Memset (Device)"  # the names torch.profiler gives these rows
# The kernel the tracing calibration launches (csrc/calib.cu): perfcore's, never a step's work.
PROBE_KERNEL = "perfcore::tracingProbe"
_COPY_NAMES = {
    5: "Memcpy AtoA (Device)",
    6: "Memcpy AtoD (Device)",
    7: "Memcpy DtoA (Device)",
    8: "Memcpy DtoD (Device -> Device)",
    9: "Memcpy HtoH (Host -> Host)",
    10: "Memcpy PtoP (Device -> Device)",
}


def _present(frames: dict[str, pd.DataFrame], kind: str) -> pd.DataFrame | None:
    f = frames.get(kind)
    return f if f is not None and len(f.columns) and len(f) else None


def _placed(launches: LaunchPhases, rows: pd.DataFrame) -> np.ndarray:
    """The launching phase of copies or memsets (no graph ids): by correlation, else by GPU time."""
    return launches.phase_of(
        rows["correlation_id"].to_numpy(), start_ns=rows["start_ns"].to_numpy(), end_ns=rows["end_ns"].to_numpy()
    )


def _timed(rows: pd.DataFrame, **columns) -> pd.DataFrame:
    """Rows' times and stream, with `columns` beside them (a scalar fills its column)."""
    times = {c: rows[c].to_numpy() for c in ("start_ns", "end_ns", "stream_id")}
    return pd.DataFrame({**times, **columns})


def device_tables(frames: dict[str, pd.DataFrame], launches: LaunchPhases) -> dict[str, pd.DataFrame]:
    """{"kernels": device work with phase_id, "copies": host<->device transfers}; empty tables left out.
    Call launches.add() with the same drain's frames first."""
    out: dict[str, pd.DataFrame] = {}
    work: list[pd.DataFrame] = []
    k = _present(frames, "kernels")
    if k is not None:
        names = k["name"].astype(str)
        mine = names.str.startswith(PROBE_KERNEL).to_numpy()
        if mine.any():
            k, names = k[~mine], names[~mine]
    if k is not None and len(k):
        phase = launches.phase_of(
            k["correlation_id"].to_numpy(),
            k["graph_id"].to_numpy() if "graph_id" in k else None,
            k["start_ns"].to_numpy(),
            k["graph_node_id"].to_numpy() if "graph_node_id" in k else None,
            k["end_ns"].to_numpy(),
        )
        comm = names.str.contains("nccl", case=False).to_numpy()
        work.append(_timed(k, name=names.to_numpy(dtype=object), comm=comm, phase_id=phase))
    m = _present(frames, "memcpy")
    if m is not None:
        host = np.isin(m["copy_kind"].to_numpy(), TRANSFER_COPY_KINDS)
        t = m[host]
        if len(t):
            out["copies"] = _timed(
                t,
                size_bytes=t["size_bytes"].to_numpy(),
                direction=t["direction"].astype(str).to_numpy(dtype=object),
                pageable=t["pageable"].to_numpy(dtype=bool),
                kind="memcpy",
            )
        d = m[~host & (m["copy_kind"].to_numpy() != 9)]  # host-to-host copies involve no device
        if len(d):
            kinds = d["copy_kind"].tolist()
            name = np.array([_COPY_NAMES.get(c, "Memcpy (Device)") for c in kinds], dtype=object)
            work.append(_timed(d, name=name, comm=False, phase_id=_placed(launches, d)))
    s = _present(frames, "memset")
    if s is not None:
        work.append(_timed(s, name=MEMSET_NAME, comm=False, phase_id=_placed(launches, s)))
    if work:
        out["kernels"] = work[0] if len(work) == 1 else pd.concat(work, ignore_index=True)
    return out
