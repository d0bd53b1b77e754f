// scripts/bench history: what the storage rings (docs/design/rings.md) cost and buy. Three
// measurements, each a set of cells in a fresh throw-away schema (ScopedSchema, migrated
// with schema::Migrator); cells are interleaved across --runs and medians reported.
//
// 1. slots — claim across live slots. A queue "history" at S = --slot-shards (1 and 4),
//    seeded with --pending + (warm-up + --claims) x 32 jobs (insert_many_copy, batches of
//    500 so the rotor spreads every part over all lanes), either all into one ready slot,
//    or in three parts with Admin::rotate(conn, "queue") between them. The first part
//    holds the rows the measurement will consume, so the measurement ends as it started:
//    --pending jobs pending, spread over the same slots. Then 20 warm-up and --claims
//    timed claims, each QueueStorage::claim(max_batch 32) — timed on the client, claim
//    call only — followed by an untimed complete of the whole batch. The 1-slot and the
//    3-slot queue of one S exist side by side and are claimed alternately, call by call,
//    so that load drifting on a shared machine hits both alike. Reported: claim
//    p50/p99 per cell, the live slots (cardinality(ring_live_slots('queue'))), and the
//    3-slot / 1-slot ratio of the p50 within each run. Target: <= 1.25.
//
// 2. history — history independence. Three cells:
//    (a) empty: a fresh schema, no history;
//    (b) rings: --history-jobs jobs went through claim + complete while a
//        runtime::MaintenanceLeader (the Client's own leader: rescue, promotion, and every
//        --maintenance-ms prune each ring's sealed slots until a prune is refused, every
//        --rotate-ms rotate each ring, prune with carry when a ring is full) ran on the
//        schema; it is stopped when the drain ends;
//    (c) no rings: the same history, nothing rotated or pruned (all of it retained).
//    History build: one producer (insert_many_copy, batches of 5,000, at most 25,000
//    jobs ahead of the completions) and --history-claimers claimers (claim max_batch
//    --history-claim-batch + one complete per batch), then VACUUM ANALYZE of the ring
//    tables (as autovacuum eventually would; it also keeps autovacuum out of the timed
//    part). (a) gets the same VACUUM ANALYZE. --no-analyze skips it: the partitions then
//    keep the statistics the run left them (a TRUNCATEd or never-analysed partition has
//    reltuples = -1 and is planned as 10 pages, which can push plans over jit_above_cost).
//    Live work, identical in every cell, set up right before measuring: --live-pending
//    pending jobs plus --open-attempts claimed, never completed attempts (claims of 4).
//    Measured: --samples rescue ticks QueueStorage::rescue(conn, 90 s, 1000) (the
//    leader's call; nothing is stale, so each returns nothing), then --samples claims
//    (max_batch 32, timed; untimed complete, and as many jobs re-enqueued so the pending
//    count stays put). 10 warm-up calls of each first. Two cells are measured together,
//    alternately call by call, so that load drifting on a shared machine hits both alike.
//    Order within a run: build (c), build (b), measure (a) with (b); wait; measure (a')
//    with (c).
//    Before (c) is measured the benchmark waits until its history ended --history-age
//    seconds ago (default 95, past the 90 s stale window): a real retained history is
//    older than the window, and the rescue scan treats old closed batches differently from
//    young ones. (b) is measured right after its build, as the leader keeps its retained
//    history young. (a') is a second empty history, measured with (c).
//    Reported: p50/p99 of both calls, b/a and c/a' of the p50 within each run (then the
//    median). Target: b/a <= 1.2 for both calls.
//
// 3. ab — rescue-path A/B (a follow-up of AWA's ADR-025): the whole runtime, an awa::Client in this
//    process with one queue, max_workers = --ab-workers (256), a no-op handler,
//    everything else the Client's defaults (ring rotation on, 5 s), attempt deadline off
//    vs on (QueueConfig::deadline = --ab-deadline-s). 512 warm-up jobs first. One
//    producer (this thread, its own connection) enqueues --ab-jobs jobs with
//    self-committing insert_many calls of --ab-batch jobs, keeping at most --ab-backlog
//    jobs enqueued but not started (saturation with a bounded backlog).
//      pickup      = insert_many returned -> handler start, on this process's steady clock
//                    (as e2e); a handler that starts first counts as 0 ("early").
//      completed/s = jobs / (first enqueue -> ClientStats::completed reached them all).
//      rescue      = a separate connection calls QueueStorage::rescue(conn, 90 s, 1000)
//                    once per second during the run and times it (the leader makes the
//                    same call every round).
//
// Bounded: fixed job counts, time limits on every drain, a statement_timeout on every
// session (the Client's and the leader's through the connection URL's `options`).
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
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
#include "runtime/maintenance_leader.hpp"
#include "storage/store_access.hpp"

namespace awa::bench {
namespace {

using std::chrono::duration;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

constexpr std::string_view kQueue = "history";
constexpr std::string_view kKind = "noop";
constexpr auto kStatementTimeout = seconds(120);
constexpr auto kDrainLimit = std::chrono::minutes(10);
constexpr auto kStale = seconds(90);  // the Client's default stale_after
constexpr int kRescueLimit = 1000;    // the leader's batch
constexpr int kClaimRows = 32;
constexpr int kSlotsSeedBatch = 500;
constexpr int kSlotsWarmup = 20;
constexpr int kHistorySeedBatch = 5000;
constexpr std::int64_t kHistoryAhead = 25000;  // producer at most this far ahead
constexpr int kHistoryWarmup = 10;
constexpr int kOpenPerClaim = 4;
constexpr std::int64_t kAbWarmup = 512;
constexpr auto kRescueProbeEvery = seconds(1);

struct Options {
  std::set<std::string> cases{"slots", "history", "ab"};
  int runs = 3;
  std::string json_path;
  // slots
  std::vector<int> slot_shards{1, 4};
  int pending = 20000;
  int claims = 2000;
  // history
  std::int64_t history_jobs = 1000000;
  int history_shards = 4;
  int history_claimers = 3;
  int history_claim_batch = 512;
  int rotate_ms = 5000;
  int maintenance_ms = 1000;
  int live_pending = 300;
  int open_attempts = 8;
  int samples = 500;
  int history_age_s = 95;
  bool analyze = true;
  // ab
  std::int64_t ab_jobs = 100000;
  int ab_workers = 256;
  int ab_shards = 4;
  int ab_deadline_s = 30;
  int ab_backlog = 1024;
  int ab_batch = 128;
};

// --- small helpers ------------------------------------------------------------------------

struct Latency {
  double p50 = 0;
  double p95 = 0;
  double p99 = 0;
  double mean = 0;
  double max = 0;
  std::size_t n = 0;

  nlohmann::json to_json() const {
    return {{"p50", p50}, {"p95", p95}, {"p99", p99}, {"mean", mean}, {"max", max}, {"n", n}};
  }
};

Latency latency(std::vector<double> v) {
  Latency l;
  if (v.empty()) return l;
  std::sort(v.begin(), v.end());
  const auto at = [&](double q) {
    return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))];
  };
  l.p50 = at(0.50);
  l.p95 = at(0.95);
  l.p99 = at(0.99);
  l.mean = mean(v);
  l.max = v.back();
  l.n = v.size();
  return l;
}

// The median, field by field, of the runs' latencies.
Latency median_latency(const std::vector<Latency>& runs) {
  const auto med = [&](double Latency::*f) {
    std::vector<double> v;
    for (const auto& l : runs) v.push_back(l.*f);
    return median(v);
  };
  Latency m;
  m.p50 = med(&Latency::p50);
  m.p95 = med(&Latency::p95);
  m.p99 = med(&Latency::p99);
  m.mean = med(&Latency::mean);
  m.max = med(&Latency::max);
  m.n = runs.empty() ? 0 : runs.front().n;
  return m;
}

double ms_since(Clock::time_point t0) {
  return duration<double, std::milli>(Clock::now() - t0).count();
}

std::string ms2(double v) { return fmt::format("{:.2f}", v); }
std::string ratio2(double v) { return fmt::format("{:.2f}", v); }

// DATABASE_URL with a statement_timeout for every session opened with it (the Client's and
// the maintenance leader's, which the benchmark does not connect itself). The URL's
// `options` would override $PGOPTIONS, so PGOPTIONS (e.g. '-c jit=off' for a diagnostic
// run) is carried into it. A URL that already has `options` is left alone.
std::string url_with_statement_timeout(std::string url, seconds timeout) {
  if (url.find("options=") != std::string::npos) return url;
  std::string options = fmt::format("-c statement_timeout={}s", timeout.count());
  if (const char* env = std::getenv("PGOPTIONS"); env != nullptr && *env != '\0') {
    options += fmt::format(" {}", env);
  }
  if (url.starts_with("postgres://") || url.starts_with("postgresql://")) {
    std::string encoded;
    for (const char ch : options) {
      const bool plain = std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '-' ||
                         ch == '_' || ch == '.' || ch == '~';
      encoded +=
          plain ? std::string(1, ch)
                : fmt::format("%{:02X}", static_cast<unsigned>(static_cast<unsigned char>(ch)));
    }
    url += url.find('?') == std::string::npos ? '?' : '&';
    url += "options=" + encoded;
  } else {
    url += fmt::format(" options='{}'", options);
  }
  return url;
}

awa::Connection open_conn(const char* application_name) {
  return pg::adopt(connect(application_name, kStatementTimeout));
}

void prepare_schema(pg::Connection& admin, const ScopedSchema& schema, int shards) {
  migrate_schema(admin, schema.name());
  admin.query(
      fmt::format("INSERT INTO {}.queue_meta (queue, enqueue_shards) VALUES ($1, $2) "
                  "ON CONFLICT (queue) DO UPDATE SET enqueue_shards = EXCLUDED.enqueue_shards",
                  schema.quoted()),
      std::string(kQueue), shards);
}

InsertOpts queue_opts() {
  InsertOpts opts;
  opts.queue = std::string(kQueue);
  return opts;
}

// n jobs, args {"n": first..first+n-1}, with COPY in batches of `batch`.
void seed(pg::Connection& c, QueueStorage& store, std::int64_t first, std::int64_t n, int batch) {
  std::vector<NewJob> jobs;
  for (std::int64_t i = 0; i < n; ++i) {
    jobs.emplace_back(std::string(kKind), nlohmann::json{{"n", first + i}}, queue_opts());
    if (static_cast<int>(jobs.size()) == batch || i + 1 == n) {
      storage::insert_many_copy(store, c, jobs);
      jobs.clear();
    }
  }
}

// Completes every claimed attempt (one statement); a stale result is a benchmark error.
void complete_all(pg::Connection& c, QueueStorage& store,
                  const std::vector<ClaimedEntry>& claimed) {
  std::vector<Completion> done;
  done.reserve(claimed.size());
  for (const auto& e : claimed) done.push_back(Completion::of(e, Outcome::kCompleted));
  for (const auto& r : storage::consumer(store).complete(c, done)) {
    if (r.stale())
      throw std::runtime_error(fmt::format("completion of job {} was stale", r.job_id));
  }
}

// --- the benchmark's own diagnostic SQL ----------------------------------------------------

std::int64_t scalar(pg::Connection& c, const std::string& sql) {
  return c.exec(sql).get<std::int64_t>(0, 0);
}

int live_slots(pg::Connection& c, const ScopedSchema& s, const char* ring) {
  return static_cast<int>(scalar(
      c, fmt::format("SELECT cardinality({}.ring_live_slots('{}'))::bigint", s.quoted(), ring)));
}

std::int64_t pending_jobs(pg::Connection& c, const ScopedSchema& s) {
  return c
      .query(fmt::format("SELECT coalesce(sum(available), 0)::bigint FROM {}.queue_shard_lag($1)",
                         s.quoted()),
             std::string(kQueue))
      .get<std::int64_t>(0, 0);
}

// How many ready slots hold pending (unclaimed) rows of the queue.
int slots_with_pending(pg::Connection& c, const ScopedSchema& s) {
  return static_cast<int>(
      c.query(fmt::format("SELECT count(DISTINCT r.ready_slot)::bigint FROM {0}.ready_entries r "
                          "JOIN {0}.queue_claim_heads h USING (queue_id, priority, enqueue_shard) "
                          "WHERE r.queue_id = {0}.queue_id_of($1) AND r.lane_seq >= h.claim_seq",
                          s.quoted()),
              std::string(kQueue))
          .get<std::int64_t>(0, 0));
}

std::int64_t count_rows(pg::Connection& c, const ScopedSchema& s, const char* table) {
  return scalar(c, fmt::format("SELECT count(*) FROM {}.{}", s.quoted(), table));
}

void vacuum_rings(pg::Connection& c, const ScopedSchema& s) {
  c.exec(
      fmt::format("VACUUM ANALYZE {0}.ready_entries, {0}.done_entries, {0}.ready_tombstones, "
                  "{0}.claim_batches, {0}.claim_closures, {0}.leases, {0}.queue_claim_heads, "
                  "{0}.queue_enqueue_heads, {0}.ring_rotations, {0}.ring_prunes",
                  s.quoted()));
}

// --- 1. claim across live slots ------------------------------------------------------------

struct SlotsCell {
  int shards = 0;
  int slots = 0;       // ready slots the backlog was enqueued into
  int live_slots = 0;  // cardinality(ring_live_slots('queue')) while measuring
  int pending_slots_start = 0;
  int pending_slots_end = 0;
  std::int64_t pending_start = 0;
  std::int64_t pending_end = 0;
  double rows_per_claim = 0;
  Latency claim_ms;
};

// One slots cell: its schema with the backlog in place, and a session that claims.
class SlotsProbe {
 public:
  SlotsProbe(pg::Connection& admin, const Options& o, int shards, int slots)
      : admin_(admin),
        schema_(admin, unique_schema_name("hist_slots")),
        conn_(open_conn("awa_bench_history")),
        store_(StorageOptions{schema_.name()}) {
    prepare_schema(admin, schema_, shards);
    auto& c = pg::native(conn_);
    const Admin adm(schema_.name());
    // The first part holds what the measurement consumes plus its share of the backlog.
    const std::int64_t consumed = static_cast<std::int64_t>(kSlotsWarmup + o.claims) * kClaimRows;
    std::vector<std::int64_t> parts;
    if (slots == 1) {
      parts = {o.pending + consumed};
    } else {
      const std::int64_t third = o.pending / 3;
      parts = {consumed + third, third, o.pending - 2 * third};
    }
    std::int64_t first = 0;
    for (std::size_t p = 0; p < parts.size(); ++p) {
      if (p > 0) {
        const auto r = adm.rotate(conn_, "queue");
        if (!r.done) throw std::runtime_error("rotate(queue) refused: " + r.reason);
      }
      seed(c, store_, first, parts[p], kSlotsSeedBatch);
      first += parts[p];
    }
    admin.exec(fmt::format("VACUUM ANALYZE {}.ready_entries", schema_.quoted()));
    cell_.shards = shards;
    cell_.slots = slots;
    cell_.live_slots = live_slots(admin, schema_, "queue");
    cell_.pending_start = pending_jobs(admin, schema_);
    cell_.pending_slots_start = slots_with_pending(admin, schema_);
    ms_.reserve(static_cast<std::size_t>(o.claims));
  }

  // One 32-row claim (timed: the claim call only), then its completion.
  void claim(bool timed) {
    auto& c = pg::native(conn_);
    QueueStorage::ClaimOptions co;
    co.max_batch = kClaimRows;
    const auto t0 = Clock::now();
    const auto claimed = storage::consumer(store_).claim(c, std::string(kQueue), co);
    const double t = ms_since(t0);
    if (claimed.empty()) throw std::runtime_error("a claim returned no rows: the backlog ran out");
    complete_all(c, store_, claimed);
    if (timed) {
      ms_.push_back(t);
      rows_ += static_cast<std::int64_t>(claimed.size());
    }
  }

  SlotsCell finish() {
    cell_.claim_ms = latency(std::move(ms_));
    cell_.rows_per_claim = static_cast<double>(rows_) / static_cast<double>(cell_.claim_ms.n);
    cell_.pending_end = pending_jobs(admin_, schema_);
    cell_.pending_slots_end = slots_with_pending(admin_, schema_);
    if (live_slots(admin_, schema_, "queue") != cell_.live_slots) {
      throw std::runtime_error("the live slots changed during the measurement");
    }
    return cell_;
  }

 private:
  pg::Connection& admin_;
  ScopedSchema schema_;
  awa::Connection conn_;
  QueueStorage store_;
  SlotsCell cell_;
  std::vector<double> ms_;
  std::int64_t rows_ = 0;
};

// The 1-slot and the 3-slot cell of one shard count, claimed alternately (the first of
// each pair alternates too), so that load drifting on the machine hits both alike.
std::pair<SlotsCell, SlotsCell> run_slots_pair(pg::Connection& admin, const Options& o,
                                               int shards) {
  SlotsProbe one(admin, o, shards, 1);
  SlotsProbe three(admin, o, shards, 3);
  for (int i = 0; i < kSlotsWarmup + o.claims; ++i) {
    const bool timed = i >= kSlotsWarmup;
    if (i % 2 == 0) {
      one.claim(timed);
      three.claim(timed);
    } else {
      three.claim(timed);
      one.claim(timed);
    }
  }
  return {one.finish(), three.finish()};
}

// --- 2. history independence ---------------------------------------------------------------

// A schema with (or without) a history, waiting to be measured.
struct History {
  std::string name;  // "a", "b", "c"
  std::unique_ptr<ScopedSchema> schema;
  std::int64_t jobs = 0;
  double build_s = 0;
  std::uint64_t rotations = 0;
  std::uint64_t prunes = 0;
  std::uint64_t rescued = 0;  // by the leader during the build (expected 0)
  Clock::time_point ended;
};

History build_history(pg::Connection& admin, const Options& o, const std::string& name,
                      std::int64_t jobs, bool rings) {
  History h;
  h.name = name;
  h.jobs = jobs;
  h.schema = std::make_unique<ScopedSchema>(admin, unique_schema_name("hist_" + name));
  const ScopedSchema& schema = *h.schema;
  prepare_schema(admin, schema, o.history_shards);
  QueueStorage store(StorageOptions{schema.name()});
  std::unique_ptr<runtime::MaintenanceLeader> leader;
  if (rings && jobs > 0) {
    runtime::MaintenanceOptions mo;
    mo.connect = connect_options("awa_bench_history_leader");
    mo.connect.url = url_with_statement_timeout(mo.connect.url, kStatementTimeout);
    mo.schema = schema.name();
    mo.interval = milliseconds(o.maintenance_ms);
    mo.rotate_interval = milliseconds(o.rotate_ms);
    leader = std::make_unique<runtime::MaintenanceLeader>(mo, store);
    leader->start();
  }
  if (jobs > 0) {
    const int workers = 1 + o.history_claimers;  // 0: producer, 1..: claimers
    std::vector<pg::Connection> conns;
    for (int i = 0; i < workers; ++i) {
      conns.push_back(connect(i == 0 ? "awa_bench_history_producer" : "awa_bench_history_claimer",
                              kStatementTimeout));
    }
    std::atomic<std::int64_t> inserted{0};
    std::atomic<std::int64_t> completed{0};
    std::atomic<bool> abort{false};
    const auto give_up = Clock::now() + kDrainLimit;
    const auto check = [&] {
      if (abort.load()) throw std::runtime_error("another history worker failed");
      if (Clock::now() > give_up) throw std::runtime_error("the history build did not finish");
    };
    const auto elapsed = run_fleet(
        workers, [](int) {},
        [&](int i) {
          try {
            auto& c = conns[static_cast<std::size_t>(i)];
            if (i == 0) {
              while (inserted.load() < jobs) {
                check();
                if (inserted.load() - completed.load() >= kHistoryAhead) {
                  std::this_thread::sleep_for(milliseconds(1));
                  continue;
                }
                const auto n = std::min<std::int64_t>(kHistorySeedBatch, jobs - inserted.load());
                seed(c, store, inserted.load(), n, kHistorySeedBatch);
                inserted += n;
              }
              return;
            }
            QueueStorage::ClaimOptions co;
            co.max_batch = o.history_claim_batch;
            while (completed.load() < jobs) {
              check();
              const auto claimed = storage::consumer(store).claim(c, std::string(kQueue), co);
              if (claimed.empty()) {
                std::this_thread::sleep_for(milliseconds(1));
                continue;
              }
              complete_all(c, store, claimed);
              completed += static_cast<std::int64_t>(claimed.size());
            }
          } catch (...) {
            abort = true;
            throw;
          }
        });
    h.build_s = duration<double>(elapsed).count();
  }
  if (leader) {
    leader->stop();
    h.rotations = leader->rotations();
    h.prunes = leader->prunes();
    h.rescued = leader->rescued();
  }
  h.ended = Clock::now();
  if (o.analyze) vacuum_rings(admin, schema);
  return h;
}

struct HistoryCell {
  std::string name;
  std::int64_t history_jobs = 0;
  double build_s = 0;
  std::uint64_t rotations = 0;
  std::uint64_t prunes = 0;
  double history_age_s = 0;  // history end -> measurement start
  int live_queue_slots = 0;
  int live_claim_slots = 0;
  std::int64_t ready_rows = 0;  // retained in the rings when the measurement starts
  std::int64_t claim_batches = 0;
  std::int64_t claim_closures = 0;
  double rows_per_claim = 0;
  Latency rescue_ms;
  Latency claim_ms;
};

// One cell's measuring session: sets up the live work, then times rescue ticks and claims
// on demand, so two cells can be sampled alternately.
class HistoryProbe {
 public:
  HistoryProbe(pg::Connection& admin, const Options& o, const History& h)
      : o_(o),
        h_(h),
        conn_(open_conn("awa_bench_history")),
        store_(StorageOptions{h.schema->name()}) {
    const ScopedSchema& schema = *h.schema;
    auto& c = pg::native(conn_);
    cell_.name = h.name;
    cell_.history_jobs = h.jobs;
    cell_.build_s = h.build_s;
    cell_.rotations = h.rotations;
    cell_.prunes = h.prunes;
    cell_.history_age_s = duration<double>(Clock::now() - h.ended).count();
    // Live work: pending jobs and a few open attempts, the same in every cell.
    std::vector<NewJob> jobs;
    for (int i = 0; i < o.live_pending + o.open_attempts; ++i) {
      jobs.emplace_back(std::string(kKind), nlohmann::json{{"live", i}}, queue_opts());
    }
    storage::insert_many(store_, c, jobs);
    int open = 0;
    while (open < o.open_attempts) {
      QueueStorage::ClaimOptions co;
      co.max_batch = std::min(kOpenPerClaim, o.open_attempts - open);
      const auto claimed = storage::consumer(store_).claim(c, std::string(kQueue), co);
      if (claimed.empty()) throw std::runtime_error("could not claim the open attempts");
      open += static_cast<int>(claimed.size());
    }
    cell_.live_queue_slots = live_slots(admin, schema, "queue");
    cell_.live_claim_slots = live_slots(admin, schema, "claim");
    cell_.ready_rows = count_rows(admin, schema, "ready_entries");
    cell_.claim_batches = count_rows(admin, schema, "claim_batches");
    cell_.claim_closures = count_rows(admin, schema, "claim_closures");
  }

  // One rescue tick, timed; nothing is stale, so it must rescue nothing.
  void rescue(bool timed) {
    const auto t0 = Clock::now();
    const auto rescued = storage::consumer(store_).rescue(pg::native(conn_), kStale, kRescueLimit);
    const double t = ms_since(t0);
    if (!rescued.empty()) {
      throw std::runtime_error(fmt::format("rescue closed {} attempts (first: job {}, {})",
                                           rescued.size(), rescued.front().job_id,
                                           rescued.front().why));
    }
    if (timed) rescue_ms_.push_back(t);
  }

  // One 32-row claim, timed; then (untimed) its completion and as many new jobs.
  void claim(bool timed) {
    auto& c = pg::native(conn_);
    QueueStorage::ClaimOptions co;
    co.max_batch = kClaimRows;
    const auto t0 = Clock::now();
    const auto claimed = storage::consumer(store_).claim(c, std::string(kQueue), co);
    const double t = ms_since(t0);
    if (claimed.empty()) throw std::runtime_error("a claim returned no rows");
    complete_all(c, store_, claimed);
    std::vector<NewJob> again;
    for (std::size_t i = 0; i < claimed.size(); ++i) {
      again.emplace_back(std::string(kKind), nlohmann::json{{"again", i}}, queue_opts());
    }
    storage::insert_many(store_, c, again);
    if (timed) {
      claim_ms_.push_back(t);
      rows_ += static_cast<std::int64_t>(claimed.size());
    }
  }

  HistoryCell finish(pg::Connection& admin) {
    cell_.rescue_ms = latency(std::move(rescue_ms_));
    cell_.claim_ms = latency(std::move(claim_ms_));
    cell_.rows_per_claim = static_cast<double>(rows_) / static_cast<double>(cell_.claim_ms.n);
    const auto pending = pending_jobs(admin, *h_.schema);
    if (pending != o_.live_pending) {
      throw std::runtime_error(
          fmt::format("history {}: {} pending jobs after the measurement, expected {}", h_.name,
                      pending, o_.live_pending));
    }
    return cell_;
  }

 private:
  const Options& o_;
  const History& h_;
  awa::Connection conn_;
  QueueStorage store_;
  HistoryCell cell_;
  std::vector<double> rescue_ms_;
  std::vector<double> claim_ms_;
  std::int64_t rows_ = 0;
};

// Measures two cells alternately, call by call (the first of each pair alternates too),
// so that load drifting on the shared machine hits both alike: 10 warm-up calls of each
// kind, then --samples rescue ticks, then --samples claims, on each cell.
std::pair<HistoryCell, HistoryCell> measure_history_pair(pg::Connection& admin, const Options& o,
                                                         const History& base, const History& cell) {
  HistoryProbe a(admin, o, base);
  HistoryProbe b(admin, o, cell);
  const auto both = [&](int i, auto&& call) {
    if (i % 2 == 0) {
      call(a);
      call(b);
    } else {
      call(b);
      call(a);
    }
  };
  for (int i = 0; i < kHistoryWarmup; ++i) both(i, [](HistoryProbe& p) { p.rescue(false); });
  for (int i = 0; i < kHistoryWarmup; ++i) both(i, [](HistoryProbe& p) { p.claim(false); });
  for (int i = 0; i < o.samples; ++i) both(i, [](HistoryProbe& p) { p.rescue(true); });
  for (int i = 0; i < o.samples; ++i) both(i, [](HistoryProbe& p) { p.claim(true); });
  return {a.finish(admin), b.finish(admin)};
}

// --- 3. rescue-path A/B through the runtime ------------------------------------------------

struct AbCell {
  bool deadline = false;
  std::int64_t jobs = 0;
  double elapsed_s = 0;
  double completed_per_s = 0;
  Latency pickup_ms;
  std::int64_t early = 0;
  Latency rescue_ms;
  std::uint64_t probe_rescued = 0;
  ClientStats stats;
};

// Calls QueueStorage::rescue on its own connection every kRescueProbeEvery and times it.
class RescueProbe {
 public:
  explicit RescueProbe(const std::string& schema)
      : conn_(connect("awa_bench_history_rescue", kStatementTimeout)),
        store_(StorageOptions{schema}),
        thread_([this](const std::stop_token& stop) { loop(stop); }) {}
  RescueProbe(const RescueProbe&) = delete;
  RescueProbe& operator=(const RescueProbe&) = delete;

  // Joins; returns the call times in ms.
  std::vector<double> stop() {
    thread_.request_stop();
    if (thread_.joinable()) thread_.join();
    if (error_) std::rethrow_exception(error_);
    return ms_;
  }
  std::uint64_t rescued() const { return rescued_; }  // after stop()

 private:
  void loop(const std::stop_token& stop) {
    try {
      auto next = Clock::now();
      while (!stop.stop_requested()) {
        const auto t0 = Clock::now();
        rescued_ += storage::consumer(store_).rescue(conn_, kStale, kRescueLimit).size();
        ms_.push_back(ms_since(t0));
        next += kRescueProbeEvery;
        while (!stop.stop_requested() && Clock::now() < next) {
          std::this_thread::sleep_for(std::min<nanoseconds>(next - Clock::now(), milliseconds(20)));
        }
      }
    } catch (...) {
      error_ = std::current_exception();
    }
  }

  pg::Connection conn_;
  QueueStorage store_;
  std::vector<double> ms_;  // the probe thread's until joined
  std::uint64_t rescued_ = 0;
  std::exception_ptr error_;
  std::jthread thread_;  // last: starts after everything above exists
};

bool wait_completed(const Client& client, std::uint64_t target, Clock::duration limit) {
  const auto give_up = Clock::now() + limit;
  while (Clock::now() < give_up) {
    if (client.stats().completed >= target) return true;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return false;
}

AbCell run_ab_cell(pg::Connection& admin, const Options& o, bool deadline) {
  ScopedSchema schema(admin, unique_schema_name("hist_ab"));
  prepare_schema(admin, schema, o.ab_shards);
  const std::int64_t n = o.ab_jobs;
  const auto base = Clock::now();
  const auto since_base = [base](Clock::time_point t) {
    return std::chrono::duration_cast<nanoseconds>(t - base).count();
  };
  std::vector<std::atomic<std::int64_t>> started(static_cast<std::size_t>(n));
  for (auto& s : started) s.store(-1, std::memory_order_relaxed);
  std::vector<std::int64_t> enqueued(static_cast<std::size_t>(n), -1);  // this thread's only
  std::atomic<std::int64_t> started_count{0};

  ClientOptions co;
  co.database_url = url_with_statement_timeout(database_url(), kStatementTimeout);
  co.schema = schema.name();
  co.migrate = false;  // done by prepare_schema
  co.application_name = "awa_bench_history_client";
  Client client(co);
  client.register_worker(std::string(kKind), [&](JobContext& job) {
    const auto now = since_base(Clock::now());
    const auto seq = job.args().at("seq").get<std::int64_t>();
    if (seq >= 0 && seq < n) {
      std::int64_t unset = -1;  // the first attempt's start (a rerun keeps it)
      if (started[static_cast<std::size_t>(seq)].compare_exchange_strong(unset, now)) {
        started_count.fetch_add(1);
      }
    }
    return JobResult::completed();
  });
  QueueConfig q;
  q.name = std::string(kQueue);
  q.max_workers = o.ab_workers;
  if (deadline) q.deadline = seconds(o.ab_deadline_s);
  client.add_queue(q);
  client.start();

  auto producer = connect("awa_bench_history_producer", kStatementTimeout);
  QueueStorage store(StorageOptions{schema.name()});
  {
    std::vector<NewJob> warm;
    for (std::int64_t i = 0; i < kAbWarmup; ++i) {
      warm.emplace_back(std::string(kKind), nlohmann::json{{"seq", -1}}, queue_opts());
    }
    storage::insert_many(store, producer, warm);
    if (!wait_completed(client, kAbWarmup, seconds(60))) {
      throw std::runtime_error("warm-up jobs did not complete within 60 s");
    }
  }

  AbCell r;
  r.deadline = deadline;
  r.jobs = n;
  RescueProbe probe(schema.name());
  const auto t0 = Clock::now();
  const auto give_up = t0 + kDrainLimit;
  std::int64_t sent = 0;
  std::vector<NewJob> batch;
  while (sent < n) {
    if (Clock::now() > give_up) throw std::runtime_error("the A/B producer did not finish");
    if (sent - started_count.load() >= o.ab_backlog) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      continue;
    }
    const auto k = std::min<std::int64_t>(o.ab_batch, n - sent);
    batch.clear();
    for (std::int64_t j = sent; j < sent + k; ++j) {
      batch.emplace_back(std::string(kKind), nlohmann::json{{"seq", j}}, queue_opts());
    }
    storage::insert_many(store, producer, batch);
    const auto now = since_base(Clock::now());
    for (std::int64_t j = sent; j < sent + k; ++j) enqueued[static_cast<std::size_t>(j)] = now;
    sent += k;
  }
  const bool done = wait_completed(client, static_cast<std::uint64_t>(kAbWarmup + n),
                                   kDrainLimit - (Clock::now() - t0));
  const auto t_done = Clock::now();
  auto rescue_ms = probe.stop();
  client.stop();
  r.stats = client.stats();
  if (!done) {
    throw std::runtime_error(
        fmt::format("A/B: only {} of {} jobs completed in time", r.stats.completed, kAbWarmup + n));
  }
  r.elapsed_s = duration<double>(t_done - t0).count();
  r.completed_per_s = static_cast<double>(n) / r.elapsed_s;
  r.rescue_ms = latency(std::move(rescue_ms));
  r.probe_rescued = probe.rescued();

  std::vector<double> pickup;
  pickup.reserve(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const auto s = started[static_cast<std::size_t>(i)].load();
    if (s < 0) throw std::runtime_error(fmt::format("job seq {} completed but never started", i));
    const double ms = static_cast<double>(s - enqueued[static_cast<std::size_t>(i)]) / 1e6;
    if (ms < 0) ++r.early;
    pickup.push_back(std::max(0.0, ms));
  }
  r.pickup_ms = latency(std::move(pickup));

  awa::Connection check = pg::adopt(connect("awa_bench_history_check", kStatementTimeout));
  const auto counts = Admin(schema.name()).queue_counts(check, std::string(kQueue));
  if (counts.completed != kAbWarmup + n || r.stats.stale_completions != 0) {
    throw std::runtime_error(fmt::format("A/B: {} completed of {}, {} stale completions",
                                         counts.completed, kAbWarmup + n,
                                         r.stats.stale_completions));
  }
  return r;
}

// --- report --------------------------------------------------------------------------------

struct Target {
  std::string name;
  double limit = 0;
  std::vector<double> per_run;

  double value() const { return median(per_run); }
  bool met() const { return value() <= limit; }
  int met_runs() const {
    return static_cast<int>(
        std::count_if(per_run.begin(), per_run.end(), [&](double v) { return v <= limit; }));
  }
  nlohmann::json to_json() const {
    return {{"target", name},    {"limit", limit}, {"per_run", per_run},
            {"median", value()}, {"met", met()},   {"met_runs", met_runs()}};
  }
};

std::string per_run_text(const std::vector<double>& v) {
  std::vector<std::string> s;
  for (const double x : v) s.push_back(ratio2(x));
  return fmt::format("{}", fmt::join(s, " "));
}

// "a", "b", "a2", "c" -> "(a)", "(b)", "(a')", "(c)"
std::string history_tag(const std::string& name) {
  return name == "a2" ? "(a')" : fmt::format("({})", name);
}

std::string history_label(const std::string& name, std::int64_t jobs) {
  if (name == "a") return "(a) empty history";
  if (name == "a2") return "(a') empty history, with (c)";
  if (name == "b")
    return fmt::format("(b) {} jobs, rings on", thousands(static_cast<double>(jobs)));
  return fmt::format("(c) {} jobs, rotation off", thousands(static_cast<double>(jobs)));
}

int run(const Options& o) {
  auto admin = connect("awa_bench_admin", kStatementTimeout);
  const auto machine = machine_info(admin);
  std::vector<std::string> cases;  // in the order they run
  for (const char* c : {"slots", "history", "ab"}) {
    if (o.cases.contains(c)) cases.emplace_back(c);
  }
  fmt::print("history: cases {}, {} run(s)\n", fmt::join(cases, ","), o.runs);
  if (o.cases.contains("slots")) {
    fmt::print(
        "  slots: S={}, {} pending jobs kept, {} timed claims of {} (+{} warm-up), 1 vs 3 live "
        "ready slots\n",
        fmt::join(o.slot_shards, ","), o.pending, o.claims, kClaimRows, kSlotsWarmup);
  }
  if (o.cases.contains("history")) {
    fmt::print(
        "  history: {} jobs at S={} by {} claimers (claim batch {}), rings: rotate every {} ms, "
        "maintenance every {} ms; live work {} pending + {} open; {} samples per call; (c) "
        "measured >= {} s after its history; {}\n",
        o.history_jobs, o.history_shards, o.history_claimers, o.history_claim_batch, o.rotate_ms,
        o.maintenance_ms, o.live_pending, o.open_attempts, o.samples, o.history_age_s,
        o.analyze ? "VACUUM ANALYZE before measuring" : "no VACUUM ANALYZE");
  }
  if (o.cases.contains("ab")) {
    fmt::print(
        "  ab: {} jobs, {} workers, S={}, deadline off vs {} s, backlog <= {}, insert batches "
        "of {}\n",
        o.ab_jobs, o.ab_workers, o.ab_shards, o.ab_deadline_s, o.ab_backlog, o.ab_batch);
  }
  fmt::print("{} | benchmark sessions: jit={}\n", machine.describe(),
             admin.exec("SHOW jit").get<std::string>(0, 0));
  const auto started = Clock::now();

  // results[key][run]
  std::map<std::pair<int, int>, std::vector<SlotsCell>> slots;  // (shards, slots)
  std::map<std::string, std::vector<HistoryCell>> hist;         // "a", "b", "c"
  std::map<bool, std::vector<AbCell>> ab;                       // deadline
  for (int r = 0; r < o.runs; ++r) {
    if (o.cases.contains("slots")) {
      for (const int s : o.slot_shards) {
        auto [one, three] = run_slots_pair(admin, o, s);
        slots[{s, 1}].push_back(one);
        slots[{s, 3}].push_back(three);
        for (const SlotsCell* c : {&one, &three}) {
          fmt::print(
              "run {}: slots S={} {} slot(s): live slots {}, pending {} -> {} in {} -> {} "
              "slot(s), {:.1f} rows/claim, claim p50 {:.2f} ms p99 {:.2f} ms",
              r + 1, s, c->slots, c->live_slots, c->pending_start, c->pending_end,
              c->pending_slots_start, c->pending_slots_end, c->rows_per_claim, c->claim_ms.p50,
              c->claim_ms.p99);
          if (c == &three) fmt::print("  (3/1 p50 {:.2f})", three.claim_ms.p50 / one.claim_ms.p50);
          fmt::print("; load {}\n", loadavg());
        }
        std::fflush(stdout);
      }
    }
    if (o.cases.contains("history")) {
      // (b) is measured together with (a), (c) after the wait together with (a'), sample
      // by sample.
      const auto measure = [&](const History& base, const History& h) {
        auto [bc, hc] = measure_history_pair(admin, o, base, h);
        hist[base.name].push_back(bc);
        hist[h.name].push_back(hc);
        for (const HistoryCell* c : {&bc, &hc}) {
          fmt::print(
              "run {}: history {} age {:.0f} s: live slots queue {} claim {}, retained ready "
              "{} batches {} closures {}; rescue p50 {:.2f} p99 {:.2f} ms, claim p50 {:.2f} p99 "
              "{:.2f} ms ({:.1f} rows)",
              r + 1, history_tag(c->name), c->history_age_s, c->live_queue_slots,
              c->live_claim_slots, thousands(static_cast<double>(c->ready_rows)),
              thousands(static_cast<double>(c->claim_batches)),
              thousands(static_cast<double>(c->claim_closures)), c->rescue_ms.p50, c->rescue_ms.p99,
              c->claim_ms.p50, c->claim_ms.p99, c->rows_per_claim);
          if (c == &hc) {
            fmt::print("  (vs {}: rescue {:.2f}, claim {:.2f})", history_tag(base.name),
                       hc.rescue_ms.p50 / bc.rescue_ms.p50, hc.claim_ms.p50 / bc.claim_ms.p50);
          }
          fmt::print("; load {}\n", loadavg());
        }
        std::fflush(stdout);
      };
      History c = build_history(admin, o, "c", o.history_jobs, false);
      fmt::print("run {}: history (c) built: {} jobs in {:.1f} s ({} jobs/s), no rotation\n", r + 1,
                 thousands(static_cast<double>(o.history_jobs)), c.build_s,
                 thousands(static_cast<double>(o.history_jobs) / c.build_s));
      {
        History b = build_history(admin, o, "b", o.history_jobs, true);
        fmt::print(
            "run {}: history (b) built: {} jobs in {:.1f} s ({} jobs/s), {} rotations, {} "
            "prunes, {} rescued by the leader\n",
            r + 1, thousands(static_cast<double>(o.history_jobs)), b.build_s,
            thousands(static_cast<double>(o.history_jobs) / b.build_s), b.rotations, b.prunes,
            b.rescued);
        measure(build_history(admin, o, "a", 0, false), b);
      }  // (a) and (b) are dropped here
      const auto age = Clock::now() - c.ended;
      const auto want = seconds(o.history_age_s);
      if (age < want) {
        const auto wait = std::chrono::duration_cast<milliseconds>(want - age);
        fmt::print("run {}: waiting {:.1f} s until history (c) is {} s old\n", r + 1,
                   static_cast<double>(wait.count()) / 1000, o.history_age_s);
        std::fflush(stdout);
        std::this_thread::sleep_for(wait);
      }
      measure(build_history(admin, o, "a2", 0, false), c);
    }  // (a') and (c) are dropped here
    if (o.cases.contains("ab")) {
      for (const bool d : {false, true}) {
        ab[d].push_back(run_ab_cell(admin, o, d));
        const auto& c = ab[d].back();
        fmt::print(
            "run {}: ab deadline {}: {} completed/s ({:.1f} s), pickup p50 {:.2f} p99 {:.2f} ms "
            "({} early), rescue probe mean {:.2f} ms over {} calls ({} rescued); client: claimed "
            "{}, completed {}, stale {}, rescued {}, rotations {}, prunes {}; load {}\n",
            r + 1, d ? fmt::format("{} s", o.ab_deadline_s) : std::string("off"),
            thousands(c.completed_per_s), c.elapsed_s, c.pickup_ms.p50, c.pickup_ms.p99, c.early,
            c.rescue_ms.mean, c.rescue_ms.n, c.probe_rescued, c.stats.claimed, c.stats.completed,
            c.stats.stale_completions, c.stats.rescued, c.stats.rotations, c.stats.prunes,
            loadavg());
      }
    }
    std::fflush(stdout);
  }

  nlohmann::json doc{{"benchmark", "history"},
                     {"runs", o.runs},
                     {"cases", cases},
                     {"jit", admin.exec("SHOW jit").get<std::string>(0, 0)},
                     {"machine", machine.to_json()}};
  std::vector<Target> targets;

  if (o.cases.contains("slots")) {
    TablePrinter t({{"queue"},
                    {"live slots", TablePrinter::Align::kRight},
                    {"pending (start → end)", TablePrinter::Align::kRight},
                    {"rows/claim", TablePrinter::Align::kRight},
                    {"claim p50 ms", TablePrinter::Align::kRight},
                    {"p99 ms", TablePrinter::Align::kRight},
                    {"mean ms", TablePrinter::Align::kRight},
                    {"3/1 p50", TablePrinter::Align::kRight},
                    {"3/1 p99", TablePrinter::Align::kRight}});
    nlohmann::json cells = nlohmann::json::array();
    for (const int s : o.slot_shards) {
      std::vector<double> r50, r99;
      for (std::size_t r = 0; r < slots[{s, 3}].size(); ++r) {
        r50.push_back(slots[{s, 3}][r].claim_ms.p50 / slots[{s, 1}][r].claim_ms.p50);
        r99.push_back(slots[{s, 3}][r].claim_ms.p99 / slots[{s, 1}][r].claim_ms.p99);
      }
      for (const int k : {1, 3}) {
        const auto& runs = slots[{s, k}];
        std::vector<Latency> ls;
        std::vector<double> rows;
        for (const auto& c : runs) {
          ls.push_back(c.claim_ms);
          rows.push_back(c.rows_per_claim);
        }
        const Latency m = median_latency(ls);
        const auto& last = runs.back();
        t.add_row({fmt::format("S={}, backlog in {} slot{}", s, k, k == 1 ? "" : "s"),
                   std::to_string(last.live_slots),
                   fmt::format("{} → {}", thousands(static_cast<double>(last.pending_start)),
                               thousands(static_cast<double>(last.pending_end))),
                   fmt::format("{:.1f}", median(rows)), ms2(m.p50), ms2(m.p99), ms2(m.mean),
                   k == 3 ? ratio2(median(r50)) : std::string("–"),
                   k == 3 ? ratio2(median(r99)) : std::string("–")});
        nlohmann::json per_run = nlohmann::json::array();
        for (const auto& c : runs) {
          per_run.push_back({{"live_slots", c.live_slots},
                             {"pending_start", c.pending_start},
                             {"pending_end", c.pending_end},
                             {"slots_with_pending_start", c.pending_slots_start},
                             {"slots_with_pending_end", c.pending_slots_end},
                             {"rows_per_claim", c.rows_per_claim},
                             {"claim_ms", c.claim_ms.to_json()}});
        }
        nlohmann::json cell{{"shards", s},
                            {"slots", k},
                            {"live_slots", last.live_slots},
                            {"claim_ms", m.to_json()},
                            {"runs", per_run}};
        if (k == 3) {
          cell["ratio_p50_vs_1_slot"] = median(r50);
          cell["ratio_p50_vs_1_slot_per_run"] = r50;
          cell["ratio_p99_vs_1_slot"] = median(r99);
          cell["ratio_p99_vs_1_slot_per_run"] = r99;
        }
        cells.push_back(cell);
      }
      targets.push_back(
          {fmt::format("S={}: claim p50, 3 live slots / 1 live slot <= 1.25", s), 1.25, r50});
    }
    fmt::print(
        "\nClaim across live slots: one 32-row claim (client-side, claim call only), medians "
        "of {} run(s); ratios within each run, then the median\n{}\n",
        o.runs, t.render());
    doc["slots"] = {
        {"pending", o.pending}, {"claims", o.claims}, {"claim_rows", kClaimRows}, {"cells", cells}};
  }

  if (o.cases.contains("history")) {
    TablePrinter t({{"history"},
                    {"live slots q/c", TablePrinter::Align::kRight},
                    {"ready rows", TablePrinter::Align::kRight},
                    {"claim batches", TablePrinter::Align::kRight},
                    {"rescue p50 ms", TablePrinter::Align::kRight},
                    {"p99 ms", TablePrinter::Align::kRight},
                    {"claim p50 ms", TablePrinter::Align::kRight},
                    {"p99 ms", TablePrinter::Align::kRight},
                    {"rescue vs empty", TablePrinter::Align::kRight},
                    {"claim vs empty", TablePrinter::Align::kRight}});
    nlohmann::json cells = nlohmann::json::array();
    for (const std::string name : {"a", "b", "a2", "c"}) {
      // (b) against (a), (c) against (a'): each measured just before it, in the same run.
      const bool base = name == "a" || name == "a2";
      const std::string base_name = name == "b" ? "a" : "a2";
      const auto& runs = hist[name];
      std::vector<Latency> rl, cl;
      std::vector<double> rv, cv;
      for (std::size_t r = 0; r < runs.size(); ++r) {
        rl.push_back(runs[r].rescue_ms);
        cl.push_back(runs[r].claim_ms);
        if (!base) {
          rv.push_back(runs[r].rescue_ms.p50 / hist[base_name][r].rescue_ms.p50);
          cv.push_back(runs[r].claim_ms.p50 / hist[base_name][r].claim_ms.p50);
        }
      }
      const Latency rm = median_latency(rl);
      const Latency cm = median_latency(cl);
      const auto& last = runs.back();
      t.add_row({history_label(name, last.history_jobs),
                 fmt::format("{}/{}", last.live_queue_slots, last.live_claim_slots),
                 thousands(static_cast<double>(last.ready_rows)),
                 thousands(static_cast<double>(last.claim_batches)), ms2(rm.p50), ms2(rm.p99),
                 ms2(cm.p50), ms2(cm.p99),
                 base ? std::string("–")
                      : fmt::format("{} {}", ratio2(median(rv)), history_tag(base_name)),
                 base ? std::string("–")
                      : fmt::format("{} {}", ratio2(median(cv)), history_tag(base_name))});
      nlohmann::json per_run = nlohmann::json::array();
      for (const auto& c : runs) {
        per_run.push_back({{"history_jobs", c.history_jobs},
                           {"build_s", c.build_s},
                           {"rotations", c.rotations},
                           {"prunes", c.prunes},
                           {"history_age_s", c.history_age_s},
                           {"live_queue_slots", c.live_queue_slots},
                           {"live_claim_slots", c.live_claim_slots},
                           {"ready_rows", c.ready_rows},
                           {"claim_batches", c.claim_batches},
                           {"claim_closures", c.claim_closures},
                           {"rows_per_claim", c.rows_per_claim},
                           {"rescue_ms", c.rescue_ms.to_json()},
                           {"claim_ms", c.claim_ms.to_json()}});
      }
      nlohmann::json cell{{"history", name},
                          {"label", history_label(name, last.history_jobs)},
                          {"rescue_ms", rm.to_json()},
                          {"claim_ms", cm.to_json()},
                          {"runs", per_run}};
      if (!base) {
        cell["baseline"] = base_name;
        cell["rescue_p50_vs_baseline"] = median(rv);
        cell["rescue_p50_vs_baseline_per_run"] = rv;
        cell["claim_p50_vs_baseline"] = median(cv);
        cell["claim_p50_vs_baseline_per_run"] = cv;
      }
      cells.push_back(cell);
      if (name == "b") {
        targets.push_back({"history (b)/(a): rescue tick p50 <= 1.2", 1.2, rv});
        targets.push_back({"history (b)/(a): 32-row claim p50 <= 1.2", 1.2, cv});
      }
    }
    fmt::print(
        "\nHistory independence: rescue tick (rescue(90 s, 1000)) and one 32-row claim, {} "
        "samples each, medians of {} run(s); ratios of the p50 to the empty history measured "
        "alongside (alternate calls), within each run, then the median. Rows retained when the "
        "measurement started.\n{}\n",
        o.samples, o.runs, t.render());
    doc["history"] = {{"history_jobs", o.history_jobs}, {"shards", o.history_shards},
                      {"claimers", o.history_claimers}, {"claim_batch", o.history_claim_batch},
                      {"rotate_ms", o.rotate_ms},       {"maintenance_ms", o.maintenance_ms},
                      {"live_pending", o.live_pending}, {"open_attempts", o.open_attempts},
                      {"samples", o.samples},           {"history_age_s", o.history_age_s},
                      {"analyze", o.analyze},           {"cells", cells}};
  }

  if (o.cases.contains("ab")) {
    TablePrinter t({{"attempt deadline"},
                    {"jobs", TablePrinter::Align::kRight},
                    {"completed/s", TablePrinter::Align::kRight},
                    {"pickup p50 ms", TablePrinter::Align::kRight},
                    {"p99 ms", TablePrinter::Align::kRight},
                    {"rescue mean ms", TablePrinter::Align::kRight},
                    {"rescue max ms", TablePrinter::Align::kRight},
                    {"rescue calls", TablePrinter::Align::kRight},
                    {"rotations", TablePrinter::Align::kRight}});
    nlohmann::json cells = nlohmann::json::array();
    for (const bool d : {false, true}) {
      const auto& runs = ab[d];
      std::vector<double> per_s, rot;
      std::vector<Latency> pick, resc;
      for (const auto& c : runs) {
        per_s.push_back(c.completed_per_s);
        pick.push_back(c.pickup_ms);
        resc.push_back(c.rescue_ms);
        rot.push_back(static_cast<double>(c.stats.rotations));
      }
      const Latency pm = median_latency(pick);
      const Latency rm = median_latency(resc);
      const std::string label = d ? fmt::format("{} s (W={})", o.ab_deadline_s, o.ab_workers)
                                  : fmt::format("off (W={})", o.ab_workers);
      t.add_row({label, thousands(static_cast<double>(o.ab_jobs)), thousands(median(per_s)),
                 ms2(pm.p50), ms2(pm.p99), ms2(rm.mean), ms2(rm.max),
                 std::to_string(runs.back().rescue_ms.n), fmt::format("{:.0f}", median(rot))});
      nlohmann::json per_run = nlohmann::json::array();
      for (const auto& c : runs) {
        per_run.push_back({{"elapsed_s", c.elapsed_s},
                           {"completed_per_s", c.completed_per_s},
                           {"pickup_ms", c.pickup_ms.to_json()},
                           {"pickup_early", c.early},
                           {"rescue_ms", c.rescue_ms.to_json()},
                           {"probe_rescued", c.probe_rescued},
                           {"client",
                            {{"claimed", c.stats.claimed},
                             {"completed", c.stats.completed},
                             {"stale_completions", c.stats.stale_completions},
                             {"rescued", c.stats.rescued},
                             {"rotations", c.stats.rotations},
                             {"prunes", c.stats.prunes}}}});
      }
      cells.push_back({{"deadline_s", d ? nlohmann::json(o.ab_deadline_s) : nlohmann::json()},
                       {"completed_per_s", median(per_s)},
                       {"pickup_ms", pm.to_json()},
                       {"rescue_ms", rm.to_json()},
                       {"runs", per_run}});
    }
    fmt::print(
        "\nRescue-path A/B through the runtime: {} workers, {} jobs, medians of {} run(s)\n{}\n",
        o.ab_workers, thousands(static_cast<double>(o.ab_jobs)), o.runs, t.render());
    doc["ab"] = {{"jobs", o.ab_jobs},        {"workers", o.ab_workers},
                 {"shards", o.ab_shards},    {"deadline_s", o.ab_deadline_s},
                 {"backlog", o.ab_backlog},  {"batch", o.ab_batch},
                 {"warmup_jobs", kAbWarmup}, {"cells", cells}};
  }

  if (!targets.empty()) {
    TablePrinter t({{"target"},
                    {"per run", TablePrinter::Align::kRight},
                    {"median", TablePrinter::Align::kRight},
                    {"met in runs", TablePrinter::Align::kRight},
                    {"met (median)", TablePrinter::Align::kRight}});
    nlohmann::json tj = nlohmann::json::array();
    for (const auto& x : targets) {
      t.add_row({x.name, per_run_text(x.per_run), ratio2(x.value()),
                 fmt::format("{}/{}", x.met_runs(), x.per_run.size()), x.met() ? "yes" : "NO"});
      tj.push_back(x.to_json());
    }
    fmt::print("\nTargets\n{}\n", t.render());
    doc["targets"] = tj;
  }
  const double total_s = duration<double>(Clock::now() - started).count();
  fmt::print("load average at the end: {}; took {:.0f} s\n", loadavg(), total_s);
  if (!o.json_path.empty()) {
    doc["loadavg_at_end"] = loadavg();
    doc["seconds"] = total_s;
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
      "history: claim cost across live ring slots, rescue and claim cost against history "
      "(rings on / off), and the runtime's rescue path with attempt deadlines off / on"};
  std::string cases = "slots,history,ab";
  std::string slot_shards = "1,4";
  app.add_option("--cases", cases, "which measurements: slots,history,ab")->capture_default_str();
  app.add_option("--runs", o.runs, "runs (cells interleaved; medians reported)")
      ->capture_default_str();
  app.add_option("--json", o.json_path, "write results as JSON");
  app.add_option("--slot-shards", slot_shards, "slots: enqueue_shards values")
      ->capture_default_str();
  app.add_option("--pending", o.pending, "slots: pending jobs kept in the queue")
      ->capture_default_str();
  app.add_option("--claims", o.claims, "slots: timed 32-row claims per cell")
      ->capture_default_str();
  app.add_option("--history-jobs", o.history_jobs, "history: jobs in the history of (b) and (c)")
      ->capture_default_str();
  app.add_option("--history-shards", o.history_shards, "history: enqueue_shards")
      ->capture_default_str();
  app.add_option("--history-claimers", o.history_claimers, "history: claiming connections")
      ->capture_default_str();
  app.add_option("--history-claim-batch", o.history_claim_batch,
                 "history: rows per claim while building the history")
      ->capture_default_str();
  app.add_option("--rotate-ms", o.rotate_ms, "history (b): ring rotation interval")
      ->capture_default_str();
  app.add_option("--maintenance-ms", o.maintenance_ms, "history (b): maintenance round interval")
      ->capture_default_str();
  app.add_option("--live-pending", o.live_pending, "history: pending jobs while measuring")
      ->capture_default_str();
  app.add_option("--open-attempts", o.open_attempts, "history: open attempts while measuring")
      ->capture_default_str();
  app.add_option("--samples", o.samples, "history: timed calls of each kind per cell")
      ->capture_default_str();
  app.add_option("--history-age", o.history_age_s,
                 "history: seconds (c)'s history must be old before it is measured (0: no wait)")
      ->capture_default_str();
  app.add_flag("!--no-analyze", o.analyze,
               "history: skip the VACUUM ANALYZE of the ring tables before measuring");
  app.add_option("--ab-jobs", o.ab_jobs, "ab: jobs per cell")->capture_default_str();
  app.add_option("--ab-workers", o.ab_workers, "ab: the queue's max_workers")
      ->capture_default_str();
  app.add_option("--ab-shards", o.ab_shards, "ab: enqueue_shards")->capture_default_str();
  app.add_option("--ab-deadline-s", o.ab_deadline_s, "ab: attempt deadline of the 'on' cell")
      ->capture_default_str();
  app.add_option("--ab-backlog", o.ab_backlog, "ab: most jobs enqueued but not started")
      ->capture_default_str();
  app.add_option("--ab-batch", o.ab_batch, "ab: jobs per insert_many call")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  // The runtime logs through spdlog's default logger (stdout); stdout is the report's.
  spdlog::set_default_logger(spdlog::stderr_color_mt("awa"));
  try {
    o.cases.clear();
    std::string_view rest = cases;
    while (!rest.empty()) {
      const auto comma = std::min(rest.find(','), rest.size());
      const std::string item(rest.substr(0, comma));
      if (item != "slots" && item != "history" && item != "ab") {
        throw std::invalid_argument("--cases: expected a list of slots, history, ab");
      }
      o.cases.insert(item);
      rest.remove_prefix(std::min(comma + 1, rest.size()));
    }
    if (o.cases.empty()) throw std::invalid_argument("--cases: nothing to run");
    o.slot_shards = awa::bench::parse_int_list(slot_shards, "--slot-shards");
    for (const int s : o.slot_shards) {
      if (s < 1 || s > 64) throw std::invalid_argument("--slot-shards: 1..64");
    }
    if (o.runs < 1 || o.pending < 3 || o.claims < 1 || o.history_jobs < 1 ||
        o.history_claimers < 1 || o.history_claim_batch < 1 || o.rotate_ms < 1 ||
        o.maintenance_ms < 1 || o.live_pending < awa::bench::kClaimRows || o.open_attempts < 0 ||
        o.samples < 1 || o.history_age_s < 0 || o.ab_jobs < 1 || o.ab_workers < 1 ||
        o.ab_deadline_s < 1 || o.ab_backlog < 1 || o.ab_batch < 1) {
      throw std::invalid_argument(
          "counts must be >= 1 (--pending >= 3, --live-pending >= 32, --open-attempts and "
          "--history-age >= 0)");
    }
    if (o.history_shards < 1 || o.history_shards > 64 || o.ab_shards < 1 || o.ab_shards > 64) {
      throw std::invalid_argument("--history-shards and --ab-shards: 1..64");
    }
    if (o.history_jobs > 100'000'000 || o.ab_jobs > 10'000'000) {
      throw std::invalid_argument("at most 100,000,000 history jobs and 10,000,000 A/B jobs");
    }
    return awa::bench::run(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "history: {}\n", e.what());
    return 1;
  }
}
