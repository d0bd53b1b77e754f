// scripts/bench sustained: one trial. sustained.cpp describes what is measured; the
// comments here say why each step sits where it does.
#include "sustained_run.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "awa/job.hpp"
#include "awa/metrics.hpp"
#include "awa/queue_storage.hpp"
#include "pg/native.hpp"
#include "sustained_probes.hpp"

namespace awa::bench {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

using sustained::CompletionWatcher;
using sustained::kAppPrefix;
using sustained::kClientApp;
using sustained::kQueue;
using sustained::mark;

constexpr std::string_view kKind = "sustained_noop";
constexpr auto kProducerGrace = seconds(30);  // past the schedule's end: producers stop
constexpr auto kDrainLimit = seconds(30);     // after the schedule: every job completed
constexpr auto kReadyLimit = seconds(30);     // the Client's first claim
constexpr auto kExitWait = seconds(15);       // the Client's backends gone

// `{"seq":G,"t":T,"pad":"xx…"}` of exactly `bytes` characters when that is at least what
// seq and t take (otherwise without pad).
std::string args_text(std::int64_t seq, std::int64_t t_ns, int bytes) {
  std::string s = fmt::format(R"({{"seq":{},"t":{})", seq, t_ns);
  constexpr std::string_view kPadOpen = R"(,"pad":")";
  const std::size_t bare = s.size() + kPadOpen.size() + 2;  // + `"}`
  const auto want = static_cast<std::size_t>(std::max(bytes, 0));
  if (want <= bare) return s + "}";
  s += kPadOpen;
  s.append(want - bare, 'x');
  s += "\"}";
  return s;
}

metrics::Histogram::Snapshot claim_snapshot() {
  return metrics::engine().claim_duration_seconds.with({kQueue}).snapshot();
}
metrics::Histogram::Snapshot flush_snapshot() {
  return metrics::engine().completion_flush_seconds.with({}).snapshot();
}

// A benchmark session whose transactions are counted (sustained::mark) from the start of
// the trial to its end.
struct CountedSession {
  pg::Connection* conn = nullptr;
  bool producer = false;
  std::int64_t start = 0;
  std::int64_t end = 0;
};

}  // namespace

TrialResult run_trial(pg::Connection& admin, const SustainedSetup& s) {
  TrialResult r;
  r.setup = s;
  const std::int64_t n = static_cast<std::int64_t>(s.rate) * s.seconds;
  r.jobs_planned = n;
  const auto nn = static_cast<std::size_t>(n);

  ScopedSchema schema(admin, unique_schema_name("sustained"));
  migrate_schema(admin, schema.name());
  const std::string url = sustained::client_url();
  {
    // The queue's shard count, and a check that a session opened as the Client opens its
    // own gets the settings. The last statement flushes the session's statistics, so
    // nothing of it is counted later.
    pg::ConnectOptions co = connect_options(fmt::format("{}_setup", kAppPrefix));
    co.url = url;
    Connection pub = pg::adopt(pg::Connection::connect(co));
    Admin(schema.name()).set_enqueue_shards(pub, std::string(kQueue), s.shards);
    const auto res = pg::native(pub).exec(
        "SELECT current_setting('synchronous_commit'), current_setting('statement_timeout'), "
        "pg_stat_force_next_flush()");
    if (res.get<std::string>(0, 0) != "on") {
      throw std::runtime_error("the Client's sessions would not have synchronous_commit = on");
    }
  }

  // Every session of the benchmark exists before the count starts.
  pg::Connection meter = sustained::open_session("meter");
  pg::Connection sampler_conn = sustained::open_session("sampler");
  std::optional<pg::Connection> pin;
  if (s.pin_xmin) {
    pin.emplace(sustained::open_session("pin"));
    pin->exec("SET idle_in_transaction_session_timeout = 0");
  }
  std::vector<Connection> producers;
  std::vector<std::unique_ptr<QueueStorage>> stores;
  for (int p = 0; p < s.producers; ++p) {
    producers.push_back(pg::adopt(sustained::open_session("producer")));
    stores.push_back(std::make_unique<QueueStorage>(StorageOptions{schema.name()}));
  }
  std::vector<CountedSession> counted{{&admin}, {&sampler_conn}};
  if (pin) counted.push_back({&*pin});
  for (auto& c : producers) counted.push_back({&pg::native(c), true});

  const auto base = Clock::now();
  const auto since_base = [base](Clock::time_point t) {
    return std::chrono::duration_cast<nanoseconds>(t - base).count();
  };
  // Per job, by seq: when the handler ran and how long after the due time in its args;
  // when its insert call returned (the producer's).
  std::vector<std::atomic<std::int64_t>> handled(nn);
  std::vector<std::atomic<std::int64_t>> handler_e2e(nn);
  for (std::size_t i = 0; i < nn; ++i) {
    handled[i].store(-1, std::memory_order_relaxed);
    handler_e2e[i].store(-1, std::memory_order_relaxed);
  }
  std::vector<std::int64_t> enqueued(nn, -1);

  // --- the count starts: nothing of this benchmark runs but what is counted -------------
  for (auto& c : counted) c.start = mark(*c.conn);
  mark(meter);
  const auto db0 = sustained::read_db(meter);

  std::optional<Client> client;  // reset() ends its sessions before the final count
  {
    ClientOptions co;
    co.database_url = url;
    co.schema = schema.name();
    co.migrate = false;
    co.application_name = std::string(kClientApp);
    client.emplace(co);
  }
  client->register_worker(std::string(kKind), [&](JobContext& job) {
    const auto now = since_base(Clock::now());
    const auto& a = job.args();
    const auto seq = a.at("seq").get<std::int64_t>();
    const auto t = a.at("t").get<std::int64_t>();
    if (seq >= 0 && seq < n) {
      std::int64_t unset = -1;  // the first attempt's (a rerun keeps it)
      if (handled[static_cast<std::size_t>(seq)].compare_exchange_strong(unset, now)) {
        handler_e2e[static_cast<std::size_t>(seq)].store(now - t, std::memory_order_relaxed);
      }
    }
    return JobResult::completed();
  });
  QueueConfig q;
  q.name = std::string(kQueue);
  q.max_workers = s.workers;
  client->add_queue(q);
  const auto claims_before = claim_snapshot().count;
  client->start();
  // Claimer 0's first (empty) claim: its connection is up and LISTENing.
  for (const auto give_up = Clock::now() + kReadyLimit; claim_snapshot().count == claims_before;) {
    if (Clock::now() > give_up) throw std::runtime_error("the Client made no claim in 30 s");
    std::this_thread::sleep_for(milliseconds(1));
  }
  // Warm-up, not measured (seq -1): one single and one batch from every producer, so that
  // lanes exist and each producer's statements are prepared before the window.
  {
    InsertOpts opts;
    opts.queue = std::string(kQueue);
    const std::vector<NewJob> batch(
        static_cast<std::size_t>(kBatchSize),
        NewJob::from_text(std::string(kKind), args_text(-1, 0, 0), opts));
    for (std::size_t p = 0; p < producers.size(); ++p) {
      stores[p]->insert(producers[p], batch.front());
      stores[p]->insert_many(producers[p], batch);
      r.warmup_jobs += 1 + kBatchSize;
    }
    const auto give_up = Clock::now() + kReadyLimit;
    while (client->stats().completed < static_cast<std::uint64_t>(r.warmup_jobs)) {
      if (Clock::now() > give_up) throw std::runtime_error("warm-up jobs did not complete in 30 s");
      std::this_thread::sleep_for(milliseconds(1));
    }
  }
  if (pin) {
    // A REPEATABLE READ transaction's snapshot is taken by its first statement; SELECT 1
    // touches no table, so it holds no lock, only the xmin horizon.
    pin->exec("BEGIN ISOLATION LEVEL REPEATABLE READ");
    pin->exec("SELECT 1");
    const auto res = meter.query(
        "SELECT backend_xmin IS NOT NULL FROM pg_stat_activity WHERE pid = $1", pin->backend_pid());
    if (res.rows() != 1 || res.get<std::string>(0, 0) != "t") {
      throw std::runtime_error("the pinning session shows no backend_xmin");
    }
  }
  sustained::Sampler::prime(sampler_conn, schema);
  const auto claims0 = claim_snapshot();
  const auto flush0 = flush_snapshot();
  const std::uint64_t completed0 = client->stats().completed;

  // --- the load -------------------------------------------------------------------------
  const std::int64_t wal0 = wal_position(meter);
  const auto t0 = Clock::now();
  const auto t_end = t0 + seconds(s.seconds);
  CompletionWatcher watcher(*client, base, completed0);
  sustained::Sampler sampler(sampler_conn, *client, schema, t0, completed0);

  const auto np = static_cast<std::size_t>(s.producers);
  std::vector<std::int64_t> singles(np, 0), batches(np, 0);
  std::vector<nanoseconds> late(np, nanoseconds{0});
  std::vector<std::exception_ptr> errors(np);
  const auto produce = [&](std::size_t p) {
    // Producer p owns the jobs seq = j * P + p; job seq is due at t0 + seq / rate, and a
    // send is due when its first job is. Late: send at once (the due time still counts).
    auto& conn = producers[p];
    auto& store = *stores[p];
    const auto P = static_cast<std::int64_t>(s.producers);
    const auto pi = static_cast<std::int64_t>(p);
    const auto give_up = t_end + kProducerGrace;
    InsertOpts opts;
    opts.queue = std::string(kQueue);
    std::vector<NewJob> jobs;
    std::int64_t j = 0;
    for (std::int64_t k = 0;; ++k) {
      const std::int64_t first = j * P + pi;
      if (first >= n) break;
      const bool batch = k % kBatchEvery == kBatchEvery - 1;
      const auto due = wait_until_due(t0, first, s.rate, give_up, late[p]);
      if (!due) break;
      const auto due_ns = since_base(*due);
      jobs.clear();
      for (std::int64_t i = 0; i < (batch ? kBatchSize : 1); ++i) {
        const std::int64_t seq = (j + i) * P + pi;
        if (seq >= n) break;
        jobs.push_back(
            NewJob::from_text(std::string(kKind), args_text(seq, due_ns, s.args_bytes), opts));
      }
      if (batch) {
        store.insert_many(conn, jobs);
        ++batches[p];
      } else {
        store.insert(conn, jobs.front());
        ++singles[p];
      }
      const auto at = since_base(Clock::now());
      for (std::size_t i = 0; i < jobs.size(); ++i) {
        enqueued[static_cast<std::size_t>((j + static_cast<std::int64_t>(i)) * P + pi)] = at;
      }
      j += static_cast<std::int64_t>(jobs.size());
    }
  };
  {
    std::vector<std::jthread> threads;
    for (std::size_t p = 0; p < np; ++p) {
      threads.emplace_back([&, p] {
        try {
          produce(p);
        } catch (...) {
          errors[p] = std::current_exception();
        }
      });
    }
  }  // joined
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  for (const auto e : enqueued) r.jobs_sent += e >= 0 ? 1 : 0;

  // --- drain: every sent job completed (bounded) ------------------------------------------
  const auto target = static_cast<std::uint64_t>(r.jobs_sent);
  const auto drain_limit = std::max(Clock::now(), t_end) + kDrainLimit;
  while (client->stats().completed - completed0 < target && Clock::now() < drain_limit) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  r.drained = client->stats().completed - completed0 >= target;
  const std::int64_t wal1 = wal_position(meter);
  const auto timeline = watcher.stop();
  r.samples = sampler.stop();
  if (pin) {
    const auto age = meter.query(
        "SELECT coalesce(age(backend_xmin), 0)::bigint FROM pg_stat_activity WHERE pid = $1",
        pin->backend_pid());
    if (age.rows() == 1) r.pinned_xmin_age = age.get<std::int64_t>(0, 0);
    pin->exec("COMMIT");
  }
  client->stop();
  r.stats = client->stats();
  const auto claims1 = claim_snapshot();
  const auto flush1 = flush_snapshot();
  client.reset();

  // --- the count ends: every counted session marks, the Client's backends exit ------------
  for (auto& c : counted) c.end = mark(*c.conn);
  sampler_conn.close();
  if (pin) pin->close();
  for (auto& c : producers) pg::native(c).close();
  for (const auto give_up = Clock::now() + kExitWait;;) {
    // An exiting backend flushes its statistics before it leaves pg_stat_activity.
    const auto left =
        meter.query("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                    std::string(kClientApp));
    if (left.get<std::int64_t>(0, 0) == 0) break;
    if (Clock::now() > give_up) {
      std::fprintf(stderr,
                   "warning: the Client's sessions did not exit within 15 s; "
                   "commits_per_job misses what they did not flush\n");
      break;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  r.autovacuum_runs = sustained::autovacuum_runs(meter, schema.name());
  mark(meter);
  const auto db1 = sustained::read_db(meter);

  // --- results ----------------------------------------------------------------------------
  r.db_commits = db1.commits - db0.commits;
  r.db_rollbacks = db1.rollbacks - db0.rollbacks;
  // The meter's own: from its baseline read (counted, as it committed after reading) to
  // its last mark (the final read is not in what it reads).
  r.bench_transactions = db1.lxid - db0.lxid;
  for (const auto& c : counted) {
    r.bench_transactions += c.end - c.start;
    // Less the end mark: what the producers' insert calls took.
    if (c.producer) r.producer_transactions += c.end - c.start - 1;
  }
  r.runtime_commits = r.db_commits - r.bench_transactions;

  r.jobs_completed = static_cast<std::int64_t>(r.stats.completed - completed0);
  const double jobs = static_cast<double>(std::max<std::int64_t>(r.jobs_completed, 1));
  r.wal_bytes = wal1 - wal0;
  r.wal_bytes_per_job = static_cast<double>(r.wal_bytes) / jobs;
  // The count spans the Client's whole life, so its commits are per job it completed.
  r.commits_per_job = static_cast<double>(r.runtime_commits) /
                      static_cast<double>(std::max<std::uint64_t>(r.stats.completed, 1));
  r.producer_commits_per_job = static_cast<double>(r.producer_transactions) /
                               static_cast<double>(std::max<std::int64_t>(r.jobs_sent, 1));

  const std::int64_t end_ns = since_base(t_end);
  for (const auto e : enqueued) r.offered_in_window += (e >= 0 && e <= end_ns) ? 1 : 0;
  r.completed_in_window = static_cast<std::int64_t>(sustained::completed_at(timeline, end_ns));
  r.offered_per_s = static_cast<double>(r.offered_in_window) / s.seconds;
  r.completed_per_s = static_cast<double>(r.completed_in_window) / s.seconds;
  r.held_ratio = r.offered_in_window > 0 ? r.completed_per_s / r.offered_per_s : 0;
  if (r.drained && !timeline.empty()) {
    r.drain_s = std::max(0.0, static_cast<double>(timeline.back().first - end_ns) / 1e9);
  }

  // e2e. The handler's view is exact per job. A completion is durable when its flush
  // commits, which ClientStats::completed counts; the k-th job to reach a handler is given
  // the time the count first reached k (the batcher flushes in hand-in order; two flushes in
  // flight may swap, by at most one flush), never earlier than its handler ran.
  struct Handled {
    std::int64_t at;
    std::int64_t due;
  };
  std::vector<Handled> done;
  done.reserve(nn);
  std::vector<double> handler_ms;
  handler_ms.reserve(nn);
  for (std::size_t i = 0; i < nn; ++i) {
    const auto at = handled[i].load(std::memory_order_relaxed);
    if (at < 0) continue;
    const auto e2e = handler_e2e[i].load(std::memory_order_relaxed);
    done.push_back({at, at - e2e});
    handler_ms.push_back(std::max(0.0, static_cast<double>(e2e) / 1e6));
  }
  std::sort(done.begin(), done.end(),
            [](const Handled& a, const Handled& b) { return a.at < b.at; });
  std::vector<double> durable_ms;
  durable_ms.reserve(done.size());
  std::size_t point = 0;
  for (std::size_t k = 1; k <= done.size(); ++k) {
    while (point < timeline.size() && timeline[point].second < k) ++point;
    if (point == timeline.size()) break;  // not durable by the end (an undrained trial)
    const auto& h = done[k - 1];
    const auto at = std::max(timeline[point].first, h.at);
    durable_ms.push_back(std::max(0.0, static_cast<double>(at - h.due) / 1e6));
  }
  const std::int64_t t0_ns = since_base(t0);
  std::vector<std::vector<double>> by_second(static_cast<std::size_t>(s.seconds));
  for (std::size_t k = 0; k < durable_ms.size(); ++k) {
    const auto second = (done[k].due - t0_ns) / 1'000'000'000LL;
    if (second >= 0 && second < s.seconds) {
      by_second[static_cast<std::size_t>(second)].push_back(durable_ms[k]);
    }
  }
  for (auto& v : by_second) r.e2e_p95_by_second.push_back(percentiles(std::move(v)).p95);
  r.e2e_ms = percentiles(std::move(durable_ms));
  r.e2e_handler_ms = percentiles(std::move(handler_ms));

  std::int64_t max_late = 0;
  for (std::size_t p = 0; p < np; ++p) {
    r.sends_single += singles[p];
    r.sends_batch += batches[p];
    max_late = std::max<std::int64_t>(max_late, late[p].count());
  }
  r.producer_max_late_ms = static_cast<double>(max_late) / 1e6;
  r.args_json_bytes = args_text(n - 1, since_base(t_end), s.args_bytes).size();
  for (const auto& smp : r.samples) {
    r.depth_max = std::max(r.depth_max, smp.depth);
    r.in_flight_max = std::max(r.in_flight_max, smp.in_flight);
    r.other_active_max = std::max(r.other_active_max, smp.other_active);
    if (smp.dead && *smp.dead > r.dead_tuples_max) {
      r.dead_tuples_max = *smp.dead;
      r.dead_tuples_max_table = smp.most_dead_table;
    }
  }
  r.claims = claims1.count - claims0.count;
  r.flushes = flush1.count - flush0.count;
  r.flush_ms_mean =
      r.flushes == 0 ? 0 : (flush1.sum - flush0.sum) * 1000.0 / static_cast<double>(r.flushes);
  r.loadavg_end = loadavg();
  return r;
}

namespace {
double per_window_job(const TrialResult& r, std::uint64_t n) {
  return r.completed_in_window > 0
             ? static_cast<double>(n) / static_cast<double>(r.completed_in_window)
             : 0.0;
}
}  // namespace

nlohmann::json trial_json(const TrialResult& r, bool with_samples) {
  nlohmann::json j{{"rate", r.setup.rate},
                   {"offered_per_s", r.offered_per_s},
                   {"completed_per_s", r.completed_per_s},
                   {"held_ratio", r.held_ratio},
                   {"e2e_ms", r.e2e_ms.to_json()},
                   {"wal_bytes_per_job", r.wal_bytes_per_job},
                   {"commits_per_job", r.commits_per_job},
                   {"dead_tuples_max", r.dead_tuples_max},
                   {"depth_max", r.depth_max},
                   {"e2e_handler_ms", r.e2e_handler_ms.to_json()},
                   {"jobs",
                    {{"planned", r.jobs_planned},
                     {"sent", r.jobs_sent},
                     {"completed", r.jobs_completed},
                     {"offered_in_window", r.offered_in_window},
                     {"completed_in_window", r.completed_in_window}}},
                   {"warmup_jobs", r.warmup_jobs},
                   {"drained", r.drained},
                   {"drain_s", r.drain_s},
                   {"producer_max_late_ms", r.producer_max_late_ms},
                   {"sends",
                    {{"single", r.sends_single},
                     {"batch", r.sends_batch},
                     {"batch_size", kBatchSize},
                     {"batch_every", kBatchEvery}}},
                   {"args_json_bytes", r.args_json_bytes},
                   {"wal_bytes", r.wal_bytes},
                   {"commits",
                    {{"database", r.db_commits},
                     {"database_rollbacks", r.db_rollbacks},
                     {"benchmark_sessions", r.bench_transactions},
                     {"producers", r.producer_transactions},
                     {"runtime", r.runtime_commits},
                     // Per job completed in the window: the claims and completion flushes
                     // (write transactions); the rest of the runtime's count is mostly the
                     // listener's session reading each NOTIFY it is signalled for (a
                     // read-only transaction with no WAL) and the maintenance leader.
                     {"claims_per_job", per_window_job(r, r.claims)},
                     {"flushes_per_job", per_window_job(r, r.flushes)}}},
                   {"producer_commits_per_job", r.producer_commits_per_job},
                   {"autovacuum_runs", r.autovacuum_runs},
                   {"dead_tuples_max_table", r.dead_tuples_max_table},
                   {"in_flight_max", r.in_flight_max},
                   {"other_active_sessions_max", r.other_active_max},
                   {"pinned_xmin_age", r.pinned_xmin_age ? nlohmann::json(*r.pinned_xmin_age)
                                                         : nlohmann::json(nullptr)},
                   {"client",
                    [&] {
                      auto c = client_stats_json(r.stats);
                      c["claims"] = r.claims;
                      c["flushes"] = r.flushes;
                      c["flush_ms_mean"] = r.flush_ms_mean;
                      return c;
                    }()},
                   {"loadavg_at_end", r.loadavg_end}};
  if (with_samples) {
    nlohmann::json samples = nlohmann::json::array();
    for (const auto& s : r.samples) {
      samples.push_back({{"t_s", s.t_s},
                         {"completed", s.completed},
                         {"depth", s.depth},
                         {"in_flight", s.in_flight},
                         {"dead", s.dead ? nlohmann::json(*s.dead) : nlohmann::json(nullptr)},
                         {"other_active", s.other_active}});
    }
    j["samples"] = std::move(samples);
    j["e2e_p95_ms_by_second"] = r.e2e_p95_by_second;
  }
  return j;
}

}  // namespace awa::bench
