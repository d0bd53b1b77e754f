// The drain cells of scripts/bench drain, shared with scripts/bench e2e --mode compare:
// seed a queue, drain it with claimer connections (claim + fused complete) or drain the
// textbook single-table queue, and measure throughput, WAL and commits per job.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bench_common.hpp"
#include "pg/connection.hpp"

namespace awa::bench {

struct DrainSetup {
  int jobs = 200000;
  int claimers = 4;
  int claim_batch = 512;
};

struct DrainCell {
  double jobs_per_s = 0;
  double wal_bytes_per_job = 0;
  double commits_per_job = 0;         // pg_stat_database
  double client_commits_per_job = 0;  // transactions our clients ran
  double claim_p50_ms = 0;
  double claim_p99_ms = 0;
};

// Migrates `schema`, sets the queue's enqueue_shards (an upsert of queue_meta) and seeds `jobs`
// jobs of `kind` (args {"seq": i}) with COPY in batches of 5000, then VACUUM ANALYZE.
// With keys > 0, job i has the ordering key "k<i % keys>" (routed by the key's hash).
void seed_queue(pg::Connection& admin, const ScopedSchema& schema, std::string_view queue,
                int shards, int jobs, std::string_view kind, int keys = 0);

// The textbook queue: one plain table drained with DELETE ... SKIP LOCKED LIMIT claim_batch.
DrainCell drain_textbook(pg::Connection& admin, const DrainSetup& setup);
// The storage engine at `shards`: claim (claim_batch rows) + complete, no runtime.
DrainCell drain_storage(pg::Connection& admin, const DrainSetup& setup, int shards);

DrainCell median_cell(const std::vector<DrainCell>& cells);

}  // namespace awa::bench
