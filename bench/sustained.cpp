// scripts/bench sustained: the whole runtime (one awa::Client in this process) under a fixed
// offered load of durable single jobs and small batches, in the shape of AWA's
// cross-system harness: does it hold the load, at what latency, and
// what does each job cost the server in WAL, commits and dead tuples.
//
// Set-up, per trial: a throw-away schema (ScopedSchema, migrated with schema::Migrator),
// one queue "sustained" with enqueue_shards = --shards (Admin::set_enqueue_shards), one
// Client with --workers no-op workers and every other option at its default (ring rotation
// every 5 s, maintenance every second, completion batches of 512 rows / 1 ms). Every
// session sets synchronous_commit = on explicitly (the Client's through `options` in its
// connection URL, checked on a session opened the same way) and has a statement_timeout.
//
// Load: --producers threads, each with its own connection and QueueStorage, share one
// open-loop schedule of rate x seconds jobs: job seq is due at t0 + seq / rate and
// belongs to producer seq mod P. A producer's sends go in a fixed mix: of every 4 sends,
// 3 are one-job QueueStorage::insert calls and the 4th one insert_many of 5 jobs (8 jobs
// per 4 sends: 3/8 of the jobs travel alone, 5/8 in batches); a send is due when its first
// job is. A producer sleeps until a send is due and never sends early; a late one sends at
// once (and gives up 30 s past the schedule). Args are `{"seq":N,"t":DUE,"pad":"x…"}` of
// --args-bytes characters, DUE the send's due time in ns on this process's steady clock.
// Before the window, each producer sends one single job and one batch that are not
// measured (lanes exist, statements are prepared), and the Client completes them.
//
//   offered_per_s   = jobs whose insert call returned by t0 + seconds, / seconds.
//   completed_per_s = durable completions (ClientStats::completed counts a job once its
//                     completion flush committed) by t0 + seconds, / seconds.
//   held_ratio      = completed_per_s / offered_per_s. Jobs still in flight at the end of
//                     the window count as not held: at a steady state it is about
//                     1 - mean e2e / seconds.
//   e2e_ms          = due time -> durable completion, per job: the handler records when
//                     it ran (and now - DUE from its args); a watcher thread polls
//                     ClientStats::completed every 1 ms, and the k-th job to reach a
//                     handler is given the time the count first reached k (never earlier
//                     than its handler ran). The completion batcher flushes in hand-in
//                     order; two flushes in flight may finish swapped, so a job's time can
//                     be off by one flush (flush_ms_mean), and late by the 1 ms poll.
//                     Measured from the due time, so a late producer's delay counts
//                     (no coordinated omission). e2e_handler_ms: due -> handler, exact.
//                     Also per second of due time (e2e_p95_ms_by_second): drift shows.
//   wal_bytes_per_job = pg_current_wal_lsn after the last completion minus before the
//                     first enqueue, / completed jobs. WAL is the cluster's: anything
//                     else writing meanwhile is in it (other_active_sessions_max says).
//   commits_per_job = the Client's commits (claims, completions, heartbeats, the
//                     maintenance leader, its start, warm-up and stop) and autovacuum's in
//                     this database, / every job the Client completed (warm-up included,
//                     as the count spans its whole life); producers and the benchmark's own
//                     sessions excluded. PostgreSQL 15 counts commits per database only
//                     (pg_stat_database.xact_commit), never per session or
//                     application_name, so the benchmark counts its own sessions'
//                     transactions exactly and subtracts them: a session's local
//                     transaction id (pg_locks' virtualxid) goes up by one for every
//                     transaction it starts, whatever made it (a statement, a Parse, each
//                     segment of a pipeline, the NOTIFY after an enqueue commits, the
//                     producer's shard-count re-read). Every benchmark session is opened
//                     before the count starts; each one marks its local id and forces its
//                     statistics out (pg_stat_force_next_flush) at the start and the end;
//                     the count ends after the Client's backends have exited (an exiting
//                     backend flushes its counters). runtime = Δxact_commit - Σ Δlocal id.
//                     The producers' own transactions per job are reported apart
//                     (producer_commits_per_job). xact_commit counts read-only
//                     transactions too: among the runtime's, the listener's (PostgreSQL
//                     signals every listening session on every NOTIFY, and the session
//                     reads the notification queue in a transaction of its own, with no
//                     WAL). commits.claims_per_job and commits.flushes_per_job (per job
//                     completed in the window) are the write transactions of the hot path.
//   dead_tuples_max = max over samples (every ~1 s) of n_dead_tup summed over the schema's
//                     tables (pg_stat_user_tables; backends publish about once a second).
//   depth_max       = max over samples (every 500 ms) of sum(available) of
//                     queue_shard_lag('sustained'): enqueued, not yet claimed.
//
// --pin-xmin: a separate session holds BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1
// (its snapshot's xmin, checked in pg_stat_activity) from before the first enqueue until
// after the last completion.
//
// --find-capacity: trials of --seconds each, each in a fresh schema, starting at --rate:
// doubling while held, then bisecting between the highest held and the lowest not held,
// until they are within 5 % or --max-trials (default 8) trials ran. Held = every sent job
// completed, offered >= 0.99 x rate (the producers kept up), held_ratio >= 0.99 and
// e2e p95 <= 100 ms.
//
// Bounded: rate x seconds <= 10,000,000 jobs per trial, the producers' 30 s grace, a 30 s
// drain limit, at most 12 trials, a statement_timeout on every session. Only DATABASE_URL
// is contacted.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "pg/connection.hpp"
#include "sustained_run.hpp"

namespace awa::bench {
namespace {

constexpr auto kStatementTimeout = std::chrono::seconds(120);
constexpr double kHeldRatio = 0.99;
constexpr double kP95LimitMs = 100;
constexpr double kStepTolerance = 0.05;  // capacity search: stop within 5 %
// The targets set for this benchmark (stated at W=32 with ~100-byte args).
constexpr double kWalTarget = 400;
constexpr double kCommitsTarget = 0.05;

struct Options {
  SustainedSetup setup;
  int runs = 1;
  bool find_capacity = false;
  int max_trials = 8;
  std::string json_path;
};

// Why a trial did not hold its load; empty when it did.
std::string not_held(const TrialResult& r) {
  std::vector<std::string> why;
  if (!r.drained) why.emplace_back("not drained");
  if (r.offered_per_s < kHeldRatio * r.setup.rate) {
    why.push_back(fmt::format("producers offered {:.0f}/s", r.offered_per_s));
  }
  if (r.held_ratio < kHeldRatio) why.push_back(fmt::format("held {:.3f}", r.held_ratio));
  if (r.e2e_ms.p95 > kP95LimitMs) why.push_back(fmt::format("p95 {:.1f} ms", r.e2e_ms.p95));
  return fmt::format("{}", fmt::join(why, ", "));
}

std::string num(double v, int decimals) { return fmt::format("{:.{}f}", v, decimals); }

TablePrinter results_table(bool with_verdict) {
  std::vector<TablePrinter::Column> cols{{"run"},
                                         {"rate", TablePrinter::Align::kRight},
                                         {"offered/s", TablePrinter::Align::kRight},
                                         {"completed/s", TablePrinter::Align::kRight},
                                         {"held", TablePrinter::Align::kRight},
                                         {"e2e p50", TablePrinter::Align::kRight},
                                         {"p95", TablePrinter::Align::kRight},
                                         {"p99", TablePrinter::Align::kRight},
                                         {"WAL B/job", TablePrinter::Align::kRight},
                                         {"commits/job", TablePrinter::Align::kRight},
                                         {"dead max", TablePrinter::Align::kRight},
                                         {"depth max", TablePrinter::Align::kRight}};
  if (with_verdict) cols.push_back({"verdict"});
  return TablePrinter(std::move(cols));
}

std::vector<std::string> result_row(const std::string& label, const TrialResult& r) {
  return {label,
          thousands(r.setup.rate),
          thousands(r.offered_per_s),
          thousands(r.completed_per_s),
          num(r.held_ratio, 4),
          num(r.e2e_ms.p50, 2),
          num(r.e2e_ms.p95, 2),
          num(r.e2e_ms.p99, 2),
          num(r.wal_bytes_per_job, 0),
          num(r.commits_per_job, 4),
          thousands(static_cast<double>(r.dead_tuples_max)),
          thousands(static_cast<double>(r.depth_max))};
}

void print_details(const std::string& label, const TrialResult& r) {
  fmt::print(
      "{}: {} jobs sent ({} single sends, {} batch sends of {}), {} completed{}, producers at "
      "most {:.1f} ms late\n"
      "  e2e ms p50/p95/p99/max {:.2f}/{:.2f}/{:.2f}/{:.2f} (to the handler "
      "{:.2f}/{:.2f}/{:.2f}); client: {} claims, {} flushes of {:.2f} ms ({:.3f} + {:.3f} per "
      "job completed in the window), {} rotations, {} prunes\n"
      "  WAL {:.1f} MB; commits: {} in the database - {} benchmark sessions' (producers {}, "
      "{:.3f}/job) = {} runtime, {} autovacuum/analyze runs; dead max {} ({}); in flight max "
      "{}; other active sessions max {}{}; load {}\n",
      label, thousands(static_cast<double>(r.jobs_sent)), r.sends_single, r.sends_batch, kBatchSize,
      thousands(static_cast<double>(r.jobs_completed)),
      r.drained ? fmt::format(", drained {:.2f} s after the window", r.drain_s)
                : std::string(", NOT drained within 30 s"),
      r.producer_max_late_ms, r.e2e_ms.p50, r.e2e_ms.p95, r.e2e_ms.p99, r.e2e_ms.max,
      r.e2e_handler_ms.p50, r.e2e_handler_ms.p95, r.e2e_handler_ms.p99, r.claims, r.flushes,
      r.flush_ms_mean,
      static_cast<double>(r.claims) /
          static_cast<double>(std::max<std::int64_t>(1, r.completed_in_window)),
      static_cast<double>(r.flushes) /
          static_cast<double>(std::max<std::int64_t>(1, r.completed_in_window)),
      r.stats.rotations, r.stats.prunes, static_cast<double>(r.wal_bytes) / 1e6, r.db_commits,
      r.bench_transactions, r.producer_transactions, r.producer_commits_per_job, r.runtime_commits,
      r.autovacuum_runs, thousands(static_cast<double>(r.dead_tuples_max)),
      r.dead_tuples_max_table.empty() ? "-" : r.dead_tuples_max_table, r.in_flight_max,
      r.other_active_max,
      r.pinned_xmin_age ? fmt::format("; pinned xmin age {}", *r.pinned_xmin_age) : "",
      r.loadavg_end);
  if (r.other_active_max > 0) {
    fmt::print(
        "  WARNING: other sessions were active on the server: WAL (cluster-wide) and commits "
        "(this database) include their work\n");
  }
  if (r.offered_per_s < 0.95 * r.setup.rate) {
    fmt::print(
        "  WARNING: the producers offered only {:.0f} of {} jobs/s: the load was "
        "producer-bound; try --producers\n",
        r.offered_per_s, r.setup.rate);
  }
}

// The samples that carry dead tuples (about one a second), at most ~30 rows.
std::string timeline_table(const TrialResult& r) {
  std::vector<const SustainedSample*> rows;
  for (const auto& s : r.samples) {
    if (s.dead) rows.push_back(&s);
  }
  const std::size_t step = std::max<std::size_t>(1, (rows.size() + 29) / 30);
  const auto p95_at = [&](double t_s) {
    const auto i = static_cast<std::size_t>(std::max(0.0, t_s));
    return i < r.e2e_p95_by_second.size() ? num(r.e2e_p95_by_second[i], 2) : std::string("–");
  };
  TablePrinter t({{"t s", TablePrinter::Align::kRight},
                  {"completed", TablePrinter::Align::kRight},
                  {"depth", TablePrinter::Align::kRight},
                  {"in flight", TablePrinter::Align::kRight},
                  {"dead (all)", TablePrinter::Align::kRight},
                  {"most dead"},
                  {"e2e p95 of jobs due in [t, t+1)", TablePrinter::Align::kRight}});
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i % step != 0 && i + 1 != rows.size()) continue;
    const auto& s = *rows[i];
    t.add_row({num(s.t_s, 1), thousands(static_cast<double>(s.completed)),
               thousands(static_cast<double>(s.depth)), std::to_string(s.in_flight),
               thousands(static_cast<double>(*s.dead)),
               s.most_dead_table.empty() ? std::string("-")
                                         : fmt::format("{} {}", s.most_dead_table,
                                                       thousands(static_cast<double>(s.most_dead))),
               p95_at(s.t_s)});
  }
  return t.render();
}

// The headline keys over runs: medians, and [min, max] in "range".
nlohmann::json headline(const std::vector<TrialResult>& runs) {
  const auto over = [&](const std::function<double(const TrialResult&)>& f) {
    std::vector<double> v;
    for (const auto& r : runs) v.push_back(f(r));
    return v;
  };
  nlohmann::json out;
  nlohmann::json range;
  const auto put = [&](nlohmann::json& into, const std::string& key,
                       const std::function<double(const TrialResult&)>& f) {
    const auto v = over(f);
    into[key] = median(v);
    range[key] = {*std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end())};
  };
  put(out, "offered_per_s", [](const TrialResult& r) { return r.offered_per_s; });
  put(out, "completed_per_s", [](const TrialResult& r) { return r.completed_per_s; });
  put(out, "held_ratio", [](const TrialResult& r) { return r.held_ratio; });
  nlohmann::json e2e;
  put(e2e, "p50", [](const TrialResult& r) { return r.e2e_ms.p50; });
  put(e2e, "p95", [](const TrialResult& r) { return r.e2e_ms.p95; });
  put(e2e, "p99", [](const TrialResult& r) { return r.e2e_ms.p99; });
  out["e2e_ms"] = e2e;
  for (const char* k : {"p50", "p95", "p99"}) {
    range[std::string("e2e_ms.") + k] = range[k];
    range.erase(k);
  }
  put(out, "wal_bytes_per_job", [](const TrialResult& r) { return r.wal_bytes_per_job; });
  put(out, "commits_per_job", [](const TrialResult& r) { return r.commits_per_job; });
  // Counts stay integers (the median of an even number of runs rounds to the nearest).
  put(out, "dead_tuples_max",
      [](const TrialResult& r) { return static_cast<double>(r.dead_tuples_max); });
  put(out, "depth_max", [](const TrialResult& r) { return static_cast<double>(r.depth_max); });
  for (const char* k : {"dead_tuples_max", "depth_max"}) {
    out[k] = std::llround(out[k].get<double>());
    range[k] = {std::llround(range[k][0].get<double>()), std::llround(range[k][1].get<double>())};
  }
  if (runs.size() > 1) out["range"] = range;
  return out;
}

nlohmann::json options_json(const Options& o) {
  const auto& s = o.setup;
  return {{"rate", s.rate},
          {"seconds", s.seconds},
          {"producers", s.producers},
          {"workers", s.workers},
          {"shards", s.shards},
          {"args_bytes", s.args_bytes},
          {"pin_xmin", s.pin_xmin},
          {"find_capacity", o.find_capacity},
          {"max_trials", o.max_trials},
          {"runs", o.runs},
          {"send_mix", fmt::format("of every {} sends, {} single-job inserts and one insert_many "
                                   "of {} jobs",
                                   kBatchEvery, kBatchEvery - 1, kBatchSize)}};
}

// Adds what every report carries (options, machine, load) and writes it to --json.
void write_report(nlohmann::json& doc, const Options& o, const MachineInfo& machine) {
  doc["options"] = options_json(o);
  doc["loadavg_at_end"] = loadavg();
  doc["machine"] = machine.to_json();
  write_json(o.json_path, doc);
  fmt::print("wrote {}\n", o.json_path);
}

int run_fixed(pg::Connection& admin, const Options& o, const MachineInfo& machine) {
  const auto& s = o.setup;
  std::vector<TrialResult> runs;
  for (int i = 0; i < o.runs; ++i) {
    runs.push_back(run_trial(admin, s));
    print_details(fmt::format("run {}", i + 1), runs.back());
    fmt::print("{}\n", timeline_table(runs.back()));
  }
  auto table = results_table(false);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    table.add_row(result_row(std::to_string(i + 1), runs[i]));
  }
  const auto head = headline(runs);
  fmt::print("\n{}\n", table.render());
  if (runs.size() > 1) {
    fmt::print(
        "medians of {} runs: held {:.4f}, e2e p95 {:.2f} ms, {:.0f} B WAL/job, {:.4f} "
        "commits/job\n",
        runs.size(), head["held_ratio"].get<double>(), head["e2e_ms"]["p95"].get<double>(),
        head["wal_bytes_per_job"].get<double>(), head["commits_per_job"].get<double>());
  }
  const double wal = head["wal_bytes_per_job"].get<double>();
  const double commits = head["commits_per_job"].get<double>();
  fmt::print(
      "targets (stated at W=32, ~100-byte args; this run W={}, {} B): "
      "wal_bytes_per_job <= {:.0f}: {:.0f} ({}); commits_per_job <= {}: {:.4f} ({})\n",
      s.workers, s.args_bytes, kWalTarget, wal, wal <= kWalTarget ? "met" : "NOT met",
      kCommitsTarget, commits, commits <= kCommitsTarget ? "met" : "NOT met");

  if (!o.json_path.empty()) {
    nlohmann::json doc = head;
    doc["benchmark"] = "sustained";
    doc["mode"] = "fixed";
    nlohmann::json per_run = nlohmann::json::array();
    for (const auto& r : runs) per_run.push_back(trial_json(r, true));
    doc["runs"] = per_run;
    write_report(doc, o, machine);
  }
  return 0;
}

int run_capacity(pg::Connection& admin, const Options& o, const MachineInfo& machine) {
  SustainedSetup s = o.setup;
  const std::int64_t max_rate = kSustainedMaxJobs / s.seconds;
  int lo = 0;  // highest rate held
  int hi = 0;  // lowest rate not held (0: none yet)
  std::vector<TrialResult> trials;
  std::vector<std::string> verdicts;
  std::optional<std::size_t> best;
  for (int trial = 1; trial <= o.max_trials; ++trial) {
    trials.push_back(run_trial(admin, s));
    const auto& r = trials.back();
    const auto why = not_held(r);
    verdicts.push_back(why.empty() ? "held" : "not held: " + why);
    print_details(fmt::format("trial {} at {} jobs/s", trial, s.rate), r);
    fmt::print("trial {}: {} jobs/s -> {}\n", trial, s.rate, verdicts.back());
    if (why.empty()) {
      if (s.rate > lo) {
        lo = s.rate;
        best = trials.size() - 1;
      }
    } else if (hi == 0 || s.rate < hi) {
      hi = s.rate;
    }
    int next = 0;
    if (hi == 0) {
      next = 2 * lo;
      if (next > max_rate) break;
    } else if (lo == 0) {
      next = hi / 2;
    } else {
      if (hi - lo <= std::max(1, static_cast<int>(kStepTolerance * lo))) break;
      next = lo + (hi - lo) / 2;
    }
    if (next < 1) break;
    s.rate = next;
  }

  auto table = results_table(true);
  for (std::size_t i = 0; i < trials.size(); ++i) {
    auto row = result_row(std::to_string(i + 1), trials[i]);
    row.push_back(verdicts[i]);
    table.add_row(std::move(row));
  }
  fmt::print("\n{}\n", table.render());
  if (lo > 0) {
    fmt::print(
        "capacity: {} jobs/s held (held_ratio >= {}, e2e p95 <= {:.0f} ms){}, W={}, P={}, "
        "{} s trials\n",
        lo, kHeldRatio, kP95LimitMs,
        hi > 0 ? fmt::format("; {} jobs/s was not", hi) : std::string("; no higher rate tried"),
        s.workers, s.producers, s.seconds);
  } else {
    fmt::print("capacity: no rate tried was held (lowest tried: {} jobs/s)\n", hi);
  }

  if (!o.json_path.empty()) {
    nlohmann::json doc =
        best ? headline({trials[*best]})
             : nlohmann::json{{"offered_per_s", nullptr},     {"completed_per_s", nullptr},
                              {"held_ratio", nullptr},        {"e2e_ms", nullptr},
                              {"wal_bytes_per_job", nullptr}, {"commits_per_job", nullptr},
                              {"dead_tuples_max", nullptr},   {"depth_max", nullptr}};
    doc["benchmark"] = "sustained";
    doc["mode"] = "find-capacity";
    doc["capacity_per_s"] = lo > 0 ? nlohmann::json(lo) : nlohmann::json(nullptr);
    doc["lowest_not_held_per_s"] = hi > 0 ? nlohmann::json(hi) : nlohmann::json(nullptr);
    doc["criteria"] = {{"held_ratio_min", kHeldRatio}, {"e2e_p95_ms_max", kP95LimitMs}};
    nlohmann::json per = nlohmann::json::array();
    for (std::size_t i = 0; i < trials.size(); ++i) {
      auto t = trial_json(trials[i], false);
      t["verdict"] = verdicts[i];
      per.push_back(std::move(t));
    }
    doc["trials"] = per;
    write_report(doc, o, machine);
  }
  return 0;
}

int run(const Options& o) {
  auto admin = connect("awa_bench_sustained_admin", kStatementTimeout);
  admin.exec("SET synchronous_commit = on");
  const auto machine = machine_info(admin);
  const auto& s = o.setup;
  fmt::print(
      "sustained: {} jobs/s offered for {} s by {} producer(s) (of every {} sends {} single, "
      "1 batch of {}), {}-byte args, {} workers, {} shards{}{}\n{}\n",
      s.rate, s.seconds, s.producers, kBatchEvery, kBatchEvery - 1, kBatchSize, s.args_bytes,
      s.workers, s.shards, s.pin_xmin ? ", xmin pinned" : "",
      o.find_capacity ? fmt::format(", capacity search (at most {} trials)", o.max_trials)
                      : fmt::format(", {} run(s)", o.runs),
      machine.describe());
  return o.find_capacity ? run_capacity(admin, o, machine) : run_fixed(admin, o, machine);
}

}  // namespace
}  // namespace awa::bench

int main(int argc, char** argv) {
  awa::bench::Options o;
  auto& s = o.setup;
  CLI::App app{
      "sustained: the runtime under a fixed offered load of durable jobs; held ratio, e2e "
      "latency, WAL and commits per job, dead tuples, depth"};
  app.add_option("--rate", s.rate,
                 "jobs/s offered by all producers together (find-capacity: "
                 "the first trial's)")
      ->capture_default_str();
  app.add_option("--seconds", s.seconds, "seconds of offered load (per trial)")
      ->capture_default_str();
  app.add_option("--producers", s.producers, "producer threads, each with its own connection")
      ->capture_default_str();
  app.add_option("--workers", s.workers, "the queue's max_workers")->capture_default_str();
  app.add_option("--shards", s.shards, "the queue's enqueue_shards")->capture_default_str();
  app.add_option("--args-bytes", s.args_bytes, "size of each job's args JSON")
      ->capture_default_str();
  app.add_flag("--pin-xmin", s.pin_xmin,
               "hold a REPEATABLE READ transaction (its snapshot) open for the whole run");
  app.add_flag("--find-capacity", o.find_capacity,
               "search the highest rate held at held_ratio >= 0.99 and e2e p95 <= 100 ms");
  app.add_option("--max-trials", o.max_trials, "find-capacity: trials at most")
      ->capture_default_str();
  app.add_option("--runs", o.runs, "runs at --rate (medians reported)")->capture_default_str();
  app.add_option("--json", o.json_path, "write results as JSON");
  CLI11_PARSE(app, argc, argv);
  // The runtime logs through spdlog's default logger; stdout is the report's.
  spdlog::set_default_logger(spdlog::stderr_color_mt("awa"));
  try {
    if (s.rate < 1 || s.seconds < 1 || s.seconds > 3600 || s.producers < 1 || s.producers > 64 ||
        s.workers < 1 || s.workers > 1024 || s.shards < 1 || s.shards > 64 || s.args_bytes < 0 ||
        s.args_bytes > 65536 || o.runs < 1 || o.runs > 20 || o.max_trials < 1 ||
        o.max_trials > 12) {
      throw std::invalid_argument(
          "--rate >= 1, --seconds 1..3600, --producers 1..64, --workers 1..1024, --shards "
          "1..64, --args-bytes 0..65536, --runs 1..20, --max-trials 1..12");
    }
    if (static_cast<std::int64_t>(s.rate) * s.seconds > awa::bench::kSustainedMaxJobs) {
      throw std::invalid_argument("at most 10,000,000 jobs per trial (rate x seconds)");
    }
    if (o.find_capacity && o.runs != 1) {
      throw std::invalid_argument("--runs applies to a fixed rate, not to --find-capacity");
    }
    return awa::bench::run(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "sustained: {}\n", e.what());
    return 1;
  }
}
