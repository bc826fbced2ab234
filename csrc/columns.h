// Struct-of-arrays tables handed to Python as numpy columns (one array per field, no row objects).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace perfcore {

// Each table type lists its columns once, in visit(); bindings.cpp turns any such table into a
// dict of numpy arrays without knowing its fields.
struct SpanColumns {
  std::vector<int32_t> phase_id;
  std::vector<int64_t> step;
  std::vector<int64_t> start_ns;
  std::vector<int64_t> end_ns;
  std::vector<int64_t> thread_id;

  template <class F>
  void visit(F&& f) {
    f("phase_id", phase_id);
    f("step", step);
    f("start_ns", start_ns);
    f("end_ns", end_ns);
    f("thread_id", thread_id);
  }
  size_t size() const { return start_ns.size(); }
};

}  // namespace perfcore
