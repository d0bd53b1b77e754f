// Maintenance leader (docs/runtime.md): one process per schema rescues stale attempts,
// promotes due deferred jobs and purges old dead letters.
//
// Election is a session-level advisory lock (sql/queries/runtime/try_leader_lock.sql)
// held on a dedicated connection that this class owns; the maintenance statements run on
// that same connection, so losing the connection and losing leadership are one event.
// A non-leader retries the lock every interval. A broken connection drops leadership and
// is reopened with exponential backoff (100 ms .. 5 s); nothing here ever throws out of
// the thread.
//
// Lease election (MaintenanceOptions::lease_holder set: a client behind a transaction
// pooler without a direct URL, where no session outlives a transaction): the schema's
// leader_lease row (sql/migrations/0010_leader_lease.sql) instead. Every round starts by
// taking or renewing it (sql/queries/runtime/lease_acquire.sql, one statement); a
// process leads while the row names it and has not expired; stop() expires it. The
// trade-off against the lock: a leader that stops renewing (paused, partitioned, or in a
// round longer than the lease) keeps leading in its own view until its next renewal
// attempt, while a successor may already lead — an overlap of at most one round. Every
// maintenance step is safe under two leaders (docs/deployment.md lists why), so that
// costs duplicate work, never a wrong result. A crashed leader is replaced after the
// lease expires (lease_ttl), not at once.
//
// Every round, while leader: rescue (until a call returns fewer than its limit), then
// promote due deferred jobs (likewise) — rescued jobs go to deferred_jobs due now, so the
// same round usually promotes them — then re-check the parents of jobs enqueued after
// others since the last round (storage/dependencies.hpp), then fire due periodic jobs
// (one bounded call: storage/periodic.hpp; docs/scheduling.md), then the rings (below),
// then, at most once per purge interval, purge the DLQ, the dependency edges older than
// failed_retention and the runtime instances not seen for instance_retention.
// Every gauges_interval the leader also sets the per-lane gauges of every queue of the
// schema (awa_queue_lag, awa_queue_available on /metrics; storage/queue_gauges.hpp) in
// one statement whose cost is bounded by gauges_cap rows per lane; only the leader does,
// so N workers do not multiply the cost. A process that loses the leadership (or stops)
// sets the series it wrote to 0, so summing them over processes counts each lane once.
//
// The steps are independent: rescue, promotion, each ring, the DLQ purge
// and the instance expiry each run whatever happened to the ones before them in the
// round. A step that throws is logged (once per streak of failures of that step, and
// again when it recovers) and counted (step_failures()); only a lost connection ends the
// round, and with it the leadership. Periodic jobs, the unique-key sweep and the gauges
// handle their own failures the same way.
//
// After each round in which no step failed the leader records its tick in
// runtime_instances (runtime/instance_registry.hpp), which is how `awa health` knows
// maintenance is running: a step that fails round after round shows there as a leader
// that stopped ticking, while the other steps go on.
//
// Rings (docs/design/rings.md), every round: prune each ring's sealed slots while they
// are free of live work (cheap refusals otherwise), and once per rotate interval rotate
// each ring. A rotation refused because the next slot still holds an unpruned
// generation means the ring is full: that slot is then pruned with carry (its live work
// copied forward), so a paused queue or a long attempt never stops the ring.
//
// Thread safety: start()/stop() from one thread; leader() and the counters from any.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "awa/connection.hpp"
#include "awa/metrics.hpp"
#include "awa/queue_storage.hpp"
#include "pg/connection.hpp"
#include "storage/queue_gauges.hpp"

namespace awa::runtime {

class InstanceRegistry;

struct MaintenanceOptions {
  pg::ConnectOptions connect;
  std::string schema = "awa";
  // Round period, and how often a non-leader retries the lock. Default: 1 s.
  std::chrono::milliseconds interval{1000};
  // Attempts whose heartbeat is older than this are rescued. Default: 90 s.
  std::chrono::milliseconds stale_after{90000};
  // Dead letters older than this are purged. Default: 30 days.
  std::chrono::milliseconds dlq_retention{std::chrono::hours(24 * 30)};
  // How often the DLQ purge runs (it scans dlq_entries). Default: 60 s.
  std::chrono::milliseconds purge_interval{60000};
  // Rows per rescue / promote call. Default: 1000.
  int batch = 1000;
  // Periodic schedules fired per round at most, and jobs per catch-up schedule per round.
  // Defaults: 100 and 100.
  int periodic_batch = 100;
  int periodic_catch_up = 100;
  // How often each ring rotates (only when its current slot holds rows); zero turns
  // rotation and prune off. Default: 5 s.
  std::chrono::milliseconds rotate_interval{5000};
  // Failed jobs stay in the rings (inspectable, retryable) at least this long. Default: 72 h.
  std::chrono::seconds failed_retention{std::chrono::hours(72)};
  // How often the leader refreshes the per-lane queue gauges; zero turns it off.
  // Default: 5 s.
  std::chrono::milliseconds gauges_interval{5000};
  // Available rows counted per lane at most when refreshing the gauges; a lane with more
  // reports its lag. Default: 1000.
  std::int64_t gauges_cap = 1000;
  // This process's row in runtime_instances, ticked after every round; nullptr: none.
  // REQUIRES: outlives the MaintenanceLeader.
  const InstanceRegistry* instance = nullptr;
  // Rows of runtime_instances not seen for this long are deleted (with the DLQ purge).
  // Default: 1 h.
  std::chrono::seconds instance_retention{std::chrono::hours(1)};
  // Non-empty: elect by lease row under this holder id (the instance id) instead of the
  // session advisory lock (see above). Default: empty.
  std::string lease_holder;
  // How long a taken or renewed lease lasts. Zero: 5 x interval, at least 2 s (a few
  // missed renewals before a successor may take over). Default: zero.
  std::chrono::milliseconds lease_ttl{0};
};

class MaintenanceLeader {
 public:
  // `store` must outlive this object.
  MaintenanceLeader(MaintenanceOptions options, QueueStorage& store);
  ~MaintenanceLeader();  // stop()
  MaintenanceLeader(const MaintenanceLeader&) = delete;
  MaintenanceLeader& operator=(const MaintenanceLeader&) = delete;

  void start();
  // Releases the lock, closes the connection and joins the thread. Idempotent.
  void stop();

  bool leader() const noexcept { return leader_.load(std::memory_order_relaxed); }
  std::uint64_t rescued() const noexcept { return rescued_.load(std::memory_order_relaxed); }
  std::uint64_t promoted() const noexcept { return promoted_.load(std::memory_order_relaxed); }
  std::uint64_t rotations() const noexcept { return rotations_.load(std::memory_order_relaxed); }
  std::uint64_t prunes() const noexcept { return prunes_.load(std::memory_order_relaxed); }
  // Jobs enqueued for periodic schedules, and schedule fires that failed (each logged).
  std::uint64_t periodic_fired() const noexcept {
    return periodic_fired_.load(std::memory_order_relaxed);
  }
  std::uint64_t periodic_failed() const noexcept {
    return periodic_failed_.load(std::memory_order_relaxed);
  }
  // Maintenance steps that threw (each logged; the rest of the round still ran).
  std::uint64_t step_failures() const noexcept {
    return step_failures_.load(std::memory_order_relaxed);
  }

 private:
  // The steps of a round that fail on their own (see above); a name each in kStepNames.
  enum class Step : std::uint8_t {
    kRescue,
    kPromote,
    kQueueRing,
    kClaimRing,
    kLeaseRing,
    kPurgeDlq,
    kExpireInstances,
    kVerifyWaiting,
    kPurgeDependencies,
    kCount
  };

  void run();
  // One maintenance round on the leader's connection; whether every step succeeded.
  bool round(awa::Connection& conn);
  // Runs one step: a failure is logged and counted and returns false; a lost connection
  // is rethrown (run() drops the leadership and reconnects).
  bool step(awa::Connection& conn, Step s, const std::function<void()>& body);
  // Rescues stale attempts until a call returns fewer than its limit (or stop()).
  void rescue(awa::Connection& conn);
  // Promotes due deferred jobs until a call returns fewer than its limit (or stop()).
  void promote(awa::Connection& conn);
  // Prune and rotate every ring (see above), each ring a step; whether all succeeded.
  bool rings(awa::Connection& conn);
  // Prune and rotate one ring.
  void ring(awa::Connection& conn, const char* name, bool rotate_due);
  // Whether stop() was called.
  bool stopping();
  // Fires due periodic schedules; a failed schedule is logged and counted, never thrown.
  void periodic(awa::Connection& conn);
  // Forgets unique keys whose jobs left the keys' states, in bounded steps resumed from
  // where the last round stopped (storage::purge_unique_keys).
  void purge_unique_keys(awa::Connection& conn);
  // Records the finished round in runtime_instances; a failure is logged, never thrown.
  void tick(awa::Connection& conn);
  // Refreshes the queue gauges when due; a failure is logged, never thrown.
  void gauges(awa::Connection& conn);
  // Sets the gauges this process wrote to 0 (leadership lost, or stopping).
  void drop_gauges();
  // Waits up to `d` or until stop(); returns false when stopping.
  bool pause(std::chrono::milliseconds d);
  // Lease election: takes or renews the lease; whether this process leads now.
  bool renew_lease(awa::Connection& conn);
  bool lease() const noexcept { return !options_.lease_holder.empty(); }

  const MaintenanceOptions options_;
  QueueStorage& store_;
  const std::string try_lock_sql_;
  const std::string release_sql_;
  const std::string lease_acquire_sql_;  // rendered for the schema
  const std::string lease_release_sql_;
  const std::chrono::milliseconds lease_ttl_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;

  std::atomic<bool> leader_{false};
  // awa_maintenance_leader{schema}: 1 while this process leads (updated every round), and
  // awa_jobs_rescued_total{schema,state}: what rescue did to the attempts it closed.
  metrics::Gauge& leader_gauge_;
  metrics::Family<metrics::Counter>& rescued_total_;
  std::atomic<std::uint64_t> rescued_{0};
  std::atomic<std::uint64_t> promoted_{0};
  std::atomic<std::uint64_t> rotations_{0};
  std::atomic<std::uint64_t> prunes_{0};
  std::atomic<std::uint64_t> periodic_fired_{0};
  std::atomic<std::uint64_t> periodic_failed_{0};
  std::atomic<std::uint64_t> step_failures_{0};
  std::chrono::steady_clock::time_point last_rotate_{};  // maintenance thread only
  std::chrono::steady_clock::time_point last_purge_{};   // maintenance thread only
  bool tick_failing_ = false;                            // maintenance thread only
  std::chrono::steady_clock::time_point last_gauges_{};  // maintenance thread only
  bool gauges_failing_ = false;                          // maintenance thread only
  bool periodic_failing_ = false;                        // maintenance thread only
  std::optional<std::string> unique_cursor_;             // maintenance thread only
  std::set<metrics::LaneLabels> gauge_lanes_;            // written; maintenance thread only
  // Which steps failed last time they ran (a streak is logged once); maintenance thread only.
  std::array<bool, static_cast<std::size_t>(Step::kCount)> step_failing_{};
};

}  // namespace awa::runtime
