// The dispatchers: one thread per queue that claims on its own LISTENing connection.
#include "runtime/client_impl.hpp"

#include <spdlog/spdlog.h>

namespace awa {
namespace {

using client_detail::kMaxBackoff;
using client_detail::kMinBackoff;
using std::chrono::milliseconds;

// An empty claim right after a wake-up or a successful claim may only mean that another
// claimer (another process) holds the lanes with rows (claim_ready_runtime uses SKIP
// LOCKED). Retry after these short pauses before falling back to the poll interval;
// bounded, so an empty queue costs two extra claims per burst and no more.
constexpr milliseconds kQuickRetries[] = {milliseconds(5), milliseconds(25)};
constexpr std::size_t kNoQuickRetry = std::size(kQuickRetries);

}  // namespace

bool Client::Impl::pause_dispatch(milliseconds d) {
  std::unique_lock lock(mu_);
  return !slot_cv_.wait_for(lock, d, [&] { return dispatch_stop_; });
}

void Client::Impl::dispatch(QueueState& q) {
  std::optional<pg::Connection> conn;
  auto backoff = kMinBackoff;
  std::size_t quick = 0;
  QueueStorage::ClaimOptions copts;
  copts.deadline = q.config.deadline;
  copts.aging = q.config.priority_aging;
  for (;;) {
    int want = 0;
    {
      std::unique_lock lock(mu_);
      // A full queue resumes as soon as a worker frees a slot (slot_cv_); the timeout
      // only bounds the wait should a notification be missed.
      slot_cv_.wait_for(lock, q.config.poll_interval,
                        [&] { return dispatch_stop_ || free_slots(q) > 0; });
      if (dispatch_stop_) break;
      want = std::min(free_slots(q), q.config.claim_batch);
      if (want <= 0) continue;
      q.inflight += want;
      inflight_total_ += want;
    }
    std::vector<ClaimedEntry> claimed;
    try {
      if (!conn || !conn->ok()) {
        conn.reset();
        conn.emplace(pg::Connection::connect(connect_options()));
        conn->listen(q.channel);
        conn->listen(q.wake_channel);
        spdlog::debug("dispatcher {}: listening", q.config.name);
      }
      // Wake-ups that arrived before this claim are answered by it; dropping them saves
      // an empty claim. One arriving during the claim is kept and wakes the wait below.
      while (conn->wait_notification(milliseconds(0))) {
      }
      copts.max_batch = want;
      claimed = store_->claim(*conn, q.config.name, copts);
      backoff = kMinBackoff;
    } catch (const std::exception& e) {
      give_back(q, want);
      spdlog::warn("dispatcher {}: {} (retrying in {} ms)", q.config.name, e.what(),
                   backoff.count());
      if (conn && !conn->ok()) conn.reset();
      if (!pause_dispatch(backoff)) break;
      backoff = std::min(backoff * 2, kMaxBackoff);
      continue;
    }
    const bool got_some = !claimed.empty();
    hand_off(q, claimed, want);
    // claim_ready_runtime drains one lane per call: rows on other lanes may be waiting,
    // so any success means "claim again", not just a full batch.
    if (got_some) {
      quick = 0;
      continue;
    }
    milliseconds wait = q.config.poll_interval;
    if (quick < kNoQuickRetry) wait = std::min(wait, kQuickRetries[quick++]);
    {
      std::lock_guard lock(mu_);
      // stop() sets the flag before it notifies the wake channel, so either we see it
      // here or the notification wakes the wait.
      if (dispatch_stop_) break;
    }
    try {
      if (conn->wait_notification(wait)) quick = 0;
    } catch (const std::exception& e) {
      spdlog::warn("dispatcher {}: {}", q.config.name, e.what());
      conn.reset();
    }
  }
  spdlog::debug("dispatcher {}: stopped", q.config.name);
}

void Client::Impl::give_back(QueueState& q, int n) {
  if (n <= 0) return;
  {
    std::lock_guard lock(mu_);
    q.inflight -= n;
    inflight_total_ -= n;
  }
  slot_cv_.notify_all();
}

void Client::Impl::hand_off(QueueState& q, std::vector<ClaimedEntry>& claimed, int reserved) {
  const int n = static_cast<int>(claimed.size());
  std::vector<std::unique_ptr<Job>> jobs;
  jobs.reserve(claimed.size());
  for (auto& e : claimed) jobs.push_back(std::make_unique<Job>(*this, std::move(e), q));
  {
    std::lock_guard lock(mu_);
    for (auto& j : jobs) {
      running_.emplace(j->key(), j.get());
      tasks_.push_back(std::move(j));
    }
  }
  claimed_.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
  q.running_gauge->inc(n);
  if (n > 0) work_cv_.notify_all();
  give_back(q, reserved - n);
}

}  // namespace awa
