// The dispatchers: QueueConfig::claimers threads per queue, each claiming on a connection of
// its own (woken by the client's listener, or polling), for the free workers and a prefetch
// buffer sized by the pace of the workers.
#include "runtime/client_impl.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/store_access.hpp"
#include "storage/wake_coalescer.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

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
// The producers' coalesced wake-ups rely on it (storage/wake_coalescer.hpp): after any
// wake-up, a claim starts at least kQuickRetries[0] later before the claimer sleeps for
// its poll interval, and that is after the commit of every job the wake-up stood for.
static_assert(kQuickRetries[0] > storage::WakeCoalescer::kWindow,
              "a coalesced wake-up must be answered by a claim after its window");

// Limits are set by an operator (awa queue configure) while workers run: how stale the
// dispatchers' copy may be.
constexpr std::chrono::seconds kLimitsRefresh{2};
// A concurrency-limited queue with work waiting is claimed again after this long: slots
// freed by other processes' jobs are not notified. 20 small claims a second per process
// at most, and only while rows wait.
constexpr milliseconds kConcurrencyRetry{50};
// A rate-limited queue with work waiting is claimed again after about one token's time,
// within these bounds.
constexpr milliseconds kMinRateRetry{5};
constexpr milliseconds kMaxRateRetry{1000};

std::string limits_sql(const std::string& schema) {
  return sql::render(sql::file("queries/runtime/queue_limits.sql"), sql::quote_schema(schema));
}

}  // namespace

bool Client::Impl::read_limits(QueueState& q, pg::Connection& conn, const std::string& sql) {
  const auto res = conn.exec(sql, pg::make_params(q.config.name));
  const auto rate = res.get_opt<double>(0, 0);
  const auto global = res.get_opt<std::int32_t>(0, 1);
  const bool backlog = res.get<bool>(0, 2);
  std::lock_guard lock(mu_);
  const bool changed = rate != q.max_rate || global != q.global_max_workers;
  if (q.limits_read ? changed : (rate || global)) {
    spdlog::info("dispatcher {}: limits max_rate {}, global_max_workers {}", q.config.name,
                 rate ? fmt::format("{}/s", *rate) : "none",
                 global ? std::to_string(*global) : "none");
  }
  q.max_rate = rate;
  q.global_max_workers = global;
  q.limits_read_at = Clock::now();
  q.limits_read = true;
  q.prefetch_goal = prefetch_goal(q);
  return backlog;
}

std::optional<milliseconds> Client::Impl::limited_wait(QueueState& q, pg::Connection& conn,
                                                       const std::string& sql) {
  {
    std::lock_guard lock(mu_);
    if (!q.max_rate && !q.global_max_workers) return std::nullopt;
  }
  if (!read_limits(q, conn, sql)) return std::nullopt;
  std::lock_guard lock(mu_);
  storage::engine_metrics(*store_)
      .claims_limited
      .with({q.config.name, q.max_rate && q.global_max_workers ? "rate+concurrency"
                            : q.max_rate                       ? "rate"
                                                               : "concurrency"})
      .inc();
  std::optional<milliseconds> wait;
  if (q.global_max_workers) wait = kConcurrencyRetry;
  if (q.max_rate) {
    const double token_ms = std::ceil(1000.0 / *q.max_rate);
    const auto token = milliseconds(
        static_cast<std::int64_t>(std::clamp(token_ms, static_cast<double>(kMinRateRetry.count()),
                                             static_cast<double>(kMaxRateRetry.count()))));
    // Both limits: the sooner; a claim that finds the other one binding costs one round
    // trip.
    wait = wait ? std::min(*wait, token) : token;
  }
  return wait;
}

pg::ConnectOptions Client::Impl::claim_options() const {
  pg::ConnectOptions c = connect_options();
  // Pooled: synchronous_commit = off per claim transaction (see claim_into), in the
  // claim's own round trip (pg::ConnectOptions::settings).
  if (pooled()) c.settings = {{"synchronous_commit", "off"}};
  return c;
}

bool Client::Impl::pause_dispatch(milliseconds d) {
  std::unique_lock lock(mu_);
  return !slot_cv_.wait_for(lock, d, [&] { return dispatch_stop_; });
}

int Client::Impl::reserve_claim(QueueState& q) {
  q.pace.observe(q.started, Clock::now());
  q.prefetch_goal = prefetch_goal(q);
  const int want = claim_want(q);
  q.claiming += want;
  return want;
}

int Client::Impl::await_claim(QueueState& q, bool helper) {
  std::unique_lock lock(mu_);
  int want = 0;
  // Workers wake us when they leave room to claim (wake_dispatcher_if_room); the timeout
  // only bounds the wait should a wake-up be missed. A helper also sleeps while the queue
  // is idle: claimer 0 alone answers notifications, so an idle queue costs one claim per
  // wake-up, not one per claimer.
  while (!dispatch_stop_ && ((helper && !q.busy) || (want = reserve_claim(q)) == 0)) {
    ++q.waiting_claimers;
    slot_cv_.wait_for(lock, q.config.poll_interval);
    --q.waiting_claimers;
    q.claimers_woken = false;
  }
  // reserve_claim ran under this lock, so a successful reservation saw dispatch_stop_ unset.
  return dispatch_stop_ ? 0 : want;
}

std::optional<int> Client::Impl::claim_into(QueueState& q, std::optional<pg::Connection>& conn,
                                            int want, const std::string& limits_sql) {
  std::vector<ClaimedEntry> claimed;
  Clock::duration took{};
  try {
    if (!conn || !conn->ok()) {
      conn.reset();
      // Kept only once fully set up: a setup step that fails is retried on a new one.
      auto fresh = pg::Connection::connect(claim_options());
      // A claim need not wait for its WAL flush: if the server loses an acknowledged
      // claim in a crash, the job is simply claimable again (at-least-once: it may run
      // twice, it is never lost), and a completion, which commits synchronously, flushes
      // the WAL through its attempt's claim before it is acknowledged — so no finished job
      // can come back. This takes the fsync out of every claim round trip.
      // Through a transaction pooler a session SET would land on whichever server session
      // serves it and apply to its other clients, not reliably to our claims: pooled
      // claim connections set it per claim transaction instead (claim_options()).
      if (!pooled()) fresh.exec("SET synchronous_commit = off");
      conn.emplace(std::move(fresh));
    }
    bool stale = false;
    {
      std::lock_guard lock(mu_);
      stale = !q.limits_read || Clock::now() - q.limits_read_at >= kLimitsRefresh;
    }
    if (stale) read_limits(q, *conn, limits_sql);
    QueueStorage::ClaimOptions copts;
    copts.max_batch = want;
    copts.deadline = q.config.deadline;
    copts.aging = q.config.priority_aging;
    const auto t0 = Clock::now();
    claimed = storage::consumer(*store_).claim(*conn, q.config.name, copts);
    took = Clock::now() - t0;
  } catch (const std::exception& e) {
    {
      std::lock_guard lock(mu_);
      q.claiming -= want;
      q.last_claim = Clock::now();
      q.claim_error = e.what();
    }
    spdlog::warn("dispatcher {}: {}", q.config.name, e.what());
    if (conn && !conn->ok()) conn.reset();
    return std::nullopt;
  }
  const int n = static_cast<int>(claimed.size());
  hand_off(q, claimed, want);
  std::lock_guard lock(mu_);
  q.last_claim = Clock::now();
  q.claim_error.reset();
  if (n > 0) {
    q.pace.claimed(took, q.started, Clock::now());
    q.prefetch_goal = prefetch_goal(q);
    if (!q.busy) {
      q.busy = true;
      slot_cv_.notify_all();  // the helper claimers
    }
  } else {
    q.busy = false;
  }
  // This claim's reservation is gone: another claimer may now have room.
  wake_dispatcher_if_room(q);
  return n;
}

void Client::Impl::dispatch(QueueState& q) {
  const std::string sql = limits_sql(options_.schema);
  std::optional<pg::Connection> conn;
  auto backoff = kMinBackoff;
  std::size_t quick = 0;
  for (;;) {
    const int want = await_claim(q, false);
    if (want == 0) break;  // stopping
    bool woken = false;
    {
      // Notifications that arrived before this claim are answered by it; dropping them
      // saves an empty claim. One arriving during the claim ends the wait after it.
      std::lock_guard lock(mu_);
      woken = std::exchange(q.notified, false);
    }
    const auto got = claim_into(q, conn, want, sql);
    // A wake-up answered by this claim restarts the quick retries, like one that ends a
    // wait (see kQuickRetries).
    if (woken) quick = 0;
    if (!got) {
      spdlog::info("dispatcher {}: retrying in {} ms", q.config.name, backoff.count());
      if (!pause_dispatch(backoff)) break;
      backoff = std::min(backoff * 2, kMaxBackoff);
      continue;
    }
    backoff = kMinBackoff;
    // claim_ready_runtime drains one lane per call: rows on other lanes may be waiting,
    // so any success means "claim again", not just a full batch.
    if (*got > 0) {
      quick = 0;
      continue;
    }
    milliseconds wait = q.config.poll_interval;
    if (quick < kNoQuickRetry) wait = std::min(wait, kQuickRetries[quick++]);
    try {
      if (const auto limited = limited_wait(q, *conn, sql)) wait = std::min(wait, *limited);
    } catch (const std::exception& e) {
      // Only the wait is at stake: poll as if the queue were not limited.
      spdlog::warn("dispatcher {}: {}", q.config.name, e.what());
      if (!conn->ok()) conn.reset();
    }
    if (!conn) continue;
    // Until the listener routes a notification of this queue, a retry or poll is due, or
    // stop. Pooled without a direct URL nothing listens: the claimer polls
    // (docs/deployment.md).
    std::unique_lock lock(mu_);
    if (slot_cv_.wait_for(lock, wait, [&] { return dispatch_stop_ || q.notified; })) quick = 0;
    if (dispatch_stop_) break;
  }
  spdlog::debug("dispatcher {}: stopped", q.config.name);
}

void Client::Impl::help_dispatch(QueueState& q) {
  const std::string sql = limits_sql(options_.schema);
  std::optional<pg::Connection> conn;
  auto backoff = kMinBackoff;
  for (;;) {
    const int want = await_claim(q, true);
    if (want == 0) break;  // stopping
    if (!claim_into(q, conn, want, sql)) {
      if (!pause_dispatch(backoff)) break;
      backoff = std::min(backoff * 2, kMaxBackoff);
      continue;
    }
    backoff = kMinBackoff;
  }
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
      const int n = storage::consumer(*store_).release(*conn, entries,
                                                       "released unstarted: the worker stopped");
      released_.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
      storage::engine_metrics(*store_)
          .job_released.with({q->config.name})
          .inc(static_cast<std::uint64_t>(n));
      spdlog::info("queue {}: handed back {} prefetched jobs", q->config.name, n);
    } catch (const std::exception& e) {
      // Their attempts stay open: rescue retries them after stale_after (at-least-once).
      spdlog::warn("queue {}: could not hand back {} prefetched jobs ({}); rescue will retry them",
                   q->config.name, entries.size(), e.what());
    }
  }
}

}  // namespace awa
