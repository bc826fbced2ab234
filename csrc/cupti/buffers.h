// The activity buffer pool and its decode side, apart from CUPTI's lifecycle so it can be driven
// by fabricated buffers in tests (as kineto's CuptiActivityBuffer tests do).
//
// Buffers move one way: free -> handed to CUPTI (request) -> ready (complete) -> decoded into
// the pending columns -> free again. Decoding runs on one thread at a time (the tracer's drain
// thread), never inside CUPTI's callbacks, which only take or queue a buffer.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "activity_columns.h"
#include "decoder.h"

namespace perfcore {

struct BufferStats {
  int64_t buffersAllocated = 0;  // distinct buffers made (the pool's high-water mark)
  int64_t buffersCompleted = 0;  // buffers CUPTI handed back
  int64_t buffersDenied = 0;     // requests refused at the pool cap (CUPTI then drops records)
  int64_t records = 0;           // decoded into columns
  int64_t droppedRecords = 0;    // CUPTI's own count, summed (it resets on every read)
  int64_t overflowRecords = 0;   // decoded columns were at their cap: counted, not kept
  int64_t invalidTimestamps = 0;
  int64_t otherRecords = 0;
  int64_t zeroTimestamps = 0;      // of invalidTimestamps: a start or end CUPTI could not collect
  int64_t buffersUndecodable = 0;  // buffers whose walk stopped at a record the loaded libcupti refused
  int64_t buffersIncomplete = 0;   // ... of which at an incomplete record (work still running at a forced flush)
  int64_t bytesUnwalked = 0;       // at most this many bytes after those stops were not decoded
  int64_t decodeNs = 0;            // time spent decoding, for the drain cost per record
  int64_t discardedRecords = 0;    // in buffers handed out past the cap where a refusal is unsafe: counted, not kept
};

class ActivityBuffers {
 public:
  ActivityBuffers() = default;
  ~ActivityBuffers();
  ActivityBuffers(const ActivityBuffers&) = delete;
  ActivityBuffers& operator=(const ActivityBuffers&) = delete;

  // Sets the sizes for a new run and forgets the last one's columns, names and counts.
  void reset(size_t bufferBytes, size_t maxBuffers, int64_t maxPendingRecords);
  void setClockOffset(int64_t ns) { clockOffsetNs_.store(ns); }
  // Whether CUPTI takes a refused (null) buffer: from API 27 (CUDA 12.9) it drops and counts
  // the records; before, it crashes inside libcupti (kineto #1038, #1275). Where it does not,
  // a refusal hands out a buffer whose records are counted and discarded instead.
  void setNullSafe(bool safe) { nullSafe_.store(safe); }
  // The buffer for a request that is refused (the tracer stopped): null where that is safe, else
  // a discard buffer. request() refuses the same way at the pool's cap or a failed allocation.
  void refuse(uint8_t** buffer, size_t* size);

  // CUPTI side (any thread, never blocks on decoding). request gives nullptr/0 at the cap.
  void request(uint8_t** buffer, size_t* size);
  void complete(uint8_t* buffer, size_t validSize);
  void addDropped(int64_t n) { dropped_.fetch_add(n); }
  bool hasReady();

  // Decode side: decodes every ready buffer into the pending columns and frees it for reuse.
  // Returns the buffers decoded. One caller at a time.
  size_t decodeReady();
  // The pending columns (with the whole name table), emptied.
  ActivityColumns take();
  BufferStats stats();
  // Records decoded and not yet taken, as a share of the cap past which they are counted and
  // dropped: read without a lock (the training thread asks between steps), so a run can take
  // them by volume before the cap, not only at its settles.
  double pendingShare() const {
    return maxPendingRecords_ > 0 ? static_cast<double>(pendingNow_.load(std::memory_order_relaxed)) /
                                        static_cast<double>(maxPendingRecords_)
                                  : 0.0;
  }

 private:
  std::mutex poolMutex_;  // guards free_, ready_, allocated_; held only to move pointers
  std::vector<uint8_t*> free_;
  struct Ready {
    uint8_t* buffer;
    size_t validSize;
  };
  std::vector<Ready> ready_;
  size_t allocated_ = 0;
  size_t bufferBytes_ = 1 << 20;
  size_t maxBuffers_ = 1;

  std::mutex decodeMutex_;  // guards pending_, names_ and the counts below
  ActivityColumns pending_;
  NameTable names_;
  int64_t maxPendingRecords_ = 0;
  void refuseLocked(uint8_t** buffer, size_t* size);  // poolMutex_ held
  std::atomic<bool> nullSafe_{true};
  std::vector<uint8_t*> discardOut_;
  // The pool's buffers of the current size (poolMutex_): one made before a reset() and still with
  // CUPTI then comes back of the old size, and is freed after decoding instead of reused.
  std::unordered_set<uint8_t*> current_;  // discard buffers with CUPTI (poolMutex_); freed when they come back
  std::atomic<int64_t> discarded_{0};
  std::atomic<int64_t> pendingNow_{0};  // pendingRecords_, for pendingShare()
  int64_t records_ = 0, pendingRecords_ = 0, overflow_ = 0, invalid_ = 0, zero_ = 0, other_ = 0, undecodable_ = 0;
  int64_t incomplete_ = 0, bytesUnwalked_ = 0;
  int64_t decodeNs_ = 0;

  std::atomic<int64_t> completed_{0};
  std::atomic<int64_t> denied_{0};
  std::atomic<int64_t> dropped_{0};
  std::atomic<int64_t> clockOffsetNs_{0};
};

}  // namespace perfcore
