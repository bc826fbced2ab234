"""The cupti-python backend on CPU: its record-to-columns conversion on cupti-python's own record
classes (built over numpy records of cupti-python's dtypes, as CUPTI's buffers would hold them),
checked against the native decoder on the same records; and its clean refusal without a GPU."""
from __future__ import annotations

import ctypes
import re
import sys

import numpy as np
import pytest

cupti_mod = pytest.importorskip("cupti.cupti", reason="cupti-python is not installed (scripts/setup.sh installs the release that fits torch)")

from perfcore.capture import cupti_python as cp  # noqa: E402
from perfcore.errors import CuptiError, DeviceUnavailable, PerfcoreError  # noqa: E402

K = cupti_mod.ActivityKind
KINDS = cp._Kinds(cupti_mod)
_NAMES = []  # C strings the kernel records point at; CUPTI keeps its own alive the same way


# Records made outside a CUPTI buffer are unknown to cupti-python's buffer manager, which
# complains (KeyError, ignored) when they are freed: an artefact of building them by hand.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def newest(family):
    """(class, dtype) of this cupti-python's newest record struct of a family: the names differ by
    release (12.8: ActivityKernel9 with c_upti_activity_kernel9_dtype; 13.x: ActivityKernel10 with
    activity_kernel10_dtype)."""
    found = [(c, d) for c, d in KINDS.dtype.items() if re.fullmatch(f"Activity{family}\\d*", c.__name__)]
    assert found, f"this cupti-python has no Activity{family} record class perfcore reads"
    return max(found, key=lambda cd: int(re.sub(r"\D", "", cd[0].__name__) or 0))


KERNEL, MEMCPY = newest("Kernel"), newest("Memcpy")
API, EXTERNAL = newest("API"), newest("ExternalCorrelation")


def record(cls, dtype, **fields):
    arr = np.zeros(1, dtype=dtype)
    for k, v in fields.items():
        arr[k] = v
    _NAMES.append(arr)  # the record reads from this memory
    return cls.from_data(arr)


def kernel(start, end, corr, name, stream=7, graph_id=0, graph_node_id=0):
    s = ctypes.create_string_buffer(name.encode())
    _NAMES.append(s)
    return record(*KERNEL, kind=int(K.CONCURRENT_KERNEL),
                  start=start, end=end, correlation_id=corr, stream_id=stream, device_id=0, grid_x=4, grid_y=1,
                  grid_z=1, block_x=128, block_y=1, block_z=1, registers_per_thread=32, graph_id=graph_id,
                  graph_node_id=graph_node_id, name=ctypes.addressof(s))


def api(start, end, corr, thread, cbid=211, driver=False):
    return record(*API, kind=int(K.DRIVER if driver else K.RUNTIME),
                  start=start, end=end, correlation_id=corr, thread_id=thread, cbid=cbid)


def external(corr, phase):
    return record(*EXTERNAL, kind=int(K.EXTERNAL_CORRELATION), external_kind=3, external_id=phase, correlation_id=corr)


def memcpy(start, end, size, copy_kind, src, dst, corr):
    return record(*MEMCPY, kind=int(K.MEMCPY), start=start,
                  end=end, bytes=size, copy_kind=copy_kind, src_kind=src, dst_kind=dst, correlation_id=corr,
                  stream_id=7)


@pytest.mark.cupti  # compares with the native decoder, built in CUDA mode only
def test_records_become_the_native_tables(C):
    # The order CUPTI documents for a tagged launch: the EXTERNAL_CORRELATION record precedes the
    # API record it annotates (host buffer); the kernel comes from a device buffer, here later.
    recs = [external(11, 2), api(100, 104, 11, 4242), memcpy(120, 130, 4096, 1, 2, 3, 12),
            kernel(200, 260, 11, "_Z4spinv"), kernel(300, 301, 13, "plain")]
    raw = cp.records_to_columns(recs, {}, KINDS)
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
    raw = cp.records_to_columns(recs, {}, KINDS)
    assert raw["invalid_timestamps"] == 3 and list(raw["kernels"]["correlation_id"]) == [3]


def test_names_keep_their_ids_across_drains():
    names: dict[str, int] = {}
    kinds = KINDS
    a = cp.records_to_columns([kernel(1, 2, 1, "x"), kernel(3, 4, 2, "y")], names, kinds)
    b = cp.records_to_columns([kernel(5, 6, 3, "y"), kernel(7, 8, 4, "z")], names, kinds)
    assert [b["names"][i] for i in a["kernels"]["name_id"]] == ["x", "y"]
    assert [b["names"][i] for i in b["kernels"]["name_id"]] == ["y", "z"]


def test_clock_offset_moves_records_onto_the_perfcore_clock():
    raw = cp.records_to_columns([kernel(1000, 1500, 1, "k")], {}, KINDS, clock_offset_ns=400)
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
    with pytest.raises(PerfcoreError, match=r'pip install "cupti-python==\d+\.\d+\.\*"|no cupti-python release'):
        cp.load_cupti()


@pytest.mark.cupti  # compares with the native decoder, built in CUDA mode only
def test_records_read_from_one_cupti_buffer(C):
    # What the completion callback hands over: records packed back to back in one buffer, each
    # object a view at its address. They are read as arrays over that span, not field by field.
    dts = [EXTERNAL[1], API[1], KERNEL[1], KERNEL[1]]
    buf = np.zeros(sum(d.itemsize for d in dts), dtype=np.uint8)
    _NAMES.append(buf)
    name = ctypes.create_string_buffer(b"_Z4spinv")
    _NAMES.append(name)
    offs = np.cumsum([0] + [d.itemsize for d in dts[:-1]])
    fields = [dict(kind=int(K.EXTERNAL_CORRELATION), external_kind=3, external_id=2, correlation_id=11),
              dict(kind=int(K.RUNTIME), start=100, end=104, correlation_id=11, thread_id=4242, cbid=211),
              dict(kind=int(K.CONCURRENT_KERNEL), start=200, end=260, correlation_id=11, name=ctypes.addressof(name)),
              dict(kind=int(K.CONCURRENT_KERNEL), start=0, end=300, correlation_id=12, name=ctypes.addressof(name))]
    classes = [EXTERNAL[0], API[0], KERNEL[0], KERNEL[0]]
    recs = []
    for off, dt, f, cls in zip(offs, dts, fields, classes):
        view = buf[off:off + dt.itemsize].view(dt)
        for k, v in f.items():
            view[k] = v
        recs.append(cls.from_ptr(buf.ctypes.data + int(off), readonly=True))
    raw = cp.records_to_columns(recs, {}, KINDS, clock_offset_ns=100)
    assert raw["records"] == 4 and raw["invalid_timestamps"] == 1
    assert list(raw["kernels"]["start_ns"]) == [100] and raw["names"] == ["_Z4spinv"]
    assert list(raw["api"]["thread_id"]) == [4242] and list(raw["external_correlation"]["external_id"]) == [2]


def test_this_release_reads_every_kind_perfcore_needs():
    assert KINDS.missing() == []
    # Each class perfcore reads has a dtype the size of its struct, in 8-byte words as CUPTI packs them.
    assert all(d.itemsize % 8 == 0 and "kind" in d.names for d in KINDS.dtype.values())


def test_a_backend_that_decodes_nothing_says_so():
    stats = {"records": 40, "other_records": 40, "invalid_timestamps": 0}
    msg = cp.decoded_nothing(stats, "12.8")
    assert stats["decoded_records"] == 0 and stats["warning"] == msg
    assert "delivered 40 records and perfcore decoded none" in msg and 'pip install "cupti-python==12.8.*"' in msg
    ok = {"records": 40, "other_records": 3, "invalid_timestamps": 1}
    assert cp.decoded_nothing(ok, "12.8") == "" and ok["decoded_records"] == 36 and "warning" not in ok
    assert cp.decoded_nothing({"records": 0, "other_records": 0, "invalid_timestamps": 0}, "12.8") == ""


def test_stop_keeps_concurrent_kernel_on_where_disabling_it_hangs(monkeypatch):
    # CUDA 13.0 GA's CUPTI may deadlock when CONCURRENT_KERNEL is disabled; the native tracer
    # keeps the kind on there, and this backend disabled every kind at stop regardless.
    assert not cp.disable_kernel_safe(130000, "13.0") and cp.disable_kernel_safe(130001, "13.0")
    assert cp.disable_kernel_safe(28, "12.9") and not cp.disable_kernel_safe(None, "13.0")
    assert cp.disable_kernel_safe(None, "12.8")

    class FakeCupti:
        ActivityKind = K

        def __init__(self):
            self.disabled = []

        def activity_disable(self, kind):
            self.disabled.append(kind)

        def activity_flush_all(self, flag):
            pass

        def activity_get_num_dropped_records(self, *a):
            pass

        def get_timestamp(self):
            return 0

        def unsubscribe(self, sub):
            pass

    for version, kept in ((130000, True), (130001, False)):
        t = cp.CuptiPythonTracer()
        fake = FakeCupti()
        t._cupti, t._active, t._enabled = fake, True, [K.CONCURRENT_KERNEL, K.MEMCPY]
        monkeypatch.setattr(cp, "loaded_cupti_version", lambda: version)
        monkeypatch.setattr(cp, "_measure_offset", lambda: None, raising=False)
        monkeypatch.setattr(t, "_measure_offset", lambda: None)
        t.stop()
        assert (K.CONCURRENT_KERNEL not in fake.disabled) is kept and K.MEMCPY in fake.disabled
        assert t.stats["concurrent_kernel_left_on"] is kept
