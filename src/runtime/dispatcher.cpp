// The dispatchers: one thread per queue that claims on its own LISTENing connection, for
// the free workers and a prefetch buffer sized by the pace of the workers.
#include "runtime/client_impl.hpp"

#include <cmath>

#include <spdlog/spdlog.h>

namespace awa {
namespace {

using Clock = std::chrono::steady_clock;
using client_detail::kMaxBackoff;
using client_detail::kMinBackoff;
using std::chrono::milliseconds;

// An empty claim right after a wake-up or a successful claim may only mean that another
// claimer (another process) holds the lanes with rows (claim_ready_runtime uses SKIP
// LOCKED). Retry after these short pauses before falling back to the poll interval;
// bounded, so an empty queue costs two extra claims per burst and no more.
constexpr milliseconds kQuickRetries[] = {milliseconds(5), milliseconds(25)};
constexpr std::size_t kNoQuickRetry = std::size(kQuickRetries);

// The prefetch goal: jobs the workers start per millisecond times the claim round trip,
// both smoothed (weight of the newest sample), doubled because the dispatcher claims
// when half the goal is gone — so what a claim brings lasts about one round trip, the
// time the next claim takes. Starts are measured over windows of at least kMinWindow.
constexpr double kSmoothing = 0.5;
constexpr double kGoalFactor = 2.0;
constexpr auto kMinWindow = std::chrono::microseconds(2000);

class Pace {
 public:
  // After a claim that took `took` and brought rows; `started` = the queue's starts so far.
  void claimed(Clock::duration took, std::uint64_t started) {
    const double ms = std::chrono::duration<double, std::milli>(took).count();
    claim_ms_ = claim_ms_ == 0 ? ms : claim_ms_ + kSmoothing * (ms - claim_ms_);
    observe(started);
  }
  // The workers' pace is also read when no claim was needed for a while.
  void observe(std::uint64_t started) {
    const auto now = Clock::now();
    if (!since_) {
      since_ = now;
      started_since_ = started;
      return;
    }
    const auto window = now - *since_;
    if (window < kMinWindow) return;
    const double per_ms = static_cast<double>(started - started_since_) /
                          std::chrono::duration<double, std::milli>(window).count();
    per_ms_ += kSmoothing * (per_ms - per_ms_);
    since_ = now;
    started_since_ = started;
  }
  int goal(int max_prefetch) const {
    const double g = std::ceil(kGoalFactor * per_ms_ * claim_ms_);
    return static_cast<int>(std::min(g, static_cast<double>(max_prefetch)));
  }

 private:
  double per_ms_ = 0;
  double claim_ms_ = 0;
  std::optional<Clock::time_point> since_;
  std::uint64_t started_since_ = 0;
};

}  // namespace

bool Client::Impl::pause_dispatch(milliseconds d) {
  std::unique_lock lock(mu_);
  return !slot_cv_.wait_for(lock, d, [&] { return dispatch_stop_; });
}

void Client::Impl::dispatch(QueueState& q) {
  std::optional<pg::Connection> conn;
  auto backoff = kMinBackoff;
  std::size_t quick = 0;
  Pace pace;
  QueueStorage::ClaimOptions copts;
  copts.deadline = q.config.deadline;
  copts.aging = q.config.priority_aging;
  for (;;) {
    int want = 0;
    {
      std::unique_lock lock(mu_);
      // Workers wake us when they leave room to claim (wake_dispatcher_if_room); the
      // timeout only bounds the wait should a wake-up be missed.
      while (!dispatch_stop_ && (want = claim_want(q)) == 0) {
        q.dispatcher_waiting = true;
        slot_cv_.wait_for(lock, q.config.poll_interval);
        q.dispatcher_waiting = false;
        pace.observe(q.started);
        q.prefetch_goal = pace.goal(q.config.max_prefetch);
      }
      if (dispatch_stop_) break;
      q.claiming = want;
    }
    std::vector<ClaimedEntry> claimed;
    Clock::duration took{};
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
      const auto t0 = Clock::now();
      claimed = store_->claim(*conn, q.config.name, copts);
      took = Clock::now() - t0;
      backoff = kMinBackoff;
    } catch (const std::exception& e) {
      {
        std::lock_guard lock(mu_);
        q.claiming = 0;
      }
      spdlog::warn("dispatcher {}: {} (retrying in {} ms)", q.config.name, e.what(),
                   backoff.count());
      if (conn && !conn->ok()) conn.reset();
      if (!pause_dispatch(backoff)) break;
      backoff = std::min(backoff * 2, kMaxBackoff);
      continue;
    }
    const bool got_some = !claimed.empty();
    hand_off(q, claimed, want);
    if (got_some) {
      std::lock_guard lock(mu_);
      pace.claimed(took, q.started);
      q.prefetch_goal = pace.goal(q.config.max_prefetch);
    }
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

void Client::Impl::hand_off(QueueState& q, std::vector<ClaimedEntry>& claimed, int reserved) {
  const int n = static_cast<int>(claimed.size());
  std::vector<std::unique_ptr<Job>> jobs;
  jobs.reserve(claimed.size());
  for (auto& e : claimed) jobs.push_back(std::make_unique<Job>(*this, std::move(e), q));
  {
    std::lock_guard lock(mu_);
    q.claiming -= reserved;
    for (auto& j : jobs) {
      running_.emplace(j->key(), j.get());
      q.ready.push_back(std::move(j));
    }
  }
  if (n == 0) return;
  claimed_.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
  q.prefetched_gauge->inc(n);
  if (n == 1) {
    work_cv_.notify_one();
  } else {
    work_cv_.notify_all();
  }
}

void Client::Impl::release_prefetched() {
  for (auto& q : queues_) {
    std::vector<std::unique_ptr<Job>> jobs;
    {
      std::lock_guard lock(mu_);
      for (auto& j : q->ready) {
        running_.erase(j->key());
        jobs.push_back(std::move(j));
      }
      q->ready.clear();
    }
    if (jobs.empty()) continue;
    q->prefetched_gauge->dec(static_cast<double>(jobs.size()));
    std::vector<ClaimedEntry> entries;
    entries.reserve(jobs.size());
    for (const auto& j : jobs) entries.push_back(j->entry());
    try {
      auto conn = pool_->acquire();
      const int n = store_->release(*conn, entries, "released unstarted: the worker stopped");
      released_.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
      metrics::engine().job_released.with({q->config.name}).inc(static_cast<std::uint64_t>(n));
      spdlog::info("queue {}: handed back {} prefetched jobs", q->config.name, n);
    } catch (const std::exception& e) {
      // Their attempts stay open: rescue retries them after stale_after (at-least-once).
      spdlog::warn("queue {}: could not hand back {} prefetched jobs ({}); rescue will retry them",
                   q->config.name, entries.size(), e.what());
    }
  }
}

}  // namespace awa
