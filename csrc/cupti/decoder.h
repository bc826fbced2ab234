// CUPTI activity buffer -> columns. Runs on the caller's thread, never in a CUPTI callback.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "activity_columns.h"

namespace perfcore {

// Kernel names interned once (demangled), so columns carry small integer ids.
class NameTable {
 public:
  int32_t intern(const char* name);
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<std::string> names_;
};

// How one buffer's walk ended. status != 0: it stopped early at a record the loaded libcupti
// would not return (incomplete: CUPTI_ERROR_INVALID_KIND, the record of work still running when
// a forced flush handed the buffer over); at most bytesLeft were not walked.
struct DecodeResult {
  int64_t records = 0;
  int status = 0;
  bool incomplete = false;
  int64_t bytesLeft = 0;
};

// Appends every record in buffer[0, validBytes) to `out`, up to the first one CUPTI cannot walk.
// Uses cuptiActivityGetNextRecord, so record sizes come from the loaded libcupti. Never throws.
DecodeResult decodeBuffer(uint8_t* buffer, size_t validBytes, ActivityColumns& out, NameTable& names,
                     int64_t clockOffsetNs);

// Records in a buffer, without decoding them (for counting what is dropped).
int64_t countRecords(uint8_t* buffer, size_t validBytes);

}  // namespace perfcore
