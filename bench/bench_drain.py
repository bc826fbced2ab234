"""Drain cost per CUPTI record, native decoder vs cupti-python's record objects, on CPU.

    python bench/bench_drain.py [--records N]

Both sides get the same records (a kernel and its runtime API record, alternating): the native
side fabricated CUPTI buffers through the tracer's pool and decode path; the cupti-python side its
own record classes over numpy records, through perfcore's conversion to columns. On a GPU,
bench/gpu_check.py measures the same on real records. Prints ns per record and the ratio.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import time
import warnings


def native_ns_per_record(n: int, repeats: int = 5) -> float:
    from perfcore._native import native

    C = native()
    per = 1000  # records per fabricated buffer
    bufs = []
    for b in range(n // per):
        f = C._FakeActivityBuffer()
        for i in range(per // 2):
            c = b * per + i
            f.add_api(False, 1000 + c, 1001 + c, c, 7, 211)
            f.add_kernel(2000 + c, 2100 + c, 0, 7, c, "k", 1, 1)
        bufs.append(f)
    times = []
    for _ in range(repeats):
        pool = C._ActivityBuffers(buffer_bytes=1 << 20, max_buffers=len(bufs) + 1)
        for f in bufs:
            pool.deliver(f)
        t0 = time.perf_counter_ns()
        pool.decode_ready()
        out = pool.take()
        times.append((time.perf_counter_ns() - t0) / out["records"])
    return statistics.median(times)


def cupti_python_ns_per_record(n: int, repeats: int = 5) -> float:
    """Records packed back to back in one buffer, each object a view at its address: what
    cupti-python's completion callback hands over."""
    import numpy as np
    from cupti import cupti

    from perfcore.capture import cupti_python as cp

    warnings.simplefilter("ignore")
    name = ctypes.create_string_buffer(b"k")
    da, dk = cupti.activity_api_dtype, cupti.activity_kernel10_dtype
    pair = da.itemsize + dk.itemsize
    buf = np.zeros(pair * (n // 2), dtype=np.uint8)
    recs = []
    for c in range(n // 2):
        off = c * pair
        a = buf[off : off + da.itemsize].view(da)
        a["kind"], a["start"], a["end"], a["correlation_id"], a["thread_id"] = (
            int(cupti.ActivityKind.RUNTIME),
            1000 + c,
            1001 + c,
            c,
            7,
        )
        k = buf[off + da.itemsize : off + pair].view(dk)
        k["kind"], k["start"], k["end"], k["correlation_id"] = (
            int(cupti.ActivityKind.CONCURRENT_KERNEL),
            2000 + c,
            2100 + c,
            c,
        )
        k["name"] = ctypes.addressof(name)
        recs += [
            cupti.ActivityAPI.from_ptr(buf.ctypes.data + off, readonly=True),
            cupti.ActivityKernel10.from_ptr(buf.ctypes.data + off + da.itemsize, readonly=True),
        ]
    kinds = cp._Kinds(cupti)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        raw = cp.records_to_columns(recs, {}, kinds)
        times.append((time.perf_counter_ns() - t0) / raw["records"])
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    args = ap.parse_args()
    nat = native_ns_per_record(args.records)
    print(f"native decoder:        {nat:8.1f} ns per record")
    try:
        py = cupti_python_ns_per_record(min(args.records, 40_000))
    except ImportError as e:
        print(f"cupti-python: not installed ({e})")
        return
    print(f"cupti-python to columns: {py:8.1f} ns per record (object creation by CUPTI's callback not included)")
    print(f"ratio: {py / nat:.0f}x")


if __name__ == "__main__":
    main()
