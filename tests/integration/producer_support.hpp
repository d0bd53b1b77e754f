// Helpers for the producer-side concurrency tests (enqueue_pgtest, insert_job_compat_pgtest):
// lock-wait detection and a background call that can always be unblocked (bounded polling,
// eventually(), is support.hpp's).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include "awa/queue_storage.hpp"
#include "pg/connection.hpp"
#include "support.hpp"

namespace awa::testing {

using SteadyClock = std::chrono::steady_clock;

// Whether backend `pid` is waiting for a lock of `locktype` (a pg_locks.locktype).
inline bool waits_for_lock(pg::Connection& observer, int pid, const std::string& locktype) {
  return observer
             .query(
                 "SELECT count(*) FROM pg_locks WHERE pid = $1 AND locktype = $2 AND NOT granted",
                 pid, locktype)
             .get<std::int64_t>(0, 0) > 0;
}

// Whether backend `pid` is waiting for an advisory lock (the lane lock of
// reserve_lane_range, or a lane-creation lock).
inline bool waits_for_advisory_lock(pg::Connection& observer, int pid) {
  return waits_for_lock(observer, pid, "advisory");
}

// Whether backend `pid` waits for another transaction to end (a unique-key insert behind
// an uncommitted row with the same key waits on that transaction's id).
inline bool waits_for_transaction(pg::Connection& observer, int pid) {
  return waits_for_lock(observer, pid, "transactionid");
}

// Runs `fn` on its own thread. If the test leaves while `fn` is still blocked in the
// database (a failed expectation), the destructor cancels backend `pid` so the thread ends
// instead of hanging the test binary.
template <class T>
class BackgroundCall {
 public:
  BackgroundCall(int pid, std::function<T()> fn)
      : pid_(pid), future_(std::async(std::launch::async, std::move(fn))) {}
  BackgroundCall(const BackgroundCall&) = delete;
  BackgroundCall& operator=(const BackgroundCall&) = delete;
  ~BackgroundCall() {
    if (!future_.valid()) return;
    for (int i = 0; i < 50 && !finishes_within(std::chrono::milliseconds(0)); ++i) {
      try {
        pg::Connection c = pg::Connection::connect(test_connect_options());
        c.query("SELECT pg_cancel_backend($1)", pid_);
      } catch (const std::exception&) {  // nothing better to do in a destructor
      }
      finishes_within(std::chrono::milliseconds(100));
    }
    future_.wait();
  }

  bool finishes_within(std::chrono::milliseconds timeout) const {
    return future_.wait_for(timeout) == std::future_status::ready;
  }
  // REQUIRES: finishes_within() returned true. Rethrows what `fn` threw.
  T get() { return future_.get(); }

 private:
  int pid_;
  std::future<T> future_;
};

// A one-shot signal from the test thread to a background call. Waits are bounded so a
// test that fails before opening it cannot hang its background threads.
class Signal {
 public:
  void open() {
    if (!opened_.exchange(true)) promise_.set_value();
  }
  // True when opened within `timeout`.
  bool wait(std::chrono::milliseconds timeout = std::chrono::seconds(15)) const {
    return future_.wait_for(timeout) == std::future_status::ready;
  }

 private:
  std::atomic<bool> opened_{false};
  std::promise<void> promise_;
  std::shared_future<void> future_ = promise_.get_future().share();
};

}  // namespace awa::testing
