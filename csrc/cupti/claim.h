// Taking CUPTI's subscriber slot and giving CUPTI up for good: the two hand-shakes with other CUPTI
// clients, and the session's dropped-record count, apart from the tracer so tests can drive them with
// fake CUPTI calls.
#pragma once

// CUPTI's own headers only, never cupti.h (setup.py stages these; cupti.h pulls a cuda.h as new as CUPTI).
#include <cupti_callbacks.h>
#include <cupti_result.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>

namespace perfcore {

constexpr const char* kSubscriberName = "perfcore";  // CUPTI reports it as "CUPTI for perfcore"

struct Claim {
  CUptiResult status = CUPTI_SUCCESS;
  std::string other;  // the subscriber CUPTI named beside ours ("" : none)
};

// Subscribes through `subscribe(handle*, oldName, oldSize)` and keeps the slot only if perfcore
// is alone. CUPTI before 13.3 refuses a second subscriber (MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED),
// which is how a held CUPTI (torch.profiler, nsys) used to show; from 13.3 it may let perfcore in
// beside another client and only write the first subscriber's name to oldSubscriberName. Tracing
// then would replace that client's buffer callbacks, so the slot is given back (`unsubscribe`)
// and the claim fails the old way, naming the other client.
template <class Subscribe, class Unsubscribe>
Claim claimSubscriber(CUpti_SubscriberHandle* out, Subscribe&& subscribe, Unsubscribe&& unsubscribe) {
  char old[64 + 1] = {0};  // CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN, and a terminator CUPTI cannot overwrite
  CUpti_SubscriberHandle sub = nullptr;
  Claim c;
  c.status = subscribe(&sub, old, sizeof(old) - 1);
  c.other.assign(old, strnlen(old, sizeof(old) - 1));
  if (c.other.find(kSubscriberName) != std::string::npos) c.other.clear();  // the first one is us
  if (c.status == CUPTI_SUCCESS && !c.other.empty()) {
    unsubscribe(sub);
    c.status = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    return c;
  }
  if (c.status == CUPTI_SUCCESS) *out = sub;
  return c;
}

// The hand-over's cuptiFinalize runs at a runtime call's exit callsite, on whichever thread gets
// there first once it is asked for. The thread that asked must not unsubscribe while another one
// is still inside that finalize (a subscriber freed twice): close() waits for a finalize that was
// taken, and says whether it detached CUPTI.
class DetachGate {
 public:
  void open() { state_.store(kOpen); }
  // At an exit callsite: true for the one caller that must now run cuptiFinalize and report it.
  bool take() {
    int expected = kOpen;
    return state_.compare_exchange_strong(expected, kRunning);
  }
  void finished(bool detached) { state_.store(detached ? kDetached : kFailed); }
  // No callsite may take it from here; waits for one that already did. True: CUPTI detached.
  bool close() {
    int expected = kOpen;
    if (state_.compare_exchange_strong(expected, kIdle)) return false;  // nobody took it
    while (state_.load() == kRunning) std::this_thread::yield();
    const bool detached = state_.load() == kDetached;
    state_.store(kIdle);
    return detached;
  }

 private:
  enum { kIdle, kOpen, kRunning, kDetached, kFailed };
  std::atomic<int> state_{kIdle};
};

// CUPTI's dropped-record count (cuptiActivityGetNumDroppedRecords): reset to zero by each read, so
// every read after a flush is added. CUPTI 13.0 GA keeps a count from before the session (an earlier
// session's, or records of no session) until it is first read: start() reads it once and keeps it
// apart (stale()), so the session's losses are its own.
class DroppedCount {
 public:
  template <class Read>
  void start(Read&& read) {
    stale_ = static_cast<int64_t>(read());
  }
  template <class Read, class Add>
  void afterFlush(Read&& read, Add&& add) {
    const int64_t n = static_cast<int64_t>(read());
    if (n > 0) add(n);
  }
  int64_t stale() const { return stale_; }

 private:
  int64_t stale_ = 0;
};

}  // namespace perfcore
