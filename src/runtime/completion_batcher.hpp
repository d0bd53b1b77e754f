// Group commit for handler results (DESIGN.md §7, ADR-025's batcher defaults).
//
// Workers submit() completions and go back to work at once; a background thread writes
// them with QueueStorage::complete — one fused statement, one transaction per flush —
// when max_batch rows are waiting or flush_interval has passed since the oldest waiting
// row, whichever comes first. The shape is LevelDB's group commit: many writers, one
// writer thread, one durable write per group.
//
// A flush that fails with a retryable error (lost connection, serialization failure) is
// retried with the same rows, up to max_retries times; completions are idempotent on
// (job_id, run_lease), so a retry after an unknown commit outcome reports the rows that
// did land as stale and changes nothing. A flush that still fails is dropped and counted:
// its attempts stay open and heartbeat/deadline rescue retries the jobs (at-least-once).
//
// Thread safety: submit(), flush() and stats() may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "awa/job.hpp"
#include "awa/queue_storage.hpp"
#include "pg/pool.hpp"

namespace awa::runtime {

struct CompletionBatcherOptions {
  // Rows per flush at most. Default: 512.
  std::size_t max_batch = 512;
  // How long the oldest waiting row may wait for company. Default: 1 ms.
  std::chrono::microseconds flush_interval{1000};
  // Retries of a failed flush before its rows are dropped to rescue. Default: 5.
  int max_retries = 5;
};

class CompletionBatcher {
 public:
  // Called on the batcher thread once per submitted completion, after its flush.
  using ResultCallback = std::function<void(const Completion&, const CompletionResult&)>;

  struct Stats {
    std::uint64_t submitted = 0;
    std::uint64_t written = 0;  // applied, including stale
    std::uint64_t stale = 0;
    std::uint64_t flushes = 0;
    std::uint64_t failed_flushes = 0;  // dropped after retries
    std::uint64_t dropped = 0;         // rows in dropped flushes
  };

  // `pool` and `store` must outlive the batcher.
  CompletionBatcher(pg::Pool& pool, QueueStorage& store, CompletionBatcherOptions options = {},
                    ResultCallback on_result = {});
  ~CompletionBatcher();  // writes everything submitted, then stops
  CompletionBatcher(const CompletionBatcher&) = delete;
  CompletionBatcher& operator=(const CompletionBatcher&) = delete;

  void submit(Completion completion);
  // Blocks until every completion submitted before the call has been written (or dropped).
  void flush();
  Stats stats() const;

 private:
  void run();
  void write(std::vector<Completion>& batch);

  pg::Pool& pool_;
  QueueStorage& store_;
  const CompletionBatcherOptions options_;
  ResultCallback on_result_;

  mutable std::mutex mu_;
  std::condition_variable wake_;                    // batcher thread: rows waiting or stopping
  std::condition_variable done_;                    // flush(): progress made
  std::deque<Completion> pending_;                  // guarded by mu_
  std::chrono::steady_clock::time_point oldest_{};  // guarded by mu_
  std::uint64_t submitted_ = 0;                     // guarded by mu_
  std::uint64_t finished_ = 0;                      // guarded by mu_
  std::uint64_t flush_target_ = 0;  // a flush() waits for finished_ >= this; guarded by mu_
  Stats stats_;                     // guarded by mu_
  bool stopping_ = false;           // guarded by mu_
  std::thread thread_;
};

}  // namespace awa::runtime
