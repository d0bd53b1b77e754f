// scripts/bench e2e: the whole runtime (awa::Client in this process) under a fixed offered
// load, or draining a seeded queue.
//
// Every run gets its own schema (ScopedSchema, migrated with schema::Migrator) with one
// queue "e2e": enqueue_shards = --shards (ADR-025 upsert into queue_meta), max_workers =
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
// mode drain: --jobs jobs seeded with insert_many_copy (batches of 5000), then the Client
// starts; completed/s = jobs / (start() called -> ClientStats::completed reached jobs),
// startup included. Compare with `scripts/bench drain` (the storage layer alone).
//
// Bounded: a fixed number of jobs, a statement_timeout on every benchmark session, and
// time limits on the producer, the settle wait and the drain.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "awa/client.hpp"
#include "awa/connection.hpp"
#include "awa/job.hpp"
#include "awa/queue_storage.hpp"
#include "bench_common.hpp"
#include "pg/connection.hpp"
#include "schema/migrator.hpp"

namespace awa::bench {
namespace {

using std::chrono::duration;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

constexpr std::string_view kQueue = "e2e";
constexpr std::string_view kKind = "e2e_noop";
constexpr auto kStatementTimeout = seconds(120);
constexpr auto kProducerGrace = seconds(30);  // past the schedule's end: the producer stops
constexpr auto kSettleLimit = seconds(60);    // after the producer: every job completed
constexpr auto kDrainLimit = std::chrono::minutes(10);
constexpr auto kDepthInterval = milliseconds(500);
constexpr auto kStatsPoll = milliseconds(1);
constexpr std::int64_t kMaxJobs = 10'000'000;

struct Options {
  std::string mode = "rate";
  int rate = 500;
  int seconds = 20;
  int workers = 32;
  int producers = 1;
  int jobs = 100000;
  int shards = 4;
  int runs = 1;
  std::string json_path;
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
};

// Polls the queue's available count on its own connection every kDepthInterval, by an
// absolute schedule, from construction until stop().
class DepthSampler {
 public:
  DepthSampler(const std::string& schema_quoted, Clock::time_point t0)
      : conn_(connect("awa_bench_e2e_depth", kStatementTimeout)),
        sql_(fmt::format("SELECT coalesce(sum(available), 0)::bigint FROM {}.queue_shard_lag($1)",
                         schema_quoted)),
        t0_(t0),
        thread_([this](const std::stop_token& stop) { loop(stop); }) {}
  DepthSampler(const DepthSampler&) = delete;
  DepthSampler& operator=(const DepthSampler&) = delete;

  std::vector<DepthSample> stop() {
    thread_.request_stop();
    if (thread_.joinable()) thread_.join();
    if (error_) std::rethrow_exception(error_);
    return samples_;
  }

 private:
  void loop(const std::stop_token& stop) {
    try {
      auto next = t0_;
      while (!stop.stop_requested()) {
        const auto n = conn_.query(sql_, std::string(kQueue)).get<std::int64_t>(0, 0);
        samples_.push_back({duration<double>(Clock::now() - t0_).count(), n});
        next += kDepthInterval;
        while (!stop.stop_requested() && Clock::now() < next) {
          std::this_thread::sleep_for(std::min<nanoseconds>(next - Clock::now(), milliseconds(20)));
        }
      }
    } catch (...) {
      error_ = std::current_exception();
    }
  }

  pg::Connection conn_;
  std::string sql_;
  Clock::time_point t0_;
  std::vector<DepthSample> samples_;  // the sampler thread's until joined
  std::exception_ptr error_;
  std::jthread thread_;  // last: starts after everything above exists
};

// Waits until the client has reported `target` completions or `limit` passes; returns the
// time it saw them, or nullopt.
std::optional<Clock::time_point> wait_completed(const Client& client, std::uint64_t target,
                                                Clock::duration limit) {
  const auto give_up = Clock::now() + limit;
  while (Clock::now() < give_up) {
    if (client.stats().completed >= target) return Clock::now();
    std::this_thread::sleep_for(kStatsPoll);
  }
  return std::nullopt;
}

ClientOptions client_options(const std::string& schema) {
  ClientOptions co;
  co.database_url = database_url();
  co.schema = schema;
  co.migrate = false;  // done with schema::Migrator before the queue_meta upsert
  co.application_name = "awa_bench_e2e_client";
  // The end-to-end latency is read from the attempt history afterwards, which a ring
  // prune would remove; bench soak measures the runtime with the rings turning.
  co.ring_rotate_interval = std::chrono::milliseconds(0);
  return co;
}

void prepare_schema(pg::Connection& admin, const ScopedSchema& schema, int shards) {
  schema::Migrator(schema.name()).migrate(admin);
  admin.query(
      fmt::format("INSERT INTO {}.queue_meta (queue, enqueue_shards) VALUES ($1, $2) "
                  "ON CONFLICT (queue) DO UPDATE SET enqueue_shards = EXCLUDED.enqueue_shards",
                  schema.quoted()),
      std::string(kQueue), shards);
}

QueueConfig queue_config(int workers) {
  QueueConfig q;
  q.name = std::string(kQueue);
  q.max_workers = workers;
  return q;
}

InsertOpts queue_opts() {
  InsertOpts opts;
  opts.queue = std::string(kQueue);
  return opts;
}

RunResult run_rate(pg::Connection& admin, const Options& o) {
  ScopedSchema schema(admin, unique_schema_name("e2e"));
  prepare_schema(admin, schema, o.shards);

  const std::int64_t n = static_cast<std::int64_t>(o.rate) * o.seconds;
  const std::int64_t warmup = 2LL * o.shards;
  const auto base = Clock::now();
  const auto since_base = [base](Clock::time_point t) {
    return std::chrono::duration_cast<nanoseconds>(t - base).count();
  };
  std::vector<std::atomic<std::int64_t>> started(static_cast<std::size_t>(n));
  for (auto& s : started) s.store(-1, std::memory_order_relaxed);
  std::vector<std::int64_t> enqueued(static_cast<std::size_t>(n), -1);  // producer's only

  Client client(client_options(schema.name()));
  client.register_worker(std::string(kKind), [&](JobContext& job) {
    const auto now = since_base(Clock::now());
    const auto seq = job.args().at("seq").get<std::int64_t>();
    if (seq >= 0 && seq < n) {
      std::int64_t unset = -1;  // the first attempt's start (a rerun keeps it)
      started[static_cast<std::size_t>(seq)].compare_exchange_strong(unset, now);
    }
    return JobResult::completed();
  });
  client.add_queue(queue_config(o.workers));
  client.start();

  QueueStorage store(StorageOptions{schema.name()});
  std::vector<Connection> producers;
  for (int p = 0; p < o.producers; ++p) {
    producers.emplace_back(
        std::make_unique<pg::Connection>(connect("awa_bench_e2e_producer", kStatementTimeout)));
  }
  // Warm-up: lanes created, statements prepared, pool connections open; not measured.
  for (std::int64_t i = 0; i < warmup; ++i) {
    store.insert(producers[static_cast<std::size_t>(i) % producers.size()],
                 NewJob(std::string(kKind), {{"seq", -1}}, queue_opts()));
  }
  if (!wait_completed(client, static_cast<std::uint64_t>(warmup), seconds(30))) {
    throw std::runtime_error("warm-up jobs did not complete within 30 s");
  }

  RunResult r;
  const auto t0 = Clock::now();
  DepthSampler depth(schema.quoted(), t0);
  // Producer p sends the slots i = p, p + P, p + 2P, ... of one absolute schedule.
  std::vector<std::int64_t> sent(producers.size(), 0);
  std::vector<nanoseconds> max_late(producers.size(), nanoseconds{0});
  std::vector<std::exception_ptr> producer_errors(producers.size());
  {
    std::vector<std::jthread> threads;
    for (std::size_t p = 0; p < producers.size(); ++p) {
      threads.emplace_back([&, p] {
        try {
          const auto give_up = t0 + seconds(o.seconds) + kProducerGrace;
          for (auto i = static_cast<std::int64_t>(p); i < n;
               i += static_cast<std::int64_t>(producers.size())) {
            const auto due = t0 + nanoseconds(i * 1'000'000'000LL / o.rate);
            const auto now = Clock::now();
            if (now > give_up) break;
            if (now < due) {
              std::this_thread::sleep_until(due);
            } else {
              max_late[p] =
                  std::max(max_late[p], std::chrono::duration_cast<nanoseconds>(now - due));
            }
            store.insert(producers[p], NewJob(std::string(kKind), {{"seq", i}}, queue_opts()));
            enqueued[static_cast<std::size_t>(i)] = since_base(Clock::now());
            ++sent[p];
          }
        } catch (...) {
          producer_errors[p] = std::current_exception();
        }
      });
    }
  }  // joined
  const auto t_produced = Clock::now();
  std::int64_t total_sent = 0;
  for (const auto s : sent) total_sent += s;
  const auto done =
      wait_completed(client, static_cast<std::uint64_t>(warmup + total_sent), kSettleLimit);
  r.depth = depth.stop();
  client.stop();
  r.stats = client.stats();
  for (const auto& e : producer_errors) {
    if (e) std::rethrow_exception(e);
  }
  if (!done) {
    throw std::runtime_error(fmt::format(
        "only {} of {} jobs completed within {} s of the last enqueue",
        r.stats.completed - static_cast<std::uint64_t>(warmup), total_sent, kSettleLimit.count()));
  }

  r.jobs = total_sent;
  r.offered_per_s = static_cast<double>(total_sent) / duration<double>(t_produced - t0).count();
  r.producer_max_late_ms =
      duration<double, std::milli>(*std::max_element(max_late.begin(), max_late.end())).count();
  r.elapsed_s = duration<double>(*done - t0).count();
  r.completed_per_s = static_cast<double>(total_sent) / r.elapsed_s;

  std::vector<double> pickup;
  pickup.reserve(static_cast<std::size_t>(total_sent));
  for (std::int64_t i = 0; i < n; ++i) {
    if (enqueued[static_cast<std::size_t>(i)] < 0) continue;  // not sent (producer gave up)
    const auto s = started[static_cast<std::size_t>(i)].load();
    if (s < 0) throw std::runtime_error(fmt::format("job seq {} completed but never started", i));
    const double ms = static_cast<double>(s - enqueued[static_cast<std::size_t>(i)]) / 1e6;
    if (ms < 0) ++r.early;
    pickup.push_back(std::max(0.0, ms));
  }
  r.pickup_ms = percentiles(std::move(pickup));

  // Statistics first: attempt_outcomes expands closures and joins ready rows, and fresh
  // tables would be planned as nearly empty.
  admin.exec(fmt::format("ANALYZE {0}.ready_entries, {0}.claim_batches, {0}.claim_closures",
                         schema.quoted()));
  const auto res = admin.exec(fmt::format(
      "SELECT extract(epoch FROM d.finished_at - r.created_at)::float8 * 1000 "
      "FROM {0}.attempt_outcomes d JOIN {0}.ready_entries r "
      "USING (ready_slot, queue, priority, enqueue_shard, lane_seq) "
      "WHERE d.queue = 'e2e' AND d.state = 'completed' AND (r.args->>'seq')::bigint >= 0",
      schema.quoted()));
  if (res.rows() != total_sent) {
    throw std::runtime_error(fmt::format(
        "attempt_outcomes has {} completed measured jobs, expected {}", res.rows(), total_sent));
  }
  std::vector<double> e2e;
  e2e.reserve(static_cast<std::size_t>(res.rows()));
  for (int i = 0; i < res.rows(); ++i) e2e.push_back(res.get<double>(i, 0));
  r.e2e_ms = percentiles(std::move(e2e));
  return r;
}

RunResult run_drain(pg::Connection& admin, const Options& o) {
  ScopedSchema schema(admin, unique_schema_name("e2e"));
  prepare_schema(admin, schema, o.shards);
  {
    QueueStorage seed(StorageOptions{schema.name()});
    std::vector<NewJob> batch;
    for (int i = 0; i < o.jobs; ++i) {
      batch.emplace_back(std::string(kKind), nlohmann::json{{"seq", i}}, queue_opts());
      if (batch.size() == 5000 || i + 1 == o.jobs) {
        seed.insert_many_copy(admin, batch);
        batch.clear();
      }
    }
  }
  admin.exec(fmt::format("VACUUM ANALYZE {}.ready_entries", schema.quoted()));

  Client client(client_options(schema.name()));
  client.register_worker(std::string(kKind), [](JobContext&) { return JobResult::completed(); });
  client.add_queue(queue_config(o.workers));

  RunResult r;
  const auto t0 = Clock::now();
  DepthSampler depth(schema.quoted(), t0);
  client.start();
  const auto done = wait_completed(client, static_cast<std::uint64_t>(o.jobs), kDrainLimit);
  r.depth = depth.stop();
  client.stop();
  r.stats = client.stats();
  if (!done) {
    throw std::runtime_error(fmt::format("only {} of {} jobs completed within {} s",
                                         r.stats.completed, o.jobs,
                                         std::chrono::duration_cast<seconds>(kDrainLimit).count()));
  }
  const auto completed =
      admin.exec(fmt::format("SELECT completed FROM {}.queue_counts_exact('e2e')", schema.quoted()))
          .get<std::int64_t>(0, 0);
  if (completed != o.jobs || r.stats.stale_completions != 0) {
    throw std::runtime_error(fmt::format("drain: {} completed of {}, {} stale", completed, o.jobs,
                                         r.stats.stale_completions));
  }
  r.jobs = o.jobs;
  r.elapsed_s = duration<double>(*done - t0).count();
  r.completed_per_s = static_cast<double>(o.jobs) / r.elapsed_s;
  return r;
}

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
          {"client",
           {{"claimed", r.stats.claimed},
            {"completed", r.stats.completed},
            {"retried", r.stats.retried},
            {"failed", r.stats.failed},
            {"stale_completions", r.stats.stale_completions},
            {"rescued", r.stats.rescued}}}};
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

int run(const Options& o) {
  auto admin = connect("awa_bench_admin", kStatementTimeout);
  const auto machine = machine_info(admin);
  const bool rate = o.mode == "rate";
  if (rate) {
    fmt::print(
        "e2e (rate): {} jobs/s offered for {} s by {} producer(s), {} workers, {} shards, "
        "{} run(s)\n",
        o.rate, o.seconds, o.producers, o.workers, o.shards, o.runs);
  } else {
    fmt::print("e2e (drain): {} jobs seeded, {} workers, {} shards, {} run(s)\n", o.jobs, o.workers,
               o.shards, o.runs);
  }
  fmt::print("{}\n", machine.describe());

  std::vector<RunResult> runs;
  for (int i = 0; i < o.runs; ++i) {
    runs.push_back(rate ? run_rate(admin, o) : run_drain(admin, o));
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
    if (rate && r.offered_per_s < 0.95 * o.rate) {
      fmt::print(
          "WARNING: the producer(s) offered only {:.1f} of {} jobs/s (each insert is a "
          "synchronous commit): the load was producer-bound, not fixed; try --producers\n",
          r.offered_per_s, o.rate);
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
  table.add_row({rate ? fmt::format("rate {}/s, W={}, S={}", o.rate, o.workers, o.shards)
                      : fmt::format("drain, W={}, S={}", o.workers, o.shards),
                 thousands(static_cast<double>(runs.back().jobs)),
                 rate ? thousands(median(offered)) : std::string("–"), thousands(completed_per_s),
                 fmt_ms(pickup, &Percentiles::p50), fmt_ms(pickup, &Percentiles::p95),
                 fmt_ms(pickup, &Percentiles::p99), fmt_ms(e2e, &Percentiles::p50),
                 fmt_ms(e2e, &Percentiles::p95), fmt_ms(e2e, &Percentiles::p99)});
  fmt::print("\nMedians of {} run(s), latencies in ms:\n{}\n", o.runs, table.render());
  if (rate && pickup) {
    const bool met = pickup->p50 <= 1.5 && pickup->p95 <= 2.5;
    fmt::print("idle-pickup target (p50 <= 1.5 ms, p95 <= 2.5 ms; stated at 200 jobs/s): {}\n",
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
                        {{"rate", o.rate},
                         {"seconds", o.seconds},
                         {"producers", o.producers},
                         {"workers", o.workers},
                         {"jobs", o.jobs},
                         {"shards", o.shards},
                         {"runs", o.runs}}},
                       {"runs", per_run},
                       {"loadavg_at_end", loadavg()},
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
  CLI::App app{"e2e: the full runtime (awa::Client) under a fixed offered load, or draining"};
  app.add_option("--mode", o.mode, "rate | drain")
      ->check(CLI::IsMember({"rate", "drain"}))
      ->capture_default_str();
  app.add_option("--rate", o.rate, "rate mode: jobs/s offered")->capture_default_str();
  app.add_option("--seconds", o.seconds, "rate mode: seconds of offered load")
      ->capture_default_str();
  app.add_option("--workers", o.workers, "the queue's max_workers")->capture_default_str();
  app.add_option("--producers", o.producers,
                 "rate mode: producer threads (connections) sharing the schedule")
      ->capture_default_str();
  app.add_option("--jobs", o.jobs, "drain mode: jobs seeded")->capture_default_str();
  app.add_option("--shards", o.shards, "the queue's enqueue_shards")->capture_default_str();
  app.add_option("--runs", o.runs, "runs (medians reported)")->capture_default_str();
  app.add_option("--json", o.json_path, "write results as JSON");
  CLI11_PARSE(app, argc, argv);
  // The runtime logs through spdlog's default logger (stdout); stdout is the report's.
  spdlog::set_default_logger(spdlog::stderr_color_mt("awa"));
  try {
    if (o.rate < 1 || o.seconds < 1 || o.workers < 1 || o.producers < 1 || o.jobs < 1 ||
        o.runs < 1) {
      throw std::invalid_argument(
          "--rate, --seconds, --workers, --producers, --jobs and --runs must be >= 1");
    }
    if (o.shards < 1 || o.shards > 64) throw std::invalid_argument("--shards must be 1..64");
    if (static_cast<std::int64_t>(o.rate) * o.seconds > awa::bench::kMaxJobs ||
        o.jobs > awa::bench::kMaxJobs) {
      throw std::invalid_argument("at most 10,000,000 jobs per run");
    }
    return awa::bench::run(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "e2e: {}\n", e.what());
    return 1;
  }
}
