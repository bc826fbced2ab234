// Builds CUPTI activity buffers in memory from known values (tests only), as kineto's unit tests
// do: the decoder is then checked field by field without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "activity_columns.h"

namespace perfcore {

// The bytes the loaded libcupti gives one record of this CUpti_ActivityKind (0: a kind it does
// not know), measured with its own cuptiActivityGetNextRecord.
size_t loadedRecordBytes(int kind);

class FakeActivityBuffer {
 public:
  void addKernel(int64_t startNs, int64_t endNs, int32_t device, int32_t stream, int32_t correlation,
                 const std::string& name, int32_t gridX, int32_t blockX, int32_t graphId = 0,
                 int64_t graphNodeId = 0);
  void addMemcpy(int64_t startNs, int64_t endNs, int64_t bytes, int32_t copyKind, int32_t srcKind,
                 int32_t dstKind, int32_t device, int32_t stream, int32_t correlation);
  void addMemset(int64_t startNs, int64_t endNs, int64_t bytes, int32_t value, int32_t device, int32_t stream,
                 int32_t correlation);
  void addSync(int64_t startNs, int64_t endNs, int32_t type, int32_t stream, int32_t correlation);
  void addExternalCorrelation(int64_t externalId, int32_t correlation);
  void addOverhead(int64_t startNs, int64_t endNs, int32_t overheadKind);
  // A runtime (driver=false) or driver API call record, as CUPTI_ACTIVITY_KIND_RUNTIME / _DRIVER.
  void addApi(bool driver, int64_t startNs, int64_t endNs, int32_t correlation, int64_t threadId, int32_t cbid);

  size_t sizeBytes() const { return bytes_.size(); }
  const uint8_t* data() const { return bytes_.data(); }
  // Runs the production decoder over the buffer.
  ActivityColumns decode();

 private:
  template <class T>
  void append(const T& record);
  std::vector<uint8_t> bytes_;
  std::vector<std::unique_ptr<std::string>> names_;  // kernel records point into these
};

}  // namespace perfcore
