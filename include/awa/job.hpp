// Jobs as producers describe them.
//
// A job has a kind (what to run), JSON args (its input) and insert options. Limits
// (validated before anything is written; awa::InvalidArgument otherwise; docs/api.md):
//   kind: 1..200 bytes of UTF-8 without NUL.  queue: 1..200 chars from [A-Za-z0-9_.:-].
//   priority: 1..4.  max_attempts: 1..1000.
//   args: valid JSON text of at most 1 MiB, no \u0000 (jsonb cannot store it).
//   ordering_key: at most 256 bytes (any bytes).
//   metadata: null or a JSON object, at most 64 KiB serialized, UTF-8, no \u0000.
//   tags: at most 32, each at most 255 bytes of UTF-8 without NUL.
//   run_at: at most 100 years from now.
//   unique: states from kJobStates, at least one; period 1 s .. 100 years.
//   after + after_in_call: at most 1000 parents; after_in_call names earlier positions of
//   the same call; a job with parents cannot also be unique.
//   batch: empty, or a name as a queue's (1..200 chars from [A-Za-z0-9_.:-]); a batch
//   member cannot also be unique.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "awa/trace.hpp"

namespace awa {

using JobId = std::int64_t;

inline constexpr std::size_t kMaxNameBytes = 200;
inline constexpr std::size_t kMaxOrderingKeyBytes = 256;
inline constexpr std::size_t kMaxArgsBytes = std::size_t{1} << 20;       // 1 MiB of JSON text
inline constexpr std::size_t kMaxMetadataBytes = std::size_t{64} << 10;  // serialized
inline constexpr std::size_t kMaxTags = 32;
inline constexpr std::size_t kMaxTagBytes = 255;
inline constexpr std::size_t kMaxParents = 1000;
// How far ahead run_at may be: 100 years of 365.25 days.
inline constexpr std::chrono::seconds kMaxScheduleAhead{3'155'760'000};
// The deepest nesting of arrays and objects a worker decodes (JobContext::args() and
// metadata()) and a display embeds as JSON. jsonb stores far deeper values (about 10,000
// levels); nlohmann::json copies, compares and prints recursively, and a few thousand
// levels overflow a thread's stack under a sanitizer. Deeper values are refused, not
// walked (awa::UndecodableJson; docs/api.md, "What a worker can decode").
inline constexpr int kMaxDecodedJsonDepth = 512;

// Where a job is now, as Admin and the SQL function job_states() name it. Live:
// "waiting" (enqueued after parents that have not all ended: InsertOpts::after),
// "scheduled" (deferred, not due or not promoted yet), "retryable" (deferred after a
// failed or rescued attempt), "available" (ready, not claimed), "running" (claimed,
// attempt open), "waiting_external" (attempt waiting for an external callback).
// Finished: "completed", "failed", "cancelled", "dlq".
inline constexpr const char* kJobStates[] = {
    "waiting",          "scheduled", "retryable", "available", "running",
    "waiting_external", "completed", "failed",    "cancelled", "dlq"};

// Unique jobs (docs/scheduling.md, "Unique jobs"): while a job with the same unique key
// is in one of `states`, inserting another returns the existing job's id (and says it was
// a duplicate; InsertResult) instead of inserting. The key is the job's kind, plus its
// args when by_args (compared as JSON values: key order and whitespace do not matter),
// plus its queue when by_queue, plus the period bucket floor(epoch(run_at) / period) —
// run_at defaulting to now — when a period is set. Never the enqueue shard: uniqueness
// holds at any enqueue_shards. Race-free: concurrent inserters of one key serialise on
// it, and exactly one inserts.
struct UniqueOpts {
  // Default: true.
  bool by_args = true;
  // Default: true.
  bool by_queue = true;
  // Unset (default): no period; unique for as long as the job stays in `states`.
  std::optional<std::chrono::seconds> period;
  // Names from kJobStates. "completed", "failed", "cancelled" or "dlq" keep the key taken
  // after the job ended, for as long as its rows are retained. Default: not ended yet.
  std::vector<std::string> states = {"scheduled", "retryable", "available",
                                     "running",   "waiting",   "waiting_external"};
};

// What a parent that failed, was cancelled or was dead-lettered does to a job enqueued
// after it (InsertOpts::after). kCancel: the job is cancelled without running, and so, in
// turn, are its own children with this policy. kRun: the parent counts as done; the job
// runs once every parent has ended, however. kFail: the job ends as failed without
// running (its error names the parent).
enum class OnParentFailure { kCancel, kRun, kFail };

// "cancel", "run", "fail": the names SQL (enqueue_after) and the CLI use.
const char* on_parent_failure_name(OnParentFailure policy);

struct InsertOpts {
  // Default: "default".
  std::string queue = "default";
  // 1 (highest) .. 4 (lowest). Default: 2.
  int priority = 2;
  // Attempts before the job fails for good (or goes to the DLQ). Default: 25.
  int max_attempts = 25;
  // Not before this time. A time in the future makes the job scheduled (deferred_jobs)
  // until promotion; unset or past means runnable now.
  std::optional<std::chrono::system_clock::time_point> run_at;
  // Jobs with the same key share a shard of their queue, and so stay FIFO relative to each
  // other across separate insert calls (docs/design/engine.md). Bytes, not necessarily
  // text. Ignored when the queue has one shard.
  std::optional<std::string> ordering_key;
  // Free-form JSON kept with the job; null means none.
  nlohmann::json metadata;
  std::vector<std::string> tags;
  // Set: a unique job (UniqueOpts). Default: unset, not unique.
  std::optional<UniqueOpts> unique;
  // Parents (docs/workflows.md, "Dependencies"): the job waits, in state "waiting", until
  // every one of these jobs has ended, and then becomes available (scheduled, with a
  // future run_at). Ids of jobs that exist: enqueued by an earlier call, or earlier in the
  // caller's transaction. A parent that had already completed counts as done at once.
  std::vector<JobId> after;
  // Parents written by the same insert call: positions of earlier jobs in the span given
  // to insert_many / insert_many_copy (so a whole tree can be enqueued in one call).
  std::vector<std::size_t> after_in_call;
  // Default: kCancel.
  OnParentFailure on_parent_failure = OnParentFailure::kCancel;
  // The open batch (Admin::open_batch; docs/workflows.md, "Batches") this job joins, in the
  // same transaction as its insert: the insert is refused (awa::Error, SQLSTATE 23503) when
  // no such batch exists and (55000) when it is sealed, and nothing of the call is written.
  // Empty (default): none.
  std::string batch;
  // The W3C trace context to store with the job (trace::parse; docs/observability.md): in
  // its metadata as "traceparent" and "tracestate", replacing any given there. Unset
  // (default): the metadata's own "traceparent" if it has one, else the thread's
  // trace::current(), else none. An invalid one makes the insert throw InvalidArgument.
  std::optional<trace::Context> trace;
};

// What one insert did: the job's id, or, for a unique job that met an equal one in its
// states, the existing job's id with duplicate = true (nothing was inserted).
struct InsertResult {
  JobId id = 0;
  bool duplicate = false;
};

struct NewJob {
  std::string kind;
  // The args as JSON text. Default: "{}".
  std::string args_json = "{}";
  InsertOpts opts;

  NewJob() = default;
  NewJob(std::string kind_, const nlohmann::json& args, InsertOpts opts_ = {})
      : kind(std::move(kind_)), args_json(args.dump()), opts(std::move(opts_)) {}
  // Args given as JSON text, checked at insert.
  static NewJob from_text(std::string kind, std::string args_json, InsertOpts opts = {}) {
    NewJob j;
    j.kind = std::move(kind);
    j.args_json = std::move(args_json);
    j.opts = std::move(opts);
    return j;
  }
};

// Checks `job` against the limits above without touching the database (the insert calls
// do the same for every job they are given). Throws InvalidArgument naming the field.
void validate_job(const NewJob& job);

// Follow-up jobs (docs/workflows.md, "Follow-up jobs"): when a follow-up is enqueued.
// kCompleted: the attempt completed. kExhausted: the job ended failed or dead-lettered (its
// last attempt failed, or its handler failed it for good); a retry that leaves attempts
// enqueues nothing.
enum class FollowUpOn { kCompleted, kExhausted };

// "completed", "exhausted": the names SQL and the CLI use.
const char* follow_up_on_name(FollowUpOn on);

// A job to enqueue when an attempt ends as `on` says, written in the transaction that
// records that end (so it exists if and only if the end does). The job may not have
// parents, be unique or join a batch (validate_follow_up).
struct FollowUp {
  FollowUpOn on = FollowUpOn::kCompleted;
  NewJob job;
};

// validate_job, and the follow-up rules above. Throws InvalidArgument.
void validate_follow_up(const FollowUp& follow_up);

// A claimed attempt, as claim_ready_runtime returns it. (claim_batch, lane_seq) names the
// attempt in the engine: the claim call's receipt row and the ready row's place in its
// lane. (job_id, run_lease) names it to users; completion sends all of it back.
struct ClaimedEntry {
  JobId job_id = 0;
  std::int64_t run_lease = 0;  // this attempt's lease: +1 on every claim
  int attempt = 0;             // 1 for the first attempt
  int max_attempts = 0;
  int enqueue_shard = 0;
  int ready_slot = 0;
  std::int64_t lane_seq = 0;
  int claim_slot = 0;            // the claim ring slot the receipt was written to
  std::int64_t claim_batch = 0;  // the receipt: one per claim call
  std::string queue;
  int priority = 0;            // the lane priority (part of every key)
  int effective_priority = 0;  // after claim-time aging
  std::string kind;
  std::string args_json;  // as stored: jsonb's text (JobContext::args() decodes it)
  // Decoded at claim: null when none, and when it could not be decoded (metadata_error).
  nlohmann::json metadata;
  std::string metadata_json;  // as stored: jsonb's text; empty when none
  // Why metadata_json has no nlohmann::json form ("metadata could not be decoded: ..."): a
  // number beyond a double's range, or nesting deeper than kMaxDecodedJsonDepth. Empty
  // when it decoded. A claim never throws for a row's JSON: the row is returned with this.
  std::string metadata_error;
  std::vector<std::string> tags;
  std::optional<std::string> ordering_key;
  // Earlier attempts' errors: [{attempt, error, at}], or null (also should they not decode).
  nlohmann::json errors;
  std::chrono::system_clock::time_point run_at;
  std::chrono::system_clock::time_point created_at;
  std::chrono::system_clock::time_point claimed_at;
  std::optional<std::chrono::system_clock::time_point> deadline_at;
};

// How an attempt ended, as the handler reports it.
enum class Outcome {
  kCompleted,
  kRetry,   // retryable failure: again after a backoff while attempts remain, else failed / DLQ
  kFail,    // terminal failure: failed, or DLQ when the queue enables it
  kSnooze,  // run again after a delay; the attempt is not consumed
  kCancel,
  // Wait for an external callback (JobResult::wait_for_callback): the attempt stays open
  // in state "waiting_external" until Admin::complete_external / fail_external or its callback
  // timeout. Not a Completion: QueueStorage::wait_for_callback parks the attempt.
  kWaitForCallback,
};

const char* to_string(Outcome outcome);

struct Completion {
  // The attempt, copied from its ClaimedEntry.
  JobId job_id = 0;
  std::int64_t run_lease = 0;
  int claim_slot = 0;
  std::int64_t claim_batch = 0;
  int ready_slot = 0;
  std::string queue;
  int priority = 0;
  int enqueue_shard = 0;
  std::int64_t lane_seq = 0;
  int attempt = 0;
  int max_attempts = 0;

  Outcome outcome = Outcome::kCompleted;
  std::string error;                    // kRetry / kFail: the message kept on the job
  std::chrono::milliseconds delay{-1};  // kRetry / kSnooze; negative: default backoff
  // kCompleted: the job's result, JSON text of at most kMaxArgsBytes, kept with the job.
  std::optional<std::string> result_json;
  // Jobs enqueued with this end when their trigger matches it (each passed
  // validate_follow_up; QueueStorage::complete checks them again).
  std::vector<FollowUp> follow_ups;

  static Completion of(const ClaimedEntry& entry, Outcome outcome, std::string error = {},
                       std::chrono::milliseconds delay = std::chrono::milliseconds(-1));
};

// What a completion did: the attempt's end state ("completed", "retried", "failed",
// "dlq", "snoozed", "cancelled"), or stale when it matched no open attempt (the job was
// rescued, cancelled or retried meanwhile) and changed nothing.
struct CompletionResult {
  JobId job_id = 0;
  std::int64_t run_lease = 0;
  std::optional<std::string> state;
  bool stale() const { return !state.has_value(); }
};

}  // namespace awa
