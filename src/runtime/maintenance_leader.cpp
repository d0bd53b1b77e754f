#include "runtime/maintenance_leader.hpp"

#include <algorithm>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>

#include <spdlog/spdlog.h>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "awa/metrics.hpp"
#include "pg/native.hpp"
#include "runtime/backoff.hpp"
#include "runtime/instance_registry.hpp"
#include "runtime/ring_maintenance.hpp"
#include "schema/sql_catalog.hpp"
#include "storage/dependencies.hpp"
#include "storage/enqueue_unique.hpp"
#include "storage/periodic.hpp"
#include "storage/store_access.hpp"

namespace awa::runtime {
namespace {

// What each step is doing, for the log: "maintenance: <name> failed: ...".
constexpr const char* kStepNames[] = {
    "rescuing stale attempts",    "promoting due jobs",         "maintaining the queue ring",
    "maintaining the claim ring", "maintaining the lease ring", "purging the DLQ",
    "expiring runtime instances", "re-checking waiting jobs",   "purging workflow history",
};

}  // namespace

MaintenanceLeader::MaintenanceLeader(MaintenanceOptions options, QueueStorage& store)
    : options_(std::move(options)),
      store_(store),
      try_lock_sql_(sql::file("queries/runtime/try_leader_lock.sql")),
      release_sql_(sql::file("queries/runtime/release_leader_lock.sql")),
      lease_acquire_sql_(sql::render(sql::file("queries/runtime/lease_acquire.sql"),
                                     sql::quote_schema(options_.schema))),
      lease_release_sql_(sql::render(sql::file("queries/runtime/lease_release.sql"),
                                     sql::quote_schema(options_.schema))),
      lease_ttl_(options_.lease_ttl.count() > 0
                     ? options_.lease_ttl
                     : std::max<std::chrono::milliseconds>(5 * options_.interval,
                                                           std::chrono::seconds(2))),
      leader_gauge_(storage::metrics_registry(store)
                        .gauge("awa_maintenance_leader",
                               "1 while this process is the schema's maintenance leader "
                               "(promotion, rescue, queue gauges, periodic jobs), else 0; "
                               "summed over processes it is 1 when the schema has a leader",
                               {"schema"})
                        .with({options_.schema})),
      rescued_total_(storage::metrics_registry(store).counter(
          "awa_jobs_rescued_total",
          "Attempts the maintenance leader closed because their heartbeat went stale, by what "
          "became of the job: rescued (retried), failed or dlq",
          {"schema", "state"})) {
  if (options_.batch < 1) throw InvalidArgument("maintenance: batch must be at least 1");
}

MaintenanceLeader::~MaintenanceLeader() { stop(); }

void MaintenanceLeader::start() {
  if (thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { run(); });
}

void MaintenanceLeader::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool MaintenanceLeader::pause(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, d, [&] { return stopping_; });
}

void MaintenanceLeader::run() {
  // The public wrapper, so that Admin can use it too; pg::native() for everything else.
  std::optional<awa::Connection> conn;
  auto backoff = kMinBackoff;
  bool in_gauge = false;  // this leader counts in awa_maintenance_leader
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) break;
    }
    auto wait = options_.interval;
    try {
      if (!conn || !pg::native(*conn).ok()) {
        if (leader_.exchange(false)) {
          spdlog::warn("maintenance: lost leadership (connection lost)");
          drop_gauges();
        }
        conn.reset();
        conn.emplace(pg::adopt(pg::Connection::connect(options_.connect)));
      }
      if (lease()) {
        const bool leads = renew_lease(*conn);
        if (leads && !leader_.exchange(true)) {
          spdlog::info("maintenance: this process is the leader for schema {} (lease of {} ms)",
                       options_.schema, lease_ttl_.count());
        } else if (!leads && leader_.exchange(false)) {
          spdlog::warn(
              "maintenance: lost leadership: the lease expired and another process took it");
          drop_gauges();
        }
      } else if (!leader_.load()) {
        if (pg::native(*conn)
                .exec(try_lock_sql_, pg::make_params(options_.schema))
                .get<bool>(0, 0)) {
          leader_.store(true);
          spdlog::info("maintenance: this process is the leader for schema {}", options_.schema);
        }
      }
      if (leader_.load() && round(*conn)) tick(*conn);
      backoff = kMinBackoff;
    } catch (const std::exception& e) {
      // A broken connection takes the session lock with it; any other failure (a
      // statement error) leaves the lock held, and the next round tries again.
      if (!conn || !pg::native(*conn).ok()) {
        if (leader_.exchange(false)) {
          spdlog::warn("maintenance: lost leadership: {}", e.what());
          drop_gauges();
        } else {
          spdlog::warn("maintenance: {}", e.what());
        }
        conn.reset();
      } else {
        spdlog::warn("maintenance round failed: {}", e.what());
      }
      wait = backoff;
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
    // Moved by this leader's own transitions, not set: two clients of one process on the
    // same schema share the series, and it counts the leaders among them.
    if (leader_.load() != in_gauge) {
      in_gauge = !in_gauge;
      in_gauge ? leader_gauge_.inc() : leader_gauge_.dec();
    }
    if (!pause(wait)) break;
  }
  if (in_gauge) leader_gauge_.dec();
  if (conn && leader_.load()) {
    try {
      if (lease()) {
        pg::native(*conn).exec(lease_release_sql_, pg::make_params(options_.lease_holder));
      } else {
        pg::native(*conn).exec(release_sql_, pg::make_params(options_.schema));
      }
    } catch (const std::exception& e) {
      spdlog::warn("maintenance: releasing the leader lock: {} (closing releases it)", e.what());
    }
    spdlog::info("maintenance: released leadership for schema {}", options_.schema);
  }
  leader_.store(false);
  drop_gauges();
  conn.reset();
}

bool MaintenanceLeader::renew_lease(awa::Connection& conn) {
  return pg::native(conn)
             .exec_cached(lease_acquire_sql_,
                          pg::make_params(options_.lease_holder,
                                          static_cast<std::int64_t>(lease_ttl_.count())))
             .rows() == 1;
}

bool MaintenanceLeader::stopping() {
  std::lock_guard lock(mu_);
  return stopping_;
}

bool MaintenanceLeader::step(awa::Connection& conn, Step s, const std::function<void()>& body) {
  const auto i = static_cast<std::size_t>(s);
  static_assert(std::size(kStepNames) == static_cast<std::size_t>(Step::kCount));
  try {
    body();
  } catch (const std::exception& e) {
    // A lost connection is every step's failure, and the leadership's: run() handles it.
    if (!pg::native(conn).ok()) throw;
    step_failures_.fetch_add(1, std::memory_order_relaxed);
    // Once per streak, not once per round.
    if (!step_failing_[i])
      spdlog::warn("maintenance: {} failed (the other steps go on; retried every round): {}",
                   kStepNames[i], e.what());
    step_failing_[i] = true;
    return false;
  }
  if (step_failing_[i]) spdlog::info("maintenance: {} works again", kStepNames[i]);
  step_failing_[i] = false;
  return true;
}

bool MaintenanceLeader::round(awa::Connection& conn) {
  bool ok = true;
  // Rescue first: rescued jobs land in deferred_jobs due now, and the promotion below
  // then puts them back on ready in the same round.
  ok = step(conn, Step::kRescue, [&] { rescue(conn); }) && ok;
  if (stopping()) return ok;
  ok = step(conn, Step::kPromote, [&] { promote(conn); }) && ok;
  if (stopping()) return ok;
  // Jobs enqueued after parents since the last round: a parent that ended while such a
  // job's transaction was open is applied here (docs/workflows.md, "Dependencies").
  ok = step(conn, Step::kVerifyWaiting,
            [&] {
              storage::verify_waiting_jobs(pg::native(conn), sql::quote_schema(options_.schema),
                                           options_.batch);
            }) &&
       ok;
  if (stopping()) return ok;
  periodic(conn);
  if (options_.rotate_interval.count() > 0) ok = rings(conn) && ok;
  const auto now = std::chrono::steady_clock::now();
  if (last_purge_ == std::chrono::steady_clock::time_point{} ||
      now - last_purge_ >= options_.purge_interval) {
    last_purge_ = now;
    ok = step(conn, Step::kPurgeDlq,
              [&] {
                const int purged = Admin(options_.schema).purge_dlq(conn, options_.dlq_retention);
                if (purged > 0) spdlog::info("maintenance: purged {} dead letters", purged);
              }) &&
         ok;
    purge_unique_keys(conn);
    ok = step(conn, Step::kPurgeDependencies,
              [&] {
                storage::purge_dependencies(pg::native(conn), sql::quote_schema(options_.schema),
                                            options_.failed_retention);
              }) &&
         ok;
    ok = step(conn, Step::kExpireInstances,
              [&] {
                const int expired =
                    InstanceRegistry::expire(pg::native(conn), sql::quote_schema(options_.schema),
                                             options_.instance_retention);
                if (expired > 0)
                  spdlog::info("maintenance: forgot {} runtime instances not seen for {} s",
                               expired, options_.instance_retention.count());
              }) &&
         ok;
  }
  gauges(conn);
  return ok;
}

void MaintenanceLeader::rescue(awa::Connection& conn) {
  for (;;) {
    const auto rescued = store_.rescue(conn, options_.stale_after, options_.batch);
    if (!rescued.empty()) {
      rescued_.fetch_add(rescued.size(), std::memory_order_relaxed);
      for (const auto& r : rescued) rescued_total_.with({options_.schema, r.state}).inc();
      spdlog::info("maintenance: rescued {} stale attempts (first: job {} {}: {})", rescued.size(),
                   rescued.front().job_id, rescued.front().state, rescued.front().why);
    }
    if (static_cast<int>(rescued.size()) < options_.batch || stopping()) return;
  }
}

void MaintenanceLeader::promote(awa::Connection& conn) {
  for (;;) {
    const int n = store_.promote_due(conn, options_.batch);
    promoted_.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
    if (n < options_.batch || stopping()) return;
  }
}

void MaintenanceLeader::purge_unique_keys(awa::Connection& conn) {
  // Steps of 5,000 keys, at most 10 per purge round: 50,000 keys swept a round, and a
  // huge key table costs several rounds rather than one long one.
  constexpr int kStep = 5000;
  constexpr int kMaxSteps = 10;
  int purged = 0;
  try {
    for (int i = 0; i < kMaxSteps; ++i) {
      const auto step = storage::purge_unique_keys(
          pg::native(conn), sql::quote_schema(options_.schema), unique_cursor_, kStep);
      purged += step.purged;
      unique_cursor_ = step.next;
      if (!unique_cursor_) break;
      std::lock_guard lock(mu_);
      if (stopping_) break;
    }
  } catch (const Error& e) {
    // Only this sweep is at stake: the next purge round starts it again.
    spdlog::warn("maintenance: purging unique keys: {}", e.what());
    unique_cursor_.reset();
  }
  if (purged > 0) spdlog::info("maintenance: forgot {} unique keys whose jobs ended", purged);
}

void MaintenanceLeader::periodic(awa::Connection& conn) {
  // One call per round: a catch-up backlog larger than its per-call bound continues in
  // the next round, so the rest of maintenance never waits behind it.
  std::vector<storage::PeriodicFire> fired;
  try {
    fired = storage::fire_due_periodic(pg::native(conn), options_.schema, options_.periodic_batch,
                                       options_.periodic_catch_up);
    periodic_failing_ = false;
  } catch (const Error& e) {
    // Whatever broke the call (a schema not migrated yet, a lost connection, which the
    // next round notices) must not stop the rest of maintenance. Once per streak.
    if (!periodic_failing_) spdlog::warn("maintenance: firing periodic jobs: {}", e.what());
    periodic_failing_ = true;
    return;
  }
  std::uint64_t jobs = 0;
  for (const auto& f : fired) {
    if (f.error) {
      // The schedule is not advanced: it is tried again next round (after the healthy
      // ones), and last_error shows in `awa cron list`.
      periodic_failed_.fetch_add(1, std::memory_order_relaxed);
      storage::engine_metrics(store_).periodic_fires.with({f.name, "failed"}).inc();
      spdlog::warn("maintenance: periodic job {} (occurrence {}) not enqueued: {}", f.name,
                   f.occurrence.value_or("?"), *f.error);
    } else {
      ++jobs;
      storage::engine_metrics(store_).periodic_fires.with({f.name, "enqueued"}).inc();
    }
  }
  if (jobs > 0) {
    periodic_fired_.fetch_add(jobs, std::memory_order_relaxed);
    spdlog::debug("maintenance: enqueued {} periodic jobs", jobs);
  }
}

void MaintenanceLeader::gauges(awa::Connection& conn) {
  if (options_.gauges_interval.count() <= 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (last_gauges_ != std::chrono::steady_clock::time_point{} &&
      now - last_gauges_ < options_.gauges_interval)
    return;
  last_gauges_ = now;
  try {
    for (auto& lane :
         metrics::refresh_lane_gauges(storage::engine_metrics(store_), pg::native(conn),
                                      options_.schema, std::nullopt, options_.gauges_cap))
      gauge_lanes_.insert(std::move(lane));
    gauges_failing_ = false;
  } catch (const Error& e) {
    // The gauges go stale; the maintenance itself is fine. A lost connection is noticed
    // by the next round.
    if (!gauges_failing_) spdlog::warn("maintenance: refreshing the queue gauges: {}", e.what());
    gauges_failing_ = true;
  }
}

void MaintenanceLeader::drop_gauges() {
  metrics::zero_lane_gauges(storage::engine_metrics(store_),
                            {gauge_lanes_.begin(), gauge_lanes_.end()});
  gauge_lanes_.clear();
  last_gauges_ = {};  // a new leadership refreshes at once
}

void MaintenanceLeader::tick(awa::Connection& conn) {
  if (options_.instance == nullptr) return;
  try {
    options_.instance->leader_tick(pg::native(conn));
    if (tick_failing_) spdlog::info("maintenance: recording leader ticks again");
    tick_failing_ = false;
  } catch (const Error& e) {
    // Maintenance itself went fine; only `awa health` loses sight of it. Once per streak,
    // not once per round. A lost connection is noticed by the next round.
    if (!tick_failing_)
      spdlog::warn("maintenance: cannot record the leader tick in runtime_instances: {}", e.what());
    tick_failing_ = true;
  }
}

bool MaintenanceLeader::rings(awa::Connection& conn) {
  const auto now = std::chrono::steady_clock::now();
  const bool rotate_due = last_rotate_ == std::chrono::steady_clock::time_point{} ||
                          now - last_rotate_ >= options_.rotate_interval;
  if (rotate_due) last_rotate_ = now;
  bool ok = true;
  static_assert(std::size(kRings) == 3, "one step per ring");
  for (std::size_t i = 0; i < std::size(kRings); ++i) {
    const auto s = static_cast<Step>(static_cast<std::size_t>(Step::kQueueRing) + i);
    ok = step(conn, s, [&] { ring(conn, kRings[i], rotate_due); }) && ok;
  }
  return ok;
}

void MaintenanceLeader::ring(awa::Connection& conn, const char* name, bool rotate_due) {
  const auto step_result =
      maintain_ring(conn, Admin(options_.schema), name, rotate_due, options_.failed_retention);
  prunes_.fetch_add(static_cast<std::uint64_t>(step_result.prunes), std::memory_order_relaxed);
  if (step_result.rotated) rotations_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace awa::runtime
