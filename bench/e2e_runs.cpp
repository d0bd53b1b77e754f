#include "e2e_runs.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "awa/job.hpp"
#include "awa/metrics.hpp"
#include "awa/queue_storage.hpp"
#include "drain_cells.hpp"
#include "pg/native.hpp"

namespace awa::bench {
namespace {

// Claim and completion-flush counts and time, from the engine's metrics (this process).
struct EngineSnapshot {
  metrics::Histogram::Snapshot claim;
  metrics::Histogram::Snapshot flush;
  static EngineSnapshot take(std::string_view queue) {
    auto& m = metrics::engine();
    return {m.claim_duration_seconds.with({std::string(queue)}).snapshot(),
            m.completion_flush_seconds.with({}).snapshot()};
  }
};

void record_engine(RunResult& r, const EngineSnapshot& before, const EngineSnapshot& after) {
  const auto mean_ms = [](const auto& a, const auto& b) {
    const auto n = a.count - b.count;
    return n == 0 ? 0.0 : (a.sum - b.sum) * 1000.0 / static_cast<double>(n);
  };
  r.claims = after.claim.count - before.claim.count;
  r.claim_ms_mean = mean_ms(after.claim, before.claim);
  r.flushes = after.flush.count - before.flush.count;
  r.flush_ms_mean = mean_ms(after.flush, before.flush);
}

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
constexpr auto kStatsPoll = milliseconds(1);

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

double process_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto s = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return s(u.ru_utime) + s(u.ru_stime);
}

ClientOptions client_options(const std::string& schema, const E2eSetup& o) {
  ClientOptions co;
  co.database_url = database_url();
  if (!o.pooled_url.empty()) {
    co.database_url = o.pooled_url;
    co.pooled = true;
    if (o.direct) co.direct_database_url = database_url();
  }
  co.schema = schema;
  co.migrate = false;  // done with schema::Migrator before the queue_meta upsert
  co.application_name = "awa_bench_e2e_client";
  if (o.completion_writers > 0) co.completion_writers = o.completion_writers;
  // The end-to-end latency is read from the attempt history afterwards, which a ring
  // prune would remove; bench soak measures the runtime with the rings turning.
  co.ring_rotate_interval = std::chrono::milliseconds(0);
  co.tracing = o.tracing.value_or(trace::ExportOptions{});
  return co;
}

void prepare_schema(pg::Connection& admin, const ScopedSchema& schema, int shards) {
  migrate_schema(admin, schema.name());
  admin.query(
      fmt::format("INSERT INTO {}.queue_meta (queue, enqueue_shards) VALUES ($1, $2) "
                  "ON CONFLICT (queue) DO UPDATE SET enqueue_shards = EXCLUDED.enqueue_shards",
                  schema.quoted()),
      std::string(kQueue), shards);
}

QueueConfig queue_config(const E2eSetup& o) {
  QueueConfig q;
  q.name = std::string(kQueue);
  q.max_workers = o.workers;
  if (o.claimers > 0) q.claimers = o.claimers;
  if (o.max_prefetch >= 0) q.max_prefetch = o.max_prefetch;
  if (o.poll_ms > 0) q.poll_interval = std::chrono::milliseconds(o.poll_ms);
  return q;
}

InsertOpts queue_opts() {
  InsertOpts opts;
  opts.queue = std::string(kQueue);
  return opts;
}

}  // namespace

RunResult run_rate(pg::Connection& admin, const E2eSetup& o) {
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

  Client client(client_options(schema.name(), o));
  client.register_worker(std::string(kKind), [&](JobContext& job) {
    const auto now = since_base(Clock::now());
    const auto seq = job.args().at("seq").get<std::int64_t>();
    if (seq >= 0 && seq < n) {
      std::int64_t unset = -1;  // the first attempt's start (a rerun keeps it)
      started[static_cast<std::size_t>(seq)].compare_exchange_strong(unset, now);
    }
    return JobResult::completed();
  });
  client.add_queue(queue_config(o));
  client.start();

  QueueStorage store(StorageOptions{schema.name()});
  std::vector<Connection> producers;
  for (int p = 0; p < o.producers; ++p) {
    producers.emplace_back(pg::adopt(connect("awa_bench_e2e_producer", kStatementTimeout)));
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
  // Producer p sends the slots i = p, p + P, p + 2P, ... of one absolute schedule; a slot
  // is one insert call of `batch` jobs (seqs i * batch ...).
  const std::int64_t slots = (n + o.batch - 1) / o.batch;
  std::vector<std::int64_t> sent(producers.size(), 0);
  std::vector<nanoseconds> max_late(producers.size(), nanoseconds{0});
  std::vector<std::exception_ptr> producer_errors(producers.size());
  {
    std::vector<std::jthread> threads;
    for (std::size_t p = 0; p < producers.size(); ++p) {
      threads.emplace_back([&, p] {
        try {
          const auto give_up = t0 + seconds(o.seconds) + kProducerGrace;
          std::vector<NewJob> jobs;
          for (auto slot = static_cast<std::int64_t>(p); slot < slots;
               slot += static_cast<std::int64_t>(producers.size())) {
            const std::int64_t first = slot * o.batch;
            const std::int64_t last = std::min(n, first + o.batch);  // exclusive
            if (!wait_until_due(t0, first, o.rate, give_up, max_late[p])) break;
            if (last - first == 1) {
              store.insert(producers[p],
                           NewJob(std::string(kKind), {{"seq", first}}, queue_opts()));
            } else {
              jobs.clear();
              for (auto i = first; i < last; ++i)
                jobs.emplace_back(std::string(kKind), nlohmann::json{{"seq", i}}, queue_opts());
              store.insert_many(producers[p], jobs);
            }
            const auto at = since_base(Clock::now());
            for (auto i = first; i < last; ++i) enqueued[static_cast<std::size_t>(i)] = at;
            sent[p] += last - first;
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
  const auto res = admin.exec(
      fmt::format("SELECT extract(epoch FROM d.finished_at - r.created_at)::float8 * 1000 "
                  "FROM {0}.attempt_outcomes d JOIN {0}.ready_entries r "
                  "USING (ready_slot, queue_id, priority, enqueue_shard, lane_seq) "
                  "WHERE d.queue_id = {0}.queue_id_of('e2e') AND d.state = 'completed' "
                  "AND (r.args->>'seq')::bigint >= 0",
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

RunResult run_drain(pg::Connection& admin, const E2eSetup& o) {
  ScopedSchema schema(admin, unique_schema_name("e2e"));
  seed_queue(admin, schema, kQueue, o.shards, o.jobs, kKind);

  Client client(client_options(schema.name(), o));
  client.register_worker(std::string(kKind), [](JobContext&) { return JobResult::completed(); });
  client.add_queue(queue_config(o));

  RunResult r;
  const Admin queues(schema.name());
  std::optional<Connection> ctl;
  if (o.warm) {
    ctl.emplace(pg::adopt(connect("awa_bench_e2e_admin", kStatementTimeout)));
    queues.pause_queue(*ctl, std::string(kQueue));
    const auto before = EngineSnapshot::take(kQueue).claim.count;
    client.start();
    // Claimer 0's first claim: its connection is up and LISTENing. The helper claimers
    // sleep while the queue is idle and connect at their first claim, inside the
    // measured window (one connection each, a few ms).
    const auto give_up = Clock::now() + seconds(30);
    while (EngineSnapshot::take(kQueue).claim.count == before) {
      if (Clock::now() > give_up) throw std::runtime_error("the paused client made no claim");
      std::this_thread::sleep_for(kStatsPoll);
    }
  }
  const auto engine0 = EngineSnapshot::take(kQueue);
  const double cpu0 = process_cpu_s();
  const auto t0 = Clock::now();
  std::optional<DepthSampler> depth;
  if (o.sample_depth) depth.emplace(schema.quoted(), t0);
  if (o.warm) {
    queues.resume_queue(*ctl, std::string(kQueue));  // its NOTIFY wakes the claimers
  } else {
    client.start();
  }
  const auto done = wait_completed(client, static_cast<std::uint64_t>(o.jobs), kDrainLimit);
  if (depth) r.depth = depth->stop();
  client.stop();
  // After stop(), which sends the last spans when tracing is on: their cost counts.
  r.cpu_s = process_cpu_s() - cpu0;
  r.stats = client.stats();
  r.tracing = client.tracing_stats();
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
  record_engine(r, engine0, EngineSnapshot::take(kQueue));
  r.jobs = o.jobs;
  r.elapsed_s = duration<double>(*done - t0).count();
  r.completed_per_s = static_cast<double>(o.jobs) / r.elapsed_s;
  return r;
}

}  // namespace awa::bench
