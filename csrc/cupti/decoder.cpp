// decodeBuffer: one switch over record kinds, each case copying prefix fields into columns.
#include "decoder.h"

#include <cxxabi.h>

#include <cstdlib>

#include "records.h"

namespace perfcore {

int32_t NameTable::intern(const char* name) {
  std::string key = name ? name : "<unknown>";
  auto it = ids_.find(key);
  if (it != ids_.end()) return it->second;
  std::string shown = key;
  int status = 0;
  char* demangled = abi::__cxa_demangle(key.c_str(), nullptr, nullptr, &status);
  if (status == 0 && demangled) shown = demangled;
  std::free(demangled);
  const auto id = static_cast<int32_t>(names_.size());
  names_.push_back(std::move(shown));
  ids_.emplace(std::move(key), id);
  return id;
}

DecodeResult decodeBuffer(uint8_t* buffer, size_t validBytes, ActivityColumns& out, NameTable& names,
                          int64_t clockOffsetNs) {
  DecodeResult res;
  int64_t n = 0;
  CUpti_Activity* rec = nullptr;
  const auto ts = [clockOffsetNs](uint64_t t) { return static_cast<int64_t>(t) - clockOffsetNs; };
  // CUPTI writes 0 for a timestamp it could not collect (documented for API records; seen on
  // kernels cut off at exit), and a record whose end precedes its start cannot be placed on the
  // timeline: such records are counted and left out, never given a made-up duration.
  const auto invalid = [&out](uint64_t start, uint64_t end) {
    if (start != 0 && end != 0 && end >= start) return false;
    ++out.invalidTimestamps;
    // A 0 is a timestamp CUPTI could not collect (a device buffer overrun, a kernel still
    // running when its buffer was forced out); end < start is a broken record: counted apart.
    if (start == 0 || end == 0) ++out.zeroTimestamps;
    return true;
  };
  while (true) {
    const uint8_t* before = rec ? reinterpret_cast<const uint8_t*>(rec) : buffer;
    CUptiResult st = cuptiActivityGetNextRecord(buffer, validBytes, &rec);
    if (st == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // end of buffer
    if (st != CUPTI_SUCCESS) {
      // CUPTI_ERROR_INVALID_KIND: "incomplete or invalid" record, which a forced flush hands over
      // for work still running. As kineto does, stop walking there and keep what came before:
      // the walk cannot step over a record it cannot size. What is left is counted (as bytes
      // from the start of the last record decoded: an upper bound), not guessed at.
      res.status = static_cast<int>(st);
      res.incomplete = st == CUPTI_ERROR_INVALID_KIND;
      const size_t walked = static_cast<size_t>(before - buffer);
      res.bytesLeft = validBytes > walked ? static_cast<int64_t>(validBytes - walked) : 0;
      break;
    }
    ++n;
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        auto* k = reinterpret_cast<const KernelRecord*>(rec);
        if (invalid(k->start, k->end)) break;
        auto& c = out.kernels;
        c.start_ns.push_back(ts(k->start));
        c.end_ns.push_back(ts(k->end));
        c.device_id.push_back(static_cast<int32_t>(k->deviceId));
        c.stream_id.push_back(static_cast<int32_t>(k->streamId));
        c.correlation_id.push_back(static_cast<int32_t>(k->correlationId));
        c.name_id.push_back(names.intern(k->name));
        c.grid_x.push_back(k->gridX);
        c.grid_y.push_back(k->gridY);
        c.grid_z.push_back(k->gridZ);
        c.block_x.push_back(k->blockX);
        c.block_y.push_back(k->blockY);
        c.block_z.push_back(k->blockZ);
        c.registers_per_thread.push_back(k->registersPerThread);
        c.static_shared_bytes.push_back(k->staticSharedMemory);
        c.dynamic_shared_bytes.push_back(k->dynamicSharedMemory);
        c.graph_id.push_back(static_cast<int32_t>(k->graphId));
        c.graph_node_id.push_back(static_cast<int64_t>(k->graphNodeId));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        auto* m = reinterpret_cast<const MemcpyRecord*>(rec);
        if (invalid(m->start, m->end)) break;
        auto& c = out.memcpy;
        c.start_ns.push_back(ts(m->start));
        c.end_ns.push_back(ts(m->end));
        c.size_bytes.push_back(static_cast<int64_t>(m->bytes));
        c.device_id.push_back(static_cast<int32_t>(m->deviceId));
        c.stream_id.push_back(static_cast<int32_t>(m->streamId));
        c.correlation_id.push_back(static_cast<int32_t>(m->correlationId));
        c.copy_kind.push_back(m->copyKind);
        c.src_kind.push_back(m->srcKind);
        c.dst_kind.push_back(m->dstKind);
        c.flags.push_back(m->flags);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        auto* m = reinterpret_cast<const MemsetRecord*>(rec);
        if (invalid(m->start, m->end)) break;
        auto& c = out.memset;
        c.start_ns.push_back(ts(m->start));
        c.end_ns.push_back(ts(m->end));
        c.size_bytes.push_back(static_cast<int64_t>(m->bytes));
        c.device_id.push_back(static_cast<int32_t>(m->deviceId));
        c.stream_id.push_back(static_cast<int32_t>(m->streamId));
        c.correlation_id.push_back(static_cast<int32_t>(m->correlationId));
        c.value.push_back(static_cast<int32_t>(m->value));
        c.memory_kind.push_back(m->memoryKind);
        break;
      }
      case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        auto* s = reinterpret_cast<const SyncRecord*>(rec);
        if (invalid(s->start, s->end)) break;
        auto& c = out.sync;
        c.start_ns.push_back(ts(s->start));
        c.end_ns.push_back(ts(s->end));
        c.sync_type.push_back(static_cast<int32_t>(s->type));
        c.context_id.push_back(static_cast<int32_t>(s->contextId));
        c.stream_id.push_back(static_cast<int32_t>(s->streamId));
        c.correlation_id.push_back(static_cast<int32_t>(s->correlationId));
        break;
      }
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        auto* e = reinterpret_cast<const ExternalCorrelationRecord*>(rec);
        auto& c = out.external;
        c.external_kind.push_back(static_cast<int32_t>(e->externalKind));
        c.external_id.push_back(static_cast<int64_t>(e->externalId));
        c.correlation_id.push_back(static_cast<int32_t>(e->correlationId));
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        auto* a = reinterpret_cast<const ApiRecord*>(rec);
        if (invalid(a->start, a->end)) break;
        auto& c = out.api;
        c.start_ns.push_back(ts(a->start));
        c.end_ns.push_back(ts(a->end));
        c.thread_id.push_back(static_cast<int64_t>(a->threadId));
        c.correlation_id.push_back(static_cast<int32_t>(a->correlationId));
        c.cbid.push_back(static_cast<int32_t>(a->cbid));
        c.driver.push_back(rec->kind == CUPTI_ACTIVITY_KIND_DRIVER ? 1 : 0);
        break;
      }
      case CUPTI_ACTIVITY_KIND_OVERHEAD: {
        auto* o = reinterpret_cast<const OverheadRecord*>(rec);
        if (invalid(o->start, o->end)) break;
        auto& c = out.overhead;
        c.start_ns.push_back(ts(o->start));
        c.end_ns.push_back(ts(o->end));
        c.overhead_kind.push_back(static_cast<int32_t>(o->overheadKind));
        c.object_kind.push_back(static_cast<int32_t>(o->objectKind));
        break;
      }
      default:
        ++out.otherRecords;
        break;
    }
  }
  out.records += n;
  res.records = n;
  return res;
}

int64_t countRecords(uint8_t* buffer, size_t validBytes) {
  int64_t n = 0;
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, validBytes, &rec) == CUPTI_SUCCESS) ++n;
  return n;
}

}  // namespace perfcore
