// scripts/bench soak: the whole runtime (awa::Client in this process) under a steady offered
// load with ring rotation running, watching what the hot tables accumulate: dead tuples
// and size per table, over time and at the end. With --pinned-horizon a REPEATABLE READ
// transaction holds the xmin horizon back for the whole offered-load period (as a long
// report query or a forgotten session would), and the benchmark measures how long dead
// tuples take to come back down after it is released.
//
// Set-up: a throw-away schema (migrated with schema::Migrator; --keep-schema leaves it for
// `awa --schema S storage status`), one queue "soak" with enqueue_shards = --shards
// (Admin::set_enqueue_shards), an awa::Client with --workers no-op workers,
// ring_rotate_interval = --rotate-ms, maintenance_interval = --maintenance-ms, everything
// else the Client's defaults. Every session (the Client's too, through the connection
// URL's `options`) has a statement_timeout.
//
// Load: one producer thread with its own connection offers --rate jobs/s by an absolute
// schedule: every 10 ms it enqueues, with one self-committing QueueStorage::insert_many,
// the jobs that are due (a late producer catches up in bigger batches, at most 2000 per
// call, and gives up 30 s past the schedule). The schedule runs --seconds; with
// --pinned-horizon it then runs on for --after-release-s more (default 2 x rotate + 10 s).
// Args carry the job's sequence number. 2 x shards warm-up jobs go through first.
//   pickup      = insert_many returned (commit and NOTIFY done) -> handler start, on this
//                 process's steady clock; a handler that starts first counts as 0
//                 ("early"). Reported over the jobs due in the --seconds window.
//   completed/s = Client completions from the start of the load until the end of the
//                 --seconds window, per second of that time.
//   rotations, prunes = ClientStats (this process is the only client, so the leader).
//
// Table statistics, every second on their own connection (pg_stat_clear_snapshot() first,
// so each sample is a fresh read): per hot table (partitions summed into their parent)
// n_dead_tup, n_live_tup from pg_stat_user_tables and pg_total_relation_size. Backends
// publish their counters at most about once a second (and an idle backend after up to
// 10 s), so the samples lag by about that much. The final sample is read after the Client
// has stopped and its backends have exited (exit flushes their counters).
//
// pg_total_relation_size takes a brief ACCESS SHARE lock on each partition, so a sample
// waits while a prune holds a slot's partitions ACCESS EXCLUSIVE (the Client's claims wait
// too): a sample later than its second shows such a wait. Each sample also reads the
// schema's ring_skips (why the leader's last rotation or prune of a ring did nothing;
// rewritten only when the reason changes) and reports the changes.
// The end: Admin::storage_status (every ring's slots and exact row counts).
//
// --pinned-horizon: a separate connection runs BEGIN ISOLATION LEVEL REPEATABLE READ;
// SELECT 1 (it touches no awa table, so it holds no lock on them, only its snapshot's
// xmin) just before the load starts, and COMMITs at the end of the --seconds window.
// recovery_s = release -> the first sample in which every hot table has n_dead_tup < 1000
// (null if that never happens before the end of the run).
//
// Bounded: a fixed schedule, the producer's grace, a 60 s drain limit, a statement_timeout
// on every session.
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "awa/admin.hpp"
#include "awa/client.hpp"
#include "awa/connection.hpp"
#include "awa/job.hpp"
#include "awa/queue_storage.hpp"
#include "bench_common.hpp"
#include "pg/connection.hpp"
#include "pg/native.hpp"
#include "storage/store_access.hpp"

namespace awa::bench {
namespace {

using std::chrono::duration;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

constexpr std::string_view kQueue = "soak";
constexpr std::string_view kKind = "soak_noop";
constexpr std::string_view kClientApp = "awa_bench_soak_client";
constexpr std::string_view kProducerApp = "awa_bench_soak_producer";
constexpr std::string_view kPinApp = "awa_bench_soak_pin";
constexpr auto kStatementTimeout = seconds(120);
constexpr auto kProducerTick = milliseconds(10);
constexpr auto kProducerGrace = seconds(30);
constexpr auto kSampleInterval = seconds(1);
constexpr auto kDrainLimit = seconds(60);
constexpr auto kExitWait = seconds(10);
constexpr std::int64_t kMaxBatch = 2000;
constexpr std::int64_t kMaxJobs = 10'000'000;
constexpr std::int64_t kDeadTarget = 1000;  // n_dead_tup per hot table
constexpr double kSizeRatioTarget = 1.2;    // total hot-table size: end / after 30 s
constexpr int kBaselineSeconds = 30;

// The tables the hot path writes (or that rotation and prune write), by parent.
constexpr std::array<std::string_view, 13> kHotTables = {
    "ready_entries",       "done_entries",   "ready_tombstones",
    "claim_batches",       "claim_closures", "leases",
    "deferred_jobs",       "dlq_entries",    "queue_claim_heads",
    "queue_enqueue_heads", "ring_rotations", "ring_prunes",
    "terminal_rollups"};

// Per parent table: leaf partitions (and a plain table itself) summed. The parent of a
// partitioned table has no storage and no counters of its own.
constexpr std::string_view kTableStats =
    "SELECT root.relname::text, "
    "       coalesce(sum(s.n_dead_tup), 0)::bigint, "
    "       coalesce(sum(s.n_live_tup), 0)::bigint, "
    "       coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint, "
    "       coalesce(sum(s.autovacuum_count), 0)::bigint "
    "FROM pg_class c "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "JOIN pg_class root ON root.oid = coalesce(pg_partition_root(c.oid::regclass), c.oid) "
    "LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid "
    "WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND root.relname = ANY($2::text[]) "
    "GROUP BY root.relname";

struct Options {
  int rate = 1000;
  int seconds = 180;
  bool pinned = false;
  int rotate_ms = 5000;
  int after_release_s = -1;  // -1: 2 x rotate interval + 10 s
  int maintenance_ms = 1000;
  int workers = 32;
  int shards = 4;
  bool keep_schema = false;
  std::string json_path;
};

struct TableStat {
  std::int64_t dead = 0;
  std::int64_t live = 0;
  std::int64_t size = 0;
  std::int64_t autovacuums = 0;
};

struct Sample {
  double t_s = 0;  // since the load started
  std::string phase;
  std::map<std::string, TableStat> tables;
  std::uint64_t completed = 0;  // ClientStats, warm-up excluded
  std::uint64_t rotations = 0;
  std::uint64_t prunes = 0;

  std::int64_t total_dead() const {
    std::int64_t n = 0;
    for (const auto& [_, t] : tables) n += t.dead;
    return n;
  }
  std::int64_t total_size() const {
    std::int64_t n = 0;
    for (const auto& [_, t] : tables) n += t.size;
    return n;
  }
  // The table with the most dead tuples.
  std::pair<std::string, std::int64_t> max_dead() const {
    std::pair<std::string, std::int64_t> m{"-", 0};
    for (const auto& [name, t] : tables) {
      if (t.dead > m.second) m = {name, t.dead};
    }
    return m;
  }
};

// Counts the runtime's warnings and errors (and keeps the first few) and its "ring full"
// carry-forward notices, passing every message on to stderr.
class CountingSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit CountingSink(spdlog::sink_ptr next) : next_(std::move(next)) {}

  std::uint64_t warnings() const { return warnings_.load(); }
  std::uint64_t errors() const { return errors_.load(); }
  std::uint64_t ring_full() const { return ring_full_.load(); }
  std::vector<std::string> first_problems() const {
    std::lock_guard lock(problems_mu_);
    return problems_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    const std::string_view text(msg.payload.data(), msg.payload.size());
    if (msg.level >= spdlog::level::warn) {
      (msg.level >= spdlog::level::err ? errors_ : warnings_).fetch_add(1);
      std::lock_guard lock(problems_mu_);
      if (problems_.size() < 5) problems_.emplace_back(text);
    }
    if (text.find("ring full") != std::string_view::npos) ring_full_.fetch_add(1);
    next_->log(msg);
  }
  void flush_() override { next_->flush(); }

 private:
  spdlog::sink_ptr next_;
  std::atomic<std::uint64_t> warnings_{0};
  std::atomic<std::uint64_t> errors_{0};
  std::atomic<std::uint64_t> ring_full_{0};
  mutable std::mutex problems_mu_;
  std::vector<std::string> problems_;
};

// Created empty (a leftover of the same name dropped first); dropped at the end unless
// kept. `admin` must outlive it and be outside a transaction at destruction.
class BenchSchema {
 public:
  BenchSchema(pg::Connection& admin, std::string name, bool keep)
      : admin_(admin), name_(std::move(name)), quoted_(admin.quote_identifier(name_)), keep_(keep) {
    admin_.exec(fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0}", quoted_));
  }
  ~BenchSchema() {
    if (keep_) return;
    try {
      admin_.exec(fmt::format("DROP SCHEMA IF EXISTS {} CASCADE", quoted_));
    } catch (const std::exception& e) {
      fmt::print(stderr, "warning: could not drop schema {}: {}\n", name_, e.what());
    }
  }
  BenchSchema(const BenchSchema&) = delete;
  BenchSchema& operator=(const BenchSchema&) = delete;

  const std::string& name() const noexcept { return name_; }
  const std::string& quoted() const noexcept { return quoted_; }

 private:
  pg::Connection& admin_;
  std::string name_;
  std::string quoted_;
  bool keep_;
};

// DATABASE_URL with a statement_timeout for every session opened with it (the Client's
// own connections), unless the URL already sets `options`.
std::string url_with_statement_timeout(std::string url, seconds timeout) {
  if (url.find("options=") != std::string::npos) return url;
  if (url.starts_with("postgres://") || url.starts_with("postgresql://")) {
    url += url.find('?') == std::string::npos ? '?' : '&';
    url += fmt::format("options=-c%20statement_timeout%3D{}s", timeout.count());
  } else {
    url += fmt::format(" options='-c statement_timeout={}s'", timeout.count());
  }
  return url;
}

std::vector<std::string> hot_table_names() {
  return std::vector<std::string>(kHotTables.begin(), kHotTables.end());
}

std::string text_array(const std::vector<std::string>& names) {
  std::string s = "{";
  for (const auto& n : names) {
    if (s.size() > 1) s += ',';
    s += n;
  }
  return s + "}";
}

// One fresh read of the hot tables' counters and sizes.
std::map<std::string, TableStat> read_tables(pg::Connection& conn, const std::string& schema) {
  conn.exec("SELECT pg_stat_clear_snapshot()");
  const auto res =
      conn.exec_cached(kTableStats, pg::make_params(schema, text_array(hot_table_names())));
  std::map<std::string, TableStat> out;
  for (int r = 0; r < res.rows(); ++r) {
    out[res.get<std::string>(r, 0)] =
        TableStat{res.get<std::int64_t>(r, 1), res.get<std::int64_t>(r, 2),
                  res.get<std::int64_t>(r, 3), res.get<std::int64_t>(r, 4)};
  }
  return out;
}

std::string kib(std::int64_t bytes) {
  return thousands(static_cast<double>(bytes) / 1024.0) + " kB";
}

struct RunResult {
  std::string schema;
  std::vector<Sample> samples;          // every second, then the final one (last)
  std::optional<std::size_t> baseline;  // the sample the size ratio is against
  double baseline_t_s = 0;
  std::int64_t jobs_main = 0;   // due and sent in the --seconds window
  std::int64_t jobs_after = 0;  // sent after it (--pinned-horizon)
  double offered_per_s = 0;
  double producer_max_late_ms = 0;
  double completed_per_s = 0;
  double after_completed_per_s = 0;
  Percentiles pickup_ms;
  std::optional<Percentiles> after_pickup_ms;
  std::int64_t early = 0;
  std::int64_t never_started = 0;
  bool drained = false;
  double drain_s = 0;
  // --pinned-horizon
  std::optional<double> release_t_s;
  std::string pinned_xmin;
  std::int64_t pinned_xmin_age_at_release = 0;
  std::optional<double> recovery_s;
  std::uint64_t rotations_at_release = 0;
  std::optional<std::uint64_t> rotations_at_recovery;
  ClientStats stats;
  std::vector<RingStatus> rings;
  std::uint64_t log_warnings = 0;
  std::uint64_t log_errors = 0;
  std::uint64_t ring_full = 0;
  std::vector<std::string> log_problems;
  // Changes of the rings' last skip reasons (ring_skips, written only when a reason
  // changes), as the sampler saw them.
  struct SkipEvent {
    double t_s = 0;
    std::string ring, action, reason, at;
  };
  std::vector<SkipEvent> skips;
  std::string client_statement_timeout;
};

RunResult run_soak(pg::Connection& admin, const Options& o, const CountingSink& log) {
  RunResult r;
  BenchSchema schema(admin, unique_schema_name("soak"), o.keep_schema);
  r.schema = schema.name();
  migrate_schema(admin, schema.name());
  {
    Connection pub = pg::adopt(connect("awa_bench_soak_admin", kStatementTimeout));
    Admin(schema.name()).set_enqueue_shards(pub, std::string(kQueue), o.shards);
  }
  auto sampler = connect("awa_bench_soak_sampler", kStatementTimeout);
  {
    const auto found = read_tables(sampler, schema.name());
    for (const auto& t : kHotTables) {
      if (!found.contains(std::string(t))) {
        throw std::runtime_error(fmt::format("hot table {}.{} not found", schema.name(), t));
      }
    }
  }

  const auto client_url = url_with_statement_timeout(database_url(), kStatementTimeout);
  {
    pg::ConnectOptions co = connect_options("awa_bench_soak_check");
    co.url = client_url;
    r.client_statement_timeout =
        pg::Connection::connect(co).exec("SHOW statement_timeout").get<std::string>(0, 0);
  }

  const int after_s = !o.pinned ? 0
                      : o.after_release_s >= 0
                          ? o.after_release_s
                          : static_cast<int>(std::ceil(2.0 * o.rotate_ms / 1000.0)) + 10;
  const int total_s = o.seconds + after_s;
  const std::int64_t n_main = static_cast<std::int64_t>(o.rate) * o.seconds;
  const std::int64_t n_total = static_cast<std::int64_t>(o.rate) * total_s;
  const std::int64_t warmup = 2LL * o.shards;

  const auto base = Clock::now();
  const auto since_base = [base](Clock::time_point t) {
    return std::chrono::duration_cast<nanoseconds>(t - base).count();
  };
  std::vector<std::atomic<std::int64_t>> started(static_cast<std::size_t>(n_total));
  for (auto& s : started) s.store(-1, std::memory_order_relaxed);
  std::vector<std::int64_t> enqueued(static_cast<std::size_t>(n_total), -1);  // producer's

  ClientOptions co;
  co.database_url = client_url;
  co.schema = schema.name();
  co.migrate = false;
  co.application_name = std::string(kClientApp);
  co.ring_rotate_interval = milliseconds(o.rotate_ms);
  co.maintenance_interval = milliseconds(o.maintenance_ms);
  Client client(co);
  client.register_worker(std::string(kKind), [&](JobContext& job) {
    const auto now = since_base(Clock::now());
    const auto seq = job.args().at("seq").get<std::int64_t>();
    if (seq >= 0 && seq < n_total) {
      std::int64_t unset = -1;  // the first attempt's start
      started[static_cast<std::size_t>(seq)].compare_exchange_strong(unset, now);
    }
    return JobResult::completed();
  });
  QueueConfig q;
  q.name = std::string(kQueue);
  q.max_workers = o.workers;
  client.add_queue(q);
  client.start();

  QueueStorage store(StorageOptions{schema.name()});
  auto producer_conn =
      std::make_unique<pg::Connection>(connect(std::string(kProducerApp), kStatementTimeout));
  InsertOpts opts;
  opts.queue = std::string(kQueue);
  for (std::int64_t i = 0; i < warmup; ++i) {  // lanes, statements, pool connections
    const std::vector<NewJob> one{NewJob(std::string(kKind), {{"seq", -1}}, opts)};
    storage::insert_many(store, *producer_conn, one);
  }
  {
    const auto give_up = Clock::now() + seconds(30);
    while (client.stats().completed < static_cast<std::uint64_t>(warmup)) {
      if (Clock::now() > give_up) throw std::runtime_error("warm-up jobs did not complete in 30 s");
      std::this_thread::sleep_for(milliseconds(5));
    }
  }
  const std::uint64_t completed0 = client.stats().completed;

  std::optional<pg::Connection> pin;
  if (o.pinned) {
    pin.emplace(connect(std::string(kPinApp), kStatementTimeout));
    pin->exec("SET idle_in_transaction_session_timeout = 0");
    pin->exec("BEGIN ISOLATION LEVEL REPEATABLE READ");
    pin->exec("SELECT 1");
    const auto res = sampler.query("SELECT backend_xmin::text FROM pg_stat_activity WHERE pid = $1",
                                   pin->backend_pid());
    if (res.rows() != 1 || res.is_null(0, 0)) {
      throw std::runtime_error("the pinning session shows no backend_xmin");
    }
    r.pinned_xmin = res.get<std::string>(0, 0);
  }

  // --- the load -----------------------------------------------------------------------
  const auto t0 = Clock::now();
  const auto t_of = [t0](Clock::time_point t) { return duration<double>(t - t0).count(); };
  std::int64_t sent = 0;  // the producer's until joined
  nanoseconds max_late{0};
  std::exception_ptr producer_error;
  std::atomic<bool> producer_done{false};
  // Stopped early only when this thread unwinds (the jthread's destructor).
  std::jthread producer([&](const std::stop_token& stop) {
    try {
      const auto give_up = t0 + seconds(total_s) + kProducerGrace;
      std::vector<NewJob> batch;
      for (std::int64_t k = 1; sent < n_total && !stop.stop_requested(); ++k) {
        const auto tick = t0 + k * kProducerTick;
        auto now = Clock::now();
        if (now < tick) {
          std::this_thread::sleep_until(tick);
          now = Clock::now();
        }
        if (now > give_up) break;
        const auto elapsed = std::chrono::duration_cast<nanoseconds>(now - t0).count();
        const std::int64_t due = std::min(
            n_total, static_cast<std::int64_t>(static_cast<double>(elapsed) * o.rate / 1e9));
        if (due <= sent) continue;
        const auto first_due = t0 + nanoseconds(sent * 1'000'000'000LL / o.rate);
        max_late = std::max(max_late, std::chrono::duration_cast<nanoseconds>(now - first_due));
        const std::int64_t n = std::min(due - sent, kMaxBatch);
        batch.clear();
        for (std::int64_t i = 0; i < n; ++i) {
          batch.emplace_back(std::string(kKind), nlohmann::json{{"seq", sent + i}}, opts);
        }
        storage::insert_many(store, *producer_conn, batch);
        const auto done = since_base(Clock::now());
        for (std::int64_t i = 0; i < n; ++i) enqueued[static_cast<std::size_t>(sent + i)] = done;
        sent += n;
      }
    } catch (...) {
      producer_error = std::current_exception();
    }
    producer_done.store(true);
  });

  const std::string skips_sql =
      fmt::format("SELECT ring, action, reason, skipped_at::text FROM {}.ring_skips ORDER BY 1, 2",
                  schema.quoted());
  std::map<std::string, std::string> last_skip;
  const auto take = [&](std::string phase) {
    Sample s;
    const auto stats = client.stats();  // before the table read: the counts lead it
    s.completed = stats.completed - completed0;
    s.rotations = stats.rotations;
    s.prunes = stats.prunes;
    s.tables = read_tables(sampler, schema.name());
    s.t_s = t_of(Clock::now());
    const auto sk = sampler.exec(skips_sql);
    for (int i = 0; i < sk.rows(); ++i) {
      auto key = sk.get<std::string>(i, 0) + "/" + sk.get<std::string>(i, 1);
      auto at = sk.get<std::string>(i, 3);
      auto& seen = last_skip[key];
      if (seen == at) continue;
      seen = at;
      r.skips.push_back({s.t_s, sk.get<std::string>(i, 0), sk.get<std::string>(i, 1),
                         sk.get<std::string>(i, 2), std::move(at)});
    }
    s.phase = std::move(phase);
    r.samples.push_back(std::move(s));
    return r.samples.size() - 1;
  };
  const auto check_recovery = [&](const Sample& s) {
    if (!r.release_t_s || r.recovery_s) return;
    if (s.max_dead().second < kDeadTarget) {
      r.recovery_s = s.t_s - *r.release_t_s;
      r.rotations_at_recovery = s.rotations;
    }
  };

  const int baseline_tick = std::min(kBaselineSeconds, o.seconds);
  std::uint64_t completed_at_end_main = 0;
  double t_end_main = o.seconds;
  for (int tick = 1; tick <= total_s; ++tick) {
    std::this_thread::sleep_until(t0 + tick * kSampleInterval);
    std::string phase = tick > o.seconds ? "after-release" : o.pinned ? "pinned" : "load";
    if (tick == o.seconds) {
      // Before the sample: a sample can wait behind a prune's locks (pg_total_relation_size).
      completed_at_end_main = client.stats().completed - completed0;
      t_end_main = t_of(Clock::now());
      if (pin) {
        const auto age =
            sampler.query("SELECT age(backend_xmin)::bigint FROM pg_stat_activity WHERE pid = $1",
                          pin->backend_pid());
        if (age.rows() == 1 && !age.is_null(0, 0)) {
          r.pinned_xmin_age_at_release = age.get<std::int64_t>(0, 0);
        }
        pin->exec("COMMIT");
        r.release_t_s = t_of(Clock::now());
        r.rotations_at_release = client.stats().rotations;
        phase = "released";
      }
    }
    const auto idx = take(std::move(phase));
    if (tick == baseline_tick) {
      r.baseline = idx;
      r.baseline_t_s = r.samples[idx].t_s;
    }
    check_recovery(r.samples[idx]);
  }
  // A producer behind its schedule is still sending (up to kProducerGrace): keep sampling.
  for (auto next = t0 + (total_s + 1) * kSampleInterval; !producer_done.load();) {
    if (Clock::now() >= next) {
      check_recovery(r.samples[take("producer late")]);
      next += kSampleInterval;
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
  producer.join();
  if (producer_error) std::rethrow_exception(producer_error);
  const std::uint64_t completed_at_end_load = client.stats().completed - completed0;
  const double t_end_load = t_of(Clock::now());

  // --- drain: every sent job completed, still sampling every second ---------------------
  const auto t_drain = Clock::now();
  const auto target = static_cast<std::uint64_t>(sent);
  auto next_sample = t_drain + kSampleInterval;
  while (client.stats().completed - completed0 < target) {
    if (Clock::now() - t_drain > kDrainLimit) break;
    if (Clock::now() >= next_sample) {
      check_recovery(r.samples[take("drain")]);
      next_sample += kSampleInterval;
    }
    std::this_thread::sleep_for(milliseconds(2));
  }
  r.drained = client.stats().completed - completed0 >= target;
  r.drain_s = duration<double>(Clock::now() - t_drain).count();

  client.stop();
  r.stats = client.stats();
  producer_conn.reset();
  pin.reset();
  // Exiting backends flush their statistics; wait until they are gone.
  {
    const auto give_up = Clock::now() + kExitWait;
    while (Clock::now() < give_up) {
      const auto n = sampler
                         .query(
                             "SELECT count(*) FROM pg_stat_activity "
                             "WHERE application_name = ANY($1::text[])",
                             fmt::format("{{{},{},{}}}", kClientApp, kProducerApp, kPinApp))
                         .get<std::int64_t>(0, 0);
      if (n == 0) break;
      std::this_thread::sleep_for(milliseconds(50));
    }
  }
  check_recovery(r.samples[take("final")]);
  {
    Connection pub = pg::adopt(connect("awa_bench_soak_admin", kStatementTimeout));
    r.rings = Admin(schema.name()).storage_status(pub);
  }

  // --- results ------------------------------------------------------------------------
  r.jobs_main = std::min(sent, n_main);
  r.jobs_after = sent - r.jobs_main;
  r.offered_per_s = static_cast<double>(r.jobs_main) / o.seconds;
  r.producer_max_late_ms = duration<double, std::milli>(max_late).count();
  r.completed_per_s = static_cast<double>(completed_at_end_main) / t_end_main;
  if (after_s > 0) {
    r.after_completed_per_s = static_cast<double>(completed_at_end_load - completed_at_end_main) /
                              (t_end_load - t_end_main);
  }
  std::vector<double> main_ms, after_ms;
  for (std::int64_t i = 0; i < sent; ++i) {
    const auto e = enqueued[static_cast<std::size_t>(i)];
    const auto s = started[static_cast<std::size_t>(i)].load();
    if (s < 0) {
      ++r.never_started;
      continue;
    }
    const double ms = static_cast<double>(s - e) / 1e6;
    if (ms < 0) ++r.early;
    (i < n_main ? main_ms : after_ms).push_back(std::max(0.0, ms));
  }
  r.pickup_ms = percentiles(std::move(main_ms));
  if (!after_ms.empty()) r.after_pickup_ms = percentiles(std::move(after_ms));
  r.log_warnings = log.warnings();
  r.log_errors = log.errors();
  r.ring_full = log.ring_full();
  r.log_problems = log.first_problems();
  return r;
}

struct TableSummary {
  std::int64_t peak_dead = 0;
  std::int64_t final_dead = 0;
  std::int64_t final_live = 0;
  std::int64_t size = 0;
  std::int64_t size_at_baseline = 0;
  std::int64_t peak_size = 0;
  std::int64_t autovacuums = 0;
};

std::map<std::string, TableSummary> summarize(const RunResult& r) {
  std::map<std::string, TableSummary> out;
  for (const auto& name : kHotTables) out[std::string(name)];
  for (const auto& s : r.samples) {
    for (const auto& [name, t] : s.tables) {
      auto& o = out[name];
      o.peak_dead = std::max(o.peak_dead, t.dead);
      o.peak_size = std::max(o.peak_size, t.size);
    }
  }
  for (const auto& [name, t] : r.samples.back().tables) {
    auto& o = out[name];
    o.final_dead = t.dead;
    o.final_live = t.live;
    o.size = t.size;
    o.autovacuums = t.autovacuums;
  }
  if (r.baseline) {
    for (const auto& [name, t] : r.samples[*r.baseline].tables) out[name].size_at_baseline = t.size;
  }
  return out;
}

std::string render_timeline(const RunResult& r) {
  // About 45 rows at most; the JSON has every sample.
  const std::size_t step = std::max<std::size_t>(1, (r.samples.size() + 44) / 45);
  TablePrinter t({{"t s", TablePrinter::Align::kRight},
                  {"phase"},
                  {"completed", TablePrinter::Align::kRight},
                  {"rotations", TablePrinter::Align::kRight},
                  {"prunes", TablePrinter::Align::kRight},
                  {"dead (all)", TablePrinter::Align::kRight},
                  {"most dead"},
                  {"size (all)", TablePrinter::Align::kRight}});
  for (std::size_t i = 0; i < r.samples.size(); ++i) {
    const auto& s = r.samples[i];
    const bool edge = i + 1 == r.samples.size() ||
                      (i + 1 < r.samples.size() && r.samples[i + 1].phase != s.phase);
    if (i % step != step - 1 && !edge) continue;
    const auto [name, dead] = s.max_dead();
    t.add_row({fmt::format("{:.1f}", s.t_s), s.phase, thousands(static_cast<double>(s.completed)),
               std::to_string(s.rotations), std::to_string(s.prunes),
               thousands(static_cast<double>(s.total_dead())),
               fmt::format("{} {}", name, thousands(static_cast<double>(dead))),
               kib(s.total_size())});
  }
  return t.render();
}

std::string render_tables(const RunResult& r, const std::map<std::string, TableSummary>& sum) {
  TablePrinter t({{"table"},
                  {"peak dead", TablePrinter::Align::kRight},
                  {"final dead", TablePrinter::Align::kRight},
                  {"final live", TablePrinter::Align::kRight},
                  {fmt::format("size @{:.0f}s", r.baseline_t_s), TablePrinter::Align::kRight},
                  {"peak size", TablePrinter::Align::kRight},
                  {"final size", TablePrinter::Align::kRight},
                  {"end/30s", TablePrinter::Align::kRight},
                  {"autovacuums", TablePrinter::Align::kRight}});
  TableSummary total;
  for (const auto& name : kHotTables) {
    const auto& s = sum.at(std::string(name));
    total.final_dead += s.final_dead;
    total.final_live += s.final_live;
    total.size += s.size;
    total.size_at_baseline += s.size_at_baseline;
    total.autovacuums += s.autovacuums;
    t.add_row(
        {std::string(name), thousands(static_cast<double>(s.peak_dead)),
         thousands(static_cast<double>(s.final_dead)), thousands(static_cast<double>(s.final_live)),
         kib(s.size_at_baseline), kib(s.peak_size), kib(s.size),
         s.size_at_baseline > 0 ? fmt::format("{:.2f}", static_cast<double>(s.size) /
                                                            static_cast<double>(s.size_at_baseline))
                                : std::string("–"),
         std::to_string(s.autovacuums)});
  }
  std::int64_t peak_total_dead = 0, peak_total_size = 0;
  for (const auto& s : r.samples) {
    peak_total_dead = std::max(peak_total_dead, s.total_dead());
    peak_total_size = std::max(peak_total_size, s.total_size());
  }
  t.add_row({"all hot tables", thousands(static_cast<double>(peak_total_dead)),
             thousands(static_cast<double>(total.final_dead)),
             thousands(static_cast<double>(total.final_live)), kib(total.size_at_baseline),
             kib(peak_total_size), kib(total.size),
             total.size_at_baseline > 0
                 ? fmt::format("{:.2f}", static_cast<double>(total.size) /
                                             static_cast<double>(total.size_at_baseline))
                 : std::string("–"),
             std::to_string(total.autovacuums)});
  return t.render();
}

std::string render_rings(const std::vector<RingStatus>& rings) {
  TablePrinter t({{"ring"},
                  {"generation", TablePrinter::Align::kRight},
                  {"current slot", TablePrinter::Align::kRight},
                  {"sealed slots", TablePrinter::Align::kRight},
                  {"rows current", TablePrinter::Align::kRight},
                  {"rows sealed", TablePrinter::Align::kRight},
                  {"last prune (removed/carried)"},
                  {"last rotate skip"},
                  {"last prune skip"}});
  for (const auto& ring : rings) {
    int sealed = 0;
    std::int64_t rows_current = 0, rows_sealed = 0;
    for (const auto& s : ring.slots) {
      if (s.state == "current") rows_current += s.rows;
      if (s.state == "sealed") {
        ++sealed;
        rows_sealed += s.rows;
      }
    }
    t.add_row({ring.ring, std::to_string(ring.generation), std::to_string(ring.current_slot),
               std::to_string(sealed), thousands(static_cast<double>(rows_current)),
               thousands(static_cast<double>(rows_sealed)),
               ring.last_prune
                   ? fmt::format("gen {}: {}/{}", ring.last_prune->generation,
                                 ring.last_prune->rows_removed, ring.last_prune->rows_carried)
                   : std::string("–"),
               ring.last_rotate_skip ? ring.last_rotate_skip->reason : std::string("–"),
               ring.last_prune_skip ? ring.last_prune_skip->reason : std::string("–")});
  }
  return t.render();
}

nlohmann::json rings_json(const std::vector<RingStatus>& rings) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& ring : rings) {
    nlohmann::json slots = nlohmann::json::array();
    for (const auto& s : ring.slots) {
      slots.push_back(
          {{"slot", s.slot}, {"state", s.state}, {"generation", s.generation}, {"rows", s.rows}});
    }
    out.push_back(
        {{"ring", ring.ring},
         {"generation", ring.generation},
         {"current_slot", ring.current_slot},
         {"slots", slots},
         {"last_rotate_skip", ring.last_rotate_skip ? nlohmann::json(ring.last_rotate_skip->reason)
                                                    : nlohmann::json(nullptr)},
         {"last_prune_skip", ring.last_prune_skip ? nlohmann::json(ring.last_prune_skip->reason)
                                                  : nlohmann::json(nullptr)}});
  }
  return out;
}

std::string yes_no(bool b) { return b ? "yes" : "NO"; }

int run(const Options& o, const CountingSink& log) {
  auto admin = connect("awa_bench_admin", kStatementTimeout);
  const auto machine = machine_info(admin);
  const int after_s = !o.pinned ? 0
                      : o.after_release_s >= 0
                          ? o.after_release_s
                          : static_cast<int>(std::ceil(2.0 * o.rotate_ms / 1000.0)) + 10;
  fmt::print(
      "soak: {} jobs/s offered for {} s{}, {} workers, {} shards, ring_rotate_interval {} ms, "
      "maintenance_interval {} ms\n",
      o.rate, o.seconds,
      o.pinned ? fmt::format(" with a REPEATABLE READ snapshot pinned throughout, then {} s more "
                             "after releasing it",
                             after_s)
               : std::string(),
      o.workers, o.shards, o.rotate_ms, o.maintenance_ms);
  fmt::print("{}\n", machine.describe());
  const auto autovac = admin.exec(
      "SELECT current_setting('autovacuum'), current_setting('autovacuum_naptime'), "
      "current_setting('autovacuum_vacuum_threshold'), "
      "current_setting('autovacuum_vacuum_scale_factor'), "
      "current_setting('stats_fetch_consistency')");
  const std::string autovac_desc = fmt::format(
      "autovacuum={} naptime={} vacuum_threshold={} vacuum_scale_factor={}; "
      "stats_fetch_consistency={}",
      autovac.get<std::string>(0, 0), autovac.get<std::string>(0, 1),
      autovac.get<std::string>(0, 2), autovac.get<std::string>(0, 3),
      autovac.get<std::string>(0, 4));
  fmt::print("{}\n", autovac_desc);
  std::fflush(stdout);

  const auto r = run_soak(admin, o, log);
  const auto sum = summarize(r);
  fmt::print("schema {}{}; client sessions' statement_timeout {}\n", r.schema,
             o.keep_schema ? " (kept: awa --schema " + r.schema + " storage status)" : "",
             r.client_statement_timeout);
  if (o.pinned) {
    fmt::print("pinned snapshot: backend_xmin {}, xid age {} at release (t = {:.1f} s)\n",
               r.pinned_xmin, r.pinned_xmin_age_at_release, r.release_t_s.value_or(-1));
  }
  fmt::print(
      "offered {:.1f} jobs/s ({} jobs, producer at most {:.1f} ms behind schedule); completed "
      "{:.1f}/s in the first {} s{}; drain {} in {:.1f} s; {} early, {} never started; "
      "client: claimed {}, completed {}, stale {}, rescued {}; load {}\n",
      r.offered_per_s, r.jobs_main + r.jobs_after, r.producer_max_late_ms, r.completed_per_s,
      o.seconds,
      r.after_pickup_ms
          ? fmt::format(", {:.1f}/s in the {} s after release", r.after_completed_per_s, after_s)
          : std::string(),
      r.drained ? "done" : "NOT done", r.drain_s, r.early, r.never_started, r.stats.claimed,
      r.stats.completed, r.stats.stale_completions, r.stats.rescued, loadavg());
  if (r.offered_per_s < 0.95 * o.rate) {
    fmt::print("WARNING: the producer offered only {:.1f} of {} jobs/s: producer-bound\n",
               r.offered_per_s, o.rate);
  }
  fmt::print("runtime log: {} warnings, {} errors, {} 'ring full' carry-forwards\n", r.log_warnings,
             r.log_errors, r.ring_full);
  for (const auto& p : r.log_problems) fmt::print("  {}\n", p);

  fmt::print("\nTimeline (samples every {} s; pg_stat counters lag up to ~1 s):\n{}\n",
             kSampleInterval.count(), render_timeline(r));
  fmt::print("Hot tables (partitions summed; final = after the Client stopped):\n{}\n",
             render_tables(r, sum));
  fmt::print("Rings at the end (awa storage status):\n{}\n", render_rings(r.rings));
  if (!r.skips.empty()) {
    TablePrinter t({{"seen at t s", TablePrinter::Align::kRight},
                    {"ring"},
                    {"action"},
                    {"skipped since (server time)"},
                    {"reason"}});
    constexpr std::size_t kMaxRows = 40;
    for (std::size_t i = 0; i < std::min(r.skips.size(), kMaxRows); ++i) {
      const auto& e = r.skips[i];
      t.add_row({fmt::format("{:.1f}", e.t_s), e.ring, e.action, e.at, e.reason});
    }
    fmt::print("Why rotations and prunes were skipped (ring_skips changes, {} of {}):\n{}\n",
               std::min(r.skips.size(), kMaxRows), r.skips.size(), t.render());
  }

  std::int64_t total_size = 0, total_baseline = 0, max_final_dead = 0;
  for (const auto& [_, s] : sum) {
    total_size += s.size;
    total_baseline += s.size_at_baseline;
    max_final_dead = std::max(max_final_dead, s.final_dead);
  }
  // 0: no baseline sample (the run ended first).
  const double ratio = total_baseline > 0
                           ? static_cast<double>(total_size) / static_cast<double>(total_baseline)
                           : 0.0;
  TablePrinter summary({{"mode"},
                        {"offered/s", TablePrinter::Align::kRight},
                        {"completed/s", TablePrinter::Align::kRight},
                        {"pickup p50", TablePrinter::Align::kRight},
                        {"p95", TablePrinter::Align::kRight},
                        {"p99", TablePrinter::Align::kRight},
                        {"rotations", TablePrinter::Align::kRight},
                        {"prunes", TablePrinter::Align::kRight},
                        {"max final dead", TablePrinter::Align::kRight},
                        {"size end/30s", TablePrinter::Align::kRight},
                        {"recovery s", TablePrinter::Align::kRight}});
  summary.add_row({fmt::format("{} {}/s x {} s, rotate {} ms", o.pinned ? "pinned" : "clean",
                               o.rate, o.seconds, o.rotate_ms),
                   thousands(r.offered_per_s), thousands(r.completed_per_s),
                   fmt::format("{:.2f}", r.pickup_ms.p50), fmt::format("{:.2f}", r.pickup_ms.p95),
                   fmt::format("{:.2f}", r.pickup_ms.p99), std::to_string(r.stats.rotations),
                   std::to_string(r.stats.prunes), thousands(static_cast<double>(max_final_dead)),
                   ratio > 0 ? fmt::format("{:.2f}", ratio) : std::string("–"),
                   !o.pinned      ? std::string("–")
                   : r.recovery_s ? fmt::format("{:.1f}", *r.recovery_s)
                                  : std::string("not reached")});
  fmt::print("Summary (pickup in ms, over the jobs of the first {} s):\n{}\n", o.seconds,
             summary.render());

  // The targets, as measured here (this benchmark measures; it does not tune).
  fmt::print("every hot table ends under {} dead tuples: {} (max {})\n", kDeadTarget,
             yes_no(max_final_dead < kDeadTarget), max_final_dead);
  if (ratio > 0) {
    fmt::print("hot tables' total size at the end <= {:.1f} x after {:.0f} s: {} ({:.2f})\n",
               kSizeRatioTarget, r.baseline_t_s, yes_no(ratio <= kSizeRatioTarget), ratio);
  }
  if (o.pinned && o.rotate_ms == 0) {
    fmt::print("dead tuples under {} after the release (rotation off): {}\n", kDeadTarget,
               r.recovery_s ? fmt::format("after {:.1f} s", *r.recovery_s)
                            : std::string("NO (not reached before the end of the run)"));
  } else if (o.pinned) {
    const double two_rotations = 2.0 * o.rotate_ms / 1000.0;
    fmt::print("dead tuples under {} within two rotations ({:.1f} s) of release: {}\n", kDeadTarget,
               two_rotations,
               r.recovery_s ? fmt::format("{} ({:.1f} s, {} rotations since release)",
                                          yes_no(*r.recovery_s <= two_rotations), *r.recovery_s,
                                          *r.rotations_at_recovery - r.rotations_at_release)
                            : std::string("NO (not reached before the end of the run)"));
  }
  if (o.pinned) {
    fmt::print(
        "throughput vs the clean run: compare completed/s with a clean run (target >= 0.80)\n");
  }

  if (!o.json_path.empty()) {
    nlohmann::json tables = nlohmann::json::object();
    for (const auto& [name, s] : sum) {
      tables[name] = {{"peak_dead", s.peak_dead},       {"final_dead", s.final_dead},
                      {"size_bytes", s.size},           {"size_at_30s_bytes", s.size_at_baseline},
                      {"peak_size_bytes", s.peak_size}, {"final_live", s.final_live},
                      {"autovacuums", s.autovacuums}};
    }
    nlohmann::json skips_json = nlohmann::json::array();
    for (const auto& e : r.skips) {
      skips_json.push_back({{"t_s", e.t_s},
                            {"ring", e.ring},
                            {"action", e.action},
                            {"reason", e.reason},
                            {"skipped_at", e.at}});
    }
    nlohmann::json timeline = nlohmann::json::array();
    for (const auto& s : r.samples) {
      nlohmann::json dead = nlohmann::json::object(), size = nlohmann::json::object();
      for (const auto& [name, t] : s.tables) {
        dead[name] = t.dead;
        size[name] = t.size;
      }
      timeline.push_back({{"t_s", s.t_s},
                          {"phase", s.phase},
                          {"completed", s.completed},
                          {"rotations", s.rotations},
                          {"prunes", s.prunes},
                          {"dead", dead},
                          {"size_bytes", size}});
    }
    nlohmann::json doc{
        {"benchmark", "soak"},
        {"pinned_horizon", o.pinned},
        {"completed_per_s", r.completed_per_s},
        {"p99_ms", r.pickup_ms.p99},
        {"rotations", r.stats.rotations},
        {"prunes", r.stats.prunes},
        {"tables", tables},
        {"recovery_s", r.recovery_s ? nlohmann::json(*r.recovery_s) : nlohmann::json(nullptr)},
        {"offered_per_s", r.offered_per_s},
        {"producer_max_late_ms", r.producer_max_late_ms},
        {"pickup_ms", r.pickup_ms.to_json()},
        {"pickup_early", r.early},
        {"never_started", r.never_started},
        {"total_size_bytes", total_size},
        {"total_size_at_30s_bytes", total_baseline},
        {"size_baseline_t_s", r.baseline_t_s},
        {"size_ratio_end_vs_30s", ratio > 0 ? nlohmann::json(ratio) : nlohmann::json(nullptr)},
        {"max_final_dead", max_final_dead},
        {"drained", r.drained},
        {"drain_s", r.drain_s},
        {"after_release",
         o.pinned
             ? nlohmann::json{{"seconds", after_s},
                              {"release_t_s", r.release_t_s.value_or(-1)},
                              {"pinned_xmin", r.pinned_xmin},
                              {"pinned_xmin_age_at_release", r.pinned_xmin_age_at_release},
                              {"completed_per_s", r.after_completed_per_s},
                              {"pickup_ms", r.after_pickup_ms ? r.after_pickup_ms->to_json()
                                                              : nlohmann::json(nullptr)},
                              {"rotations_at_release", r.rotations_at_release},
                              {"rotations_at_recovery",
                               r.rotations_at_recovery ? nlohmann::json(*r.rotations_at_recovery)
                                                       : nlohmann::json(nullptr)}}
             : nlohmann::json(nullptr)},
        {"client", client_stats_json(r.stats)},
        {"runtime_log",
         {{"warnings", r.log_warnings},
          {"errors", r.log_errors},
          {"ring_full_carries", r.ring_full},
          {"first_problems", r.log_problems}}},
        {"rings", rings_json(r.rings)},
        {"ring_skips", skips_json},
        {"timeline", timeline},
        {"options",
         {{"rate", o.rate},
          {"seconds", o.seconds},
          {"rotate_ms", o.rotate_ms},
          {"maintenance_ms", o.maintenance_ms},
          {"after_release_s", after_s},
          {"workers", o.workers},
          {"shards", o.shards}}},
        {"schema", r.schema},
        {"server_settings", autovac_desc},
        {"loadavg_at_end", loadavg()},
        {"machine", machine.to_json()}};
    write_json(o.json_path, doc);
    fmt::print("wrote {}\n", o.json_path);
  }
  return r.drained && r.never_started == 0 ? 0 : 1;
}

}  // namespace
}  // namespace awa::bench

int main(int argc, char** argv) {
  awa::bench::Options o;
  CLI::App app{
      "soak: the runtime under a steady load with ring rotation; dead tuples and size "
      "of the hot tables"};
  app.add_option("--rate", o.rate, "jobs/s offered")->capture_default_str();
  app.add_option("--seconds", o.seconds, "seconds of offered load (with the snapshot pinned)")
      ->capture_default_str();
  app.add_flag("--pinned-horizon", o.pinned,
               "hold a REPEATABLE READ snapshot for the --seconds window, then release it");
  app.add_option("--rotate-ms", o.rotate_ms, "ClientOptions::ring_rotate_interval (0: off)")
      ->capture_default_str();
  app.add_option("--after-release-s", o.after_release_s,
                 "--pinned-horizon: seconds of load after the release (default 2 x rotate + 10)");
  app.add_option("--maintenance-ms", o.maintenance_ms, "ClientOptions::maintenance_interval")
      ->capture_default_str();
  app.add_option("--workers", o.workers, "the queue's max_workers")->capture_default_str();
  app.add_option("--shards", o.shards, "the queue's enqueue_shards")->capture_default_str();
  app.add_flag("--keep-schema", o.keep_schema, "leave the schema (for awa storage status)");
  app.add_option("--json", o.json_path, "write results as JSON");
  CLI11_PARSE(app, argc, argv);
  // The runtime logs through spdlog's default logger; stdout is the report's.
  auto sink = std::make_shared<awa::bench::CountingSink>(
      std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("awa", sink));
  try {
    if (o.rate < 1 || o.seconds < 1 || o.workers < 1 || o.maintenance_ms < 1) {
      throw std::invalid_argument("--rate, --seconds, --workers and --maintenance-ms must be >= 1");
    }
    if (o.rotate_ms < 0) throw std::invalid_argument("--rotate-ms must be >= 0");
    if (o.shards < 1 || o.shards > 64) throw std::invalid_argument("--shards must be 1..64");
    if (o.after_release_s > 3600) throw std::invalid_argument("--after-release-s: at most 3600");
    const std::int64_t after =
        o.after_release_s >= 0 ? o.after_release_s : 2LL * o.rotate_ms / 1000 + 11;
    if (static_cast<std::int64_t>(o.rate) * (o.seconds + (o.pinned ? after : 0)) >
        awa::bench::kMaxJobs) {
      throw std::invalid_argument("at most 10,000,000 jobs per run");
    }
    return awa::bench::run(o, *sink);
  } catch (const std::exception& e) {
    fmt::print(stderr, "soak: {}\n", e.what());
    return 1;
  }
}
