// scripts/bench fleet: several `awa work` processes drain one queue together.
//
// Per cell (P processes): a fresh schema whose queue "fleet" has enqueue_shards = --shards,
// seeded with --jobs noop jobs carrying --keys ordering keys ("k<i % keys>", so each key's
// jobs sit on one shard in enqueue order). Then P `awa work --queue fleet:W` processes
// start at once (--no-migrate, ring rotation off so the claim evidence stays readable);
// completed/s = jobs / (spawn -> queue_counts_exact says all completed), process start-up
// included. The processes are then stopped with SIGTERM.
//
// Checked after each cell, from the database (a failure ends the benchmark):
//   - exactly once: one completed attempt per job, no other attempt history;
//   - no row claimed twice: within each lane the claim batches' lane_seq ranges are
//     disjoint;
//   - per-key FIFO: each key's jobs were claimed in enqueue (job id) order, whichever
//     process claimed them. Claim order is the claim transactions' commit order (claims
//     of a lane serialise on its claim head's row lock), read with
//     pg_xact_commit_timestamp — so only on a server with track_commit_timestamp = on;
//     otherwise the benchmark says it did not check.
// Start order across processes is not checked: two processes run claimed jobs in
// parallel, which is what a fleet is for; the guarantee is the claim order.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "drain_cells.hpp"
#include "pg/connection.hpp"

extern char** environ;

namespace awa::bench {
namespace {

constexpr std::string_view kQueue = "fleet";
constexpr auto kStatementTimeout = std::chrono::seconds(120);
constexpr auto kDrainLimit = std::chrono::minutes(10);
constexpr auto kPoll = std::chrono::milliseconds(20);
constexpr auto kStopLimit = std::chrono::seconds(30);

struct Options {
  int jobs = 100000;
  int shards = 8;
  std::vector<int> processes{1, 2, 4};
  int workers = 32;
  int keys = 1000;
  int runs = 3;
  std::string json_path;
  bool check_order = false;  // the server has track_commit_timestamp = on
};

struct Cell {
  double jobs_per_s = 0;
  double seconds = 0;
};

// `awa work` children; SIGKILLed if still running when destroyed.
class Fleet {
 public:
  Fleet(const std::string& schema, int processes, int workers) {
    for (int i = 0; i < processes; ++i) {
      std::vector<std::string> args{
          AWA_CLI_PATH,   "--schema",    schema,
          "work",         "--queue",     fmt::format("{}:{}", kQueue, workers),
          "--no-migrate", "--rotate-ms", "0"};
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      posix_spawn_file_actions_t fa;
      posix_spawn_file_actions_init(&fa);
      posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
      posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
      pid_t pid = 0;
      const int rc = posix_spawn(&pid, AWA_CLI_PATH, &fa, nullptr, argv.data(), environ);
      posix_spawn_file_actions_destroy(&fa);
      if (rc != 0) throw std::runtime_error(fmt::format("posix_spawn awa: error {}", rc));
      pids_.push_back(pid);
    }
  }
  ~Fleet() {
    for (const pid_t p : pids_) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
  }
  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;

  // SIGTERM, then waits (bounded) for every process to exit 0.
  void stop() {
    for (const pid_t p : pids_) ::kill(p, SIGTERM);
    const auto give_up = Clock::now() + kStopLimit;
    std::vector<pid_t> left;
    for (const pid_t p : pids_) {
      int status = 0;
      while (::waitpid(p, &status, WNOHANG) == 0) {
        if (Clock::now() > give_up) throw std::runtime_error("awa work did not stop in time");
        std::this_thread::sleep_for(kPoll);
      }
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        left.push_back(p);
      }
    }
    pids_.clear();
    if (!left.empty()) throw std::runtime_error("an awa work process exited with an error");
  }

 private:
  std::vector<pid_t> pids_;
};

std::int64_t scalar(pg::Connection& c, const std::string& sql) {
  return c.exec(sql).get<std::int64_t>(0, 0);
}

Cell run_cell(pg::Connection& admin, const Options& o, int processes) {
  ScopedSchema schema(admin, unique_schema_name("fleet"));
  seed_queue(admin, schema, kQueue, o.shards, o.jobs, "noop", o.keys);
  const auto q = schema.quoted();
  const auto completed_sql =
      fmt::format("SELECT completed FROM {}.queue_counts_exact('{}')", q, kQueue);
  const auto t0 = Clock::now();
  Fleet fleet(schema.name(), processes, o.workers);
  const auto give_up = t0 + kDrainLimit;
  while (scalar(admin, completed_sql) < o.jobs) {
    if (Clock::now() > give_up) throw std::runtime_error("the fleet did not drain in time");
    std::this_thread::sleep_for(kPoll);
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  fleet.stop();

  admin.exec(fmt::format("ANALYZE {0}.ready_entries, {0}.claim_batches, {0}.claim_closures", q));
  const auto outcomes = admin.exec(fmt::format(
      "SELECT count(*), count(DISTINCT job_id), count(*) FILTER (WHERE state = 'completed') "
      "FROM {}.attempt_outcomes",
      q));
  if (outcomes.get<std::int64_t>(0, 0) != o.jobs || outcomes.get<std::int64_t>(0, 1) != o.jobs ||
      outcomes.get<std::int64_t>(0, 2) != o.jobs) {
    throw std::runtime_error(fmt::format(
        "P={}: {} attempt outcomes for {} jobs ({} distinct, {} completed): not exactly once",
        processes, outcomes.get<std::int64_t>(0, 0), o.jobs, outcomes.get<std::int64_t>(0, 1),
        outcomes.get<std::int64_t>(0, 2)));
  }
  // No lane_seq claimed twice: within each lane the batches' ranges are disjoint.
  const auto overlaps = scalar(
      admin,
      fmt::format("SELECT count(*) FROM (SELECT first_seq, lag(last_seq) OVER ("
                  "PARTITION BY queue_id, priority, enqueue_shard ORDER BY first_seq) AS prev "
                  "FROM {}.claim_batches) b WHERE first_seq <= prev",
                  q));
  if (overlaps != 0) {
    throw std::runtime_error(
        fmt::format("P={}: {} claim batches overlap another of their lane", processes, overlaps));
  }
  // Claim order: claims of one lane serialise on its claim head's row lock, so their
  // commit order is their claim order; batch ids do not show it (each session caches its
  // own range of the sequence). Jobs of one key must be claimed in enqueue order.
  if (o.check_order) {
    const auto key_violations = scalar(
        admin, fmt::format("SELECT count(*) FROM (SELECT r.job_id, lag(r.job_id) OVER ("
                           "PARTITION BY r.ordering_key ORDER BY pg_xact_commit_timestamp(b.xmin), "
                           "r.lane_seq) AS prev "
                           "FROM {0}.ready_entries r JOIN {0}.claim_batches b "
                           "ON b.queue_id = r.queue_id AND b.priority = r.priority "
                           "AND b.enqueue_shard = r.enqueue_shard "
                           "AND r.lane_seq BETWEEN b.first_seq AND b.last_seq "
                           "WHERE r.ordering_key IS NOT NULL) x WHERE job_id < prev",
                           q));
    if (key_violations != 0) {
      throw std::runtime_error(fmt::format(
          "P={}: {} jobs claimed before an earlier job of their key", processes, key_violations));
    }
  }
  return Cell{o.jobs / secs, secs};
}

int run(Options o) {
  auto admin = connect("awa_bench_admin", kStatementTimeout);
  const auto machine = machine_info(admin);
  o.check_order = admin.exec("SHOW track_commit_timestamp").get<std::string>(0, 0) == "on";
  if (!o.check_order) {
    fmt::print(
        "note: track_commit_timestamp is off on this server, so per-key claim order is not "
        "checked (exactly once and disjoint claims are)\n");
  }
  fmt::print(
      "fleet: {} jobs ({} ordering keys) at S={}, `awa work` processes {} with {} workers "
      "each, {} run(s)\n{}\n",
      o.jobs, o.keys, o.shards, fmt::join(o.processes, ","), o.workers, o.runs, machine.describe());
  std::map<int, std::vector<double>> rates;
  std::map<int, std::vector<double>> scaling;  // vs P=processes[0] in the same run
  for (int r = 0; r < o.runs; ++r) {
    double first = 0;
    for (const int p : o.processes) {
      const Cell c = run_cell(admin, o, p);
      if (first == 0) first = c.jobs_per_s;
      rates[p].push_back(c.jobs_per_s);
      scaling[p].push_back(c.jobs_per_s / first);
      fmt::print("run {}: {} process(es): {} jobs/s ({:.2f} s); exactly once{}; load {}\n", r + 1,
                 p, thousands(c.jobs_per_s), c.seconds,
                 o.check_order ? ", per-key claim order held" : "", loadavg());
    }
  }
  TablePrinter table(
      {{"processes", TablePrinter::Align::kRight},
       {"completed jobs/s", TablePrinter::Align::kRight},
       {fmt::format("vs {} process(es)", o.processes.front()), TablePrinter::Align::kRight}});
  nlohmann::json results = nlohmann::json::array();
  for (const int p : o.processes) {
    table.add_row({std::to_string(p), thousands(median(rates[p])),
                   fmt::format("{:.2f}", median(scaling[p]))});
    results.push_back({{"processes", p},
                       {"completed_per_s", median(rates[p])},
                       {"vs_first", median(scaling[p])},
                       {"per_run", rates[p]}});
  }
  fmt::print("\nMedians of {} run(s) (ratios per run, then the median):\n{}\n", o.runs,
             table.render());
  if (!o.json_path.empty()) {
    write_json(o.json_path, {{"benchmark", "fleet"},
                             {"results", results},
                             {"jobs", o.jobs},
                             {"shards", o.shards},
                             {"keys", o.keys},
                             {"workers_per_process", o.workers},
                             {"runs", o.runs},
                             {"key_order_checked", o.check_order},
                             {"machine", machine.to_json()}});
    fmt::print("wrote {}\n", o.json_path);
  }
  return 0;
}

}  // namespace
}  // namespace awa::bench

int main(int argc, char** argv) {
  awa::bench::Options o;
  CLI::App app{"fleet: several `awa work` processes drain one queue; scaling and FIFO"};
  std::string processes = "1,2,4";
  app.add_option("--jobs", o.jobs, "jobs seeded per cell")->capture_default_str();
  app.add_option("--shards", o.shards, "the queue's enqueue_shards")->capture_default_str();
  app.add_option("--processes", processes, "awa work process counts")->capture_default_str();
  app.add_option("--workers", o.workers, "workers per process")->capture_default_str();
  app.add_option("--keys", o.keys, "distinct ordering keys (0: unkeyed jobs)")
      ->capture_default_str();
  app.add_option("--runs", o.runs, "runs (cells interleaved)")->capture_default_str();
  app.add_option("--json", o.json_path, "write results as JSON");
  CLI11_PARSE(app, argc, argv);
  try {
    o.processes = awa::bench::parse_int_list(processes, "--processes");
    if (o.jobs < 1 || o.workers < 1 || o.keys < 0 || o.runs < 1) {
      throw std::invalid_argument("--jobs, --workers and --runs must be >= 1, --keys >= 0");
    }
    if (o.shards < 1 || o.shards > 64) throw std::invalid_argument("--shards must be 1..64");
    for (const int p : o.processes) {
      if (p < 1 || p > 16) throw std::invalid_argument("--processes: each 1..16");
    }
    return awa::bench::run(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "fleet: {}\n", e.what());
    return 1;
  }
}
