// Fewer NOTIFYs for self-committing enqueues: at most one per queue per window from one
// process, without leaving a job unannounced.
//
// Every NOTIFY is a transaction of its own with a commit record (PostgreSQL gives a
// notifying transaction an xid), so one per single-job insert doubles the commits of a
// busy producer. A wake-up is only needed by a dispatcher that is waiting; one that is
// claiming will claim again. The rule that keeps every job announced:
//   - a call carries its queue's NOTIFY unless this process sent one less than kWindow
//     before (the time recorded is when the NOTIFY was sent, never later than its commit,
//     so never later than its delivery);
//   - a call that did not carry one checks again once its commit is acknowledged: unless a
//     NOTIFY was sent within kWindow before that, it sends one then.
// So every committed job has a NOTIFY delivered at most kWindow before its commit was
// acknowledged (or after it). The runtime's dispatcher claims again at least
// kQuickRetries[0] after any wake-up before it sleeps for its poll interval
// (src/runtime/dispatcher.cpp, which static_asserts that this window is shorter): that
// claim starts after the job's commit and sees it.
//
// A NOTIFY that fails after being counted here (a broken connection) can leave the jobs it
// covered to the poll interval; the failure is logged.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace awa::storage {

class WakeCoalescer {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::microseconds kWindow{2000};

  // Of `queues` (a self-committing call's), those whose NOTIFY rides with this call: sent
  // now, and recorded as sent at `now`.
  std::vector<std::string> carry(const std::vector<std::string>& queues, Clock::time_point now);
  // After the commit of a call that carried none for `queues`: those that still need one
  // (nothing sent within kWindow before `acked`), recorded as sent at `acked`.
  std::vector<std::string> after_commit(const std::vector<std::string>& queues,
                                        Clock::time_point acked);
  // A NOTIFY recorded by carry() or after_commit() failed: the next call sends its own.
  void forget(const std::vector<std::string>& queues);

 private:
  std::mutex mu_;
  std::unordered_map<std::string, Clock::time_point> last_sent_;  // guarded by mu_
};

}  // namespace awa::storage
