// FakeRuntime: the event timer's CUDA calls answered as the runtime documentation defines them.
#include "fake_runtime.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "clock.h"
#include "cuda_calls.h"

namespace perfcore {

namespace {
std::atomic<FakeRuntime*> activeFake{nullptr};

// A timer made under a fake may outlive it (the test's scope ends first): its calls then fail
// as calls on handles that no longer exist, never reach freed memory.
FakeRuntime* fakeOrNull() { return activeFake.load(); }
uintptr_t handleOf(const void* p) { return reinterpret_cast<uintptr_t>(p); }
cudaError_t result(int code) {
  switch (code) {
    case 0: return cudaSuccess;
    case 1: return cudaErrorNotReady;
    case 3: return cudaErrorCapturedEvent;
    case 4: return cudaErrorStreamCaptureUnsupported;
    default: return cudaErrorInvalidResourceHandle;
  }
}

const CudaCalls kFakeCalls = {
    []() { return fakeOrNull() ? fakeOrNull()->now() : nowNs(); },
    [](int* n) {
      FakeRuntime* F = fakeOrNull();
      if (F == nullptr) return cudaErrorInvalidResourceHandle;
      *n = F->deviceCount();
      return *n > 0 ? cudaSuccess : cudaErrorNoDevice;
    },
    [](int* d) {
      FakeRuntime* F = fakeOrNull();
      if (F == nullptr) return cudaErrorInvalidResourceHandle;
      *d = F->currentDevice();
      return cudaSuccess;
    },
    [](int d) {
      FakeRuntime* F = fakeOrNull();
      if (F == nullptr) return cudaErrorInvalidResourceHandle;
      if (d < 0 || d >= F->deviceCount()) return cudaErrorInvalidDevice;
      F->setCurrentDevice(d);
      return cudaSuccess;
    },
    [](cudaEvent_t* e) {
      FakeRuntime* F = fakeOrNull();
      if (F == nullptr) return cudaErrorInvalidResourceHandle;
      *e = reinterpret_cast<cudaEvent_t>(F->newEvent());
      return cudaSuccess;
    },
    [](cudaEvent_t e) {
      FakeRuntime* F = fakeOrNull();
      if (F == nullptr) return cudaErrorInvalidResourceHandle;
      return F->destroyEvent(handleOf(e)) ? cudaSuccess : cudaErrorInvalidResourceHandle;
    },
    [](cudaEvent_t e, cudaStream_t s) {
      FakeRuntime* F = fakeOrNull();
      if (F == nullptr) return cudaErrorInvalidResourceHandle;
      return result(F->record(handleOf(e), handleOf(s)));
    },
    [](cudaEvent_t e) {
      FakeRuntime* F = fakeOrNull();
      if (F == nullptr) return cudaErrorInvalidResourceHandle;
      return result(F->query(handleOf(e)));
    },
    [](cudaEvent_t e) {
      FakeRuntime* F = fakeOrNull();
      if (F == nullptr) return cudaErrorInvalidResourceHandle;
      return result(F->wait(handleOf(e)));
    },
    [](float* ms, cudaEvent_t a, cudaEvent_t b) {
      FakeRuntime* F = fakeOrNull();
      if (F == nullptr) return cudaErrorInvalidResourceHandle;
      return result(F->elapsed(ms, handleOf(a), handleOf(b)));
    },
    [](cudaStream_t* s) {
      FakeRuntime* F = fakeOrNull();
      if (F == nullptr) return cudaErrorInvalidResourceHandle;
      *s = reinterpret_cast<cudaStream_t>(F->createStream(true));
      return cudaSuccess;
    },
    [](cudaStream_t) { return cudaSuccess; },
    [](cudaStream_t s, int* capturing) {
      FakeRuntime* F = fakeOrNull();
      if (F == nullptr) return cudaErrorInvalidResourceHandle;
      const int c = F->isCapturing(handleOf(s));
      *capturing = c == 1;
      return c == 2 ? cudaErrorStreamCaptureImplicit : cudaSuccess;
    },
    [](cudaStreamCaptureMode* mode) {
      FakeRuntime* F = fakeOrNull();
      if (F == nullptr) return cudaErrorInvalidResourceHandle;
      int m = static_cast<int>(*mode);
      F->exchangeMode(&m);
      *mode = static_cast<cudaStreamCaptureMode>(m);
      return cudaSuccess;
    },
};
}  // namespace

FakeRuntime::FakeRuntime(bool manualClock, double driftPpm, int devices)
    : manual_(manualClock), driftPpm_(driftPpm), devices_(devices) {
  epochNs_ = nowLocked();
  // The legacy default stream has two handles: 0 and cudaStreamLegacy.
  streams_.push_back(Stream{0, Kind::kLegacy, 0});
  streams_.push_back(Stream{handleOf(cudaStreamLegacy), Kind::kLegacy, 0});
}

FakeRuntime::~FakeRuntime() { uninstall(); }

FakeRuntime* FakeRuntime::active() { return activeFake.load(); }

void FakeRuntime::install() {
  activeFake.store(this);
  setCudaCalls(&kFakeCalls);
}

void FakeRuntime::uninstall() {
  FakeRuntime* self = this;
  if (activeFake.compare_exchange_strong(self, nullptr)) setCudaCalls(nullptr);
}

int64_t FakeRuntime::nowLocked() const { return manual_ ? manualNs_ : nowNs(); }

int64_t FakeRuntime::now() {
  std::lock_guard<std::mutex> lock(mutex_);
  return nowLocked();
}

int64_t FakeRuntime::deviceNs(int64_t hostNs) const {
  const double since = static_cast<double>(hostNs - epochNs_);
  return hostNs + static_cast<int64_t>(since * driftPpm_ * 1e-6);
}

FakeRuntime::Stream* FakeRuntime::find(uintptr_t handle) {
  for (auto& s : streams_) {
    if (s.handle == handle) return &s;
  }
  return nullptr;
}

int64_t FakeRuntime::readyAt(const Stream& s) const {
  int64_t t = s.tailNs;
  for (const auto& o : streams_) {
    // The legacy stream and the blocking streams wait for each other's earlier work.
    const bool ordered = (s.kind == Kind::kLegacy && o.kind == Kind::kBlocking) ||
                         (s.kind == Kind::kBlocking && o.kind == Kind::kLegacy);
    if (ordered) t = std::max(t, o.tailNs);
  }
  return std::max(t, nowLocked());
}

uintptr_t FakeRuntime::createStream(bool nonBlocking) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uintptr_t h = nextStream_;
  nextStream_ += 0x10;
  streams_.push_back(Stream{h, nonBlocking ? Kind::kNonBlocking : Kind::kBlocking, 0});
  return h;
}

int64_t FakeRuntime::launch(uintptr_t stream, int64_t durationNs) {
  std::lock_guard<std::mutex> lock(mutex_);
  Stream* s = find(stream);
  if (s == nullptr) return -1;
  s->tailNs = readyAt(*s) + durationNs;
  return s->tailNs;
}

void FakeRuntime::advance(int64_t ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  manualNs_ += ns;
}

void FakeRuntime::waitUntil(int64_t hostNs) {
  if (manual_) {
    std::lock_guard<std::mutex> lock(mutex_);
    manualNs_ = std::max(manualNs_, hostNs);
    return;
  }
  while (nowNs() < hostNs) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

void FakeRuntime::synchronize() {
  int64_t t = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& s : streams_) t = std::max(t, s.tailNs);
  }
  waitUntil(t);
}

uintptr_t FakeRuntime::newEvent() {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(Event{});
  return events_.size();  // handle = index + 1, never null
}

bool FakeRuntime::destroyEvent(uintptr_t ev) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ev == 0 || ev > events_.size() || !events_[ev - 1].alive) return false;
  events_[ev - 1].alive = false;
  return true;
}

void FakeRuntime::beginCapture(uintptr_t stream, int mode) {
  std::lock_guard<std::mutex> lock(mutex_);
  capturing_ = stream;
  captureMode_ = mode;
  captureThread_ = std::this_thread::get_id();
  captureInvalid_ = false;
}

void FakeRuntime::exchangeMode(int* mode) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto me = std::this_thread::get_id();
  auto it = modes_.find(me);
  const int old = it == modes_.end() ? 0 : it->second;
  modes_[me] = *mode;
  *mode = old;
}

int FakeRuntime::threadMode() {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = modes_.find(std::this_thread::get_id());
  return it == modes_.end() ? 0 : it->second;
}

int FakeRuntime::unsafeLocked() {
  if (capturing_ == 0) return 0;
  const auto me = std::this_thread::get_id();
  auto it = modes_.find(me);
  const int mine = it == modes_.end() ? 0 : it->second;
  constexpr int kGlobal = 0, kRelaxed = 2;
  const bool refused = mine != kRelaxed && (captureThread_ == me ? captureMode_ != kRelaxed
                                                                  : captureMode_ == kGlobal && mine == kGlobal);
  return refused ? forbiddenLocked() : 0;
}

bool FakeRuntime::endCapture() {
  std::lock_guard<std::mutex> lock(mutex_);
  capturing_ = 0;
  return !captureInvalid_;
}

int FakeRuntime::isCapturing(uintptr_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capturing_ == 0) return 0;
  if (stream == capturing_) return 1;
  const Stream* s = find(stream);
  return s != nullptr && s->kind == Kind::kLegacy ? 2 : 0;
}

int FakeRuntime::forbiddenLocked() {
  if (capturing_ == 0) return 0;
  captureInvalid_ = true;
  return 4;
}

int FakeRuntime::record(uintptr_t ev, uintptr_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  Stream* s = find(stream);
  if (s == nullptr || ev == 0 || ev > events_.size() || !events_[ev - 1].alive) return 2;
  Event& e = events_[ev - 1];
  if (capturing_ != 0 && stream == capturing_) {  // a node of the graph, not a point in time
    e.recorded = true;
    e.captured = true;
    return 0;
  }
  if (capturing_ != 0 && s->kind == Kind::kLegacy) return forbiddenLocked();
  e.captured = false;
  e.recorded = true;
  e.doneNs = readyAt(*s);
  recordedStreams_.push_back(stream);
  recordedTimes_.emplace_back(e.doneNs, deviceNs(e.doneNs));
  return 0;
}

int FakeRuntime::query(uintptr_t ev) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ev == 0 || ev > events_.size() || !events_[ev - 1].alive) return 2;
  if (unsafeLocked()) return 4;
  const Event& e = events_[ev - 1];
  if (e.captured) return 3;
  return !e.recorded || nowLocked() >= e.doneNs ? 0 : 1;
}

int FakeRuntime::wait(uintptr_t ev) {
  int64_t t = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ev == 0 || ev > events_.size() || !events_[ev - 1].alive) return 2;
    if (unsafeLocked()) return 4;
    if (events_[ev - 1].captured) return 3;
    if (!events_[ev - 1].recorded) return 0;
    t = events_[ev - 1].doneNs;
  }
  waitUntil(t);
  return 0;
}

int FakeRuntime::elapsed(float* ms, uintptr_t a, uintptr_t b) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (uintptr_t ev : {a, b}) {
    if (ev == 0 || ev > events_.size() || !events_[ev - 1].alive || !events_[ev - 1].recorded) return 2;
    if (events_[ev - 1].captured) return 3;
    if (nowLocked() < events_[ev - 1].doneNs) return 1;
  }
  *ms = static_cast<float>(static_cast<double>(deviceNs(events_[b - 1].doneNs) - deviceNs(events_[a - 1].doneNs)) / 1e6);
  return 0;
}

std::vector<uintptr_t> FakeRuntime::recordedStreams() {
  std::lock_guard<std::mutex> lock(mutex_);
  return recordedStreams_;
}

std::vector<std::pair<int64_t, int64_t>> FakeRuntime::recordedTimes() {
  std::lock_guard<std::mutex> lock(mutex_);
  return recordedTimes_;
}

size_t FakeRuntime::recordedCount() {
  std::lock_guard<std::mutex> lock(mutex_);
  return recordedTimes_.size();
}

}  // namespace perfcore
