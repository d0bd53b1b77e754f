// scripts/bench drain: how fast the claim + completion path empties a seeded queue, what it
// writes to WAL per job and how many commits it needs, against the textbook single-table
// queue on the same server in the same run.
//
// Seed: `jobs` jobs with COPY (insert_many_copy, unkeyed batches spread over the shards).
// Drain: `claimers` threads, each with its own connection, loop claim (max_batch =
// claim-batch) + complete (one fused statement for the whole claimed batch, outcome
// completed, no work in between) until the queue is empty. Measured: completed jobs/s,
// claim latency p50/p99, WAL bytes per completed job (pg_current_wal_lsn difference over
// the drain) and commits per completed job (pg_stat_database.xact_commit difference;
// also counted client-side).
//
// Textbook: the same jobs in one plain table with an index on (priority, id), drained by
// the same number of connections with
//   DELETE FROM jobs WHERE id IN (SELECT id FROM jobs ORDER BY priority, id
//                                 FOR UPDATE SKIP LOCKED LIMIT claim-batch) RETURNING *
// (the claim's batch size, so both take the same rows per statement). It keeps no
// history, no ordering guarantee beyond the index and no receipts.
//
// Cells are interleaved across runs so drift hits all alike; medians are reported.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "drain_cells.hpp"
#include "pg/connection.hpp"

namespace awa::bench {
namespace {

constexpr auto kStatementTimeout = std::chrono::seconds(120);

struct Options {
  DrainSetup setup;
  std::vector<int> shards{1, 4, 8};
  int runs = 3;
  std::string json_path;
};

int run(const Options& o) {
  auto admin = connect("awa_bench_admin", kStatementTimeout);
  const auto machine = machine_info(admin);
  fmt::print("drain: {} jobs, {} claimers, claim batch {}, shards {}, {} run(s)\n{}\n",
             o.setup.jobs, o.setup.claimers, o.setup.claim_batch, fmt::join(o.shards, ","), o.runs,
             machine.describe());

  std::vector<DrainCell> textbook;
  std::map<int, std::vector<DrainCell>> queue;
  for (int r = 0; r < o.runs; ++r) {
    textbook.push_back(drain_textbook(admin, o.setup));
    fmt::print("run {}: textbook {} jobs/s\n", r + 1, thousands(textbook.back().jobs_per_s));
    for (const int s : o.shards) {
      queue[s].push_back(drain_storage(admin, o.setup, s));
      fmt::print("run {}: S={} {} jobs/s ({:.2f} of textbook)\n", r + 1, s,
                 thousands(queue[s].back().jobs_per_s),
                 queue[s].back().jobs_per_s / textbook.back().jobs_per_s);
    }
  }

  const DrainCell tb = median_cell(textbook);
  TablePrinter table({{"queue"},
                      {"completed jobs/s", TablePrinter::Align::kRight},
                      {"vs textbook", TablePrinter::Align::kRight},
                      {"WAL B/job", TablePrinter::Align::kRight},
                      {"commits/job", TablePrinter::Align::kRight},
                      {"client txns/job", TablePrinter::Align::kRight},
                      {"claim p50 ms", TablePrinter::Align::kRight},
                      {"claim p99 ms", TablePrinter::Align::kRight}});
  const auto row = [&](const std::string& name, const DrainCell& c, double vs) {
    table.add_row({name, thousands(c.jobs_per_s), fmt::format("{:.2f}", vs),
                   fmt::format("{:.0f}", c.wal_bytes_per_job),
                   fmt::format("{:.4f}", c.commits_per_job),
                   fmt::format("{:.4f}", c.client_commits_per_job),
                   fmt::format("{:.2f}", c.claim_p50_ms), fmt::format("{:.2f}", c.claim_p99_ms)});
  };
  row(fmt::format("textbook (DELETE … SKIP LOCKED LIMIT {})", o.setup.claim_batch), tb, 1.0);
  nlohmann::json results = nlohmann::json::array();
  for (const int s : o.shards) {
    const DrainCell c = median_cell(queue[s]);
    // The ratio is taken per run (same run, same conditions), then the median.
    std::vector<double> ratios;
    for (std::size_t r = 0; r < queue[s].size(); ++r) {
      ratios.push_back(queue[s][r].jobs_per_s / textbook[r].jobs_per_s);
    }
    const double vs = median(ratios);
    row(fmt::format("awa S={}", s), c, vs);
    results.push_back({{"shards", s},
                       {"completed_per_s", c.jobs_per_s},
                       {"vs_textbook", vs},
                       {"vs_textbook_per_run", ratios},
                       {"wal_bytes_per_job", c.wal_bytes_per_job},
                       {"commits_per_job", c.commits_per_job},
                       {"client_transactions_per_job", c.client_commits_per_job},
                       {"claim_ms", {{"p50", c.claim_p50_ms}, {"p99", c.claim_p99_ms}}}});
  }
  fmt::print("\nMedians of {} run(s):\n{}\n", o.runs, table.render());
  if (!o.json_path.empty()) {
    nlohmann::json doc{{"benchmark", "drain"},
                       {"textbook_jobs_per_s", tb.jobs_per_s},
                       {"textbook",
                        {{"wal_bytes_per_job", tb.wal_bytes_per_job},
                         {"commits_per_job", tb.commits_per_job},
                         {"claim_ms", {{"p50", tb.claim_p50_ms}, {"p99", tb.claim_p99_ms}}}}},
                       {"results", results},
                       {"jobs", o.setup.jobs},
                       {"claimers", o.setup.claimers},
                       {"claim_batch", o.setup.claim_batch},
                       {"runs", o.runs},
                       {"machine", machine.to_json()}};
    write_json(o.json_path, doc);
    fmt::print("wrote {}\n", o.json_path);
  }
  return 0;
}

}  // namespace
}  // namespace awa::bench

int main(int argc, char** argv) {
  awa::bench::Options o;
  CLI::App app{
      "drain: claim + complete throughput, WAL and commits per job, vs the textbook queue"};
  std::string shards = "1,4,8";
  app.add_option("--jobs", o.setup.jobs, "jobs seeded per cell")->capture_default_str();
  app.add_option("--shards", shards, "enqueue_shards values")->capture_default_str();
  app.add_option("--claimers", o.setup.claimers, "claiming connections")->capture_default_str();
  app.add_option("--claim-batch", o.setup.claim_batch, "rows per claim")->capture_default_str();
  app.add_option("--runs", o.runs, "runs (cells interleaved)")->capture_default_str();
  app.add_option("--json", o.json_path, "write results as JSON");
  CLI11_PARSE(app, argc, argv);
  try {
    o.shards = awa::bench::parse_int_list(shards, "--shards");
    if (o.setup.jobs < 1 || o.setup.claimers < 1 || o.setup.claim_batch < 1 || o.runs < 1) {
      throw std::invalid_argument("--jobs, --claimers, --claim-batch and --runs must be >= 1");
    }
    return awa::bench::run(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "drain: {}\n", e.what());
    return 1;
  }
}
