// Pinned vs pageable host<->device copy timing (CUDA events around each copy; raw samples out).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace perfcore {

struct CopyColumns {
  std::vector<int64_t> size_bytes;
  std::vector<int32_t> repeat;
  std::vector<int64_t> gpu_ns;   // event-measured copy time
  std::vector<int64_t> host_ns;  // wall time of the call (a pageable copy blocks the host while staging)

  template <class F>
  void visit(F&& f) {
    f("size_bytes", size_bytes);
    f("repeat", repeat);
    f("gpu_ns", gpu_ns);
    f("host_ns", host_ns);
  }
  size_t size() const { return size_bytes.size(); }
};

enum class CopyDirection { kHostToDevice, kDeviceToHost };

// Times `repeats` copies of each size (after one untimed copy per size). Buffers are allocated once
// at the largest size; pageable memory is touched first so page faults are not timed.
CopyColumns measureCopies(const std::vector<int64_t>& sizes, CopyDirection dir, bool pinned, int repeats,
                          uintptr_t stream);

}  // namespace perfcore
