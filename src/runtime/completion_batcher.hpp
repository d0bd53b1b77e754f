// Group commit for handler results (defaults as in AWA's ADR-025; docs/runtime.md).
//
// Workers submit() completions and go back to work at once; background writer threads
// write them with QueueStorage::complete — one fused statement, one transaction per
// flush — when max_batch rows are waiting or flush_interval has passed since the oldest
// waiting row, whichever comes first. The shape is LevelDB's group commit: many
// submitters, few writers, one durable write per group. With more than one writer, a
// flush waiting for its commit (the WAL fsync) no longer holds up the next one, and the
// server can fold their commits into one fsync; completions are independent of each
// other, so their order does not matter (close_attempts locks each flush's batches in
// ascending order, so concurrent flushes never deadlock).
//
// A flush that fails with a retryable error (lost connection, server restart,
// serialization failure) is retried with the same rows, with a growing pause, for up to
// retry_for; completions are idempotent on (claim batch, lane_seq), so a retry after an
// unknown commit outcome finds the rows that did land closed, reports them as stale and
// changes nothing. A flush that fails with a server-wide error (pg::ErrorKind::kServerWide:
// a read-only server after a fail-over, a dropped database, the completion function
// missing or ambiguous, a refused feature) says nothing about its rows: it is neither
// split nor dropped but retried, without the retry_for bound, until the cause is gone —
// logged at error level and counted (awa_completion_flush_server_errors_total{sqlstate})
// so an operator is alarmed; only once a flush() or the destructor waits for the rows
// does retry_for bound it again, so stopping cannot hang on an outage. A flush that fails
// with any other error is split in halves and each half written on its own, down to
// single rows, so one row the server rejects costs that row alone and not the up to
// max_batch others. A row still failing, or a flush still failing when its retries are
// over, is dropped and counted: its attempt stays open and heartbeat/deadline rescue
// retries the job (at-least-once).
//
// Thread safety: submit(), flush() and stats() may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <thread>
#include <vector>

#include "awa/error.hpp"
#include "awa/job.hpp"
#include "awa/queue_storage.hpp"
#include "pg/pool.hpp"

namespace awa::runtime {

struct CompletionBatcherOptions {
  // Rows per flush at most. Default: 512.
  std::size_t max_batch = 512;
  // How long the oldest waiting row may wait for company. Default: 1 ms.
  std::chrono::microseconds flush_interval{1000};
  // How long a flush failing with retryable errors is retried before its rows are dropped
  // to rescue. Longer than a typical server restart; shorter than the stale timeout is
  // pointless to exceed, since rescue closes the attempts after it. Server-wide errors
  // are retried past it, until a flush() or the destructor waits. Default: 30 s.
  std::chrono::milliseconds retry_for{30000};
  // Writer threads (flushes in flight at once). Default: 1.
  int writers = 1;
};

class CompletionBatcher {
 public:
  // Called on a writer thread once per submitted completion, after its flush has been
  // counted in stats(); with several writers, concurrently. An exception it throws is
  // logged and changes nothing else.
  using ResultCallback = std::function<void(const Completion&, const CompletionResult&)>;

  struct Stats {
    std::uint64_t submitted = 0;
    std::uint64_t written = 0;  // applied, including stale
    std::uint64_t stale = 0;
    std::uint64_t flushes = 0;
    std::uint64_t retries = 0;         // flushes repeated after a retryable or server-wide error
    std::uint64_t server_errors = 0;   // flushes failed by a server-wide error (rows kept)
    std::uint64_t splits = 0;          // flushes split after a non-retryable error
    std::uint64_t failed_flushes = 0;  // dropped: retries exhausted, or a lone row rejected
    std::uint64_t dropped = 0;         // rows in dropped flushes
    // When a flush last failed (dropped, or held by a server-wide error); unset: never.
    std::optional<std::chrono::steady_clock::time_point> last_failure;
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
  void write(std::span<const Completion> batch);
  // One attempt at writing `batch`; rethrows what QueueStorage::complete throws.
  void write_once(std::span<const Completion> batch);
  void drop(std::size_t rows, const std::exception& e);
  // Counts and reports a server-wide failure of a flush of `rows` rows; false when the
  // rows must be given up now because a flush() or the destructor waits for them and
  // `*drain_give_up` (set on the first such call) has passed.
  bool hold(std::size_t rows, const Error& e, int attempt, std::chrono::milliseconds backoff,
            std::optional<std::chrono::steady_clock::time_point>& drain_give_up);

  pg::Pool& pool_;
  QueueStorage& store_;
  const CompletionBatcherOptions options_;
  ResultCallback on_result_;

  mutable std::mutex mu_;
  std::condition_variable wake_;                    // batcher thread: rows waiting or stopping
  std::condition_variable done_;                    // flush(): progress made
  std::deque<Completion> pending_;                  // guarded by mu_
  std::chrono::steady_clock::time_point oldest_{};  // guarded by mu_
  // Rows are numbered in submission order. Guarded by mu_:
  std::uint64_t submitted_ = 0;             // rows submitted
  std::uint64_t taken_ = 0;                 // rows taken by writers (pending_ starts here)
  std::multiset<std::uint64_t> in_flight_;  // first row number of each batch being written
  std::uint64_t flush_target_ = 0;          // a flush() waits for done_below() >= this
  Stats stats_;
  bool stopping_ = false;
  // When a server-wide failure was last logged at error level (one line per interval for
  // all writers, not one per retry). Guarded by mu_.
  std::optional<std::chrono::steady_clock::time_point> last_alarm_;
  std::vector<std::thread> threads_;

  // Every row numbered below this is written (or dropped). REQUIRES: mu_ held.
  std::uint64_t done_below() const { return in_flight_.empty() ? taken_ : *in_flight_.begin(); }
};

}  // namespace awa::runtime
