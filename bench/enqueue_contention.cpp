// scripts/bench enqueue-contention: AWA's ADR-025 test_queue_storage_enqueue_contention.
//
// P producer threads, each with its own connection and all sharing one QueueStorage (one
// store per process, as in a service), enqueue to the same queue and priority in
// self-committing batches. The sweep runs over the queue's enqueue_shards (the lever
// sharding gives) and over the two write paths (multi-row INSERT and COPY), and measures a
// ceiling in the same run: the same producers, batches and row contents inserted into a
// plain table with only a primary key, so "vs ceiling" says how much of what this server
// can insert the queue keeps, independent of the machine.
//
// A second, diagnostic ceiling adds to every plain INSERT the pg_notify statement that the
// enqueue path sends after a commit (at most once per queue every 2 ms from one process:
// src/storage/wake_coalescer.hpp), to bound what the notification alone costs.
//
// With --batch 1 (single-job enqueue: one insert() call, one job, its own transaction) a
// third reference is measured: raw single-row commits, i.e. the same producers each
// sending one plain `INSERT ... VALUES` per transaction into the plain table. That is
// what this server can commit one row at a time, and the yardstick of single-job enqueue.
//
// A fourth reference, the bare ready table, puts the same rows into the queue's own
// ready_entries (the migrated schema: its partition, its five-column primary key, its BRIN
// index) with no lane: no reservation, no lane lock, no lane head; each producer writes
// one shard with its own sequence for lane_seq. It is what the table's shape alone
// allows, so the gap between it and the plain-table ceiling is the cost of the row and
// its key, and the gap between the queue's cells and it is the cost of the enqueue logic.
//
// Every cell also reports the WAL it wrote per job over its timed window
// (pg_current_wal_lsn before the producers are released and after the last one returned;
// the median over the runs); the plain table's is ceiling_wal_bytes_per_row in the JSON.
// A CHECKPOINT precedes each cell (--no-checkpoint skips it), so every cell starts with
// the same full-page-image debt.
//
// Cells are interleaved across runs (run 1: ceilings, S=1, S=2, ...; run 2: ...) so that
// drift (other load, checkpoints, caches) hits every cell alike. Each cell gets a fresh
// schema and fresh connections; warm-up (connect, prepare, create the lanes) is not timed.
// After each cell the rows are counted (and, for the queue, the shards they landed on):
// a mismatch ends the benchmark with an error rather than printing a wrong number.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "enqueue_cells.hpp"
#include "enqueue_report.hpp"
#include "pg/connection.hpp"

namespace awa::bench::contention {
namespace {

int run(const Options& o) {
  pg::Connection admin = connect("awa_bench", std::chrono::seconds(o.statement_timeout_s));
  const MachineInfo machine = machine_info(admin);
  const Workload workload = make_workload(o);

  nlohmann::json modes = nlohmann::json::array();
  for (const auto m : o.modes) modes.push_back(mode_name(m));
  fmt::print(
      "enqueue-contention: {} producers x {} jobs (batch {}), queue '{}' priority {}, "
      "modes {}, shards {} (from {}), {} runs\n",
      o.producers, o.jobs_per_producer, o.batch, kQueue, kPriority, fmt::join(modes, ","),
      fmt::join(o.shards, ","), o.shards_source, o.runs);
  fmt::print("machine: {}\n\n", machine.describe());
  std::fflush(stdout);

  const Report report = run_sweep(admin, o, workload);
  ThroughputJson throughput = print_throughput(report, o);
  nlohmann::json targets = print_targets(report, o);
  nlohmann::json waits = print_waits(report, o);

  const std::string load_end = loadavg();
  fmt::print("\nload average at the end: {}; sweep took {:.0f} s\n", load_end,
             report.total_seconds);
  nlohmann::json errors = nlohmann::json::array();
  for (const auto& [mode, error] : report.errors) {
    fmt::print(stderr, "ERROR ({}): {}\n", mode_name(mode), error);
    errors.push_back(error);
  }

  if (!o.json_path.empty()) {
    nlohmann::json ceiling_runs = nlohmann::json::array();
    for (const auto& v : report.ceiling().rate) ceiling_runs.push_back(json_opt(v));
    nlohmann::json single_row = nullptr;
    if (const Cell* one = report.single_row(); one != nullptr) {
      nlohmann::json runs_json = nlohmann::json::array();
      for (const auto& v : one->rate) runs_json.push_back(json_opt(v));
      single_row = {{"jobs_per_s", one->mean_rate()},
                    {"median_jobs_per_s", one->median_rate()},
                    {"runs_jobs_per_s", runs_json}};
    }
    const nlohmann::json doc{{"benchmark", "enqueue-contention"},
                             {"ceiling_jobs_per_s", report.ceiling().mean_rate()},
                             {"ceiling_median_jobs_per_s", report.ceiling().median_rate()},
                             {"ceiling_runs_jobs_per_s", ceiling_runs},
                             {"ceiling_wal_bytes_per_row", json_opt(report.ceiling().median_wal())},
                             {"results", throughput.results},
                             {"ceiling_notify", throughput.ceiling_notify},
                             {"bare_ready", throughput.bare_ready},
                             {"single_row_commit", single_row},
                             {"targets", targets},
                             {"wait_events", waits},
                             {"runs", o.runs},
                             {"producers", o.producers},
                             {"jobs_per_producer", o.jobs_per_producer},
                             {"batch", o.batch},
                             {"warmup_jobs_per_producer", workload.warmup_batches * kWarmupJobs},
                             {"shards", o.shards},
                             {"shards_source", o.shards_source},
                             {"modes", modes},
                             {"queue", kQueue},
                             {"priority", kPriority},
                             {"wait_sample_ms", o.sample_ms},
                             {"checkpoint_before_each_cell", o.checkpoint},
                             {"machine", machine.to_json()},
                             {"loadavg_at_end", load_end},
                             {"total_seconds", report.total_seconds},
                             {"errors", errors}};
    write_json(o.json_path, doc);
    fmt::print("JSON written to {}\n", o.json_path);
  }
  return report.errors.empty() ? 0 : 1;
}

}  // namespace
}  // namespace awa::bench::contention

int main(int argc, char** argv) {
  using awa::bench::contention::Mode;
  using awa::bench::contention::WaitCells;
  awa::bench::contention::Options o;
  std::string shards_text = "1,2,4,8";
  std::string mode_text = "both";
  std::string wait_cells_text = "all";
  CLI::App app{
      "Enqueue contention (AWA's ADR-025 benchmark): P producers enqueue to one queue at each "
      "enqueue_shards value, against a plain-table ceiling measured in the same run. Needs "
      "DATABASE_URL."};
  app.name("scripts/bench enqueue-contention");
  app.add_option("--shards", shards_text,
                 "comma-separated enqueue_shards values (1..64); AWA_QS_CONTENTION_SHARDS "
                 "overrides")
      ->capture_default_str();
  app.add_option("--producers", o.producers, "producer threads, one connection each")
      ->check(CLI::Range(1, 128))
      ->capture_default_str();
  app.add_option("--jobs-per-producer", o.jobs_per_producer, "timed jobs per producer")
      ->check(CLI::Range(1, 10'000'000))
      ->capture_default_str();
  app.add_option("--batch", o.batch, "jobs per insert call")
      ->check(CLI::Range(1, 100'000))
      ->capture_default_str();
  app.add_option("--mode", mode_text,
                 "write path: insert (insert_many), copy (insert_many_copy) or both")
      ->check(CLI::IsMember({"insert", "copy", "both"}))
      ->capture_default_str();
  app.add_option("--runs", o.runs, "runs; cells are interleaved across runs")
      ->check(CLI::Range(1, 50))
      ->capture_default_str();
  app.add_option("--json", o.json_path, "also write the results as JSON to this file");
  app.add_option("--wait-cells", wait_cells_text,
                 "cells whose waits are sampled: all (so every cell pays the sampling alike), "
                 "ends (the ceilings and the smallest and largest S of each mode; tables are "
                 "printed for these), none")
      ->check(CLI::IsMember({"ends", "all", "none"}))
      ->capture_default_str();
  app.add_option("--sample-ms", o.sample_ms, "wait-event sampling interval")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--statement-timeout", o.statement_timeout_s,
                 "seconds; bounds any one statement (and so any lock wait)")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_flag("!--no-checkpoint", o.checkpoint, "skip the CHECKPOINT before each cell");
  app.add_flag("!--no-notify-ceiling", o.notify_ceiling,
               "skip the diagnostic cell: plain-table INSERT + the enqueue path's pg_notify");
  app.add_flag("!--no-bare-ready-cell", o.bare_ready_cell,
               "skip the bound: the same rows into the queue's ready_entries with no lane "
               "(no reservation, no lane lock)");
  app.add_flag("!--no-single-row-cell", o.single_row_cell,
               "with --batch 1, skip the raw single-row commit reference (one plain INSERT per "
               "transaction)");
  CLI11_PARSE(app, argc, argv);

  try {
    if (const char* env = std::getenv("AWA_QS_CONTENTION_SHARDS"); env != nullptr && *env != '\0') {
      shards_text = env;
      o.shards_source = "AWA_QS_CONTENTION_SHARDS";
    }
    o.shards = awa::bench::parse_int_list(shards_text, o.shards_source);
    for (const int s : o.shards) {
      if (s < 1 || s > 64) {
        throw std::invalid_argument(fmt::format("{}: {} is outside 1..64", o.shards_source, s));
      }
    }
    std::sort(o.shards.begin(), o.shards.end());
    o.shards.erase(std::unique(o.shards.begin(), o.shards.end()), o.shards.end());
    if (mode_text == "insert") o.modes = {Mode::kInsert};
    if (mode_text == "copy") o.modes = {Mode::kCopy};
    if (wait_cells_text == "all") o.wait_cells = WaitCells::kAll;
    if (wait_cells_text == "none") o.wait_cells = WaitCells::kNone;
    return awa::bench::contention::run(o);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "enqueue-contention: {}\n", e.what());
    return 2;
  }
}
