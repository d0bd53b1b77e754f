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
//                                 FOR UPDATE SKIP LOCKED LIMIT 100) RETURNING *
// It keeps no history, no ordering guarantee beyond the index and no receipts.
//
// Cells are interleaved across runs so drift hits all alike; medians are reported.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "awa/job.hpp"
#include "awa/queue_storage.hpp"
#include "bench_common.hpp"
#include "pg/connection.hpp"
#include "pg/copy.hpp"
#include "schema/migrator.hpp"

namespace awa::bench {
namespace {

constexpr std::string_view kQueue = "drain";
constexpr auto kStatementTimeout = std::chrono::seconds(120);
constexpr auto kDrainLimit = std::chrono::minutes(10);

struct Options {
  int jobs = 200000;
  std::vector<int> shards{1, 4, 8};
  int claimers = 4;
  int claim_batch = 512;
  int runs = 3;
  std::string json_path;
};

struct Cell {
  double jobs_per_s = 0;
  double wal_bytes_per_job = 0;
  double commits_per_job = 0;         // pg_stat_database
  double client_commits_per_job = 0;  // transactions our clients ran
  double claim_p50_ms = 0;
  double claim_p99_ms = 0;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto idx = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
  return v[idx];
}

std::int64_t wal_lsn_bytes(pg::Connection& c) {
  return c.exec("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint")
      .get<std::int64_t>(0, 0);
}

// Commits so far in this database. Backends publish their counters lazily; each worker
// asks for a flush (flush_stats) before this is read, and the reader drops its cached
// snapshot so it sees them.
std::int64_t xact_commits(pg::Connection& c) {
  c.exec("SELECT pg_stat_clear_snapshot()");
  return c.exec("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
      .get<std::int64_t>(0, 0);
}

void flush_stats(pg::Connection& c) {
  c.exec("SELECT pg_stat_force_next_flush()");
  c.exec("SELECT 1");
}

// Runs `claimers` threads over fn(conn, done) until `total` rows are drained.
template <class Step>
std::chrono::nanoseconds drain_fleet(int claimers, int total, const std::string& schema_sql,
                                     std::vector<pg::Connection>& conns, Step step) {
  std::atomic<int> done{0};
  auto elapsed = run_fleet(
      claimers,
      [&](int i) { conns[static_cast<std::size_t>(i)].exec("SET search_path TO " + schema_sql); },
      [&](int i) {
        auto& c = conns[static_cast<std::size_t>(i)];
        const auto give_up = Clock::now() + kDrainLimit;
        while (done.load() < total) {
          if (Clock::now() > give_up) throw std::runtime_error("drain did not finish in time");
          const int n = step(i, c);
          if (n == 0) std::this_thread::yield();  // another claimer holds the only lane
          done += n;
        }
      });
  for (auto& c : conns) flush_stats(c);
  return elapsed;
}

// One claim step of a drainer: rows taken, the claim's latency, transactions committed.
struct StepResult {
  int rows;
  double claim_ms;
  int transactions;
};

// Drains with `o.claimers` fresh connections running step(conn) until o.jobs rows are
// gone, and measures the cell: throughput, WAL and commits per job, claim latency.
template <class Step>
Cell measure_drain(pg::Connection& admin, const Options& o, const ScopedSchema& schema, Step step) {
  std::vector<pg::Connection> conns;
  for (int i = 0; i < o.claimers; ++i) {
    conns.push_back(connect("awa_bench_drain", kStatementTimeout));
  }
  flush_stats(admin);
  const auto wal0 = wal_lsn_bytes(admin);
  const auto commits0 = xact_commits(admin);
  std::mutex mu;
  std::vector<double> claim_ms;
  std::atomic<std::int64_t> txns{0};
  const auto elapsed =
      drain_fleet(o.claimers, o.jobs, schema.quoted(), conns, [&](int, pg::Connection& c) {
        const StepResult r = step(c);
        txns += r.transactions;
        std::lock_guard lock(mu);
        claim_ms.push_back(r.claim_ms);
        return r.rows;
      });
  const auto wal1 = wal_lsn_bytes(admin);
  const auto commits1 = xact_commits(admin);
  Cell cell;
  const double secs = std::chrono::duration<double>(elapsed).count();
  cell.jobs_per_s = o.jobs / secs;
  cell.wal_bytes_per_job = static_cast<double>(wal1 - wal0) / o.jobs;
  cell.commits_per_job = static_cast<double>(commits1 - commits0) / o.jobs;
  cell.client_commits_per_job = static_cast<double>(txns.load()) / o.jobs;
  cell.claim_p50_ms = percentile(claim_ms, 0.50);
  cell.claim_p99_ms = percentile(claim_ms, 0.99);
  return cell;
}

Cell run_textbook(pg::Connection& admin, const Options& o) {
  ScopedSchema schema(admin, unique_schema_name("drain_tb"));
  admin.exec(fmt::format(
      "CREATE TABLE {0}.jobs (id bigserial PRIMARY KEY, queue text NOT NULL, priority smallint "
      "NOT NULL, kind text NOT NULL, args jsonb NOT NULL, attempt smallint NOT NULL DEFAULT 0, "
      "max_attempts smallint NOT NULL, run_at timestamptz NOT NULL DEFAULT now(), created_at "
      "timestamptz NOT NULL DEFAULT now()); CREATE INDEX ON {0}.jobs (priority, id)",
      schema.quoted()));
  {
    auto copy = admin.copy_in(fmt::format(
        "COPY {}.jobs (queue, priority, kind, args, max_attempts) FROM STDIN", schema.quoted()));
    for (int i = 0; i < o.jobs; ++i) {
      const std::string args = fmt::format("{{\"n\": {}}}", i);
      const std::optional<std::string_view> row[] = {kQueue, "2", "noop", args, "25"};
      copy.row(row);
    }
    copy.finish();
  }
  admin.exec(fmt::format("VACUUM ANALYZE {}.jobs", schema.quoted()));
  const std::string del =
      "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs ORDER BY priority, id "
      "FOR UPDATE SKIP LOCKED LIMIT 100) RETURNING *";
  return measure_drain(admin, o, schema, [&](pg::Connection& c) {
    const auto t0 = Clock::now();
    const int n = c.exec_cached(del, {}).rows();
    return StepResult{n, std::chrono::duration<double, std::milli>(Clock::now() - t0).count(), 1};
  });
}

Cell run_queue(pg::Connection& admin, const Options& o, int shards) {
  ScopedSchema schema(admin, unique_schema_name("drain_q"));
  schema::Migrator(schema.name()).migrate(admin);
  admin.query(
      fmt::format("INSERT INTO {}.queue_meta (queue, enqueue_shards) VALUES ($1, $2) "
                  "ON CONFLICT (queue) DO UPDATE SET enqueue_shards = EXCLUDED.enqueue_shards",
                  schema.quoted()),
      std::string(kQueue), shards);
  QueueStorage store(StorageOptions{schema.name()});
  {
    InsertOpts opts;
    opts.queue = std::string(kQueue);
    std::vector<NewJob> batch;
    for (int i = 0; i < o.jobs; ++i) {
      batch.emplace_back("noop", nlohmann::json{{"n", i}}, opts);
      if (batch.size() == 5000 || i + 1 == o.jobs) {
        store.insert_many_copy(admin, batch);
        batch.clear();
      }
    }
  }
  admin.exec(fmt::format("VACUUM ANALYZE {}.ready_entries", schema.quoted()));
  std::atomic<std::int64_t> stale{0};
  QueueStorage::ClaimOptions co;
  co.max_batch = o.claim_batch;
  const Cell cell = measure_drain(admin, o, schema, [&](pg::Connection& c) {
    const auto t0 = Clock::now();
    const auto claimed = store.claim(c, std::string(kQueue), co);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (claimed.empty()) return StepResult{0, ms, 1};
    std::vector<Completion> done;
    done.reserve(claimed.size());
    for (const auto& e : claimed) done.push_back(Completion::of(e, Outcome::kCompleted));
    for (const auto& r : store.complete(c, done)) stale += r.stale() ? 1 : 0;
    return StepResult{static_cast<int>(claimed.size()), ms, 2};
  });
  const auto completed = admin
                             .exec(fmt::format("SELECT completed FROM {}.queue_counts_exact('{}')",
                                               schema.quoted(), kQueue))
                             .get<std::int64_t>(0, 0);
  if (completed != o.jobs || stale.load() != 0) {
    throw std::runtime_error(fmt::format("drain S={}: {} completed of {}, {} stale", shards,
                                         completed, o.jobs, stale.load()));
  }
  return cell;
}

Cell median_cell(const std::vector<Cell>& cells) {
  const auto med = [&](auto field) {
    std::vector<double> v;
    for (const auto& c : cells) v.push_back(c.*field);
    return median(v);
  };
  Cell m;
  m.jobs_per_s = med(&Cell::jobs_per_s);
  m.wal_bytes_per_job = med(&Cell::wal_bytes_per_job);
  m.commits_per_job = med(&Cell::commits_per_job);
  m.client_commits_per_job = med(&Cell::client_commits_per_job);
  m.claim_p50_ms = med(&Cell::claim_p50_ms);
  m.claim_p99_ms = med(&Cell::claim_p99_ms);
  return m;
}

int run(const Options& o) {
  auto admin = connect("awa_bench_admin", kStatementTimeout);
  const auto machine = machine_info(admin);
  fmt::print("drain: {} jobs, {} claimers, claim batch {}, shards {}, {} run(s)\n{}\n", o.jobs,
             o.claimers, o.claim_batch, fmt::join(o.shards, ","), o.runs, machine.describe());

  std::vector<Cell> textbook;
  std::map<int, std::vector<Cell>> queue;
  for (int r = 0; r < o.runs; ++r) {
    textbook.push_back(run_textbook(admin, o));
    fmt::print("run {}: textbook {} jobs/s\n", r + 1, thousands(textbook.back().jobs_per_s));
    for (const int s : o.shards) {
      queue[s].push_back(run_queue(admin, o, s));
      fmt::print("run {}: S={} {} jobs/s ({:.2f} of textbook)\n", r + 1, s,
                 thousands(queue[s].back().jobs_per_s),
                 queue[s].back().jobs_per_s / textbook.back().jobs_per_s);
    }
  }

  const Cell tb = median_cell(textbook);
  TablePrinter table({{"queue"},
                      {"completed jobs/s", TablePrinter::Align::kRight},
                      {"vs textbook", TablePrinter::Align::kRight},
                      {"WAL B/job", TablePrinter::Align::kRight},
                      {"commits/job", TablePrinter::Align::kRight},
                      {"client txns/job", TablePrinter::Align::kRight},
                      {"claim p50 ms", TablePrinter::Align::kRight},
                      {"claim p99 ms", TablePrinter::Align::kRight}});
  const auto row = [&](const std::string& name, const Cell& c, double vs) {
    table.add_row({name, thousands(c.jobs_per_s), fmt::format("{:.2f}", vs),
                   fmt::format("{:.0f}", c.wal_bytes_per_job),
                   fmt::format("{:.4f}", c.commits_per_job),
                   fmt::format("{:.4f}", c.client_commits_per_job),
                   fmt::format("{:.2f}", c.claim_p50_ms), fmt::format("{:.2f}", c.claim_p99_ms)});
  };
  row("textbook (DELETE … SKIP LOCKED LIMIT 100)", tb, 1.0);
  nlohmann::json results = nlohmann::json::array();
  for (const int s : o.shards) {
    const Cell c = median_cell(queue[s]);
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
                       {"jobs", o.jobs},
                       {"claimers", o.claimers},
                       {"claim_batch", o.claim_batch},
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
  app.add_option("--jobs", o.jobs, "jobs seeded per cell")->capture_default_str();
  app.add_option("--shards", shards, "enqueue_shards values")->capture_default_str();
  app.add_option("--claimers", o.claimers, "claiming connections")->capture_default_str();
  app.add_option("--claim-batch", o.claim_batch, "rows per claim")->capture_default_str();
  app.add_option("--runs", o.runs, "runs (cells interleaved)")->capture_default_str();
  app.add_option("--json", o.json_path, "write results as JSON");
  CLI11_PARSE(app, argc, argv);
  try {
    o.shards = awa::bench::parse_int_list(shards, "--shards");
    if (o.jobs < 1 || o.claimers < 1 || o.claim_batch < 1 || o.runs < 1) {
      throw std::invalid_argument("--jobs, --claimers, --claim-batch and --runs must be >= 1");
    }
    return awa::bench::run(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "drain: {}\n", e.what());
    return 1;
  }
}
