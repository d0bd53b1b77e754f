// External callbacks in the runtime: a handler registers a callback id and returns
// JobResult::wait_for_callback; the attempt is parked in the database (waiting_external)
// and its worker slot freed. What ends it later — the callback, its timeout, a cancel —
// never involves this process (docs/scheduling.md, "External callbacks").
#include "awa/error.hpp"
#include "runtime/client_impl.hpp"
#include "storage/store_access.hpp"

#include <spdlog/spdlog.h>

namespace awa {

std::string Client::Impl::register_callback(Job& job, std::chrono::milliseconds timeout) {
  auto conn = pool_->acquire();
  auto id = storage::consumer(*store_).callback(*conn, job.entry(), timeout, false);
  if (!id) {
    throw Error(
        fmt::format("job {}: attempt {} is no longer open (cancelled, rescued, or ended "
                    "by its callback); no callback registered",
                    job.job_id(), job.entry().run_lease));
  }
  return *id;
}

void Client::Impl::park_for_callback(Job& job, std::chrono::milliseconds timeout) {
  try {
    auto conn = pool_->acquire();
    const auto id = storage::consumer(*store_).callback(*conn, job.entry(), timeout, true);
    if (id) {
      waiting_.fetch_add(1, std::memory_order_relaxed);
      spdlog::debug("job {}: waiting for callback {} (timeout {} ms)", job.job_id(), *id,
                    timeout.count());
    } else {
      // Not an error: the callback (or a cancel) got there before the handler returned.
      spdlog::info("job {}: attempt {} ended before it could wait for its callback", job.job_id(),
                   job.entry().run_lease);
    }
  } catch (const Error& e) {
    // A bad timeout, or the database: the attempt must not be left open with nobody
    // heartbeating it, so it ends as a retryable failure with the reason.
    spdlog::warn("job {}: could not wait for a callback: {}", job.job_id(), e.what());
    batcher_->submit(Completion::of(job.entry(), Outcome::kRetry,
                                    fmt::format("could not wait for a callback: {}", e.what())));
  }
}

}  // namespace awa
