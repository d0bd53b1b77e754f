// Operator functions: queue settings and exact per-shard inspection (DESIGN.md §10).
//
// Each takes the connection to use; none caches anything. Thread safety: as the
// connection (one thread at a time).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
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

 private:
  std::string schema_;
  std::string quoted_;
};

}  // namespace awa
