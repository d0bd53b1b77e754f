// scripts/bench e2e's runs (see e2e.cpp for what each measures): the whole runtime
// (awa::Client in this process) under a fixed offered load, or draining a seeded queue.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "awa/client.hpp"
#include "bench_common.hpp"
#include "pg/connection.hpp"

namespace awa::bench {

inline constexpr std::chrono::milliseconds kDepthInterval{500};
inline constexpr std::int64_t kMaxJobs = 10'000'000;

struct E2eSetup {
  int rate = 500;              // rate: jobs/s offered
  int seconds = 20;            // rate: seconds of offered load
  int workers = 32;            // the queue's max_workers
  int producers = 1;           // rate: producer threads (connections) sharing the schedule
  int batch = 1;               // rate: jobs per insert call
  int jobs = 100000;           // drain: jobs seeded
  int shards = 4;              // the queue's enqueue_shards
  int claimers = 0;            // the queue's claim connections (0: QueueConfig's default)
  int max_prefetch = -1;       // QueueConfig::max_prefetch (-1: its default)
  int poll_ms = 0;             // the queue's poll interval (0: QueueConfig's default, 1 s)
  int completion_writers = 0;  // ClientOptions::completion_writers (0: its default)
  // Non-empty: the Client goes through this transaction pooler (ClientOptions::pooled);
  // producers and the seeding stay on DATABASE_URL.
  std::string pooled_url;
  bool direct = false;  // with pooled_url: DATABASE_URL as the direct_database_url
  // drain: start the Client on the paused queue and start the clock when it is resumed,
  // once its first claimer has made an (empty) claim, so that the Client's connections
  // mostly exist before the clock starts, as the storage cell's do. false: the clock
  // starts at start(), start-up included (mode drain).
  bool warm = false;
  // drain: sample the queue depth (DepthSampler) during the run. Each sample counts the
  // backlog's index entries: server work the storage cell does not have.
  bool sample_depth = true;
  // The Client's tracing (ClientOptions::tracing); unset: off, whatever OTEL_* says.
  std::optional<trace::ExportOptions> tracing;
};

struct DepthSample {
  double t_s = 0;
  std::int64_t available = 0;
};

struct RunResult {
  std::int64_t jobs = 0;     // measured jobs (enqueued in rate mode, seeded in drain mode)
  double offered_per_s = 0;  // rate mode: jobs / producer wall time
  double producer_max_late_ms = 0;
  double elapsed_s = 0;  // first enqueue (or start()) -> last completion reported
  double completed_per_s = 0;
  std::optional<Percentiles> pickup_ms;
  std::optional<Percentiles> e2e_ms;
  std::int64_t early = 0;  // handler started before the insert call returned
  std::vector<DepthSample> depth;
  ClientStats stats;
  // The engine's metrics over the run (this process's claims and completion flushes).
  std::uint64_t claims = 0;
  double claim_ms_mean = 0;
  std::uint64_t flushes = 0;
  double flush_ms_mean = 0;
  // drain: this process's CPU time (user + system) from the clock's start to the end of
  // stop() (which sends the spans still queued).
  double cpu_s = 0;
  trace::ExportStats tracing;  // what the Client's span exporter did
};

RunResult run_rate(pg::Connection& admin, const E2eSetup& o);
RunResult run_drain(pg::Connection& admin, const E2eSetup& o);

// e2e --mode pooler (e2e_pooler.cpp): per run, a drain and an idle-pickup rate run
// (200 jobs/s) direct, through the pooler with a direct URL, and through it poll-only.
// e2e --mode tracing (e2e_tracing.cpp): per run, a drain with tracing off and one with
// every attempt's span exported to an OTLP/HTTP sink in this process, in alternating order.
int run_tracing(pg::Connection& admin, const E2eSetup& st, int runs, const std::string& json_path,
                const MachineInfo& machine);

int run_pooler(pg::Connection& admin, const E2eSetup& st, int runs, const std::string& json_path,
               const MachineInfo& machine);

}  // namespace awa::bench
