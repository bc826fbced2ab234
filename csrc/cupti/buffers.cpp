// ActivityBuffers: a capped pool of aligned buffers and the decode into pending columns.
#include "buffers.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "../clock.h"

namespace perfcore {

ActivityBuffers::~ActivityBuffers() {
  for (auto* b : free_) std::free(b);
  for (auto& r : ready_) std::free(r.buffer);
}

namespace {
// The last resort where a refusal would crash libcupti and no discard buffer can be made: one
// static buffer, possibly handed out twice (its records are discarded uncounted then).
alignas(8) uint8_t emergencyBuffer[64 << 10];
}  // namespace

void ActivityBuffers::refuse(uint8_t** buffer, size_t* size) {
  std::lock_guard<std::mutex> lock(poolMutex_);
  refuseLocked(buffer, size);
}

void ActivityBuffers::refuseLocked(uint8_t** buffer, size_t* size) {
  denied_.fetch_add(1);
  *buffer = nullptr;
  *size = 0;
  if (nullSafe_.load()) return;  // CUPTI drops the records and counts them
  auto* b = static_cast<uint8_t*>(std::aligned_alloc(8, bufferBytes_));
  if (b == nullptr) {
    *buffer = emergencyBuffer;
    *size = sizeof(emergencyBuffer);
    return;
  }
  discardOut_.push_back(b);
  *buffer = b;
  *size = bufferBytes_;
}

void ActivityBuffers::reset(size_t bufferBytes, size_t maxBuffers, int64_t maxPendingRecords) {
  {
    std::lock_guard<std::mutex> lock(poolMutex_);
    // Buffers of the old size are freed; ones still out with CUPTI come back through complete().
    for (auto* b : free_) std::free(b);
    free_.clear();
    for (auto& r : ready_) std::free(r.buffer);
    ready_.clear();
    current_.clear();
    allocated_ = 0;
    bufferBytes_ = bufferBytes;
    maxBuffers_ = maxBuffers;
  }
  std::lock_guard<std::mutex> lock(decodeMutex_);
  pending_ = ActivityColumns{};
  names_ = NameTable{};
  maxPendingRecords_ = maxPendingRecords;
  records_ = pendingRecords_ = overflow_ = invalid_ = zero_ = other_ = undecodable_ = decodeNs_ = 0;
  pendingNow_.store(0, std::memory_order_relaxed);
  incomplete_ = bytesUnwalked_ = 0;
  completed_.store(0);
  denied_.store(0);
  dropped_.store(0);
  discarded_.store(0);
}

void ActivityBuffers::request(uint8_t** buffer, size_t* size) {
  std::lock_guard<std::mutex> lock(poolMutex_);
  if (!free_.empty()) {
    *buffer = free_.back();
    free_.pop_back();
    *size = bufferBytes_;
    return;
  }
  *buffer = nullptr;
  *size = 0;
  if (allocated_ >= maxBuffers_) {
    // Cap reached: CUPTI drops the records it has no room for and counts them
    // (cuptiActivityGetNumDroppedRecords), or they go to a discard buffer; stats() says so.
    refuseLocked(buffer, size);
    return;
  }
  void* p = std::aligned_alloc(8, bufferBytes_);  // CUPTI needs ACTIVITY_RECORD_ALIGNMENT (8)
  if (!p) {
    refuseLocked(buffer, size);
    return;
  }
  ++allocated_;
  current_.insert(static_cast<uint8_t*>(p));
  *buffer = static_cast<uint8_t*>(p);
  *size = bufferBytes_;
}

void ActivityBuffers::complete(uint8_t* buffer, size_t validSize) {
  completed_.fetch_add(1);
  if (!buffer) return;
  if (buffer == emergencyBuffer) return;
  std::lock_guard<std::mutex> lock(poolMutex_);
  auto it = std::find(discardOut_.begin(), discardOut_.end(), buffer);
  if (it != discardOut_.end()) {  // a refused request's records: counted as lost, never decoded
    discardOut_.erase(it);
    discarded_.fetch_add(countRecords(buffer, validSize));
    std::free(buffer);
    return;
  }
  ready_.push_back(Ready{buffer, validSize});
}

bool ActivityBuffers::hasReady() {
  std::lock_guard<std::mutex> lock(poolMutex_);
  return !ready_.empty();
}

size_t ActivityBuffers::decodeReady() {
  std::vector<Ready> ready;
  {
    std::lock_guard<std::mutex> lock(poolMutex_);
    ready.swap(ready_);
  }
  std::lock_guard<std::mutex> lock(decodeMutex_);
  const int64_t t0 = nowNs();
  for (auto& r : ready) {
    // Bounded memory: past the cap the records are counted, not kept (reported as overflow).
    if (pendingRecords_ < maxPendingRecords_) {
      const int64_t invalidBefore = pending_.invalidTimestamps;
      const int64_t zeroBefore = pending_.zeroTimestamps;
      const int64_t otherBefore = pending_.otherRecords;
      // Records before a stop are kept and counted; the stop itself is counted by cause.
      const DecodeResult d = decodeBuffer(r.buffer, r.validSize, pending_, names_, clockOffsetNs_.load());
      records_ += d.records;
      pendingRecords_ += d.records;
      pendingNow_.store(pendingRecords_, std::memory_order_relaxed);
      if (d.status != 0) {
        ++undecodable_;
        if (d.incomplete) ++incomplete_;
        bytesUnwalked_ += d.bytesLeft;
      }
      invalid_ += pending_.invalidTimestamps - invalidBefore;
      zero_ += pending_.zeroTimestamps - zeroBefore;
      other_ += pending_.otherRecords - otherBefore;
    } else {
      overflow_ += countRecords(r.buffer, r.validSize);
    }
    std::lock_guard<std::mutex> pool(poolMutex_);
    if (current_.count(r.buffer)) {
      free_.push_back(r.buffer);
    } else {
      std::free(r.buffer);  // made before the last reset(), of the old size
    }
  }
  decodeNs_ += nowNs() - t0;
  return ready.size();
}

ActivityColumns ActivityBuffers::take() {
  std::lock_guard<std::mutex> lock(decodeMutex_);
  ActivityColumns out = std::move(pending_);
  pending_ = ActivityColumns{};
  pendingRecords_ = 0;
  pendingNow_.store(0, std::memory_order_relaxed);
  out.names = names_.names();
  return out;
}

BufferStats ActivityBuffers::stats() {
  BufferStats s;
  {
    std::lock_guard<std::mutex> lock(poolMutex_);
    s.buffersAllocated = static_cast<int64_t>(allocated_);
  }
  {
    std::lock_guard<std::mutex> lock(decodeMutex_);
    s.records = records_;
    s.overflowRecords = overflow_;
    s.invalidTimestamps = invalid_;
    s.otherRecords = other_;
    s.zeroTimestamps = zero_;
    s.buffersUndecodable = undecodable_;
    s.buffersIncomplete = incomplete_;
    s.bytesUnwalked = bytesUnwalked_;
    s.decodeNs = decodeNs_;
  }
  s.buffersCompleted = completed_.load();
  s.buffersDenied = denied_.load();
  s.droppedRecords = dropped_.load();
  s.discardedRecords = discarded_.load();
  return s;
}

}  // namespace perfcore
