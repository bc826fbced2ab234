// FakeActivityBuffer: records laid out with the pinned struct versions of records.h.
#include "fake_buffer.h"

#include <cstdlib>
#include <cstring>

#include "decoder.h"
#include "records.h"

namespace perfcore {

template <class T>
T& FakeActivityBuffer::append() {
  // CUPTI records are 8-byte aligned and packed back to back.
  static_assert(sizeof(T) % 8 == 0, "CUPTI records are multiples of 8 bytes");
  const size_t off = bytes_.size();
  bytes_.resize(off + sizeof(T), 0);
  return *reinterpret_cast<T*>(bytes_.data() + off);
}

void FakeActivityBuffer::addKernel(int64_t startNs, int64_t endNs, int32_t device, int32_t stream,
                                   int32_t correlation, const std::string& name, int32_t gridX, int32_t blockX,
                                   int32_t graphId) {
  names_.push_back(std::make_unique<std::string>(name));
  auto& r = append<KernelRecord>();
  r.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  r.start = static_cast<uint64_t>(startNs);
  r.end = static_cast<uint64_t>(endNs);
  r.deviceId = static_cast<uint32_t>(device);
  r.streamId = static_cast<uint32_t>(stream);
  r.correlationId = static_cast<uint32_t>(correlation);
  r.name = names_.back()->c_str();
  r.gridX = gridX;
  r.gridY = 1;
  r.gridZ = 1;
  r.blockX = blockX;
  r.blockY = 1;
  r.blockZ = 1;
  r.registersPerThread = 32;
  r.graphId = static_cast<uint32_t>(graphId);
}

void FakeActivityBuffer::addMemcpy(int64_t startNs, int64_t endNs, int64_t bytes, int32_t copyKind, int32_t srcKind,
                                   int32_t dstKind, int32_t device, int32_t stream, int32_t correlation) {
  auto& r = append<MemcpyRecord>();
  r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  r.start = static_cast<uint64_t>(startNs);
  r.end = static_cast<uint64_t>(endNs);
  r.bytes = static_cast<uint64_t>(bytes);
  r.copyKind = static_cast<uint8_t>(copyKind);
  r.srcKind = static_cast<uint8_t>(srcKind);
  r.dstKind = static_cast<uint8_t>(dstKind);
  r.deviceId = static_cast<uint32_t>(device);
  r.streamId = static_cast<uint32_t>(stream);
  r.correlationId = static_cast<uint32_t>(correlation);
}

void FakeActivityBuffer::addMemset(int64_t startNs, int64_t endNs, int64_t bytes, int32_t value, int32_t device,
                                   int32_t stream, int32_t correlation) {
  auto& r = append<MemsetRecord>();
  r.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  r.start = static_cast<uint64_t>(startNs);
  r.end = static_cast<uint64_t>(endNs);
  r.bytes = static_cast<uint64_t>(bytes);
  r.value = static_cast<uint32_t>(value);
  r.deviceId = static_cast<uint32_t>(device);
  r.streamId = static_cast<uint32_t>(stream);
  r.correlationId = static_cast<uint32_t>(correlation);
  r.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
}

void FakeActivityBuffer::addSync(int64_t startNs, int64_t endNs, int32_t type, int32_t stream, int32_t correlation) {
  auto& r = append<SyncRecord>();
  r.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  r.start = static_cast<uint64_t>(startNs);
  r.end = static_cast<uint64_t>(endNs);
  r.type = static_cast<CUpti_ActivitySynchronizationType>(type);
  r.streamId = static_cast<uint32_t>(stream);
  r.correlationId = static_cast<uint32_t>(correlation);
}

void FakeActivityBuffer::addExternalCorrelation(int64_t externalId, int32_t correlation) {
  auto& r = append<ExternalCorrelationRecord>();
  r.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  r.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  r.externalId = static_cast<uint64_t>(externalId);
  r.correlationId = static_cast<uint32_t>(correlation);
}

void FakeActivityBuffer::addOverhead(int64_t startNs, int64_t endNs, int32_t overheadKind) {
  auto& r = append<OverheadRecord>();
  r.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  r.start = static_cast<uint64_t>(startNs);
  r.end = static_cast<uint64_t>(endNs);
  r.overheadKind = static_cast<CUpti_ActivityOverheadKind>(overheadKind);
  r.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
}

void FakeActivityBuffer::addApi(bool driver, int64_t startNs, int64_t endNs, int32_t correlation, int64_t threadId,
                                int32_t cbid) {
  auto& r = append<ApiRecord>();
  r.kind = driver ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
  r.cbid = static_cast<CUpti_CallbackId>(cbid);
  r.start = static_cast<uint64_t>(startNs);
  r.end = static_cast<uint64_t>(endNs);
  r.processId = 1;
  r.threadId = static_cast<uint32_t>(threadId);
  r.correlationId = static_cast<uint32_t>(correlation);
}

ActivityColumns FakeActivityBuffer::decode() {
  // CUPTI wants an 8-byte aligned buffer; std::vector<uint8_t> only promises alignof(max_align_t)
  // through operator new, which is 16 on x86-64, so data() is fine, but copy to be explicit.
  const size_t n = bytes_.size();
  uint8_t* buf = static_cast<uint8_t*>(std::aligned_alloc(8, n == 0 ? 8 : (n + 7) / 8 * 8));
  std::memcpy(buf, bytes_.data(), n);
  ActivityColumns out;
  NameTable names;
  try {
    decodeBuffer(buf, n, out, names, 0);
  } catch (...) {
    std::free(buf);
    throw;
  }
  std::free(buf);
  out.names = names.names();
  return out;
}

}  // namespace perfcore
