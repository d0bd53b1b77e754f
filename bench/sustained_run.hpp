// scripts/bench sustained's trial (sustained.cpp says what is measured and how): a fresh
// schema, producers on an open-loop schedule, one awa::Client working the jobs, and the
// accounting of WAL, commits, dead tuples and queue depth over the run.
//
// Thread safety: run_trial runs its own threads and joins them before it returns.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "awa/client.hpp"
#include "bench_common.hpp"
#include "pg/connection.hpp"

namespace awa::bench {

inline constexpr std::int64_t kSustainedMaxJobs = 10'000'000;  // per trial
// The send mix of every producer: each kBatchEvery-th send is one insert_many of
// kBatchSize jobs, the others are single-job inserts (1 in 4 sends a batch of 5: 3 + 5 = 8
// jobs per 4 sends, so 5/8 of the jobs travel in batches and 3/8 alone).
inline constexpr int kBatchEvery = 4;
inline constexpr int kBatchSize = 5;
// Samples of depth (and in-flight jobs) every kSampleInterval; dead tuples every
// kDeadEvery-th sample (about once a second).
inline constexpr std::chrono::milliseconds kSampleInterval{500};
inline constexpr int kDeadEvery = 2;

struct SustainedSetup {
  int rate = 1000;       // jobs/s offered, all producers together
  int seconds = 30;      // length of the offered schedule (the measured window)
  int producers = 4;     // producer threads, each with its connection and QueueStorage
  int workers = 32;      // the queue's max_workers
  int shards = 4;        // the queue's enqueue_shards
  int args_bytes = 100;  // size of each job's args JSON text (at least what seq/t need)
  bool pin_xmin = false;
};

struct SustainedSample {
  double t_s = 0;                    // since the first enqueue was due
  std::uint64_t completed = 0;       // ClientStats::completed
  std::int64_t depth = 0;            // sum(available) of queue_shard_lag
  std::int64_t in_flight = 0;        // ClientStats::prefetched + running
  std::int64_t other_active = 0;     // active client backends that are not this benchmark's
  std::optional<std::int64_t> dead;  // n_dead_tup summed over the schema's tables
  std::string most_dead_table;       // with that sample: the table (partitions summed)
  std::int64_t most_dead = 0;
};

struct TrialResult {
  SustainedSetup setup;
  std::int64_t jobs_planned = 0;  // rate x seconds
  std::int64_t jobs_sent = 0;     // insert calls returned (all of the schedule unless a
                                  // producer gave up 30 s behind it)
  std::int64_t jobs_completed = 0;
  std::int64_t offered_in_window = 0;    // inserts returned by the end of the window
  std::int64_t completed_in_window = 0;  // durable completions by the end of the window
  double offered_per_s = 0;
  double completed_per_s = 0;
  double held_ratio = 0;
  Percentiles e2e_ms;          // due time -> durable completion (ClientStats; see .cpp)
  Percentiles e2e_handler_ms;  // due time -> handler start, exact per job
  bool drained = false;        // every sent job completed within the drain limit
  double drain_s = 0;          // end of the window -> last completion
  double producer_max_late_ms = 0;
  std::int64_t sends_single = 0;
  std::int64_t sends_batch = 0;
  std::size_t args_json_bytes = 0;  // of the last job of the schedule
  // WAL: pg_current_wal_lsn before the first enqueue and after the last completion.
  std::int64_t wal_bytes = 0;
  double wal_bytes_per_job = 0;
  // Commits: pg_stat_database.xact_commit over the trial minus this benchmark's own
  // sessions' transactions, each counted exactly by its local transaction id.
  std::int64_t db_commits = 0;
  std::int64_t db_rollbacks = 0;
  std::int64_t bench_transactions = 0;     // every session of the benchmark, producers too
  std::int64_t producer_transactions = 0;  // the producers' insert calls alone
  std::int64_t runtime_commits = 0;        // db_commits - bench_transactions
  double commits_per_job = 0;              // runtime_commits / every job the Client completed
  double producer_commits_per_job = 0;
  std::int64_t autovacuum_runs = 0;  // autovacuum + autoanalyze runs on the schema's tables
  std::int64_t dead_tuples_max = 0;
  std::string dead_tuples_max_table;  // the largest table of the sample with the max
  std::int64_t depth_max = 0;
  std::int64_t in_flight_max = 0;
  std::int64_t other_active_max = 0;
  std::optional<std::int64_t> pinned_xmin_age;  // --pin-xmin: age(backend_xmin) at release
  std::uint64_t claims = 0;                     // claim calls of the Client (empty ones included)
  std::uint64_t flushes = 0;                    // completion flushes of the Client
  double flush_ms_mean = 0;
  ClientStats stats;
  std::vector<SustainedSample> samples;
  // e2e p95 (ms) of the jobs due in each second of the window: [i] for [i s, i + 1 s).
  std::vector<double> e2e_p95_by_second;
  std::int64_t warmup_jobs = 0;  // through the Client before the window, not measured
  std::string loadavg_end;
};

// One trial in a schema of its own (dropped at the end). `admin` must be idle, outside a
// transaction, and used by nothing else meanwhile. Throws on a failed session or a
// statement timeout; an overloaded trial (not drained) returns with drained = false.
TrialResult run_trial(pg::Connection& admin, const SustainedSetup& setup);

// The trial as JSON (the keys of docs/benchmarks.md, "sustained"); samples optional.
nlohmann::json trial_json(const TrialResult& r, bool with_samples);

}  // namespace awa::bench
