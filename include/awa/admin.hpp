// Operator functions: queue settings and exact per-shard inspection (DESIGN.md §10).
//
// Each takes the connection to use; none caches anything. Thread safety: as the
// connection (one thread at a time).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "awa/connection.hpp"

namespace awa {

// One lane of a queue, exact at the time of the call.
struct ShardLag {
  int priority;
  int enqueue_shard;
  std::int64_t enqueue_cursor;  // next lane_seq a producer will reserve
  std::int64_t claim_cursor;    // next lane_seq a claimer will look at
  std::int64_t lag;             // enqueue_cursor - claim_cursor (counts gaps, as in ADR-025)
  std::int64_t available;       // committed, unclaimed, not cancelled rows
};

// Exact counts of one queue by state (queue_counts_exact): exact at any shard count and
// across ring rotations and prunes. completed / failed / cancelled are all-time totals.
struct QueueCounts {
  std::int64_t available = 0;  // committed, unclaimed, not cancelled
  std::int64_t running = 0;    // claimed attempts not closed yet
  std::int64_t scheduled = 0;  // deferred: scheduled or snoozed
  std::int64_t retryable = 0;  // deferred: waiting out a retry backoff, or rescued
  std::int64_t completed = 0;
  std::int64_t failed = 0;
  std::int64_t cancelled = 0;
  std::int64_t dlq = 0;  // dead letters held now
};

// The storage rings (docs/design/rings.md): "queue" (ready, done, tombstones), "claim"
// (claim batches and their closures), "lease" (materialised leases).
inline constexpr const char* kRings[] = {"queue", "claim", "lease"};

// What one rotation or prune did. `done` false: nothing changed, `reason` says why. A
// rotation's reason starts with "busy:", "idle:", "full:" (the next slot still holds an
// unpruned generation: prune it, with carry if it holds live work) or "lost the race:".
inline constexpr std::string_view kRingFull = "full:";
struct RingAction {
  std::string ring;
  bool done = false;
  std::int64_t generation = 0;  // rotate: the ring's generation now; prune: the one pruned
  int slot = 0;
  std::int64_t rows_removed = 0;  // prune: rows truncated for good
  std::int64_t rows_carried = 0;  // prune: live rows copied forward into the current slot
  std::string reason;
};

struct RingSlotStatus {
  int slot = 0;
  std::string state;            // "current", "sealed" (holds an older generation) or "pruned"
  std::int64_t generation = 0;  // the newest generation that used the slot (-1: never)
  std::int64_t rows = 0;        // exact, over the slot's partitions
};

// A past event of a ring; `at` is ISO 8601 UTC.
struct RingEvent {
  std::string at;
  std::int64_t generation = 0;
  int slot = 0;
  std::int64_t rows_removed = 0;
  std::int64_t rows_carried = 0;
  std::string reason;  // skips only
};

struct RingStatus {
  std::string ring;
  int current_slot = 0;
  std::int64_t generation = 0;
  std::vector<RingSlotStatus> slots;
  std::optional<RingEvent> last_rotation;
  std::optional<RingEvent> last_prune;
  // Why the latest rotation / prune attempt did nothing, when none has succeeded since.
  std::optional<RingEvent> last_rotate_skip;
  std::optional<RingEvent> last_prune_skip;
};

// One set of privileges a role holds on some objects of the schema.
struct RoleGrant {
  std::string kind;        // "schema", "tables", "columns", "sequences", "functions",
                           // "partitions" (TRUNCATE on the ring partitions)
  std::string privileges;  // e.g. "INSERT" or "DELETE, INSERT, SELECT, UPDATE"
  std::string objects;     // the objects, comma-separated, e.g. "deferred_jobs, ready_entries"
};

struct RoleSetup {
  std::string role;               // e.g. "awa_producer"
  bool created = false;           // false: it existed and was brought up to date
  std::vector<RoleGrant> grants;  // everything the role holds in the schema afterwards
};

// What setup_roles did: the producer, worker and admin role, in that order.
struct RolesReport {
  std::string schema;
  std::vector<RoleSetup> roles;
};

class Admin {
 public:
  // Default schema: "awa". Throws InvalidArgument for a bad schema name.
  explicit Admin(std::string schema = "awa");

  // Upserts queue_meta.enqueue_shards (ADR-025's procedure). Outside 1..64 the database's
  // CHECK constraint rejects it: ConstraintViolation with SQLSTATE 23514, nothing changed.
  // Running producers keep their cached count until QueueStorage::reset() or a restart.
  void set_enqueue_shards(Connection& conn, const std::string& queue, int shards) const;

  // Every lane of the queue, ordered by (priority, enqueue_shard); empty if the queue has
  // never been enqueued to.
  std::vector<ShardLag> queue_shards(Connection& conn, const std::string& queue) const;

  // Cancels a job wherever it is; returns what was found: "scheduled", "available",
  // "running" (the open attempt is closed; its completion will be stale; 'awa:cancel' is
  // notified with the job id), "finished" or "missing".
  std::string cancel_job(Connection& conn, std::int64_t job_id) const;

  // Deletes dead letters older than `keep`; returns how many.
  int purge_dlq(Connection& conn, std::chrono::milliseconds keep) const;

  // Exact per-state counts of the queue (all zero for a queue never used).
  QueueCounts queue_counts(Connection& conn, const std::string& queue) const;

  // Rotates `ring` ("queue", "claim" or "lease"): the next slot becomes current, only if
  // its previous generation was pruned and the current slot holds rows. A
  // compare-and-swap on the rotation ledger: concurrent rotators never both advance one
  // generation. Never waits for a lock. InvalidArgument for an unknown ring.
  RingAction rotate(Connection& conn, const std::string& ring) const;
  // Prunes the oldest sealed slot of `ring` (TRUNCATE). Refused (done = false, reason)
  // while it holds live work — a pending ready row, an open attempt, an active lease —
  // unless `carry`: then that work is copied into the current slot first, in the same
  // transaction. Failed jobs younger than `failed_retention` are always carried. Never
  // waits for a lock: a slot in use is skipped ("locked") and tried again later.
  RingAction prune(Connection& conn, const std::string& ring, bool carry = false,
                   std::chrono::seconds failed_retention = std::chrono::hours(72)) const;
  // Every ring's slots, generations and row counts (exact: reads every partition), and
  // its last rotation, prune and skip reasons.
  std::vector<RingStatus> storage_status(Connection& conn) const;

  // Least privilege: creates (or brings up to date) the NOLOGIN roles <prefix>_producer,
  // <prefix>_worker and <prefix>_admin and grants each what it needs in this schema, no
  // more; deployments grant them to their login roles.
  //   producer: enqueue only — QueueStorage::insert*, insert_job_compat,
  //     insert_jobs_compat. Cannot read any job's data, claim, complete or cancel.
  //   worker: claim, complete, heartbeat, read the jobs, and the maintenance leader's
  //     work (promotion, rescue, ring rotation and prune, DLQ purge). Cannot change
  //     queue settings (queue_meta).
  //   admin: the worker's privileges plus queue settings: every Admin function.
  // None owns an object, so none can ALTER or DROP one or migrate: run migrate() and this
  // as the schema's owner, and again after a migration (new objects get no grants until
  // then). Clients running as one of these roles need ClientOptions::migrate = false.
  // Idempotent; revokes and re-grants in one transaction (the caller's, when one is
  // open), so a re-run converges on exactly the current privilege set. Roles are
  // cluster-wide; privileges are per schema: run it once per schema.
  // REQUIRES: CREATEROLE (or superuser) and ownership of the schema's objects.
  // Throws InvalidArgument for a prefix that is not 1-54 lower-case letters, digits or
  // underscores starting with a letter or underscore.
  RolesReport setup_roles(Connection& conn, std::string_view prefix = "awa") const;

 private:
  std::string schema_;
  std::string quoted_;
};

}  // namespace awa
