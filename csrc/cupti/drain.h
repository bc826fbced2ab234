// The tracer's drain thread: a flush every period, or sooner when asked (collect), never while a
// hold says to wait (a graph capture underway). Apart from CUPTI so tests drive it with a fake flush.
//
// Threading: ask() may be called from any thread and returns once a pass that began after it
// ended; the flush runs on the drain thread with no lock held (CUPTI's flush calls bufferCompleted
// on the calling thread).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

namespace perfcore {

class DrainThread {
 public:
  struct Pass {
    std::function<void()> flush;   // CUPTI's default flush and the decode
    std::function<void()> decode;  // the decode alone, for passes the hold skips the flush of
    std::function<bool()> hold;    // true: no flush now
    std::function<bool()> ready;   // true: buffers wait for a decode (wakes the thread early)
  };

  ~DrainThread() { stop(); }

  void start(int64_t periodMs, Pass pass) {
    stop();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = false;
      requested_ = done_ = 0;
    }
    held_.store(0);
    pass_ = std::move(pass);
    period_ = std::chrono::milliseconds(periodMs);
    thread_ = std::thread([this] { loop(); });
  }

  // Asks for a pass and waits for it (or for stop()).
  void ask() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!thread_.joinable() || stop_) return;
    const uint64_t ticket = ++requested_;
    wake_.notify_one();
    served_.wait(lock, [this, ticket] { return done_ >= ticket || stop_; });
  }

  void wake() { wake_.notify_one(); }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    served_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  int64_t held() const { return held_.load(); }  // passes that skipped their flush for the hold

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      wake_.wait_for(lock, period_, [this] { return stop_ || requested_ > done_ || pass_.ready(); });
      if (stop_) break;
      const uint64_t serving = requested_;
      lock.unlock();  // never held across the flush: it calls bufferCompleted on this thread
      if (pass_.hold()) {
        held_.fetch_add(1);
        pass_.decode();  // what CUPTI completed on its own; no call into CUPTI
      } else {
        pass_.flush();
      }
      lock.lock();
      done_ = serving;
      served_.notify_all();
    }
  }

  Pass pass_;
  std::chrono::milliseconds period_{200};
  std::thread thread_;
  std::mutex mutex_;  // guards the counters and the stop flag
  std::condition_variable wake_, served_;
  bool stop_ = false;
  uint64_t requested_ = 0, done_ = 0;
  std::atomic<int64_t> held_{0};
};

}  // namespace perfcore
