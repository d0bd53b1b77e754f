#include "runtime/completion_batcher.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "awa/error.hpp"
#include "awa/metrics.hpp"
#include "pg/error_map.hpp"
#include "runtime/backoff.hpp"
#include "storage/store_access.hpp"

namespace awa::runtime {
namespace {

// A server-wide failure is logged at error level at most this often (each retry at debug).
constexpr std::chrono::seconds kAlarmEvery{10};

bool server_wide(const Error& e) {
  return !e.sqlstate().empty() &&
         pg::classify_sqlstate(e.sqlstate()).kind == pg::ErrorKind::kServerWide;
}

}  // namespace

CompletionBatcher::CompletionBatcher(pg::Pool& pool, QueueStorage& store,
                                     CompletionBatcherOptions options, ResultCallback on_result)
    : pool_(pool), store_(store), options_(options), on_result_(std::move(on_result)) {
  if (options_.max_batch == 0) throw InvalidArgument("completion batcher: max_batch must be > 0");
  if (options_.writers < 1) throw InvalidArgument("completion batcher: writers must be >= 1");
  for (int i = 0; i < options_.writers; ++i) threads_.emplace_back([this] { run(); });
}

CompletionBatcher::~CompletionBatcher() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void CompletionBatcher::submit(Completion completion) {
  bool wake = false;
  {
    std::lock_guard lock(mu_);
    const bool first = pending_.empty();
    if (first) oldest_ = std::chrono::steady_clock::now();
    pending_.push_back(std::move(completion));
    ++submitted_;
    ++stats_.submitted;
    wake = first || pending_.size() >= options_.max_batch;
  }
  // With rows waiting, the thread sleeps until the oldest row's deadline, so only a full
  // batch must wake it early; waking it for every row would cost a context switch per
  // completion. With none waiting it sleeps without a deadline, so the first row must
  // wake it (otherwise a lone completion waits for the next full batch or flush()).
  if (wake) wake_.notify_one();
}

void CompletionBatcher::flush() {
  std::unique_lock lock(mu_);
  const auto target = submitted_;
  flush_target_ = std::max(flush_target_, target);
  wake_.notify_all();
  done_.wait(lock, [&] { return done_below() >= target; });
}

CompletionBatcher::Stats CompletionBatcher::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void CompletionBatcher::run() {
  std::vector<Completion> batch;
  std::unique_lock lock(mu_);
  for (;;) {
    if (pending_.empty()) {
      if (stopping_) return;
      wake_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      continue;
    }
    // Wait for company until the oldest row's deadline, unless the batch is full, a
    // flush() is waiting, or we are stopping.
    const auto deadline = oldest_ + options_.flush_interval;
    wake_.wait_until(lock, deadline, [&] {
      return stopping_ || pending_.size() >= options_.max_batch || flush_target_ > taken_ ||
             std::chrono::steady_clock::now() >= deadline;
    });
    // Another writer may have taken the rows meanwhile.
    if (pending_.empty()) continue;
    const auto n = std::min(pending_.size(), options_.max_batch);
    batch.assign(std::make_move_iterator(pending_.begin()),
                 std::make_move_iterator(pending_.begin() + static_cast<std::ptrdiff_t>(n)));
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
    if (!pending_.empty()) oldest_ = std::chrono::steady_clock::now();
    const auto first = taken_;
    taken_ += n;
    const auto flight = in_flight_.insert(first);
    lock.unlock();
    write(batch);
    lock.lock();
    in_flight_.erase(flight);
    done_.notify_all();
  }
}

void CompletionBatcher::write_once(std::span<const Completion> batch) {
  auto conn = pool_.acquire();
  std::vector<CompletionResult> results;
  try {
    results = storage::consumer(store_).complete(*conn, batch);
  } catch (const Error& e) {
    // A session on a read-only server (25006 after a fail-over) stays there: the next try
    // needs a new connection, which may reach the new primary.
    if (server_wide(e) && e.retry() == Retry::kRetryCall) conn->close();
    throw;
  }
  std::uint64_t stale = 0;
  for (const auto& r : results) {
    if (r.stale()) ++stale;
  }
  // The stats first: whoever is told of a row by its callback sees it counted.
  {
    std::lock_guard lock(mu_);
    ++stats_.flushes;
    stats_.written += batch.size();
    stats_.stale += stale;
  }
  if (!on_result_) return;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    // The rows are written: a callback that throws must not make them look dropped or
    // keep the other rows' callbacks from running.
    try {
      on_result_(batch[i], results[i]);
    } catch (const std::exception& e) {
      spdlog::error("completion result callback for job {} threw: {}", batch[i].job_id, e.what());
    }
  }
}

void CompletionBatcher::drop(std::size_t rows, const std::exception& e) {
  spdlog::error("completion flush of {} rows failed, left to rescue: {}", rows, e.what());
  std::lock_guard lock(mu_);
  ++stats_.failed_flushes;
  stats_.dropped += rows;
  stats_.last_failure = std::chrono::steady_clock::now();
}

bool CompletionBatcher::hold(std::size_t rows, const Error& e, int attempt,
                             std::chrono::milliseconds backoff,
                             std::optional<std::chrono::steady_clock::time_point>& drain_give_up) {
  storage::engine_metrics(store_).completion_flush_server_errors.with({e.sqlstate()}).inc();
  const auto now = std::chrono::steady_clock::now();
  bool alarm = false;
  {
    std::lock_guard lock(mu_);
    ++stats_.server_errors;
    stats_.last_failure = now;
    // Someone waits for these rows (flush(), ~CompletionBatcher): from now on retry_for
    // bounds the wait, as for any retryable error.
    if (stopping_ || flush_target_ > done_below()) {
      if (!drain_give_up) drain_give_up = now + options_.retry_for;
      if (now + backoff > *drain_give_up) {
        ++stats_.failed_flushes;
        stats_.dropped += rows;
        spdlog::error(
            "completion flush of {} rows still failing with SQLSTATE {} while stopping, left to "
            "rescue: {}",
            rows, e.sqlstate(), e.what());
        return false;
      }
    }
    ++stats_.retries;
    alarm = !last_alarm_ || now - *last_alarm_ >= kAlarmEvery;
    if (alarm) last_alarm_ = now;
  }
  if (alarm) {
    spdlog::error(
        "completion flush of {} rows failed with SQLSTATE {}, an error of the server or schema, "
        "not of a row: the rows are kept and retried until it is fixed (attempt {}): {}",
        rows, e.sqlstate(), attempt, e.what());
  } else {
    spdlog::debug("completion flush of {} rows: SQLSTATE {} again (attempt {}), retrying in {} ms",
                  rows, e.sqlstate(), attempt, backoff.count());
  }
  return true;
}

void CompletionBatcher::write(std::span<const Completion> batch) {
  const auto give_up = std::chrono::steady_clock::now() + options_.retry_for;
  auto backoff = std::chrono::milliseconds(10);
  std::optional<std::chrono::steady_clock::time_point> drain_give_up;
  bool held = false;
  for (int attempt = 1;; ++attempt) {
    try {
      write_once(batch);
      if (held) {
        spdlog::info("completion flush of {} rows written after {} attempts", batch.size(),
                     attempt);
      }
      return;
    } catch (const Error& e) {
      if (server_wide(e)) {
        // Not a row's fault: bisecting would fail every half the same way and drop the
        // rows one by one; keep them all and try again.
        if (!hold(batch.size(), e, attempt, backoff, drain_give_up)) return;
        held = true;
        std::this_thread::sleep_for(backoff);
        backoff = std::min(backoff * 2, kMaxBackoff);
        continue;
      }
      if (e.retry() == Retry::kDoNotRetry) {
        if (batch.size() == 1) {
          drop(1, e);
          return;
        }
        // Bisect: the error belongs to some row(s); the halves without one go through.
        spdlog::warn("completion flush of {} rows rejected, writing it in halves: {}", batch.size(),
                     e.what());
        {
          std::lock_guard lock(mu_);
          ++stats_.splits;
        }
        const auto half = batch.size() / 2;
        write(batch.first(half));
        write(batch.subspan(half));
        return;
      }
      if (std::chrono::steady_clock::now() + backoff > give_up) {
        drop(batch.size(), e);
        return;
      }
      spdlog::warn("completion flush failed (attempt {}), retrying in {} ms: {}", attempt,
                   backoff.count(), e.what());
      {
        std::lock_guard lock(mu_);
        ++stats_.retries;
      }
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, kMaxBackoff);
    } catch (const std::exception& e) {
      // Not from the database (out of memory, a bug in a result callback): nothing to
      // learn from retrying, and the batcher thread must survive it.
      drop(batch.size(), e);
      return;
    }
  }
}

}  // namespace awa::runtime
