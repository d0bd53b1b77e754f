#include "runtime/completion_batcher.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "awa/error.hpp"

namespace awa::runtime {

CompletionBatcher::CompletionBatcher(pg::Pool& pool, QueueStorage& store,
                                     CompletionBatcherOptions options, ResultCallback on_result)
    : pool_(pool), store_(store), options_(options), on_result_(std::move(on_result)) {
  if (options_.max_batch == 0) throw InvalidArgument("completion batcher: max_batch must be > 0");
  thread_ = std::thread([this] { run(); });
}

CompletionBatcher::~CompletionBatcher() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
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
  wake_.notify_one();
  done_.wait(lock, [&] { return finished_ >= target; });
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
      return stopping_ || pending_.size() >= options_.max_batch || flush_target_ > finished_ ||
             std::chrono::steady_clock::now() >= deadline;
    });
    const auto n = std::min(pending_.size(), options_.max_batch);
    batch.assign(std::make_move_iterator(pending_.begin()),
                 std::make_move_iterator(pending_.begin() + static_cast<std::ptrdiff_t>(n)));
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
    if (!pending_.empty()) oldest_ = std::chrono::steady_clock::now();
    lock.unlock();
    write(batch);
    lock.lock();
    finished_ += n;
    done_.notify_all();
  }
}

void CompletionBatcher::write(std::vector<Completion>& batch) {
  for (int attempt = 0;; ++attempt) {
    try {
      auto conn = pool_.acquire();
      const auto results = store_.complete(*conn, batch);
      std::uint64_t stale = 0;
      for (std::size_t i = 0; i < batch.size(); ++i) {
        if (results[i].stale()) ++stale;
        if (on_result_) on_result_(batch[i], results[i]);
      }
      std::lock_guard lock(mu_);
      ++stats_.flushes;
      stats_.written += batch.size();
      stats_.stale += stale;
      return;
    } catch (const Error& e) {
      if (e.retry() == Retry::kDoNotRetry || attempt >= options_.max_retries) {
        spdlog::error("completion flush of {} rows failed, left to rescue: {}", batch.size(),
                      e.what());
        std::lock_guard lock(mu_);
        ++stats_.failed_flushes;
        stats_.dropped += batch.size();
        return;
      }
      spdlog::warn("completion flush failed (attempt {}), retrying: {}", attempt + 1, e.what());
      std::this_thread::sleep_for(std::chrono::milliseconds(10) * (1 << attempt));
    }
  }
}

}  // namespace awa::runtime
