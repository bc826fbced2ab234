// Thread ids for the clock/span layer.
#include "clock.h"

#include <sys/syscall.h>
#include <unistd.h>

namespace perfcore {

int64_t currentThreadId() {
  // gettid is a syscall; cache it per thread so the span hot path never makes one.
  __attribute__((tls_model("initial-exec"))) thread_local const int64_t tid = static_cast<int64_t>(::syscall(SYS_gettid));
  return tid;
}

}  // namespace perfcore
