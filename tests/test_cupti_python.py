"""The cupti-python backend on CPU: its record-to-columns conversion on cupti-python's own record
classes (built over numpy records of cupti-python's dtypes, as CUPTI's buffers would hold them),
checked against the native decoder on the same records; and its clean refusal without a GPU."""
from __future__ import annotations

import ctypes
import sys

import numpy as np
import pytest

cupti_mod = pytest.importorskip("cupti.cupti", reason="cupti-python is not installed (pip install 'perfcore[cupti]')")

from perfcore.capture import cupti_python as cp  # noqa: E402
from perfcore.errors import CuptiError, DeviceUnavailable, PerfcoreError  # noqa: E402

K = cupti_mod.ActivityKind
_NAMES = []  # C strings the kernel records point at; CUPTI keeps its own alive the same way


# Records made outside a CUPTI buffer are unknown to cupti-python's buffer manager, which
# complains (KeyError, ignored) when they are freed: an artefact of building them by hand.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def record(cls, dtype, **fields):
    arr = np.zeros(1, dtype=dtype)
    for k, v in fields.items():
        arr[k] = v
    _NAMES.append(arr)  # the record reads from this memory
    return cls.from_data(arr)


def kernel(start, end, corr, name, stream=7, graph_id=0):
    s = ctypes.create_string_buffer(name.encode())
    _NAMES.append(s)
    return record(cupti_mod.ActivityKernel10, cupti_mod.activity_kernel10_dtype, kind=int(K.CONCURRENT_KERNEL),
                  start=start, end=end, correlation_id=corr, stream_id=stream, device_id=0, grid_x=4, grid_y=1,
                  grid_z=1, block_x=128, block_y=1, block_z=1, registers_per_thread=32, graph_id=graph_id,
                  name=ctypes.addressof(s))


def api(start, end, corr, thread, cbid=211, driver=False):
    return record(cupti_mod.ActivityAPI, cupti_mod.activity_api_dtype, kind=int(K.DRIVER if driver else K.RUNTIME),
                  start=start, end=end, correlation_id=corr, thread_id=thread, cbid=cbid)


def external(corr, phase):
    return record(cupti_mod.ActivityExternalCorrelation, cupti_mod.activity_external_correlation_dtype,
                  kind=int(K.EXTERNAL_CORRELATION), external_kind=3, external_id=phase, correlation_id=corr)


def memcpy(start, end, size, copy_kind, src, dst, corr):
    return record(cupti_mod.ActivityMemcpy6, cupti_mod.activity_memcpy6_dtype, kind=int(K.MEMCPY), start=start,
                  end=end, bytes=size, copy_kind=copy_kind, src_kind=src, dst_kind=dst, correlation_id=corr,
                  stream_id=7)


def test_records_become_the_native_tables(C):
    # The order CUPTI documents for a tagged launch: the EXTERNAL_CORRELATION record precedes the
    # API record it annotates (host buffer); the kernel comes from a device buffer, here later.
    recs = [external(11, 2), api(100, 104, 11, 4242), memcpy(120, 130, 4096, 1, 2, 3, 12),
            kernel(200, 260, 11, "_Z4spinv"), kernel(300, 301, 13, "plain")]
    raw = cp.records_to_columns(recs, {}, cp._Kinds(cupti_mod))
    assert raw["records"] == 5 and raw["other_records"] == 0 and raw["invalid_timestamps"] == 0
    assert list(raw["kernels"]["correlation_id"]) == [11, 13]
    assert [raw["names"][i] for i in raw["kernels"]["name_id"]] == ["_Z4spinv", "plain"]
    assert list(raw["api"]["thread_id"]) == [4242] and list(raw["api"]["driver"]) == [0]
    assert list(raw["external_correlation"]["external_id"]) == [2]
    assert list(raw["memcpy"]["copy_kind"]) == [1] and list(raw["memcpy"]["src_kind"]) == [2]

    # The native decoder on the same records gives the same columns, names and dtypes, so parts
    # from the two backends concatenate and compare.
    buf = C._FakeActivityBuffer()
    buf.add_external_correlation(2, 11)
    buf.add_api(False, 100, 104, 11, 4242, 211)
    buf.add_memcpy(120, 130, 4096, 1, 2, 3, 0, 7, 12)
    buf.add_kernel(200, 260, 0, 7, 11, "_Z4spinv", 4, 128)
    buf.add_kernel(300, 301, 0, 7, 13, "plain", 4, 128)
    native = buf.decode()
    for table in ("kernels", "api", "external_correlation", "memcpy"):
        assert set(raw[table]) == set(native[table]), table
        for col, arr in native[table].items():
            assert raw[table][col].dtype == arr.dtype, f"{table}.{col}"
            if col not in ("name_id", "flags", "device_id"):
                assert list(raw[table][col]) == list(arr), f"{table}.{col}"


def test_invalid_timestamps_are_dropped_and_counted():
    recs = [kernel(0, 10, 1, "a"), kernel(50, 40, 2, "b"), kernel(60, 70, 3, "c"), api(0, 0, 4, 1)]
    raw = cp.records_to_columns(recs, {}, cp._Kinds(cupti_mod))
    assert raw["invalid_timestamps"] == 3 and list(raw["kernels"]["correlation_id"]) == [3]


def test_names_keep_their_ids_across_drains():
    names: dict[str, int] = {}
    kinds = cp._Kinds(cupti_mod)
    a = cp.records_to_columns([kernel(1, 2, 1, "x"), kernel(3, 4, 2, "y")], names, kinds)
    b = cp.records_to_columns([kernel(5, 6, 3, "y"), kernel(7, 8, 4, "z")], names, kinds)
    assert [b["names"][i] for i in a["kernels"]["name_id"]] == ["x", "y"]
    assert [b["names"][i] for i in b["kernels"]["name_id"]] == ["y", "z"]


def test_clock_offset_moves_records_onto_the_perfcore_clock():
    raw = cp.records_to_columns([kernel(1000, 1500, 1, "k")], {}, cp._Kinds(cupti_mod), clock_offset_ns=400)
    assert list(raw["kernels"]["start_ns"]) == [600] and list(raw["kernels"]["end_ns"]) == [1100]


def test_version_rules():
    assert cp.check_versions("13.0.1", "13.0", "13.0.85") is None
    assert "CUDA 12" in cp.check_versions("12.8.0", "13.0", "13.0.85")
    assert "newer than the CUPTI torch loads" in cp.check_versions("13.4.0", "13.0", "13.0.85")
    assert "CPU build" in cp.check_versions("13.0.1", None, None)


def test_without_a_gpu_start_refuses_in_one_line():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the refusal path is not taken")
    t = cp.CuptiPythonTracer()
    with pytest.raises((CuptiError, DeviceUnavailable)) as ei:
        t.start()
    assert "\n" not in str(ei.value) and str(ei.value)
    assert not t.active


def test_missing_package_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupti", None)
    with pytest.raises(PerfcoreError, match=r"perfcore\[cupti\]"):
        cp.load_cupti()


def test_records_read_from_one_cupti_buffer(C):
    # What the completion callback hands over: records packed back to back in one buffer, each
    # object a view at its address. They are read as arrays over that span, not field by field.
    dts = [cupti_mod.activity_external_correlation_dtype, cupti_mod.activity_api_dtype,
           cupti_mod.activity_kernel10_dtype, cupti_mod.activity_kernel10_dtype]
    buf = np.zeros(sum(d.itemsize for d in dts), dtype=np.uint8)
    _NAMES.append(buf)
    name = ctypes.create_string_buffer(b"_Z4spinv")
    _NAMES.append(name)
    offs = np.cumsum([0] + [d.itemsize for d in dts[:-1]])
    fields = [dict(kind=int(K.EXTERNAL_CORRELATION), external_kind=3, external_id=2, correlation_id=11),
              dict(kind=int(K.RUNTIME), start=100, end=104, correlation_id=11, thread_id=4242, cbid=211),
              dict(kind=int(K.CONCURRENT_KERNEL), start=200, end=260, correlation_id=11, name=ctypes.addressof(name)),
              dict(kind=int(K.CONCURRENT_KERNEL), start=0, end=300, correlation_id=12, name=ctypes.addressof(name))]
    classes = [cupti_mod.ActivityExternalCorrelation, cupti_mod.ActivityAPI, cupti_mod.ActivityKernel10,
               cupti_mod.ActivityKernel10]
    recs = []
    for off, dt, f, cls in zip(offs, dts, fields, classes):
        view = buf[off:off + dt.itemsize].view(dt)
        for k, v in f.items():
            view[k] = v
        recs.append(cls.from_ptr(buf.ctypes.data + int(off), readonly=True))
    raw = cp.records_to_columns(recs, {}, cp._Kinds(cupti_mod), clock_offset_ns=100)
    assert raw["records"] == 4 and raw["invalid_timestamps"] == 1
    assert list(raw["kernels"]["start_ns"]) == [100] and raw["names"] == ["_Z4spinv"]
    assert list(raw["api"]["thread_id"]) == [4242] and list(raw["external_correlation"]["external_id"]) == [2]
