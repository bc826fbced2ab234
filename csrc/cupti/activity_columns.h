// Decoded CUPTI activity as struct-of-arrays tables, one per record kind.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace perfcore {

struct KernelColumns {
  std::vector<int64_t> start_ns, end_ns;
  std::vector<int32_t> device_id, stream_id, correlation_id, name_id;
  std::vector<int32_t> grid_x, grid_y, grid_z, block_x, block_y, block_z;
  std::vector<int32_t> registers_per_thread, static_shared_bytes, dynamic_shared_bytes;
  // The CUDA graph the kernel ran in (0: not a graph launch). Every kernel of one cudaGraphLaunch
  // carries that launch's correlation id.
  std::vector<int32_t> graph_id;
  // The graph node the kernel ran as (0: not a graph launch): each node runs once per replay, so
  // a node seen again starts the graph's next replay, whatever the correlation ids say.
  std::vector<int64_t> graph_node_id;

  template <class F>
  void visit(F&& f) {
    f("start_ns", start_ns);
    f("end_ns", end_ns);
    f("device_id", device_id);
    f("stream_id", stream_id);
    f("correlation_id", correlation_id);
    f("name_id", name_id);
    f("grid_x", grid_x);
    f("grid_y", grid_y);
    f("grid_z", grid_z);
    f("block_x", block_x);
    f("block_y", block_y);
    f("block_z", block_z);
    f("registers_per_thread", registers_per_thread);
    f("static_shared_bytes", static_shared_bytes);
    f("dynamic_shared_bytes", dynamic_shared_bytes);
    f("graph_id", graph_id);
    f("graph_node_id", graph_node_id);
  }
};

struct MemcpyColumns {
  std::vector<int64_t> start_ns, end_ns, size_bytes;
  std::vector<int32_t> device_id, stream_id, correlation_id;
  // CUpti_ActivityMemcpyKind (1 = HtoD, 2 = DtoH, 8 = DtoD, ...) and CUpti_ActivityMemoryKind
  // (1 = pageable, 2 = pinned, 3 = device, ...): pageable is what pin_memory=True removes.
  std::vector<uint8_t> copy_kind, src_kind, dst_kind, flags;

  template <class F>
  void visit(F&& f) {
    f("start_ns", start_ns);
    f("end_ns", end_ns);
    f("size_bytes", size_bytes);
    f("device_id", device_id);
    f("stream_id", stream_id);
    f("correlation_id", correlation_id);
    f("copy_kind", copy_kind);
    f("src_kind", src_kind);
    f("dst_kind", dst_kind);
    f("flags", flags);
  }
};

struct MemsetColumns {
  std::vector<int64_t> start_ns, end_ns, size_bytes;
  std::vector<int32_t> device_id, stream_id, correlation_id, value;
  std::vector<uint16_t> memory_kind;

  template <class F>
  void visit(F&& f) {
    f("start_ns", start_ns);
    f("end_ns", end_ns);
    f("size_bytes", size_bytes);
    f("device_id", device_id);
    f("stream_id", stream_id);
    f("correlation_id", correlation_id);
    f("value", value);
    f("memory_kind", memory_kind);
  }
};

struct SyncColumns {
  std::vector<int64_t> start_ns, end_ns;
  std::vector<int32_t> sync_type, context_id, stream_id, correlation_id;

  template <class F>
  void visit(F&& f) {
    f("start_ns", start_ns);
    f("end_ns", end_ns);
    f("sync_type", sync_type);
    f("context_id", context_id);
    f("stream_id", stream_id);
    f("correlation_id", correlation_id);
  }
};

struct ExternalCorrelationColumns {
  std::vector<int32_t> external_kind, correlation_id;
  std::vector<int64_t> external_id;

  template <class F>
  void visit(F&& f) {
    f("external_kind", external_kind);
    f("external_id", external_id);
    f("correlation_id", correlation_id);
  }
};

// Runtime and driver API calls (CUPTI_ACTIVITY_KIND_RUNTIME / _DRIVER): when and on which thread
// each launch was made, keyed by the correlation id its kernels and copies carry.
struct ApiColumns {
  std::vector<int64_t> start_ns, end_ns, thread_id;
  std::vector<int32_t> correlation_id, cbid;
  std::vector<uint8_t> driver;  // 1: driver API (cuLaunchKernel, e.g. Triton), 0: runtime API

  template <class F>
  void visit(F&& f) {
    f("start_ns", start_ns);
    f("end_ns", end_ns);
    f("thread_id", thread_id);
    f("correlation_id", correlation_id);
    f("cbid", cbid);
    f("driver", driver);
  }
};

struct OverheadColumns {
  std::vector<int64_t> start_ns, end_ns;
  std::vector<int32_t> overhead_kind, object_kind;

  template <class F>
  void visit(F&& f) {
    f("start_ns", start_ns);
    f("end_ns", end_ns);
    f("overhead_kind", overhead_kind);
    f("object_kind", object_kind);
  }
};

// Everything one collect() returns. Kernel names are interned: name_id indexes `names`.
struct ActivityColumns {
  KernelColumns kernels;
  MemcpyColumns memcpy;
  MemsetColumns memset;
  SyncColumns sync;
  ExternalCorrelationColumns external;
  OverheadColumns overhead;
  ApiColumns api;
  std::vector<std::string> names;  // the whole table so far, not only new names
  int64_t records = 0;
  int64_t otherRecords = 0;       // kinds perfcore does not decode
  int64_t invalidTimestamps = 0;  // records dropped for start/end of 0 or end < start
  int64_t zeroTimestamps = 0;     // ... of which a timestamp was 0 (CUPTI could not collect it)
};

}  // namespace perfcore
