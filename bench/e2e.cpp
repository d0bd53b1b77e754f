// scripts/bench e2e: the whole runtime (awa::Client in this process) under a fixed offered
// load, or draining a seeded queue.
//
// Every run gets its own schema (ScopedSchema, migrated with schema::Migrator) with one
// queue "e2e": enqueue_shards = --shards (an upsert into queue_meta), max_workers =
// --workers, everything else the Client's defaults (poll interval 1 s, completion batch
// 512 rows / 1 ms, maintenance on). The handler is a no-op that records when it started.
//
// mode rate: a producer thread with its own connection enqueues single jobs
// (self-committing QueueStorage::insert) at --rate jobs/s for --seconds, paced by an
// absolute schedule (a late producer does not sleep; it gives up 30 s past the schedule).
// One synchronous-commit insert at a time caps one producer (about 300/s on a loaded
// 2-core box); --producers P splits the same schedule round-robin over P threads, each
// with its own connection. A run that offered < 95 % of --rate says so.
// Args carry the job's sequence number. Before the measurement, 2 x shards warm-up jobs
// (seq -1) go through so lanes, prepared statements and pool connections exist.
//   pickup = the insert call returned (its commit and NOTIFY are done) -> handler start,
//            both on this process's steady clock. A handler that starts before the
//            producer sees its insert return counts as 0 (counted in "early").
//   e2e    = attempt_outcomes.finished_at - ready_entries.created_at, in SQL on the server's
//            clock. Both are now() of their transaction, i.e. transaction START: e2e runs
//            from the start of the enqueue transaction to the start of the completion
//            batch's transaction (the batch commits a little later, so durable completion
//            is e2e + one batch commit).
//   completed/s = jobs / (first enqueue -> the Client reported the last completion).
//   depth  = sum(available) of queue_shard_lag('e2e') every 500 ms (own connection).
//
// --batch B makes each slot of the schedule one insert_many call of B jobs (pickup then
// runs from that call's return).
//
// mode drain: --jobs jobs seeded with insert_many_copy (batches of 5000), then the Client
// starts; completed/s = jobs / (start() called -> ClientStats::completed reached jobs),
// startup included.
//
// mode compare: per run, a runtime drain and then the storage engine alone draining the
// same number of jobs at the same S (`scripts/bench drain`'s cell: 4 claimer connections,
// claim batch 512, claim + fused complete, no handlers); prints runtime_vs_storage per run
// and the median of those ratios. The storage cell opens its connections before its clock
// starts and runs nothing else, so the runtime cell does the same: the Client is started
// on the paused queue, the clock starts when the queue is resumed (after claimer 0's first
// empty claim), and no depth sampler runs. --cold measures the runtime cell as mode drain
// does instead (start-up and sampler inside the window).
//
// mode ladder: per run, a runtime drain gives the drain rate D; then rate runs at 200
// jobs/s (idle pickup: one producer, single-job inserts) and at 50 % and 90 % of D
// (--producers producers, default 4, batches sized so each producer makes at most
// 250 insert calls/s), --seconds each.
//
// mode pooler (e2e_pooler.cpp): per run, a drain of --jobs and an idle-pickup rate run
// (200 jobs/s, one producer, single-job inserts, --seconds) in three set-ups: the Client
// direct; through the transaction pooler --pooler-url (default $AWA_POOLER_URL; e.g.
// scripts/pgbouncer) with DATABASE_URL as its direct URL; and through it poll-only
// (docs/deployment.md). Producers and seeding stay on DATABASE_URL, so the cells differ
// only in the runtime's connections. --poll-ms sets the queue's poll interval (which
// bounds the poll-only pickup).
//
// mode tracing (e2e_tracing.cpp): per run, a drain of --jobs with tracing off and one with
// every attempt's span exported over OTLP/HTTP JSON to a sink in this process, in
// alternating order: completed/s and CPU µs per job of each.
//
// Bounded: a fixed number of jobs, a statement_timeout on every benchmark session, and
// time limits on the producer, the settle wait and the drain.
#include <algorithm>
#include <cmath>
#include <cstdlib>
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
#include "drain_cells.hpp"
#include "e2e_runs.hpp"
#include "pg/connection.hpp"

namespace awa::bench {
namespace {

constexpr auto kStatementTimeout = std::chrono::seconds(120);
constexpr double kIdleRate = 200;
constexpr double kCallsPerProducer = 250;  // ladder: insert calls per producer per second

struct Options {
  std::string mode = "rate";
  E2eSetup setup;
  bool producers_set = false;
  int runs = 1;
  std::string json_path;
  bool cold_compare = false;  // compare: the runtime cell as mode drain measures it
};

std::string render_depth(const std::vector<DepthSample>& depth) {
  if (depth.empty()) return "  (no samples)\n";
  std::int64_t max = 0;
  double sum = 0;
  for (const auto& d : depth) {
    max = std::max(max, d.available);
    sum += static_cast<double>(d.available);
  }
  std::string out = fmt::format("  {} samples, max {}, mean {:.1f}\n", depth.size(), max,
                                sum / static_cast<double>(depth.size()));
  constexpr std::size_t kPerLine = 10;
  for (std::size_t i = 0; i < depth.size(); i += kPerLine) {
    std::vector<std::string> cells;
    for (std::size_t j = i; j < std::min(depth.size(), i + kPerLine); ++j) {
      cells.push_back(fmt::format("{:>7}", depth[j].available));
    }
    out += fmt::format("  t={:5.1f}s {}\n", depth[i].t_s, fmt::join(cells, ""));
  }
  return out;
}

nlohmann::json json_or_null(const std::optional<Percentiles>& p) {
  return p ? p->to_json() : nlohmann::json(nullptr);
}

nlohmann::json run_json(const RunResult& r) {
  nlohmann::json depth = nlohmann::json::array();
  for (const auto& d : r.depth) depth.push_back({d.t_s, d.available});
  return {{"jobs", r.jobs},
          {"offered_per_s", r.offered_per_s},
          {"producer_max_late_ms", r.producer_max_late_ms},
          {"elapsed_s", r.elapsed_s},
          {"completed_per_s", r.completed_per_s},
          {"pickup_ms", json_or_null(r.pickup_ms)},
          {"e2e_ms", json_or_null(r.e2e_ms)},
          {"pickup_early", r.early},
          {"depth_available", depth},
          {"client", client_stats_json(r.stats)}};
}

// The median of one percentile field over the runs that have it.
std::optional<Percentiles> median_percentiles(const std::vector<RunResult>& runs,
                                              std::optional<Percentiles> RunResult::*field) {
  std::vector<double> p50, p95, p99, mx;
  for (const auto& r : runs) {
    if (!(r.*field)) continue;
    p50.push_back((r.*field)->p50);
    p95.push_back((r.*field)->p95);
    p99.push_back((r.*field)->p99);
    mx.push_back((r.*field)->max);
  }
  if (p50.empty()) return std::nullopt;
  return Percentiles{median(p50), median(p95), median(p99), median(mx)};
}

int run_single(pg::Connection& admin, const Options& o, const MachineInfo& machine) {
  const E2eSetup& st = o.setup;
  const bool rate = o.mode == "rate";
  if (rate) {
    fmt::print(
        "e2e (rate): {} jobs/s offered for {} s by {} producer(s), {} workers, {} shards, "
        "{} run(s)\n",
        st.rate, st.seconds, st.producers, st.workers, st.shards, o.runs);
  } else {
    fmt::print("e2e (drain): {} jobs seeded, {} workers, {} shards, {} run(s)\n", st.jobs,
               st.workers, st.shards, o.runs);
  }
  fmt::print("{}\n", machine.describe());

  std::vector<RunResult> runs;
  for (int i = 0; i < o.runs; ++i) {
    runs.push_back(rate ? run_rate(admin, st) : run_drain(admin, st));
    const auto& r = runs.back();
    fmt::print("run {}: {} jobs, {} completed/s", i + 1, thousands(static_cast<double>(r.jobs)),
               thousands(r.completed_per_s));
    if (rate) {
      fmt::print(
          " (offered {:.1f}/s, producer at most {:.1f} ms late), pickup p50 {:.2f} ms, "
          "e2e p50 {:.2f} ms, {} early",
          r.offered_per_s, r.producer_max_late_ms, r.pickup_ms->p50, r.e2e_ms->p50, r.early);
    }
    fmt::print("; client: claimed {}, completed {}, stale {}; load {}\n", r.stats.claimed,
               r.stats.completed, r.stats.stale_completions, loadavg());
    if (rate && r.offered_per_s < 0.95 * st.rate) {
      fmt::print(
          "WARNING: the producer(s) offered only {:.1f} of {} jobs/s (each insert is a "
          "synchronous commit): the load was producer-bound, not fixed; try --producers\n",
          r.offered_per_s, st.rate);
    }
    fmt::print("queue depth (available) every {} ms:\n{}", kDepthInterval.count(),
               render_depth(r.depth));
  }

  std::vector<double> per_s, offered;
  for (const auto& r : runs) {
    per_s.push_back(r.completed_per_s);
    offered.push_back(r.offered_per_s);
  }
  const double completed_per_s = median(per_s);
  const auto pickup = median_percentiles(runs, &RunResult::pickup_ms);
  const auto e2e = median_percentiles(runs, &RunResult::e2e_ms);
  const auto fmt_ms = [](const std::optional<Percentiles>& p, double Percentiles::*f) {
    return p ? fmt::format("{:.2f}", (*p).*f) : std::string("–");
  };
  TablePrinter table({{"mode"},
                      {"jobs", TablePrinter::Align::kRight},
                      {"offered/s", TablePrinter::Align::kRight},
                      {"completed/s", TablePrinter::Align::kRight},
                      {"pickup p50", TablePrinter::Align::kRight},
                      {"p95", TablePrinter::Align::kRight},
                      {"p99", TablePrinter::Align::kRight},
                      {"e2e p50", TablePrinter::Align::kRight},
                      {"p95", TablePrinter::Align::kRight},
                      {"p99", TablePrinter::Align::kRight}});
  table.add_row({rate ? fmt::format("rate {}/s, W={}, S={}", st.rate, st.workers, st.shards)
                      : fmt::format("drain, W={}, S={}", st.workers, st.shards),
                 thousands(static_cast<double>(runs.back().jobs)),
                 rate ? thousands(median(offered)) : std::string("–"), thousands(completed_per_s),
                 fmt_ms(pickup, &Percentiles::p50), fmt_ms(pickup, &Percentiles::p95),
                 fmt_ms(pickup, &Percentiles::p99), fmt_ms(e2e, &Percentiles::p50),
                 fmt_ms(e2e, &Percentiles::p95), fmt_ms(e2e, &Percentiles::p99)});
  fmt::print("\nMedians of {} run(s), latencies in ms:\n{}\n", o.runs, table.render());
  if (rate && pickup) {
    const bool met = pickup->p50 <= 1.0 && pickup->p95 <= 2.0;
    fmt::print("idle-pickup target (p50 <= 1.0 ms, p95 <= 2.0 ms; stated at 200 jobs/s): {}\n",
               met ? "met" : "NOT met");
  }

  if (!o.json_path.empty()) {
    nlohmann::json per_run = nlohmann::json::array();
    for (const auto& r : runs) per_run.push_back(run_json(r));
    nlohmann::json doc{{"benchmark", "e2e"},
                       {"mode", o.mode},
                       {"completed_per_s", completed_per_s},
                       {"pickup_ms", json_or_null(pickup)},
                       {"e2e_ms", json_or_null(e2e)},
                       {"options",
                        {{"rate", st.rate},
                         {"seconds", st.seconds},
                         {"producers", st.producers},
                         {"batch", st.batch},
                         {"workers", st.workers},
                         {"jobs", st.jobs},
                         {"shards", st.shards},
                         {"runs", o.runs}}},
                       {"runs", per_run},
                       {"loadavg_at_end", loadavg()},
                       {"machine", machine.to_json()}};
    write_json(o.json_path, doc);
    fmt::print("wrote {}\n", o.json_path);
  }
  return 0;
}

int run_compare(pg::Connection& admin, const Options& o, const MachineInfo& machine) {
  const E2eSetup& st = o.setup;
  DrainSetup storage_setup;  // scripts/bench drain's defaults
  storage_setup.jobs = st.jobs;
  fmt::print(
      "e2e (compare): {} jobs at S={}: the runtime ({} workers, noop handlers, {} start) vs the "
      "storage engine alone ({} claimers, claim batch {}), {} run(s)\n{}\n",
      st.jobs, st.shards, st.workers, o.cold_compare ? "cold" : "warm", storage_setup.claimers,
      storage_setup.claim_batch, o.runs, machine.describe());
  std::vector<double> runtime, storage, ratio;
  nlohmann::json per_run = nlohmann::json::array();
  for (int i = 0; i < o.runs; ++i) {
    E2eSetup rs = st;
    rs.warm = !o.cold_compare;
    rs.sample_depth = o.cold_compare;
    const auto rt = run_drain(admin, rs);
    const auto sg = drain_storage(admin, storage_setup, st.shards);
    runtime.push_back(rt.completed_per_s);
    storage.push_back(sg.jobs_per_s);
    ratio.push_back(rt.completed_per_s / sg.jobs_per_s);
    fmt::print(
        "run {}: runtime {} jobs/s ({} claims of {:.0f} rows, {:.2f} ms; {} flushes of {:.0f} "
        "rows, {:.2f} ms), storage {} jobs/s, runtime/storage {:.2f}; load {}\n",
        i + 1, thousands(runtime.back()), rt.claims,
        static_cast<double>(st.jobs) / static_cast<double>(std::max<std::uint64_t>(rt.claims, 1)),
        rt.claim_ms_mean, rt.flushes,
        static_cast<double>(st.jobs) / static_cast<double>(std::max<std::uint64_t>(rt.flushes, 1)),
        rt.flush_ms_mean, thousands(storage.back()), ratio.back(), loadavg());
    per_run.push_back({{"runtime_per_s", runtime.back()},
                       {"storage_per_s", storage.back()},
                       {"runtime_vs_storage", ratio.back()}});
  }
  TablePrinter table({{"drain, S=" + std::to_string(st.shards)},
                      {"jobs/s", TablePrinter::Align::kRight},
                      {"vs storage", TablePrinter::Align::kRight}});
  table.add_row({fmt::format("storage engine ({} claimers)", storage_setup.claimers),
                 thousands(median(storage)), "1.00"});
  table.add_row({fmt::format("runtime (awa::Client, {} workers)", st.workers),
                 thousands(median(runtime)), fmt::format("{:.2f}", median(ratio))});
  fmt::print("\nMedians of {} run(s) (the ratio is the median of the per-run ratios):\n{}\n",
             o.runs, table.render());
  fmt::print("target runtime >= 0.85 x storage: {}\n", median(ratio) >= 0.85 ? "met" : "NOT met");
  if (!o.json_path.empty()) {
    write_json(o.json_path,
               {{"benchmark", "e2e"},
                {"mode", "compare"},
                {"runtime_per_s", median(runtime)},
                {"storage_per_s", median(storage)},
                {"runtime_vs_storage", median(ratio)},
                {"options",
                 {{"jobs", st.jobs},
                  {"workers", st.workers},
                  {"shards", st.shards},
                  {"storage_claimers", storage_setup.claimers},
                  {"storage_claim_batch", storage_setup.claim_batch},
                  {"max_prefetch",
                   st.max_prefetch >= 0 ? st.max_prefetch : awa::QueueConfig{}.max_prefetch},
                  {"runtime_start", o.cold_compare ? "cold" : "warm"},
                  {"runs", o.runs}}},
                {"runs", per_run},
                {"machine", machine.to_json()}});
    fmt::print("wrote {}\n", o.json_path);
  }
  return 0;
}

int run_ladder(pg::Connection& admin, const Options& o, const MachineInfo& machine) {
  const E2eSetup& st = o.setup;
  const int producers = o.producers_set ? st.producers : 4;
  fmt::print(
      "e2e (ladder): pickup at 200 jobs/s and at 50 % and 90 % of the runtime's drain rate "
      "({} jobs), {} s each, {} workers, S={}, {} producer(s) under load, {} run(s)\n{}\n",
      st.jobs, st.seconds, st.workers, st.shards, producers, o.runs, machine.describe());
  struct Level {
    std::string name;
    double fraction;  // of the drain rate; 0 = idle (kIdleRate)
    std::vector<RunResult> runs;
  };
  std::vector<Level> levels{
      {"idle, 200/s", 0, {}}, {"50 % of drain", 0.5, {}}, {"90 % of drain", 0.9, {}}};
  std::vector<double> drains;
  for (int i = 0; i < o.runs; ++i) {
    drains.push_back(run_drain(admin, st).completed_per_s);
    fmt::print("run {}: drain {} jobs/s\n", i + 1, thousands(drains.back()));
    for (auto& level : levels) {
      E2eSetup rs = st;
      if (level.fraction == 0) {
        rs.rate = static_cast<int>(kIdleRate);
        rs.producers = 1;
        rs.batch = 1;
      } else {
        rs.rate = static_cast<int>(level.fraction * drains.back());
        rs.producers = producers;
        rs.batch =
            std::max(1, static_cast<int>(std::ceil(rs.rate / (producers * kCallsPerProducer))));
      }
      level.runs.push_back(run_rate(admin, rs));
      const auto& r = level.runs.back();
      fmt::print(
          "run {}: {}: offered {} jobs/s ({} producer(s), batch {}), completed {}/s, pickup p50 "
          "{:.2f} p95 {:.2f} p99 {:.2f} ms; load {}\n",
          i + 1, level.name, thousands(r.offered_per_s), rs.producers, rs.batch,
          thousands(r.completed_per_s), r.pickup_ms->p50, r.pickup_ms->p95, r.pickup_ms->p99,
          loadavg());
      if (r.offered_per_s < 0.95 * rs.rate) {
        fmt::print(
            "WARNING: the producers offered only {} of {} jobs/s: this level was "
            "producer-bound, not at its fraction of the drain rate\n",
            thousands(r.offered_per_s), thousands(rs.rate));
      }
    }
  }
  TablePrinter table({{"load"},
                      {"target/s", TablePrinter::Align::kRight},
                      {"offered/s", TablePrinter::Align::kRight},
                      {"completed/s", TablePrinter::Align::kRight},
                      {"pickup p50", TablePrinter::Align::kRight},
                      {"p95", TablePrinter::Align::kRight},
                      {"p99", TablePrinter::Align::kRight},
                      {"e2e p50", TablePrinter::Align::kRight}});
  nlohmann::json json_levels = nlohmann::json::array();
  for (const auto& level : levels) {
    std::vector<double> offered, completed;
    for (const auto& r : level.runs) {
      offered.push_back(r.offered_per_s);
      completed.push_back(r.completed_per_s);
    }
    const auto pickup = median_percentiles(level.runs, &RunResult::pickup_ms);
    const auto e2e = median_percentiles(level.runs, &RunResult::e2e_ms);
    const double target = level.fraction == 0 ? kIdleRate : level.fraction * median(drains);
    table.add_row({level.name, thousands(target), thousands(median(offered)),
                   thousands(median(completed)), fmt::format("{:.2f}", pickup->p50),
                   fmt::format("{:.2f}", pickup->p95), fmt::format("{:.2f}", pickup->p99),
                   fmt::format("{:.2f}", e2e->p50)});
    json_levels.push_back({{"load", level.name},
                           {"fraction_of_drain", level.fraction},
                           {"target_per_s", target},
                           {"offered_per_s", median(offered)},
                           {"completed_per_s", median(completed)},
                           {"pickup_ms", pickup->to_json()},
                           {"e2e_ms", e2e->to_json()}});
  }
  fmt::print("\nMedians of {} run(s); drain {} jobs/s; latencies in ms:\n{}\n", o.runs,
             thousands(median(drains)), table.render());
  if (!o.json_path.empty()) {
    write_json(o.json_path, {{"benchmark", "e2e"},
                             {"mode", "ladder"},
                             {"drain_per_s", median(drains)},
                             {"levels", json_levels},
                             {"options",
                              {{"jobs", st.jobs},
                               {"seconds", st.seconds},
                               {"workers", st.workers},
                               {"shards", st.shards},
                               {"producers", producers},
                               {"runs", o.runs}}},
                             {"machine", machine.to_json()}});
    fmt::print("wrote {}\n", o.json_path);
  }
  return 0;
}

int run(const Options& o) {
  auto admin = connect("awa_bench_admin", kStatementTimeout);
  const auto machine = machine_info(admin);
  if (o.mode == "compare") return run_compare(admin, o, machine);
  if (o.mode == "ladder") return run_ladder(admin, o, machine);
  if (o.mode == "pooler") return run_pooler(admin, o.setup, o.runs, o.json_path, machine);
  if (o.mode == "tracing") return run_tracing(admin, o.setup, o.runs, o.json_path, machine);
  return run_single(admin, o, machine);
}

}  // namespace
}  // namespace awa::bench

int main(int argc, char** argv) {
  awa::bench::Options o;
  auto& st = o.setup;
  CLI::App app{"e2e: the full runtime (awa::Client) under a fixed offered load, or draining"};
  app.add_option("--mode", o.mode, "rate | drain | compare | ladder | pooler | tracing")
      ->check(CLI::IsMember({"rate", "drain", "compare", "ladder", "pooler", "tracing"}))
      ->capture_default_str();
  app.add_option("--rate", st.rate, "rate mode: jobs/s offered")->capture_default_str();
  app.add_option("--seconds", st.seconds, "rate, ladder: seconds of offered load")
      ->capture_default_str();
  app.add_option("--workers", st.workers, "the queue's max_workers")->capture_default_str();
  auto* producers = app.add_option("--producers", st.producers,
                                   "rate: producer threads (connections) sharing the schedule "
                                   "(ladder: under load, default 4)")
                        ->capture_default_str();
  app.add_option("--batch", st.batch, "rate mode: jobs per insert call")->capture_default_str();
  app.add_option("--jobs", st.jobs, "drain, compare, ladder, tracing: jobs seeded")
      ->capture_default_str();
  app.add_option("--shards", st.shards, "the queue's enqueue_shards")->capture_default_str();
  app.add_option("--completion-writers", st.completion_writers,
                 "completion flushes in flight at once (ClientOptions::completion_writers; 0: its "
                 "default)")
      ->check(CLI::Range(0, 16));
  app.add_option("--claimers", st.claimers,
                 "the queue's claim connections (QueueConfig::claimers; 0: its default)")
      ->check(CLI::Range(0, 8))
      ->capture_default_str();
  app.add_option("--max-prefetch", st.max_prefetch,
                 "the queue's prefetch bound (QueueConfig::max_prefetch; -1: its default)")
      ->check(CLI::Range(-1, 100000))
      ->capture_default_str();
  app.add_option("--runs", o.runs, "runs (medians reported)")->capture_default_str();
  app.add_option("--poll-ms", st.poll_ms, "the queue's poll interval (0: the default, 1 s)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  if (const char* env = std::getenv("AWA_POOLER_URL")) st.pooled_url = env;
  // Never capture_default_str(): a URL may hold a password.
  app.add_option("--pooler-url", st.pooled_url,
                 "pooler mode: the transaction pooler's URL (default: $AWA_POOLER_URL)");
  app.add_flag("--cold", o.cold_compare,
               "compare: time the runtime cell from start() with the depth sampler on, as "
               "mode drain does (default: from a started client, no sampler)");
  app.add_option("--json", o.json_path, "write results as JSON");
  CLI11_PARSE(app, argc, argv);
  o.producers_set = producers->count() > 0;
  // The runtime logs through spdlog's default logger (stdout); stdout is the report's.
  spdlog::set_default_logger(spdlog::stderr_color_mt("awa"));
  try {
    if (st.rate < 1 || st.seconds < 1 || st.workers < 1 || st.producers < 1 || st.batch < 1 ||
        st.jobs < 1 || o.runs < 1) {
      throw std::invalid_argument(
          "--rate, --seconds, --workers, --producers, --batch, --jobs and --runs must be >= 1");
    }
    if (st.shards < 1 || st.shards > 64) throw std::invalid_argument("--shards must be 1..64");
    if (o.mode == "pooler" && st.pooled_url.empty()) {
      throw std::invalid_argument(
          "--mode pooler needs --pooler-url (or $AWA_POOLER_URL), e.g. \"$(scripts/pgbouncer "
          "url)\"");
    }
    if (o.mode != "pooler") st.pooled_url.clear();
    if (static_cast<std::int64_t>(st.rate) * st.seconds > awa::bench::kMaxJobs ||
        st.jobs > awa::bench::kMaxJobs) {
      throw std::invalid_argument("at most 10,000,000 jobs per run");
    }
    return awa::bench::run(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "e2e: {}\n", e.what());
    return 1;
  }
}
