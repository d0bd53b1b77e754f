// awa_hosts: the many-hosts harness's driver (docs/deployment.md, "Many worker hosts").
//
// For each host count H (default 1, 2, 4): a fresh schema, N jobs enqueued up front on one
// queue with S enqueue shards (half of them keyed, over K ordering keys), then H `awa work`
// processes — one per simulated host — drain it together. Reported per H: the drain time
// (first claim to last completion, both as the server recorded them, so process start-up
// is not counted), jobs/s, each process's share, the client addresses the server saw, and
// the ledger check of the fault harness (ledger.cpp): every job finished exactly once,
// none lost, keyed jobs in producer order on one shard, claim batches consistent.
//
// The driver knows nothing of network namespaces: scripts/hosts creates them and passes
// a command prefix per host (`ip netns exec awa-h{}`) and the server address each host
// reaches it at; in loopback mode both are plain 127.0.0.1 processes. Runs only against
// the harness's own cluster (it drops and re-creates schema awa).
#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "awa/job.hpp"
#include "awa/queue_storage.hpp"
#include "ledger.hpp"
#include "pg/connection.hpp"
#include "processes.hpp"
#include "producers.hpp"
#include "sql_files.hpp"

namespace chaos {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct Options {
  std::string url;  // the driver's own connection (enqueue, checks)
  std::string awa;
  std::string log_dir;
  std::string json;
  std::string mode = "loopback";  // what scripts/hosts set up: netns | loopback
  std::string worker_url;         // "{}" is replaced by the host's number (1-based)
  std::string worker_prefix;      // ditto; split on spaces; empty: none
  std::vector<int> hosts = {1, 2, 4};
  std::string queue = "hosts";
  int jobs = 30000;
  int keys = 64;
  int shards = 8;
  int workers = 16;  // per process
  int drain_seconds = 120;
};

std::string for_host(const std::string& pattern, int host) {
  std::string out = pattern;
  for (auto at = out.find("{}"); at != std::string::npos; at = out.find("{}"))
    out.replace(at, 2, std::to_string(host));
  return out;
}

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

struct HostShare {
  int host = 0;
  std::int64_t completed = -1;  // from the process's exit summary; -1 when missing
};

struct RunResult {
  int hosts = 0;
  std::int64_t jobs = 0;
  double drain_s = 0.0;
  bool drained = false;
  std::vector<HostShare> shares;
  std::map<std::string, std::int64_t> clients;  // client address -> awa connections
  LedgerResult ledger;
  int exits_not_clean = 0;
  double per_s() const { return drain_s > 0 ? static_cast<double>(jobs) / drain_s : 0.0; }
  bool ok() const { return drained && ledger.ok() && ledger.jobs == jobs && exits_not_clean == 0; }
};

class Driver {
 public:
  explicit Driver(Options o) : o_(std::move(o)) {}
  int run();

 private:
  void say(const std::string& line) const {
    fmt::print("hosts: [{:6.1f}s] {}\n",
               std::chrono::duration<double>(Clock::now() - started_).count(), line);
    std::fflush(stdout);
  }
  awa::pg::Connection& db();
  std::vector<ProducedJob> enqueue();
  RunResult run_once(int hosts);

  Options o_;
  Clock::time_point started_ = Clock::now();
  std::optional<awa::pg::Connection> db_;
};

awa::pg::Connection& Driver::db() {
  if (!db_ || !db_->ok()) db_.emplace(awa::pg::Connection::connect({o_.url}));
  return *db_;
}

// N jobs in transactions of 500, one producer (so `seq` is the enqueue order): even ones
// keyed "k<i mod K>", odd ones not. Kind noop: the drain measures the queue, not handlers.
std::vector<ProducedJob> Driver::enqueue() {
  constexpr int kBatch = 500;
  auto conn = awa::Connection::connect(o_.url);
  awa::QueueStorage store;
  std::vector<ProducedJob> out;
  out.reserve(static_cast<std::size_t>(o_.jobs));
  for (int first = 0; first < o_.jobs; first += kBatch) {
    std::vector<awa::NewJob> batch;
    std::vector<ProducedJob> meta;
    for (int i = first; i < std::min(o_.jobs, first + kBatch); ++i) {
      ProducedJob pj;
      pj.seq = i + 1;
      pj.marker = fmt::format("h-{}", pj.seq);
      pj.kind = "noop";
      awa::InsertOpts opts;
      opts.queue = o_.queue;
      if (i % 2 == 0) {
        pj.ordering_key = fmt::format("k{}", (i / 2) % o_.keys);
        opts.ordering_key = pj.ordering_key;
      }
      batch.emplace_back(pj.kind, nlohmann::json{{"m", pj.marker}}, opts);
      meta.push_back(std::move(pj));
    }
    awa::Transaction tx(conn);
    const auto ids = store.insert_many(conn, std::span<const awa::NewJob>(batch));
    tx.commit();
    for (std::size_t k = 0; k < meta.size(); ++k) {
      meta[k].job_id = ids.at(k);
      out.push_back(std::move(meta[k]));
    }
  }
  return out;
}

RunResult Driver::run_once(int hosts) {
  RunResult r;
  r.hosts = hosts;
  // A fresh schema: the ledger check reads the whole history (rotation is off below).
  db().exec(sql::file("run/reset_schemas.sql"));
  const auto log = [&](const std::string& what) {
    return fmt::format("{}/{}-hosts-{}.log", o_.log_dir, hosts, what);
  };
  const auto migrated = chaos::run({o_.awa, "--database-url", o_.url, "migrate"}, log("migrate"),
                                   milliseconds(60000));
  if (!migrated || *migrated != 0)
    throw std::runtime_error("awa migrate failed: " + log("migrate"));
  db().exec(sql::file("run/record_claims.sql"));
  // Paused while the processes start, so that all of them begin the drain together
  // (resuming wakes every listening worker) and no host drains alone before the others
  // are up.
  auto conn = awa::Connection::connect(o_.url);
  awa::Admin().set_enqueue_shards(conn, o_.queue, o_.shards);
  awa::Admin().pause_queue(conn, o_.queue);
  const auto jobs = enqueue();
  r.jobs = load_ledger(db(), jobs);

  std::vector<pid_t> pids;
  for (int h = 1; h <= hosts; ++h) {
    auto argv = split_words(for_host(o_.worker_prefix, h));
    for (const std::string& a :
         {o_.awa, std::string("--database-url"), for_host(o_.worker_url, h), std::string("work"),
          std::string("--queue"), fmt::format("{}:{}", o_.queue, o_.workers),
          // no rotation, so no prune: the ledger check needs every attempt's record
          std::string("--rotate-ms"), std::string("0"), std::string("--shutdown-timeout-ms"),
          std::string("5000"), std::string("--no-migrate")})
      argv.push_back(a);
    pids.push_back(spawn(argv, log(fmt::format("worker-{}", h))));
  }
  const auto up_until = Clock::now() + std::chrono::seconds(30);
  for (int h = 1; h <= hosts; ++h) {
    for (;;) {
      std::ifstream in(log(fmt::format("worker-{}", h)));
      const std::string text((std::istreambuf_iterator<char>(in)), {});
      if (text.find("awa work: running") != std::string::npos) break;
      if (try_reap(pids[static_cast<std::size_t>(h - 1)]) || Clock::now() > up_until)
        throw std::runtime_error(fmt::format("worker {} did not start: see {}", h, o_.log_dir));
      std::this_thread::sleep_for(milliseconds(50));
    }
  }
  std::this_thread::sleep_for(milliseconds(500));  // their claimers reach LISTEN
  awa::Admin().resume_queue(conn, o_.queue);
  say(
      fmt::format("{} host(s): {} jobs enqueued ({} keyed over {} keys, S={}); workers {} up; "
                  "queue resumed",
                  hosts, r.jobs, (o_.jobs + 1) / 2, o_.keys, o_.shards, fmt::join(pids, " ")));

  const auto until = Clock::now() + std::chrono::seconds(o_.drain_seconds);
  std::int64_t left = -1;
  while (Clock::now() < until) {
    left = unfinished(o_.url, o_.queue);
    if (left == 0) break;
    for (const pid_t p : pids)
      if (try_reap(p))
        throw std::runtime_error("a worker exited during the drain: see " + o_.log_dir);
    std::this_thread::sleep_for(milliseconds(100));
  }
  r.drained = left == 0;
  const auto clients = db().query(sql::file("hosts/client_addresses.sql"));
  for (int i = 0; i < clients.rows(); ++i)
    r.clients[clients.get<std::string>(i, 0)] = clients.get<std::int64_t>(i, 1);

  for (const pid_t p : pids) ::kill(p, SIGTERM);
  for (std::size_t i = 0; i < pids.size(); ++i) {
    const auto code = wait_for(pids[i], milliseconds(20000));
    if (!code) {
      ::kill(pids[i], SIGKILL);
      wait_for(pids[i], milliseconds(5000));
    }
    if (!code || *code != 0) ++r.exits_not_clean;
    HostShare share{static_cast<int>(i) + 1, -1};
    std::ifstream in(log(fmt::format("worker-{}", i + 1)));
    static const std::regex summary(R"(awa work: claimed \d+ completed (\d+))");
    std::smatch m;
    for (std::string line; std::getline(in, line);)
      if (std::regex_search(line, m, summary)) share.completed = std::stoll(m[1].str());
    r.shares.push_back(share);
  }

  const auto window = db().query(sql::file("hosts/drain_window.sql"));
  r.drain_s = window.get_opt<double>(0, 0).value_or(0.0);
  r.ledger = check_ledger(db(), o_.url, o_.queue);
  for (const auto& p : r.ledger.problems) say("VIOLATION " + p);
  return r;
}

std::string shares_text(const RunResult& r) {
  std::string out;
  for (const auto& s : r.shares)
    out += fmt::format("{}{}", out.empty() ? "" : " / ",
                       s.completed < 0 ? std::string("?") : std::to_string(s.completed));
  return out;
}

int Driver::run() {
  std::filesystem::create_directories(o_.log_dir);
  say(fmt::format("mode {}: {} jobs per run, S={}, {} workers per process; logs in {}", o_.mode,
                  o_.jobs, o_.shards, o_.workers, o_.log_dir));
  std::vector<RunResult> runs;
  for (const int h : o_.hosts) {
    runs.push_back(run_once(h));
    const auto& r = runs.back();
    std::string clients;
    for (const auto& [addr, n] : r.clients) clients += fmt::format(" {}×{}", addr, n);
    say(fmt::format(
        "{} host(s): drained {} in {:.3f} s ({:.0f} jobs/s); completed per host {}; "
        "connections by client address:{}",
        h, r.drained ? "all" : "NOT all", r.drain_s, r.per_s(), shares_text(r), clients));
  }

  const double base = runs.empty() ? 0.0 : runs.front().per_s();
  fmt::print("\n{:>5} {:>7} {:>8} {:>9} {:>7} {:>5} {:>6} {:>6} {:>7} {:>6}  {}\n", "hosts", "jobs",
             "drain_s", "jobs/s", "vs_1st", "lost", "double", "order", "checked", "lanes",
             "completed per host");
  bool ok = true;
  nlohmann::json jruns = nlohmann::json::array();
  for (const auto& r : runs) {
    const double ratio = base > 0 ? r.per_s() / base : 0.0;
    fmt::print("{:>5} {:>7} {:>8.3f} {:>9.0f} {:>7.2f} {:>5} {:>6} {:>6} {:>7} {:>6}  {}\n",
               r.hosts, r.jobs, r.drain_s, r.per_s(), ratio, r.ledger.lost,
               r.ledger.double_finalised, r.ledger.order_violations, r.ledger.keyed_checked,
               r.ledger.lane_violations, shares_text(r));
    ok = ok && r.ok();
    nlohmann::json shares = nlohmann::json::array();
    for (const auto& s : r.shares) shares.push_back(s.completed);
    jruns.push_back({{"hosts", r.hosts},
                     {"jobs", r.jobs},
                     {"drained", r.drained},
                     {"drain_s", r.drain_s},
                     {"jobs_per_s", r.per_s()},
                     {"vs_first", ratio},
                     {"lost", r.ledger.lost},
                     {"double_finalised", r.ledger.double_finalised},
                     {"order_violations", r.ledger.order_violations},
                     {"keyed_checked", r.ledger.keyed_checked},
                     {"keyed_moves", r.ledger.keyed_moves},
                     {"keyed_moves_checked", r.ledger.keyed_moves_checked},
                     {"lane_violations", r.ledger.lane_violations},
                     {"completed_per_host", shares},
                     {"connections_by_client", r.clients},
                     {"unclean_exits", r.exits_not_clean}});
  }
  if (!o_.json.empty()) {
    nlohmann::json j = {{"mode", o_.mode},
                        {"shards", o_.shards},
                        {"workers_per_process", o_.workers},
                        {"runs", jruns},
                        {"ok", ok}};
    std::ofstream(o_.json) << j.dump(2) << '\n';
  }
  say(ok ? "ok: every job finished exactly once, keyed jobs in order, in every run"
         : fmt::format("FAILED (logs in {})", o_.log_dir));
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace chaos

int main(int argc, char** argv) {
  chaos::Options o;
  CLI::App app("awa_hosts: many-hosts drain harness driver (run it through scripts/hosts)");
  app.add_option("--url", o.url, "the harness cluster's URL, for the driver")->required();
  app.add_option("--awa", o.awa, "path of the awa binary")->required();
  app.add_option("--log-dir", o.log_dir, "where worker logs go")->required();
  app.add_option("--worker-url", o.worker_url,
                 "URL each worker process uses; {} becomes the host's number")
      ->required();
  app.add_option("--worker-prefix", o.worker_prefix,
                 "command words before awa for each worker; {} becomes the host's number");
  app.add_option("--mode", o.mode, "label for the report (netns or loopback)");
  app.add_option("--json", o.json, "also write the report to this JSON file");
  app.add_option("--hosts", o.hosts, "host counts to run, in order")->delimiter(',');
  app.add_option("--jobs", o.jobs, "jobs per run")->capture_default_str();
  app.add_option("--keys", o.keys, "ordering keys (half the jobs are keyed)")
      ->capture_default_str();
  app.add_option("--shards", o.shards, "enqueue_shards of the queue")->capture_default_str();
  app.add_option("--workers", o.workers, "workers per process")->capture_default_str();
  app.add_option("--drain-seconds", o.drain_seconds, "bound on each drain")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const bool hosts_ok = !o.hosts.empty() && std::all_of(o.hosts.begin(), o.hosts.end(),
                                                        [](int h) { return h >= 1 && h <= 16; });
  if (!hosts_ok || o.jobs < 1 || o.jobs > 1000000 || o.keys < 1 || o.shards < 1 || o.shards > 64 ||
      o.workers < 1 || o.drain_seconds < 1) {
    std::cerr << "awa_hosts: --hosts wants 1..16 each; --jobs 1..1000000; --keys, --workers, "
                 "--drain-seconds positive; --shards 1..64\n";
    return 2;
  }
  try {
    return chaos::Driver(o).run();
  } catch (const std::exception& e) {
    std::cerr << "awa_hosts: " << e.what() << '\n';
    return 2;
  }
}
