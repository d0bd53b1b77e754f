// QueueStorage's producer side, shared by the files that implement it: enqueue.cpp
// (routing, the INSERT path, wake-ups, the public entry points), enqueue_copy.cpp (the
// COPY path) and enqueue_one.cpp (the one-job path). Internal: nothing in include/awa/
// names it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <shared_mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "awa/error.hpp"
#include "awa/job.hpp"
#include "awa/metrics.hpp"
#include "awa/queue_storage.hpp"
#include "pg/connection.hpp"
#include "pg/params.hpp"
#include "pg/pipeline.hpp"
#include "storage/busy_lanes.hpp"
#include "storage/consume.hpp"
#include "storage/enqueue_after.hpp"
#include "storage/enqueue_one.hpp"
#include "storage/enqueue_unique.hpp"
#include "storage/job_columns.hpp"
#include "storage/wake_coalescer.hpp"

namespace awa {
namespace storage {

struct LaneKey {
  std::string queue;
  int priority;
  int shard;
  // std::string compares bytewise, which is PostgreSQL's "C" collation: the SQL batch
  // producer (insert_jobs_compat) sorts lanes the same way.
  auto operator<=>(const LaneKey&) const = default;
};

struct LaneBatch {
  LaneKey key;
  std::vector<std::size_t> rows;  // indexes into the input, in input order
  bool uncached = false;          // lane not known to exist (reserve_lane_range creates it)
};

struct Plan {
  std::vector<LaneBatch> lanes;  // ascending LaneKey
  std::vector<std::size_t> deferred;
  std::vector<std::string> notify_queues;
  // The shard count each queue's keyed rows were routed with (cached: see
  // QueueStorage::Impl::keyed_insert).
  std::map<std::string, int> keyed_shards;
  BusyLanes::Hold writing;  // `lanes`, counted as written by this store until the call ends
};

}  // namespace storage

struct QueueStorage::Impl {
  using LaneKey = storage::LaneKey;
  using LaneBatch = storage::LaneBatch;
  using Plan = storage::Plan;

  explicit Impl(StorageOptions o);

  // Fills `out` with the shard count of every queue in `queues`, reading the uncached ones
  // in one query.
  void load_shard_counts(pg::Connection& conn, const std::set<std::string>& queues,
                         std::unordered_map<std::string, int>& out);
  // The queue's id as last read with its shard count, or kept by remember_lanes from a
  // committed insert since; 0 when not known (yet).
  int cached_queue_id(const std::string& queue) const;

  Plan plan(pg::Connection& conn, std::span<const NewJob> jobs);

  // After a committed insert of `p`: its lanes exist, and `queue_ids` (one per lane, 0
  // when not known) are the queues' ids the reservations returned.
  void remember_lanes(const Plan& p, std::span<const int> queue_ids);

  // Keyed rows across a change of enqueue_shards (sql/functions/0022_shard_fences.sql).
  // A self-committing call routes with its cached counts; when it has keyed rows, the
  // first statement of its transaction (check_params) takes the queues' reshard locks
  // and fails with 40001 if a count changed. keyed_insert then forgets those counts and
  // plans and writes again, at most twice more: nothing of the failed try was written.
  // Without the check a producer with a stale count would route a key to its old shard
  // after the change was fenced, behind or beside the key's newer jobs.
  template <class Write>
  auto keyed_insert(pg::Connection& conn, std::span<const NewJob> jobs, Write&& write)
      -> decltype(write(std::declval<const Plan&>())) {
    for (int attempt = 0;; ++attempt) {
      const Plan p = plan(conn, jobs);
      try {
        return write(p);
      } catch (const Error& e) {
        if (e.sqlstate() != "40001" || p.keyed_shards.empty() || attempt >= 2) throw;
        forget_shard_counts(p);
      }
    }
  }
  static pg::Params check_params(const Plan& p);
  static std::pair<std::string, std::string> check_arrays(const Plan& p);  // $1, $2
  void forget_shard_counts(const Plan& p);

  pg::Params insert_params(const LaneBatch& lane, std::span<const NewJob> jobs) const;

  static pg::Params deferred_params(const Plan& p, std::span<const NewJob> jobs);

  // The `notify` statement's $1: the channel of each queue (notify_channel), as an array
  // literal.
  static std::string notify_channels(const std::vector<std::string>& queues);
  static pg::Params notify_params(const std::vector<std::string>& queues);

  // A self-committing call's wake-ups (storage/wake_coalescer.hpp): the queues whose
  // NOTIFY is sent with the call, after its commit.
  std::vector<std::string> wake_with_commit(const Plan& p);

  // The same for a pipeline whose last statement ends the call's transaction: a Sync (the
  // commit), then the carried NOTIFY, best effort, in the same round trip (`notify` below
  // says why after the commit, and why its failure is only a warning).
  std::vector<std::string> add_wake(pg::Pipeline& pipe, const Plan& p);

  // Once the call's commit is acknowledged: logs a NOTIFY sent with it that failed, and
  // sends those of its queues that it did not carry and that still need one.
  void wake_after_commit(pg::Connection& conn, const Plan& p,
                         const std::vector<std::string>& carried,
                         const std::vector<std::string>& errors);

  // The one-job path (storage/enqueue_one.hpp): a self-committing call of one job, due
  // now, to a lane the cache knows. nullopt when nothing was written (the lane row is
  // missing, or the ring moved under two tries): the caller takes the general path.
  // A COPY of one row has nothing to win over it either.
  // Roles set up before this path existed lack its grants (42501) until `awa roles setup`
  // runs again: the store then keeps to the general path, which needs none of them.
  std::optional<JobId> insert_one(pg::Connection& conn, const Plan& p,
                                  std::span<const NewJob> jobs);

  // awa_job_enqueued_total, once the rows are written: one series lookup per queue in the
  // call, not per row. Scheduled rows count as enqueued too.
  void count_enqueued(const Plan& p, std::span<const NewJob> jobs);

  // reserve_lane_range created the lane: a first enqueue to it, or (for a lane the cache
  // knew) one whose creation had rolled back. Lanes are never created ahead of their
  // reservation: a creation lock taken before an earlier lane's lane lock would invert the
  // order that reserve_lane_range (insert_jobs_compat, promotion) takes them in, and two
  // producers could deadlock (issue 10, defect 2).
  void count_created(const LaneBatch& lane, bool created);

  std::vector<JobId> insert_many(pg::Connection& conn, std::span<const NewJob> jobs);
  std::vector<JobId> insert_planned(pg::Connection& conn, const Plan& p,
                                    std::span<const NewJob> jobs);

  // Any insert inside the caller's transaction (INSERT and COPY alike): the due rows go to
  // enqueue_staging in one statement and are placed in their lanes, routed and notified
  // when the caller commits (place_staged_jobs), every lane of the transaction at once in
  // the global lock order; scheduled rows go to deferred_jobs as usual. Reserving lanes
  // per call instead let two transactions with several calls each take lanes in crossing
  // order and deadlock. Nothing here takes a lane lock, so the rotor and BusyLanes do not
  // apply: the commit picks one shard per (queue, priority) for all of the
  // transaction's unkeyed rows.
  std::vector<JobId> insert_staged(pg::Connection& conn, std::span<const NewJob> jobs);

  // The COPY path. The rows of every lane are encoded (binary COPY) before anything is
  // sent; then one script (pg::run_script, simple query protocol) reserves each lane in
  // ascending order and COPYs its rows, and, for a self-committing call, commits and
  // notifies. The lane lock is taken by the reservation and held to the commit, as in
  // INSERT mode; in between the client only patches the reserved values (ready slot,
  // lane_seq, job id, transaction time) into the encoded rows. Round trips with the lane
  // locked: one per lane (the reservation's result is needed for its rows), where the
  // text-COPY path this replaces had three (reserve, COPY start, COPY end) plus the commit.
  std::vector<JobId> insert_many_copy(pg::Connection& conn, std::span<const NewJob> jobs);
  std::vector<JobId> insert_planned_copy(pg::Connection& conn, const Plan& p,
                                         std::span<const NewJob> jobs);

  // Every entry point: calls with batch members (storage/enqueue_batch.hpp), jobs that have
  // parents (storage/enqueue_after.hpp) or unique jobs (storage/enqueue_unique.hpp) split
  // off; the others go straight to the bulk path, unchanged.
  std::vector<InsertResult> insert_results(pg::Connection& conn, std::span<const NewJob> jobs,
                                           bool copy);

  std::vector<JobId> insert_ids(pg::Connection& conn, std::span<const NewJob> jobs, bool copy);

  StorageOptions options;
  std::string quoted;
  metrics::Registry& registry;      // options.metrics, or the default registry
  metrics::EngineMetrics& metrics;  // the engine's families in it
  storage::Consumer consumer;
  storage::UniqueInserter unique;
  storage::AfterInserter after;
  storage::OneJobInserter one;
  storage::WakeCoalescer wakes;
  // Why a self-committed enqueue notifies after its commit (INSERT: a second pipeline
  // segment; COPY: after the script's COMMIT), in the same round trip: NOTIFY inside the
  // enqueue transaction would serialise every enqueue commit in the cluster: PostgreSQL
  // takes one global lock on the notification queue from pre-commit to the end of commit
  // (its WAL flush included), and our producer would wait for it while holding its lane
  // locks. Sent after commit it costs one short statement with no WAL flush. A caller-owned
  // transaction still gets the NOTIFY inside it, since only its commit makes the rows
  // visible. A failure there loses only a wake-up (workers also poll); reporting it as a
  // failed enqueue would invite a duplicate, so it is logged.
  std::string insert_lane, reserve_lane, copy_ready, insert_deferred, notify, shard_counts, stage,
      check_shards, add_batch_members;

  std::atomic<std::uint16_t> rotor{0};
  storage::BusyLanes busy;  // the lanes of the calls in flight; the rotor steps past them
  std::atomic<std::uint64_t> reservations{0}, creations{0}, repairs{0}, one_job_writes{0};
  std::atomic<bool> one_denied{false};  // see insert_one
  mutable std::shared_mutex mu;
  // A queue's shard count and its id in the hot tables (0: none yet), read together.
  struct CachedShards {
    int shards;
    int queue_id;
    std::chrono::steady_clock::time_point read_at;
  };
  std::unordered_map<std::string, CachedShards> shard_cache;  // guarded by mu
  std::set<LaneKey> lane_cache;                               // guarded by mu
};

}  // namespace awa
