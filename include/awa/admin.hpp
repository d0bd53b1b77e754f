// Operator functions: queue settings and exact per-shard inspection (docs/operations.md).
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
#include "awa/job.hpp"

namespace awa {

// One lane of a queue, exact at the time of the call.
struct ShardLag {
  int priority;
  int enqueue_shard;
  std::int64_t enqueue_cursor;  // next lane_seq a producer will reserve
  std::int64_t claim_cursor;    // next lane_seq a claimer will look at
  std::int64_t lag;             // enqueue_cursor - claim_cursor (counts rollback gaps)
  std::int64_t available;       // committed, unclaimed, not cancelled rows
};

// Exact counts of one queue by state (queue_counts_exact): exact at any shard count and
// across ring rotations and prunes, also while a prune commits. completed / failed /
// cancelled are all-time totals. Read outside a transaction, or in a READ COMMITTED one:
// a REPEATABLE READ or SERIALIZABLE transaction's snapshot can predate a prune that
// truncates a slot while it reads, and then misses that slot's counts.
struct QueueCounts {
  std::int64_t available = 0;  // committed, unclaimed, not cancelled
  std::int64_t running = 0;    // claimed attempts not closed yet
  std::int64_t scheduled = 0;  // deferred: scheduled or snoozed
  std::int64_t retryable = 0;  // deferred: waiting out a retry backoff, or rescued
  std::int64_t completed = 0;
  std::int64_t failed = 0;
  std::int64_t cancelled = 0;
  std::int64_t dlq = 0;      // dead letters held now
  std::int64_t waiting = 0;  // waiting for their parents (InsertOpts::after)
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
  // prune: rows copied forward (queue ring: into its keep slot, see RingStatus::kept_rows;
  // the other rings: into the current slot)
  std::int64_t rows_carried = 0;
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
  // Queue ring: rows in its keep slot, outside the ring, where prune moves what outlives
  // a lap (failed jobs inside their retention, unclaimed backlog, long attempts' rows);
  // a sweep deletes each once it is dead. Zero for the other rings.
  std::int64_t kept_rows = 0;
  std::optional<RingEvent> last_rotation;
  std::optional<RingEvent> last_prune;
  // Why the latest rotation / prune attempt did nothing, when none has succeeded since.
  std::optional<RingEvent> last_rotate_skip;
  std::optional<RingEvent> last_prune_skip;
};

// --- queues ------------------------------------------------------------------------------

// A queue's settings (queue_meta; defaults when it has no row).
struct QueueSettings {
  std::string queue;
  int enqueue_shards = 1;
  bool paused = false;
  bool dlq_enabled = false;
  std::optional<std::int64_t> priority_aging_ms;  // claim-time aging; unset: the worker's
  std::optional<std::int64_t> deadline_ms;        // attempt deadline; unset: the worker's
  std::optional<int> max_workers_hint;            // informational only
  // Limits enforced by every claim of the queue, in the database (docs/scheduling.md,
  // "Rate limits and concurrency"); unset: none.
  std::optional<double> max_rate;         // claims per second, all workers together
  std::optional<int> burst;               // claims at once; unset: max(1, ceil(max_rate))
  std::optional<int> global_max_workers;  // attempts open at once, all workers together
  bool configured = false;                // a queue_meta row exists
};

// A change to a queue's settings: only the fields set are written (an upsert of
// queue_meta). For the optional numbers, 0 clears the setting (back to the worker's).
struct QueueConfigChange {
  std::optional<bool> dlq_enabled;
  std::optional<std::int64_t> priority_aging_ms;
  std::optional<std::int64_t> deadline_ms;
  std::optional<int> max_workers_hint;
  // Limits: 0 clears. InvalidArgument (naming the field) for a value out of range:
  // max_rate (0, 1000000] claims/s, burst 1..1000000, global_max_workers 1..100000.
  std::optional<double> max_rate;
  std::optional<int> burst;
  std::optional<int> global_max_workers;
};

// One queue as `awa queue list` / `awa queue stats` show it.
struct QueueSummary {
  QueueSettings settings;
  QueueCounts counts;
  // Age of the oldest available job (by run_at), in seconds; unset when none is available.
  std::optional<double> oldest_available_age_s;
  // The schema knows the queue (a queue_meta row, a lane, a deferred job or a dead
  // letter); false: queue_summary of a queue never used or configured.
  bool known = false;
};

// --- rates (the dashboard's charts) ------------------------------------------------------

// The longest window of Admin::throughput and Admin::shard_claims: a day of minutes.
inline constexpr int kMaxRateWindowMinutes = 1440;

// One queue's job ends per minute; index i is the minute Throughput::start + i.
struct MinuteSeries {
  std::string queue;
  std::vector<std::int64_t> completed;  // attempts that ended completed
  std::vector<std::int64_t> failed;     // jobs that ended failed or went to the DLQ
};

// Job ends per minute over a window of whole minutes ending with the current one.
struct Throughput {
  std::string start;  // ISO 8601 UTC of bucket 0 (a whole minute, e.g. "2026-11-30T22:37:00Z")
  int minutes = 60;   // buckets per series; the last is the current, partial minute
  std::vector<MinuteSeries> queues;  // queues with at least one end in the window, by name
};

// One lane's claims per minute: jobs handed to workers (every attempt counts).
struct LaneClaims {
  int priority = 0;
  int enqueue_shard = 0;
  std::vector<std::int64_t> claims;  // index i: minute ShardClaims::start + i
};

// A queue's claims per lane per minute, over a window like Throughput's.
struct ShardClaims {
  std::string start;  // ISO 8601 UTC of bucket 0
  int minutes = 0;
  std::vector<LaneClaims> lanes;  // lanes with at least one claim in the window
};

// --- jobs --------------------------------------------------------------------------------

// Where a job is now: one of kJobStates (awa/job.hpp, which says what each means).

// One job in a listing.
struct JobSummary {
  JobId id = 0;
  std::string queue;
  std::string kind;
  std::string state;  // one of kJobStates
  int priority = 2;
  int attempt = 0;  // attempts started so far
  int max_attempts = 0;
  std::optional<int> enqueue_shard;  // unset while scheduled / retryable / in the DLQ
  std::string created_at;            // ISO 8601 UTC
  std::string run_at;                // ISO 8601 UTC; in the DLQ: when it was dead-lettered
};

// Filters of list_jobs; every set field must match. Ordered by id, ascending.
struct JobFilter {
  std::optional<std::string> queue;
  std::optional<std::string> state;  // one of kJobStates; InvalidArgument otherwise
  std::optional<std::string> kind;
  int limit = 100;             // 1..10000
  std::optional<JobId> after;  // keyset pagination: ids greater than this
};

// An error recorded by a failed attempt.
struct JobError {
  int attempt = 0;
  std::string at;  // ISO 8601 UTC
  std::string error;
};

// One event in a job's life, oldest first. `event`: "created", "scheduled" (deferred
// until `detail`), "claimed" (attempt, shard), "completed", "failed", "retried",
// "snoozed", "rescued", "cancelled", "dlq", "retried_by_operator", "moved" (to another
// queue or priority; `detail` says from where to where). An attempt end keeps the state
// it had when the operator retried it: a failed attempt retried by the operator shows as
// "retried", followed by "retried_by_operator" ("was failed").
struct JobEvent {
  std::string at;  // ISO 8601 UTC; empty for a success whose claim record was pruned
  std::string event;
  int attempt = 0;
  std::optional<int> enqueue_shard;
  std::string detail;  // error text, reason or destination; may be empty
};

// Everything known about one job: `summary` plus its body and history.
// Another job a job depends on, or that depends on it, and its state.
struct JobLink {
  JobId id = 0;
  std::string state;
};

struct JobDetail {
  JobSummary summary;
  std::string args_json;
  std::string metadata_json;  // "null" when none
  std::vector<std::string> tags;
  std::optional<std::string> ordering_key;  // raw bytes
  std::optional<std::int64_t> lane_seq;     // its ready row's place in its lane, when it has one
  std::int64_t run_lease = 0;
  std::vector<JobError> errors;
  std::optional<std::string> progress_json;  // the open attempt's last reported progress
  // The callback id the open attempt registered (JobContext::register_callback, or parked
  // with JobResult::wait_for_callback): what Admin::complete_external takes.
  std::optional<std::string> callback_id;
  // A completed job's result, when its handler returned one (JobResult::completed(json))
  // or its external callback gave one (Admin::complete_external); JSON text.
  std::optional<std::string> result_json;
  // Dependencies (InsertOpts::after): its parents with their ends (or live states while
  // pending), the jobs enqueued after it with their states now, its policy when it has
  // parents, and how many parents it still waits for while "waiting". Edges are kept for
  // the failed-job retention after they were applied.
  std::vector<JobLink> parents;
  std::vector<JobLink> children;
  std::optional<std::string> on_parent_failure;  // "cancel", "run" or "fail"
  std::optional<int> pending_parents;
  std::vector<JobEvent> timeline;
};

// What an action on one job found and did. `outcome` names the action's result, e.g.
// "retried", "moved", "reprioritised", "unchanged" (already so: nothing to do),
// "not_retryable", "not_movable", "not_found"; `state` is where the job was before
// (one of kJobStates; empty when not found).
struct JobAction {
  JobId id = 0;
  std::string state;
  std::string outcome;
};

// --- external callbacks ----------------------------------------------------------------------

// What a callback did: the job whose attempt it ended and that attempt's end state
// ("completed", "retried", "failed", "dlq"), or stale when no open attempt waits on the
// id (ended already — a duplicate or late callback, a timeout, a cancel — or unknown),
// in which case nothing changed.
struct CallbackResult {
  std::optional<JobId> job_id;
  std::string state;
  bool stale() const { return !job_id.has_value(); }
};

// --- dead-letter queue --------------------------------------------------------------------

struct DlqEntry {
  JobId id = 0;
  std::string queue;
  std::string kind;
  int priority = 2;
  int attempt = 0;
  int max_attempts = 0;
  std::string reason;
  std::string dlq_at;  // ISO 8601 UTC
  std::string args_json;
  std::vector<JobError> errors;
};

// Selects dead letters for list / retry / purge. A bulk retry or purge with no filter
// set and all = false is refused (InvalidArgument): emptying the DLQ must be explicit.
struct DlqFilter {
  std::optional<JobId> id;
  std::optional<std::string> queue;
  std::optional<std::string> kind;
  std::optional<std::chrono::seconds> older_than;  // dlq_at older than now - this
  bool all = false;
  int limit = 100;  // list only: 1..10000
};

// --- health --------------------------------------------------------------------------------

struct WorkerInstance {
  std::string instance_id;
  std::string hostname;
  int pid = 0;
  std::vector<std::string> queues;
  std::string started_at;    // ISO 8601 UTC
  std::string last_seen_at;  // ISO 8601 UTC
  bool is_leader = false;
};

struct Health {
  bool healthy = false;  // connected, schema current, a leader ticked recently
  int schema_version = 0;
  int expected_schema_version = 0;  // what this build migrates to
  bool leader_present = false;
  std::optional<double> leader_tick_age_s;  // since the leader's last maintenance round
  std::vector<WorkerInstance> workers;      // seen within the last `recent` window
  struct QueueAge {
    std::string queue;
    std::optional<double> oldest_available_age_s;
  };
  std::vector<QueueAge> queues;
  std::vector<std::string> problems;  // why healthy is false, one line each
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

  // Upserts queue_meta.enqueue_shards (docs/operations.md). Outside 1..64 the database's
  // CHECK constraint rejects it: ConstraintViolation with SQLSTATE 23514, nothing changed.
  // Producers see the new count at once for keyed jobs and for enqueues inside a caller's
  // transaction (routed at commit); unkeyed self-committing enqueues within
  // StorageOptions::shard_count_ttl (2 s), or at once after QueueStorage::reset().
  void set_enqueue_shards(Connection& conn, const std::string& queue, int shards) const;

  // Every lane of the queue, ordered by (priority, enqueue_shard); empty if the queue has
  // never been enqueued to.
  std::vector<ShardLag> queue_shards(Connection& conn, const std::string& queue) const;

  // Cancels a job wherever it is; returns what was found: "waiting" (its children then
  // apply their on_parent_failure policies), "scheduled", "available", "running" (the open
  // attempt is closed; its completion will be stale; 'awa:cancel' is notified with the job
  // id), "finished" or "missing".
  std::string cancel_job(Connection& conn, std::int64_t job_id) const;

  // Deletes dead letters older than `keep`; returns how many.
  int purge_dlq(Connection& conn, std::chrono::milliseconds keep) const;

  // Exact per-state counts of the queue (all zero for a queue never used).
  QueueCounts queue_counts(Connection& conn, const std::string& queue) const;

  // --- queues (awa queue ...) ----------------------------------------------------------
  // Every queue the schema knows (a queue_meta row, a lane, a deferred job or a dead
  // letter), by name, with exact counts.
  std::vector<QueueSummary> list_queues(Connection& conn) const;
  // One queue's settings and counts (defaults and zeros for a queue never used).
  QueueSummary queue_summary(Connection& conn, const std::string& queue) const;
  // Persisted in queue_meta: survives worker restarts. Claims of a paused queue return
  // nothing; enqueue still works. A claim already running when the pause commits may
  // still return its batch. Resuming wakes the queue's listening workers.
  void pause_queue(Connection& conn, const std::string& queue) const;
  void resume_queue(Connection& conn, const std::string& queue) const;
  // Upserts the set fields; out-of-range values are refused by queue_meta's CHECK
  // constraints (ConstraintViolation, SQLSTATE 23514), nothing changed. Returns the
  // settings afterwards. priority_aging_ms and deadline_ms apply to claims whose worker
  // sets none (a deadline above 100 years counts as 100 years). The limits are checked
  // here first (InvalidArgument naming the field, nothing sent); running workers pick a
  // change up within a few seconds.
  QueueSettings configure_queue(Connection& conn, const std::string& queue,
                                const QueueConfigChange& change) const;
  // The aging lookup: available jobs that have waited at least `aging` per level
  // are moved to the priority they have aged to (one level per interval, not above 1),
  // at the tail of that priority's lane on the same shard rule as move_queue. Returns
  // how many were moved. Ready rows are immutable: each is tombstoned and re-enqueued,
  // its run_at moved on by the wait the levels used up, so no wait is counted twice
  // (a second call, or claim-time aging, sees the same effective priority).
  int age_waiting_priorities(Connection& conn, const std::string& queue,
                             std::chrono::milliseconds aging) const;

  // --- rates (awa serve's charts) ---------------------------------------------------------
  // Both are exact across ring rotations and prunes: what the rings still hold plus what
  // prune folded into per-minute rollups (kept two days) in the transaction that removed
  // it, read in one statement. The window is `window` whole minutes ending with the
  // current one, fixed by that statement's now(). InvalidArgument for a window outside
  // 1..1440 minutes or an invalid queue name.
  //
  // Completed and failed job ends per queue per minute (one queue only when `queue` is
  // set; a valid name never used gives no series). Retried, snoozed, rescued and
  // cancelled attempts are not counted.
  Throughput throughput(Connection& conn, std::chrono::minutes window,
                        const std::optional<std::string>& queue = std::nullopt) const;
  // Claims of `queue` per lane per minute, ordered by (priority, enqueue_shard).
  ShardClaims shard_claims(Connection& conn, const std::string& queue,
                           std::chrono::minutes window) const;

  // --- jobs (awa job ...) -----------------------------------------------------------------
  std::vector<JobSummary> list_jobs(Connection& conn, const JobFilter& filter) const;
  // Unset when no trace of the job is retained (pruned, or a purged dead letter).
  std::optional<JobDetail> job(Connection& conn, JobId id) const;
  // A failed or cancelled job (or a dead letter) gets a new attempt: it is available
  // again at once with its attempt count reset; its errors are kept. Other states:
  // outcome "not_retryable" and nothing changes; unknown id: "not_found".
  JobAction retry_job(Connection& conn, JobId id) const;
  // Every failed job of the queue and/or kind (at least one must be given, else
  // InvalidArgument). Returns the ids retried.
  std::vector<JobId> retry_failed(Connection& conn, const std::optional<std::string>& queue,
                                  const std::optional<std::string>& kind) const;
  // Scheduled / retryable: updated in place. Available: re-enqueued at the tail of the
  // new priority's lane (same shard rule as move_queue). Outcome "reprioritised", or
  // "unchanged" at that priority already. Running or finished: outcome "not_movable".
  // Priority outside 1..4: InvalidArgument.
  JobAction set_job_priority(Connection& conn, JobId id, int priority) const;
  // move_queue (docs/design/engine.md, "Cross-queue administration"): ready or scheduled
  // jobs only. A keyed ready job lands on source_enqueue_shard %
  // destination_enqueue_shards; an unkeyed one (or a scheduled one, which has no shard)
  // takes the destination's ordinary enqueue rule. Never an out-of-range shard. A retryable
  // job (deferred, like a scheduled one) moves too. Outcome "moved", or "unchanged" when
  // already in that queue. Running or finished: outcome "not_movable". An invalid
  // destination name: InvalidArgument.
  JobAction move_job(Connection& conn, JobId id, const std::string& destination) const;

  // --- external callbacks (awa serve's POST /api/callbacks/...) ------------------------------
  // `callback_id` is the id JobContext::register_callback returned (a UUID; anything else
  // is InvalidArgument). Each ends the waiting attempt exactly once, through the same
  // path as every other end: a second or late callback is stale and changes nothing.
  // `result_json`: what the other system answered (JSON text, at most kMaxArgsBytes; not
  // JSON: InvalidArgument, nothing changed). Kept on the completed job, where
  // JobDetail::result_json shows it; a stale callback's result is dropped with it.
  CallbackResult complete_external(
      Connection& conn, const std::string& callback_id,
      const std::optional<std::string>& result_json = std::nullopt) const;
  // retryable: retried with backoff while attempts remain (like a handler's failure),
  // else failed (or the DLQ). `error` is kept on the job like a handler's.
  CallbackResult fail_external(Connection& conn, const std::string& callback_id,
                               const std::string& error, bool retryable = true) const;
  // The other system is still working: moves the callback timeout to now + timeout
  // (unchanged when unset). Returns the job id, or unset when no open attempt waits on it.
  std::optional<JobId> heartbeat_external(
      Connection& conn, const std::string& callback_id,
      std::optional<std::chrono::milliseconds> timeout = std::nullopt) const;

  // --- dead-letter queue (awa dlq ...) ------------------------------------------------------
  std::vector<DlqEntry> list_dlq(Connection& conn, const DlqFilter& filter) const;
  // Dead letters per queue, by queue name.
  std::vector<std::pair<std::string, std::int64_t>> dlq_depth(Connection& conn) const;
  // Moves the selected dead letters back to ready (attempt count reset); returns the ids.
  std::vector<JobId> retry_dlq(Connection& conn, const DlqFilter& filter) const;
  // Deletes the selected dead letters; returns how many.
  std::int64_t purge_dlq(Connection& conn, const DlqFilter& filter) const;

  // --- health (awa health) -------------------------------------------------------------------
  // Never throws for an unhealthy state; throws ConnectionError only via `conn` itself.
  // `recent`: how long ago a worker or leader tick still counts as alive.
  Health health(Connection& conn, std::chrono::seconds recent = std::chrono::seconds(30)) const;

  // Rotates `ring` ("queue", "claim" or "lease"): the next slot becomes current, only if
  // its previous generation was pruned and the current slot holds rows. A
  // compare-and-swap on the rotation ledger: concurrent rotators never both advance one
  // generation. Never waits for a lock. InvalidArgument for an unknown ring.
  RingAction rotate(Connection& conn, const std::string& ring) const;
  // Prunes the oldest sealed slot of `ring` (TRUNCATE). Refused (done = false, reason)
  // while it holds live work — a pending ready row, an open attempt, an active lease —
  // unless `carry`: then that work is copied forward first, in the same transaction (the
  // queue ring's into its keep slot, where it is written once however long it stays; the
  // other rings' into the current slot). Failed jobs younger than `failed_retention` are
  // always moved to the keep slot. Never waits for a lock: a slot in use is skipped
  // ("locked") and tried again later.
  RingAction prune(Connection& conn, const std::string& ring, bool carry = false,
                   std::chrono::seconds failed_retention = std::chrono::hours(72)) const;
  // Deletes dead rows from the queue ring's keep slot (claimed and closed, cancelled and
  // passed, failed past `failed_retention`), at most `limit` ready rows with their done
  // rows and tombstones, folding their terminal counts first; truncates the slot instead
  // when nothing in it is to be kept. Returns the rows deleted (0 also when another
  // prune or sweep holds the queue ring). Never waits for a lock to truncate. The
  // maintenance leader calls it after each queue-ring rotation.
  std::int64_t sweep_kept(Connection& conn,
                          std::chrono::seconds failed_retention = std::chrono::hours(72),
                          int limit = 100000) const;
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
