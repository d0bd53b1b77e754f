// The single-job path of a self-committing insert(): one ready job, to a lane this
// process has written before, in one statement without PL/pgSQL
// (sql/queries/enqueue/insert_one.sql). The general path (insert_lane.sql) reserves the
// lane through reserve_lane_range and ready_slot_for_write, whose PL/pgSQL, dynamic LOCK
// TABLE and partition routing cost more than the row itself; measured side by side, this
// statement commits about twice as many single jobs per second (docs/benchmarks.md).
//
// The statement names the ready partition of the slot the producer last saw as current,
// so there is one statement per slot; the current slot is cached here and corrected from
// what a miss returns.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "awa/job.hpp"
#include "pg/connection.hpp"
#include "pg/params.hpp"
#include "pg/result.hpp"

namespace awa::storage {

class OneJobInserter {
 public:
  explicit OneJobInserter(const std::string& quoted_schema);

  // The slot to write to now: the last current slot seen (0 before any).
  int slot() const noexcept { return slot_.load(std::memory_order_relaxed); }
  // The statement for `slot`. The reference stays valid for the inserter's lifetime:
  // std::map nodes do not move, and a text is never changed once rendered, so callers on
  // the hot path read it without a copy after the lookup.
  const std::string& sql(int slot);
  // Its parameters. REQUIRES: job passed validate_job and is due now.
  static pg::Params params(int queue_id, int priority, int shard, const NewJob& job);

  // What the statement for `slot` returned.
  struct Outcome {
    std::optional<JobId> id;  // set when the job was written
    bool slot_moved = false;  // not written: the ring is elsewhere (retry on slot())
  };
  Outcome read(const pg::Result& res, int slot);

 private:
  std::string template_;
  std::atomic<int> slot_{0};
  std::mutex mu_;
  std::map<int, std::string> by_slot_;  // guarded by mu_; rendered on first use
};

}  // namespace awa::storage
