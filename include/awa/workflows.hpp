// Batches and queue follow-up jobs (docs/workflows.md): the administrative side of the
// workflow features. Jobs join a batch with InsertOpts::batch; a handler declares its own
// follow-ups with JobResult::then.
//
// A batch is opened by name, filled with member jobs over any number of transactions and
// sealed. Once it is sealed and every member has ended (completed, failed, dead-lettered
// or cancelled), its completion job, if it has one, is enqueued exactly once, in the
// transaction of the last of those events, with args {"batch", "members", "completed",
// "failed", "cancelled"} added to the ones given at open. A member counts once, by its
// first end (a member retried after it ended is not counted again).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "awa/job.hpp"

namespace awa {

struct BatchOptions {
  // The completion job's kind. Empty (default): the batch has none; it only counts.
  std::string on_complete;
  // The completion job's queue. Default: "default".
  std::string queue = "default";
  // The completion job's args (a JSON object); the counts are added to them.
  nlohmann::json on_complete_args = nlohmann::json::object();
};

struct Batch {
  std::string name;
  bool sealed = false;
  // Sealed: the members it was sealed with. Open: the members committed so far.
  std::int64_t members = 0;
  std::int64_t completed = 0;
  std::int64_t failed = 0;  // failed or dead-lettered
  std::int64_t cancelled = 0;
  std::int64_t pending = 0;  // members that have not ended
  // Sealed and every member ended (the completion job, if any, was then enqueued).
  bool finished = false;
  std::optional<JobId> completion_job;
  std::optional<std::string> on_complete;  // the completion job's kind
  std::string queue;                       // the completion job's queue
  std::string created_at;                  // ISO 8601 UTC
  std::optional<std::string> sealed_at;
  std::optional<std::string> finished_at;
};

// The keys `awa batch show --json` and the dashboard's API print: name, sealed, members,
// completed, failed, cancelled, pending, finished, completion_job (null while none),
// on_complete, queue, created_at, sealed_at, finished_at.
nlohmann::json to_json(const Batch& batch);

// A job a queue enqueues when one of its jobs ends as `on` says (FollowUpOn): kind `kind`
// on queue `queue`, with args {"job_id", "kind", "queue", "state"} of the job that ended
// and, for kExhausted, "error" (its last error, at most 2000 characters).
struct QueueFollowUp {
  std::string source_queue;
  FollowUpOn on = FollowUpOn::kCompleted;
  std::string kind;
  std::string queue;
};

nlohmann::json to_json(const QueueFollowUp& follow_up);

class WorkflowAdmin {
 public:
  explicit WorkflowAdmin(std::string schema = "awa");

  // Opens a batch. awa::Error with SQLSTATE 23505 when the name is in use (a finished
  // batch keeps it until the maintenance leader purges it, after the failed-job
  // retention); InvalidArgument for a bad name (as a queue name), kind, queue or args.
  Batch open_batch(Connection& conn, const std::string& name,
                   const BatchOptions& options = {}) const;
  // Seals a batch: no job joins it afterwards. Waits for the transactions adding members to
  // it to end; finishes it at once when every member has already ended (an empty batch
  // finishes when sealed). Sealing again changes nothing. SQLSTATE 23503: no such batch.
  Batch seal_batch(Connection& conn, const std::string& name) const;
  // Unset when no such batch exists (or it was purged).
  std::optional<Batch> batch(Connection& conn, const std::string& name) const;
  // The newest first; open_only: those not finished.
  std::vector<Batch> list_batches(Connection& conn, int limit = 100, bool open_only = false) const;
  // A batch's members with their states (the member's end once it has ended), lowest id
  // first after `after`, at most `limit`.
  std::vector<JobLink> batch_members(Connection& conn, const std::string& name, int limit = 100,
                                     JobId after = 0) const;

  // Sets the job `queue` enqueues when one of its jobs ends as `on` says: kind `kind` on
  // `target_queue` (default: `queue`). At most one per (queue, on); setting again replaces
  // it. Written in the transaction of each such end. Returns the queue's follow-ups.
  std::vector<QueueFollowUp> set_queue_follow_up(
      Connection& conn, const std::string& queue, FollowUpOn on, const std::string& kind,
      const std::optional<std::string>& target_queue = std::nullopt) const;
  // Removes it (nothing if none). Returns the queue's follow-ups.
  std::vector<QueueFollowUp> clear_queue_follow_up(Connection& conn, const std::string& queue,
                                                   FollowUpOn on) const;
  // One queue's follow-ups, or every queue's.
  std::vector<QueueFollowUp> queue_follow_ups(
      Connection& conn, const std::optional<std::string>& queue = std::nullopt) const;

 private:
  std::string schema_;
  std::string quoted_;
};

}  // namespace awa
