// The queue-storage engine's producer side (docs/design/engine.md): sharded enqueue heads.
//
// One QueueStorage per process (a "store"): it owns the per-queue shard-count cache, the
// lane-presence cache and the rotor, and is safe to share between threads, each using
// its own connection.
//
// Enqueue calls work in two modes:
//   - inside a transaction the caller opened on `conn` (transactional enqueue): the jobs
//     become visible when the caller commits and vanish if it rolls back. The call writes
//     them to a staging table only; the caller's commit places them in their lanes (a
//     deferred trigger: routing with the shard count of that moment, every lane of the
//     transaction reserved at once in the global lock order, then the queues' NOTIFY).
//     INSERT and COPY calls behave alike here (COPY pays only for large self-committing
//     batches);
//   - otherwise self-committing: the call is one atomic transaction of its own, which
//     reserves its lanes in the global lock order, writes and commits.
// They validate every job first (InvalidArgument, nothing written) and return the job
// ids in input order.
//
// What holds for concurrent transactions: no sequence of enqueue calls — any number per
// transaction, from any number of processes, keyed and unkeyed, C++ and the SQL functions
// mixed — can deadlock on lane locks (no 40P01 from lanes), because a transaction takes
// all its lane locks at one point (its commit, or its only statement) in ascending
// (queue, priority, enqueue_shard) order and then waits for no other lock. Within a lane,
// a transaction's jobs keep their call order and transactions follow in commit order.
// Until the caller commits, its own reads of the queue do not show the jobs.
//
// Unique jobs (InsertOpts::unique) take a separate, simpler path: one insert_job_compat
// statement each, which claims the job's unique key and enqueues only when no equal job
// holds it. In a call with both kinds the unique jobs go first, then the others; the ids
// stay in input order, a duplicate's being the existing job's id. A claimed key's row
// stays locked until commit: two transactions that claim the same keys in opposite orders
// (in separate calls) can deadlock on those rows (PostgreSQL aborts one with 40P01: retry
// the transaction); one call claims its keys in key order.
//
// Jobs with parents (InsertOpts::after, after_in_call; docs/workflows.md) take a path of
// their own too: the call's other jobs are written first, as above, then each job with
// parents in call order, one enqueue_after statement each, all in one transaction (the
// caller's, or one of the call's own). A parent that does not exist is refused with
// SQLSTATE 23503 and nothing of the call is written.
//
// Routing (self-committing calls): within one call, rows without an ordering_key share
// one rotor pick per (queue, priority), so a 500-row batch reserves one contiguous
// lane_seq range on one lane and issues one INSERT; the rotor advances per pick so
// successive calls spread over the shards, and a pick that lands on a lane another call of
// this store is writing right now takes the next shard none is writing (two calls on one
// lane would wait for each other's commit). Rows with an ordering_key go to
// shard_for_ordering_key(key, S). Inside a caller's transaction the commit routes the same
// way, with one pick per (queue, priority) for the whole transaction.
//
// Per-key order across a change of enqueue_shards: keyed rows are routed with the count in
// force when they are written, never a cached stale one (a self-committing call whose
// cached count changed re-routes and writes again, internally, before returning), and
// claims take a key's rows enqueued after a change only once its rows enqueued before it
// are claimed. docs/operations.md, "Adding shards", says what an operator sees.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "awa/connection.hpp"
#include "awa/job.hpp"

namespace awa {

namespace metrics {
class Registry;
}  // namespace metrics

namespace detail {
struct StorageAccess;
}  // namespace detail

struct StorageOptions {
  // Schema holding the queue tables. Default: "awa".
  std::string schema = "awa";
  // How long a queue's enqueue_shards, once read, is used before it is read again: a
  // changed shard count reaches this store's self-committing unkeyed enqueues at most this
  // long after it committed (keyed ones are checked against the current count on every
  // call, and enqueues inside a caller's transaction are routed at commit with the count
  // of that moment). Zero reads it on every call. Default: 2 s.
  std::chrono::milliseconds shard_count_ttl{2000};
  // Where this store counts what it enqueues, claims and completes (the engine's metric
  // families, awa/metrics.hpp); must outlive the store. Default (null):
  // metrics::default_registry().
  metrics::Registry* metrics = nullptr;
};

class QueueStorage {
 public:
  explicit QueueStorage(StorageOptions options = {});
  ~QueueStorage();
  QueueStorage(const QueueStorage&) = delete;
  QueueStorage& operator=(const QueueStorage&) = delete;

  // The job's id (for a duplicate unique job, the existing job's id).
  JobId insert(Connection& conn, const NewJob& job);
  // The same insert, also saying whether a unique job was a duplicate.
  InsertResult insert_result(Connection& conn, const NewJob& job);
  // One multi-row INSERT per lane, all lanes in one pipelined round trip.
  std::vector<JobId> insert_many(Connection& conn, std::span<const NewJob> jobs);
  // The same routing and reservation, rows sent with COPY: the rows can only be completed
  // once the reservation has answered, a second client turn under the lane lock. Measured
  // (docs/benchmarks.md) slower than insert_many on a queue of one shard and faster with 8
  // or more shards and many producers.
  std::vector<JobId> insert_many_copy(Connection& conn, std::span<const NewJob> jobs);

  // --- consumer side -------------------------------------------------------------------
  struct ClaimOptions {
    // Rows per claim, from one lane. Default: 512.
    int max_batch = 512;
    // Hard deadline for each claimed attempt (rescued after it). Default: none.
    std::optional<std::chrono::milliseconds> deadline;
    // Priority aging interval: a row's effective priority improves by one per interval
    // waited. Default: none (queue_meta.priority_aging_ms applies when set).
    std::optional<std::chrono::milliseconds> aging;
  };
  // One claim_ready_runtime call (its own transaction unless the caller opened one).
  std::vector<ClaimedEntry> claim(Connection& conn, const std::string& queue,
                                  const ClaimOptions& options);
  std::vector<ClaimedEntry> claim(Connection& conn, const std::string& queue) {
    return claim(conn, queue, ClaimOptions{});
  }

  // Applies many completions in one statement (one transaction unless the caller opened
  // one). Results are in input order; stale ones changed nothing.
  std::vector<CompletionResult> complete(Connection& conn, std::span<const Completion> completions);

  // Exactly-once effects (docs/workflows.md): completes the attempt `entry` inside the
  // transaction open on `conn`, with the caller's own writes, so the job is completed if
  // and only if that transaction commits (finalize_attempt). `result_json`: a result kept
  // with the job (JSON text, as for Completion::result_json). Throws InvalidArgument when
  // `conn` has no transaction open or the result is not storable; awa::Error with SQLSTATE
  // 55000 when the attempt is no longer current (rescued, cancelled, already ended) and
  // 0A000 outside READ COMMITTED: the transaction is then aborted, so nothing of it can
  // commit. Until it ends, the attempts of `entry`'s claim batch cannot be heartbeaten or
  // completed by others: call it last, just before COMMIT.
  void finalize_in(Connection& conn, const ClaimedEntry& entry,
                   const std::optional<std::string>& result_json = std::nullopt);

  // Heartbeats open attempts, materialising a leases row for each on its first beat
  // (progress, when given, is stored on the lease). Returns the ids of the attempts that
  // are still open; an attempt not returned was closed (cancelled, rescued) and its
  // handler should stop.
  struct Heartbeat {
    // The attempt, copied from its ClaimedEntry (Heartbeat::of).
    JobId job_id = 0;
    std::int64_t run_lease = 0;
    std::int64_t claim_batch = 0;
    std::int64_t lane_seq = 0;
    int ready_slot = 0;
    int attempt = 0;
    std::optional<std::string> progress_json;
    static Heartbeat of(const ClaimedEntry& entry, std::optional<std::string> progress = {}) {
      return {entry.job_id,     entry.run_lease, entry.claim_batch,  entry.lane_seq,
              entry.ready_slot, entry.attempt,   std::move(progress)};
    }
  };
  std::vector<std::pair<JobId, std::int64_t>> heartbeat(Connection& conn,
                                                        std::span<const Heartbeat> beats);

  // Closes attempts whose heartbeat (or claim, for receipt-only attempts) is older than
  // `stale`, that are past their deadline, or whose callback timed out; their jobs are
  // retried (counting the attempt) or fail / go to the DLQ. Returns what was rescued.
  struct Rescued {
    JobId job_id = 0;
    std::string state;  // "rescued" (retried), "failed" or "dlq"
    std::string why;
  };
  std::vector<Rescued> rescue(Connection& conn, std::chrono::milliseconds stale, int limit = 1000);

  // Hands back claimed attempts whose handlers never started (release_attempts): each is
  // closed without consuming its attempt, `reason` goes to the attempt history, and the
  // job is back in ready in the same transaction, claimable at once (at its lane's
  // tail). Attempts closed meanwhile are left alone. Returns how many were handed back.
  int release(Connection& conn, std::span<const ClaimedEntry> entries, std::string_view reason);

  // External callbacks (docs/scheduling.md): gives the open attempt `entry` a callback
  // id (the same one on every call) with a callback timeout of now + timeout, and
  // materialises its lease. Returns the id, or unset when the attempt is closed.
  // InvalidArgument for a timeout outside 1 ms .. 100 years.
  std::optional<std::string> register_callback(Connection& conn, const ClaimedEntry& entry,
                                               std::chrono::milliseconds timeout);
  // Parks the open attempt: state waiting_external (as Admin shows it), callback
  // timeout now + timeout when given, a callback id made if it has none. The caller's
  // worker slot is free from here; Admin::complete_external / fail_external or the
  // timeout rescue end the attempt. Returns the callback id, or unset when the attempt
  // is closed (its callback may have come first).
  std::optional<std::string> wait_for_callback(
      Connection& conn, const ClaimedEntry& entry,
      std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  // Moves up to `limit` due deferred jobs to ready; returns how many.
  int promote_due(Connection& conn, int limit = 1000);

  // The queue's enqueue_shards as this store sees it (cached for shard_count_ttl).
  int enqueue_shards(Connection& conn, const std::string& queue);

  // Forgets the cached shard counts and lanes: the next enqueue re-reads queue_meta.
  // A changed enqueue_shards is seen without it within StorageOptions::shard_count_ttl
  // (at once by keyed enqueues).
  void reset();

  // Statistics, for tests and metrics.
  struct Stats {
    std::uint64_t lane_reservations = 0;  // contiguous ranges reserved
    std::uint64_t lane_creations = 0;     // lanes created by a first enqueue (cache misses)
    std::uint64_t lane_repairs = 0;       // cached lanes found missing and recreated
    // Of the reservations, single jobs written by the one-statement path (a
    // self-committing insert of one job, due now, to a lane already seen).
    std::uint64_t one_job_writes = 0;
  };
  Stats stats() const;

  const std::string& schema() const noexcept;

 private:
  friend struct detail::StorageAccess;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The ordering-key hash (docs/design/engine.md; bit-identical to the SQL function
// shard_for_ordering_key): h = 14695981039346656037; h = h * 1099511628211 + byte.
std::uint64_t ordering_key_hash(std::string_view key);
// REQUIRES: 1 <= shards <= 64.
int shard_for_ordering_key(std::string_view key, int shards);

// The NOTIFY channel producers wake a queue's workers on: "awa:<queue>", or, for queue
// names too long for PostgreSQL's 63-byte channel names, "awa:#<ordering_key_hash>".
// Identical to the SQL function notify_channel().
std::string notify_channel(std::string_view queue);

}  // namespace awa
