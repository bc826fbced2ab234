// perfcore's CUPTI decoder and fabricated buffers against one real libcupti, without a device:
// tests/test_cupti_real.py builds this once per CUPTI release (that release's headers, linked to
// its library) and compares what it prints with what it put in. One "key value..." line per fact.
#include <cstdio>
#include <string>
#include <vector>

#include "cupti/fake_buffer.h"
#include "cupti/records.h"

using namespace perfcore;

template <class T>
static void column(const char* name, const std::vector<T>& v) {
  std::printf("%s", name);
  for (const auto& x : v) std::printf(" %lld", static_cast<long long>(x));
  std::printf("\n");
}

#define SIZE(T) std::printf("sizeof %s %zu\n", #T, sizeof(CUpti_Activity##T))

int main() {
  uint32_t loaded = 0;
  cuptiGetVersion(&loaded);
  std::printf("api %u %u\n", loaded, static_cast<unsigned>(CUPTI_API_VERSION));
  std::printf("stride kernel %zu\n", loadedRecordBytes(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  std::printf("stride memcpy %zu\n", loadedRecordBytes(CUPTI_ACTIVITY_KIND_MEMCPY));
  std::printf("stride memset %zu\n", loadedRecordBytes(CUPTI_ACTIVITY_KIND_MEMSET));
  std::printf("stride sync %zu\n", loadedRecordBytes(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION));
  std::printf("stride overhead %zu\n", loadedRecordBytes(CUPTI_ACTIVITY_KIND_OVERHEAD));
  std::printf("stride external %zu\n", loadedRecordBytes(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
  std::printf("stride runtime %zu\n", loadedRecordBytes(CUPTI_ACTIVITY_KIND_RUNTIME));
  SIZE(Kernel9);
  SIZE(Memcpy5);
  SIZE(Memset4);
  SIZE(Synchronization);
  SIZE(Overhead);
  SIZE(Overhead3);
  SIZE(ExternalCorrelation);
  SIZE(API);
#if CUPTI_API_VERSION >= 26  // 12.8
  SIZE(Memcpy6);
  SIZE(Synchronization2);
#endif
#if CUPTI_API_VERSION >= 130000
  SIZE(Kernel10);
#endif
  std::printf("pinned kernel %zu memcpy %zu sync %zu overhead %zu\n", sizeof(KernelRecord), sizeof(MemcpyRecord),
              sizeof(SyncRecord), sizeof(OverheadRecord));

  // Two of each kind, so a wrong stride shows as a second record misread or an error.
  FakeActivityBuffer b;
  for (int i = 0; i < 2; ++i) {
    b.addKernel(1000 + i, 2000 + i, 0, 7 + i, 11 + i, i ? "_Z4gemmv" : "relu_kernel", 64 + i, 128 + i, 5 + i,
                (int64_t{1} << 40) + i);
    b.addMemcpy(3000 + i, 3500 + i, 4096 + i, 1, 2, 3, 0, 7, 21 + i);
    b.addMemset(4000 + i, 4100 + i, 512 + i, 9 + i, 0, 7, 31 + i);
    b.addSync(5000 + i, 5200 + i, 3, 7, 41 + i);
    b.addExternalCorrelation(900 + i, 11 + i);
    b.addOverhead(6000 + i, 6100 + i, 1);
    b.addApi(i == 1, 700 + i, 800 + i, 11 + i, 1234 + i, 211 + i);
  }
  std::printf("buffer_bytes %zu\n", b.sizeBytes());
  try {
    ActivityColumns c = b.decode();
    std::printf("records %lld other %lld invalid %lld\n", static_cast<long long>(c.records),
                static_cast<long long>(c.otherRecords), static_cast<long long>(c.invalidTimestamps));
    column("kernel.start_ns", c.kernels.start_ns);
    column("kernel.end_ns", c.kernels.end_ns);
    column("kernel.stream_id", c.kernels.stream_id);
    column("kernel.correlation_id", c.kernels.correlation_id);
    column("kernel.grid_x", c.kernels.grid_x);
    column("kernel.block_x", c.kernels.block_x);
    column("kernel.graph_id", c.kernels.graph_id);
    column("kernel.graph_node_id", c.kernels.graph_node_id);
    std::printf("names");
    for (auto id : c.kernels.name_id) std::printf(" %s", c.names[id].c_str());
    std::printf("\n");
    column("memcpy.start_ns", c.memcpy.start_ns);
    column("memcpy.size_bytes", c.memcpy.size_bytes);
    column("memcpy.copy_kind", c.memcpy.copy_kind);
    column("memcpy.src_kind", c.memcpy.src_kind);
    column("memcpy.dst_kind", c.memcpy.dst_kind);
    column("memcpy.correlation_id", c.memcpy.correlation_id);
    column("memset.size_bytes", c.memset.size_bytes);
    column("memset.value", c.memset.value);
    column("memset.correlation_id", c.memset.correlation_id);
    column("sync.end_ns", c.sync.end_ns);
    column("sync.sync_type", c.sync.sync_type);
    column("sync.correlation_id", c.sync.correlation_id);
    column("external.external_id", c.external.external_id);
    column("external.correlation_id", c.external.correlation_id);
    column("overhead.start_ns", c.overhead.start_ns);
    column("overhead.overhead_kind", c.overhead.overhead_kind);
    column("api.start_ns", c.api.start_ns);
    column("api.thread_id", c.api.thread_id);
    column("api.cbid", c.api.cbid);
    column("api.driver", c.api.driver);
  } catch (const std::exception& e) {
    std::printf("error %s\n", e.what());
    return 1;
  }
  return 0;
}
