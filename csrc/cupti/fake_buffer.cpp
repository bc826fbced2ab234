// FakeActivityBuffer: records filled through the pinned struct versions of records.h, each padded
// to the size the loaded libcupti strides by.
#include "fake_buffer.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "decoder.h"
#include "records.h"

namespace perfcore {

size_t loadedRecordBytes(int kind) {
  // cuptiActivityGetNextRecord steps over each record by the size of its library's newest struct
  // of that kind (12.4 and 12.6 write Overhead3 where the pinned type is Overhead; 12.8 also
  // Memcpy6 and Synchronization2; 13.x Kernel10+), whatever the headers perfcore compiled with.
  // Measured with the library itself, which needs no device: a record of `kind` first, a small
  // valid record kind in every 8-byte slot after it, and the second record it returns sits at
  // the first one's size.
  static std::mutex mu;
  static std::unordered_map<int, size_t> sizes;
  std::lock_guard<std::mutex> lock(mu);
  auto it = sizes.find(kind);
  if (it != sizes.end()) return it->second;
  constexpr size_t kBytes = 8192;
  auto* buf = static_cast<uint8_t*>(std::aligned_alloc(8, kBytes));
  std::memset(buf, 0, kBytes);
  for (size_t off = 0; off < kBytes; off += 8) {
    const uint32_t filler = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    std::memcpy(buf + off, &filler, sizeof(filler));
  }
  const auto k = static_cast<uint32_t>(kind);
  std::memcpy(buf, &k, sizeof(k));
  CUpti_Activity* rec = nullptr;
  size_t stride = 0;
  if (cuptiActivityGetNextRecord(buf, kBytes, &rec) == CUPTI_SUCCESS &&
      cuptiActivityGetNextRecord(buf, kBytes, &rec) == CUPTI_SUCCESS)
    stride = static_cast<size_t>(reinterpret_cast<uint8_t*>(rec) - buf);
  std::free(buf);
  sizes.emplace(kind, stride);
  return stride;
}

template <class T>
void FakeActivityBuffer::append(const T& record) {
  // CUPTI records are 8-byte aligned and packed back to back. The fields set here all lie in the
  // prefix every struct version shares, so a shorter or longer slot keeps them where CUPTI does.
  static_assert(sizeof(T) % 8 == 0, "CUPTI records are multiples of 8 bytes");
  size_t slot = loadedRecordBytes(static_cast<int>(record.kind));
  if (slot == 0) slot = sizeof(T);  // a kind this library does not know: it will say so when decoding
  const size_t off = bytes_.size();
  bytes_.resize(off + slot, 0);
  std::memcpy(bytes_.data() + off, &record, slot < sizeof(T) ? slot : sizeof(T));
}

void FakeActivityBuffer::addKernel(int64_t startNs, int64_t endNs, int32_t device, int32_t stream,
                                   int32_t correlation, const std::string& name, int32_t gridX, int32_t blockX,
                                   int32_t graphId, int64_t graphNodeId) {
  names_.push_back(std::make_unique<std::string>(name));
  KernelRecord r{};
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
  r.graphNodeId = static_cast<uint64_t>(graphNodeId);
  append(r);
}

void FakeActivityBuffer::addMemcpy(int64_t startNs, int64_t endNs, int64_t bytes, int32_t copyKind, int32_t srcKind,
                                   int32_t dstKind, int32_t device, int32_t stream, int32_t correlation) {
  MemcpyRecord r{};
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
  append(r);
}

void FakeActivityBuffer::addMemset(int64_t startNs, int64_t endNs, int64_t bytes, int32_t value, int32_t device,
                                   int32_t stream, int32_t correlation) {
  MemsetRecord r{};
  r.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  r.start = static_cast<uint64_t>(startNs);
  r.end = static_cast<uint64_t>(endNs);
  r.bytes = static_cast<uint64_t>(bytes);
  r.value = static_cast<uint32_t>(value);
  r.deviceId = static_cast<uint32_t>(device);
  r.streamId = static_cast<uint32_t>(stream);
  r.correlationId = static_cast<uint32_t>(correlation);
  r.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  append(r);
}

void FakeActivityBuffer::addSync(int64_t startNs, int64_t endNs, int32_t type, int32_t stream, int32_t correlation) {
  SyncRecord r{};
  r.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  r.start = static_cast<uint64_t>(startNs);
  r.end = static_cast<uint64_t>(endNs);
  r.type = static_cast<CUpti_ActivitySynchronizationType>(type);
  r.streamId = static_cast<uint32_t>(stream);
  r.correlationId = static_cast<uint32_t>(correlation);
  append(r);
}

void FakeActivityBuffer::addExternalCorrelation(int64_t externalId, int32_t correlation) {
  ExternalCorrelationRecord r{};
  r.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  r.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  r.externalId = static_cast<uint64_t>(externalId);
  r.correlationId = static_cast<uint32_t>(correlation);
  append(r);
}

void FakeActivityBuffer::addOverhead(int64_t startNs, int64_t endNs, int32_t overheadKind) {
  OverheadRecord r{};
  r.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  r.start = static_cast<uint64_t>(startNs);
  r.end = static_cast<uint64_t>(endNs);
  r.overheadKind = static_cast<CUpti_ActivityOverheadKind>(overheadKind);
  r.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  append(r);
}

void FakeActivityBuffer::addApi(bool driver, int64_t startNs, int64_t endNs, int32_t correlation, int64_t threadId,
                                int32_t cbid) {
  ApiRecord r{};
  r.kind = driver ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
  r.cbid = static_cast<CUpti_CallbackId>(cbid);
  r.start = static_cast<uint64_t>(startNs);
  r.end = static_cast<uint64_t>(endNs);
  r.processId = 1;
  r.threadId = static_cast<uint32_t>(threadId);
  r.correlationId = static_cast<uint32_t>(correlation);
  append(r);
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
