// awa_chaos: the fault harness's driver (docs/reliability.md, "Fault harness").
//
// About 1,000 attempts stay parked waiting for callbacks (parked.hpp), and C++ and Python
// producers enqueue keyed and unkeyed jobs on a 4-shard queue while three `awa work`
// processes drain it and a bounded random schedule (from --seed) injects faults: SIGKILL
// of a worker (respawned), SIGSTOP/SIGCONT of a worker for longer than the stale timeout,
// pg_terminate_backend of awa connections, of the maintenance leader's connection, and an
// immediate restart of the server. Then the producers stop, the workers drain and stop,
// and the ledger check (ledger.cpp) compares what was committed with what happened. The
// faults themselves are in faults.cpp, the Harness's declaration in harness.hpp.
//
// Runs only against the harness's own cluster: scripts/chaos starts it with
// AWA_PG_INSTANCE=chaos, and the driver refuses to restart a server unless that variable
// names an instance (restarting the shared .pg/ cluster would break the test suite).
// Child processes are signalled only by the pid the driver got from fork.
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "harness.hpp"
#include "ledger.hpp"
#include "parked.hpp"
#include "pg/connection.hpp"
#include "processes.hpp"
#include "producers.hpp"
#include "schedule.hpp"
#include "sql_files.hpp"
#include "sql_producers.hpp"

namespace chaos {

using std::chrono::milliseconds;

void Harness::say(const std::string& line) const {
  fmt::print("chaos: [{:6.1f}s] {}\n", elapsed(), line);
  std::fflush(stdout);
}

// The driver's own connection, reopened after a fault broke it (bounded: 30 s).
awa::pg::Connection& Harness::admin() {
  if (admin_ && admin_->ok()) return *admin_;
  admin_.reset();
  const auto until = Clock::now() + std::chrono::seconds(30);
  for (;;) {
    try {
      admin_.emplace(
          awa::pg::Connection::connect({o_.url, std::chrono::seconds(3), "awa-chaos-driver"}));
      return *admin_;
    } catch (const awa::Error&) {
      if (Clock::now() > until) throw;
      std::this_thread::sleep_for(milliseconds(200));
    }
  }
}

void Harness::spawn_worker(std::size_t i) {
  auto& s = slots_[i];
  // The last slot is the exactly-once worker when there is one: faults pick it like the
  // others.
  const bool credit = !o_.credit_worker.empty() && i + 1 == slots_.size();
  const std::vector<std::string> argv =
      credit ? std::vector<std::string>{o_.credit_worker,
                                        "--url",
                                        o_.url,
                                        "--queue",
                                        o_.credit_queue,
                                        "--slots",
                                        "4",
                                        "--heartbeat-ms",
                                        std::to_string(o_.heartbeat_ms),
                                        "--stale-ms",
                                        std::to_string(o_.stale_ms)}
             : std::vector<std::string>{
                   o_.awa, "--database-url", o_.url, "work", "--queue",
                   fmt::format("{}:{}", o_.queue, o_.worker_slots), "--heartbeat-ms",
                   std::to_string(o_.heartbeat_ms), "--stale-ms", std::to_string(o_.stale_ms),
                   "--maintenance-ms", "250",
                   // no rotation, so no prune: the ledger check needs
                   // every attempt's record
                   "--rotate-ms", "0", "--poll-ms", "250", "--shutdown-timeout-ms", "3000",
                   "--pool-size", "4", "--no-migrate"};
  // Worker 0 exports its spans to the harness's collector, worker 1 to one that refuses
  // them: through env(1), which execs awa in the same process (the pid stays the worker's).
  std::vector<std::string> traced = argv;
  if (!credit && otlp_ && i < 2) {
    traced.insert(traced.begin(),
                  {"/usr/bin/env",
                   "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" +
                       (i == 0 ? otlp_->accepting_url() : otlp_->refusing_url()),
                   "OTEL_SERVICE_NAME=chaos-worker-" + std::to_string(i),
                   "OTEL_BSP_SCHEDULE_DELAY=200", "OTEL_EXPORTER_OTLP_TIMEOUT=2000"});
  }
  s.pid = spawn(traced, fmt::format("{}/worker-{}.log", o_.log_dir, i));
  s.expected_exit = false;
  s.respawn_at.reset();
  s.cont_at.reset();
  ++s.spawns;
}

// Reaps exited workers and respawns them, continues stopped ones that are due.
void Harness::tend_workers() {
  const auto now = Clock::now();
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    auto& s = slots_[i];
    if (s.pid != 0) {
      if (const auto code = try_reap(s.pid)) {
        if (!s.expected_exit) {
          ++unexpected_exits_;
          say(fmt::format("worker {} (pid {}) exited on its own with status {}; respawning", i,
                          s.pid, *code));
        }
        s.pid = 0;
        s.cont_at.reset();
        s.respawn_at = now + (s.expected_exit ? milliseconds(300) : milliseconds(1000));
      }
    }
    if (s.pid == 0 && s.respawn_at && now >= *s.respawn_at) spawn_worker(i);
    if (s.pid != 0 && s.cont_at && now >= *s.cont_at) {
      ::kill(s.pid, SIGCONT);
      s.cont_at.reset();
      say(fmt::format("worker {} (pid {}) continued", i, s.pid));
    }
  }
  if (restart_pid_) {
    if (const auto code = try_reap(*restart_pid_)) {
      say(fmt::format("server restart finished (status {})", *code));
      restart_pid_.reset();
      // A restart's fault time is when the old server was gone: the new postmaster's start
      // (work claimed and completed between the pg_ctl call and the kill must not count).
      try {
        const auto res = admin().query(sql::file("faults/postmaster_start_time.sql"));
        const auto start = res.empty() ? std::nullopt : res.get_opt<double>(0, 0);
        if (start && restart_fault_ < fault_times_.size()) {
          const auto us = static_cast<long long>(*start * 1e6);
          fault_times_[restart_fault_] = Wall::time_point(std::chrono::microseconds(us));
        }
      } catch (const awa::Error& e) {
        say(fmt::format("cannot read the new server's start time: {}", e.what()));
      }
    }
  }
}
void Harness::stop_workers() {
  for (auto& s : slots_) {
    if (s.pid == 0) continue;
    if (s.cont_at) ::kill(s.pid, SIGCONT);
    ::kill(s.pid, SIGTERM);
  }
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    auto& s = slots_[i];
    if (s.pid == 0) continue;
    // Graceful stop: two shutdown timeouts (3 s each) and a flush, with margin.
    const auto code = wait_for(s.pid, std::chrono::seconds(20));
    if (!code) {
      ++stop_timeouts_;
      say(fmt::format("worker {} (pid {}) did not stop within 20 s of SIGTERM; SIGKILL", i, s.pid));
      ::kill(s.pid, SIGKILL);
      wait_for(s.pid, std::chrono::seconds(5));
    } else if (*code != 0) {
      ++unexpected_exits_;
      say(fmt::format("worker {} (pid {}) exited with status {} at SIGTERM", i, s.pid, *code));
    }
    s.pid = 0;
  }
}

int Harness::sanitizer_reports() const {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(o_.log_dir)) {
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line))
      if (line.find("AddressSanitizer") != std::string::npos ||
          line.find("runtime error:") != std::string::npos ||
          line.find("LeakSanitizer") != std::string::npos)
        ++n;
  }
  return n;
}

int Harness::run() {
  std::filesystem::create_directories(o_.log_dir);
  if (o_.check_only) {
    // The ledger check alone, on the database a finished run left behind (to test the
    // check itself: damage a row, see it reported).
    const auto r = check_ledger(admin(), o_.url, o_.queue);
    say(fmt::format("dependencies: {} edges of claimed jobs judged, started_before_parents {}",
                    r.dependency_edges, r.started_before_parents));
    say(fmt::format("batches: {} sealed batches judged, batch_callbacks_not_once {}",
                    r.batches_judged, r.batch_callbacks_not_once));
    say(fmt::format("exactly-once: {} credit jobs judged, credits_not_once {}", r.credit_jobs,
                    r.credits_not_once));
    for (const auto& p : r.problems) say("VIOLATION " + p);
    fmt::print("jobs={} lost={} double_finalised={} faults=0 max_recovery_s=0.00\n", r.jobs, r.lost,
               r.double_finalised);
    return r.ok() ? 0 : 1;
  }
  say(fmt::format("seed {}, {} s of faults, {} workers, {} producers; logs in {}", o_.seed,
                  o_.seconds, o_.workers, o_.producers, o_.log_dir));

  // A fresh schema every run: the ledger check reads the whole history.
  admin().exec(sql::file("run/reset_schemas.sql"));
  const auto migrated = chaos::run({o_.awa, "--database-url", o_.url, "migrate"},
                                   o_.log_dir + "/migrate.log", std::chrono::seconds(60));
  if (!migrated || *migrated != 0) throw std::runtime_error("awa migrate failed (migrate.log)");
  admin().exec(sql::file("run/record_claims.sql"));
  admin().exec(sql::file("credit/create.sql"));
  {
    auto conn = awa::Connection::connect(o_.url);
    awa::Admin().set_enqueue_shards(conn, o_.queue, 4);
  }

  otlp_ = std::make_unique<OtlpSink>();
  slots_.resize(static_cast<std::size_t>(o_.workers) + (o_.credit_worker.empty() ? 0 : 1));
  for (std::size_t i = 0; i < slots_.size(); ++i) spawn_worker(i);
  // Parked callbacks first: the faults must meet a rescue that has them to look past.
  ParkedCallbacks parked({o_.url, o_.queue, o_.parked, 20, 1000});
  parked.start();
  if (!parked.wait_parked(std::chrono::seconds(60)))
    say(fmt::format("not all {} park jobs parked within 60 s", o_.parked));
  else if (o_.parked > 0)
    say(fmt::format("{} attempts parked waiting for callbacks", o_.parked));
  Producers producers({o_.url, o_.queue, o_.producers, o_.rate, o_.seed,
                       o_.credit_worker.empty() ? std::string() : o_.credit_queue});
  producers.start();
  SqlProducers sql_producers({o_.sql_producer_script, o_.url, o_.queue, o_.producers,
                              o_.sql_producer_script.empty() ? 0 : o_.sql_producers, o_.rate,
                              o_.seed, o_.huge_numbers, o_.log_dir});
  sql_producers.start();

  const auto schedule = plan({o_.seconds, o_.max_faults, o_.stale_ms, o_.no_restart}, rng_);
  say(fmt::format("{} faults planned", schedule.size()));
  const auto phase_start = Clock::now();
  const auto phase_end = phase_start + std::chrono::seconds(o_.seconds);
  std::size_t next = 0;
  // --reshard (on by default): the queue goes 4 -> 8 at a third of the phase and 8 -> 2 at
  // two thirds, while producers run; the ledger checks that each key's jobs were still
  // claimed in producer order across both changes.
  std::vector<std::pair<Clock::time_point, int>> reshards;
  if (o_.reshard) {
    reshards = {{phase_start + std::chrono::seconds(o_.seconds) / 3, 8},
                {phase_start + std::chrono::seconds(o_.seconds) * 2 / 3, 2}};
  }
  std::size_t next_reshard = 0;
  while (Clock::now() < phase_end) {
    tend_workers();
    if (next < schedule.size() && Clock::now() >= phase_start + schedule[next].at) {
      inject(schedule[next].kind);
      ++next;
    }
    if (next_reshard < reshards.size() && Clock::now() >= reshards[next_reshard].first) {
      try {
        auto conn = awa::Connection::connect(o_.url, std::chrono::seconds(3));
        awa::Admin().set_enqueue_shards(conn, o_.queue, reshards[next_reshard].second);
        say(fmt::format("reshard: {} now has {} enqueue shards", o_.queue,
                        reshards[next_reshard].second));
        ++next_reshard;
      } catch (const std::exception& e) {
        say(fmt::format("reshard failed (retried): {}", e.what()));
      }
    }
    std::this_thread::sleep_for(milliseconds(20));
  }

  // Let a running restart finish and stopped workers continue before the drain.
  const auto settle_until = Clock::now() + std::chrono::seconds(60);
  for (;;) {
    tend_workers();
    bool stopped = false;
    for (const auto& s : slots_) stopped = stopped || s.cont_at.has_value();
    if ((!restart_pid_ && !stopped) || Clock::now() > settle_until) break;
    std::this_thread::sleep_for(milliseconds(20));
  }
  producers.stop();
  sql_producers.stop();
  parked.stop();
  auto pstats = producers.stats();
  auto produced = producers.results();
  const auto from_sql = sql_producers.results(pstats);
  produced.insert(produced.end(), from_sql.begin(), from_sql.end());
  const auto from_parked = parked.results();
  produced.insert(produced.end(), from_parked.begin(), from_parked.end());
  say(
      fmt::format("producers stopped: {} jobs committed ({} by SQL producers), {} with an "
                  "unknown commit outcome, {} C++ transactions rolled back, {} C++ connects, "
                  "{} producer errors",
                  pstats.committed, from_sql.size(), pstats.unknown, pstats.rolled_back,
                  pstats.reconnects, pstats.errors));
  say(fmt::format("batches: {} opened, {} sealed, {} member jobs (committed or unknown)",
                  pstats.batches_opened, pstats.batches_sealed, pstats.batch_members));
  for (const auto& m : pstats.messages) say("PRODUCER ERROR " + m);

  const auto committed = load_ledger(admin(), produced, producers.sealed_batches());
  const auto drain_until = Clock::now() + std::chrono::seconds(o_.drain_seconds);
  std::int64_t left = 0;
  for (;;) {
    tend_workers();
    parked.answer_waiting();  // the other system answers whatever parked since
    try {
      left = unfinished(o_.url, o_.queue) +
             (o_.credit_worker.empty() ? 0 : unfinished(o_.url, o_.credit_queue));
    } catch (const awa::Error&) {
      left = -1;
    }
    if (left == 0 || Clock::now() > drain_until) break;
    std::this_thread::sleep_for(milliseconds(500));
  }
  say(fmt::format("drain: {} of the queue's jobs not finished ({} committed)", left, committed));
  const auto ps = parked.stats();
  say(
      fmt::format("parked callbacks: {} park jobs, at most {} parked at once, {} completed by "
                  "callback, {} callbacks stale, {} errors",
                  ps.enqueued, ps.max_waiting, ps.resolved, ps.stale, ps.errors));
  for (const auto& m : ps.messages) say("PRODUCER ERROR " + m);
  pstats.errors += ps.errors;
  stop_workers();

  auto r = check_ledger(admin(), o_.url, o_.queue);
  const auto recovery = recovery_seconds(admin(), fault_times_);
  double max_recovery = 0.0;
  int unrecovered = 0;
  for (std::size_t i = 0; i < recovery.size(); ++i) {
    if (recovery[i] < 0)
      ++unrecovered;
    else
      max_recovery = std::max(max_recovery, recovery[i]);
  }
  const int sanitizer = sanitizer_reports();

  say(
      fmt::format("outcomes: completed {} failed {} cancelled {} dlq {}; {} jobs retried; "
                  "{} ended unexpectedly for their kind (a noop out of attempts, ...)",
                  r.completed, r.failed, r.cancelled, r.dlq, r.retried_jobs, r.unexpected_end));
  say(fmt::format(
      "unknown commits: {} ({} applied); keyed jobs checked for order: {} ({} of "
      "{} moves to another shard judged)",
      r.unknown_commits, r.unknown_applied, r.keyed_checked, r.keyed_moves_checked, r.keyed_moves));
  say(
      fmt::format("lost {} (pending {}), double finalised {}, phantom {}, resurrected {}, "
                  "key order violations {}, lane violations {}",
                  r.lost, r.lost_pending, r.double_finalised, r.phantom, r.resurrected,
                  r.order_violations, r.lane_violations));
  say(fmt::format("dependencies: {} edges of claimed jobs judged, started_before_parents {}",
                  r.dependency_edges, r.started_before_parents));
  say(fmt::format("batches: {} sealed batches judged, batch_callbacks_not_once {}",
                  r.batches_judged, r.batch_callbacks_not_once));
  say(fmt::format("exactly-once: {} credit jobs judged, credits_not_once {}", r.credit_jobs,
                  r.credits_not_once));
  say(
      fmt::format("workers: {} unexpected exits, {} stop timeouts, {} sanitizer lines; "
                  "faults without a later completion: {}",
                  unexpected_exits_, stop_timeouts_, sanitizer, unrecovered));
  for (const auto& p : r.problems) say("VIOLATION " + p);
  // The workers have stopped, each sending its last spans first.
  const auto spans = otlp_->counts();
  say(fmt::format(
      "tracing: worker 0 exported {} process spans of {} jobs ({} malformed); worker 1's "
      "collector refused {} requests",
      spans.process_spans, spans.jobs, spans.malformed, spans.refused_requests));
  const bool tracing_ok = spans.process_spans > 0 && spans.malformed == 0 &&
                          (o_.workers < 2 || spans.refused_requests > 0);
  if (!tracing_ok) say("VIOLATION tracing: no spans arrived, or malformed ones, or none refused");

  const bool ok = r.ok() && unrecovered == 0 && stop_timeouts_ == 0 && sanitizer == 0 &&
                  pstats.errors == 0 && tracing_ok;
  const auto faults = static_cast<std::int64_t>(fault_times_.size());
  fmt::print(
      "jobs={} lost={} double_finalised={} producer_errors={} faults={} "
      "max_recovery_s={:.2f}\n",
      r.jobs, r.lost, r.double_finalised, pstats.errors, faults, max_recovery);
  if (!o_.json.empty()) {
    nlohmann::json j = {{"jobs", r.jobs},
                        {"lost", r.lost},
                        {"double_finalised", r.double_finalised},
                        {"producer_errors", pstats.errors},
                        {"faults", faults},
                        {"max_recovery_s", std::round(max_recovery * 100.0) / 100.0}};
    std::ofstream(o_.json) << j.dump(2) << '\n';
  }
  if (!ok) say(fmt::format("FAILED (worker logs in {})", o_.log_dir));
  return ok ? 0 : 1;
}

}  // namespace chaos

int main(int argc, char** argv) {
  chaos::Options o;
  CLI::App app("awa_chaos: fault harness driver (run it through scripts/chaos)");
  app.add_option("--url", o.url, "the harness cluster's DATABASE_URL")->required();
  app.add_option("--awa", o.awa, "path of the awa binary")->required();
  app.add_option("--pg-script", o.pg_script, "path of scripts/pg (restart-immediate)");
  app.add_option("--credit-worker", o.credit_worker,
                 "path of awa_chaos_credit, the exactly-once worker (none: no credit jobs)");
  app.add_option("--log-dir", o.log_dir, "where worker logs go")->required();
  app.add_option("--seconds", o.seconds, "length of the fault phase")->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the fault schedule and the job mix")
      ->capture_default_str();
  app.add_option("--json", o.json, "also write the result keys to this JSON file");
  app.add_option("--workers", o.workers, "awa work processes")->capture_default_str();
  app.add_option("--worker-slots", o.worker_slots,
                 "handlers each awa work process runs at once (its queue's max_workers)")
      ->capture_default_str();
  app.add_option("--producers", o.producers, "producer threads")->capture_default_str();
  app.add_option("--sql-producers", o.sql_producers,
                 "SQL producer processes (Python, psycopg2; with --sql-producer-script)")
      ->capture_default_str();
  app.add_option("--sql-producer-script", o.sql_producer_script,
                 "path of tools/chaos/sql_producer.py (none: no SQL producers)");
  app.add_option("--parked", o.parked,
                 "park jobs kept waiting for callbacks during the run (0: none)")
      ->capture_default_str();
  app.add_flag("--reshard,!--no-reshard", o.reshard,
               "change the queue's shard count mid-run (4 -> 8 -> 2) (default on)");
  app.add_flag("--huge-numbers,!--no-huge-numbers", o.huge_numbers,
               "SQL producers put numbers beyond a double's range (1e400) in metadata "
               "(default on)");
  app.add_option("--rate", o.rate, "enqueue transactions per second per producer")
      ->capture_default_str();
  app.add_option("--max-faults", o.max_faults, "cap on injected faults")->capture_default_str();
  app.add_option("--drain-seconds", o.drain_seconds, "bound on the drain")->capture_default_str();
  app.add_option("--heartbeat-ms", o.heartbeat_ms, "workers' heartbeat")->capture_default_str();
  app.add_option("--stale-ms", o.stale_ms, "workers' stale timeout (rescue)")
      ->capture_default_str();
  app.add_flag("--no-restart", o.no_restart, "never restart the server");
  app.add_flag("--check-only", o.check_only,
               "only run the ledger check on the database the last run left");
  CLI11_PARSE(app, argc, argv);

  if (o.seconds < 1 || o.workers < 1 || o.worker_slots < 1 || o.producers < 1 || o.rate <= 0) {
    std::cerr << "awa_chaos: --seconds, --workers, --worker-slots, --producers and --rate must be "
                 "positive\n";
    return 2;
  }
  const char* instance = std::getenv("AWA_PG_INSTANCE");
  if (!o.no_restart && !o.check_only &&
      (instance == nullptr || *instance == '\0' || o.pg_script.empty())) {
    std::cerr << "awa_chaos: server restarts need --pg-script and AWA_PG_INSTANCE naming the "
                 "harness's own cluster (never the shared one); use scripts/chaos\n";
    return 2;
  }
  try {
    return chaos::Harness(o).run();
  } catch (const std::exception& e) {
    std::cerr << "awa_chaos: " << e.what() << '\n';
    return 2;
  }
}
